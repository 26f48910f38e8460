package dlbridge

// One versioned export ended by its deleter, three ways in one run:
// from Go (Export, then Close, which runs the deleter), the floor of any
// Go binding (two bare cgo calls of an empty C function: what calling C
// twice costs), and the same two C calls in a C loop in the same process
// (testlib.ExportDeleteLoop). scripts/go-bench runs them in fresh
// processes and prints medians, spreads and ratios.
//
// Besides Go's ns/op (wall time), each reports cpu-ns/op: the process's
// CPU time (user and system, every thread: the garbage collector's work
// included) per iteration, which a machine busy with other processes
// disturbs far less than wall time.

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"dlbridge.dev/dlbridge/internal/testlib"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the cpu-ns/op metric of the loop that began at start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func BenchmarkExportRelease(b *testing.B) {
	buf := must(Alloc("float32", 16, 16))
	defer buf.Close()
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		t, err := buf.Export(nil)
		if err != nil {
			b.Fatal(err)
		}
		t.Close()
	}
	reportCPU(b, start)
}

func BenchmarkTwoBareCgoCalls(b *testing.B) {
	buf := must(Alloc("float32", 16, 16))
	defer buf.Close()
	p := buf.UnsafePointer()
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		testlib.BareCall(p)
		testlib.BareCall(p)
	}
	reportCPU(b, start)
}

func BenchmarkExportReleaseC(b *testing.B) {
	buf := must(Alloc("float32", 16, 16))
	defer buf.Close()
	b.ResetTimer()
	start := cpuTime()
	if s := testlib.ExportDeleteLoop(buf.UnsafePointer(), b.N); s != 0 {
		b.Fatal(Status(s))
	}
	reportCPU(b, start)
}

// The cost of reaching the elements: a Slice (Go memory, kept), and a
// Read of the same buffer (a function lent the view).
func BenchmarkSlice(b *testing.B) {
	buf := must(Alloc("float32", 16, 16))
	defer buf.Close()
	var sum float32
	start := cpuTime()
	for b.Loop() {
		s, err := Slice[float32](buf)
		if err != nil {
			b.Fatal(err)
		}
		sum += s[0]
	}
	reportCPU(b, start)
	_ = sum
}

func BenchmarkRead(b *testing.B) {
	buf := must(Alloc("float32", 16, 16))
	defer buf.Close()
	var sum float32
	start := cpuTime()
	for b.Loop() {
		if err := Read(buf, func(s []float32) { sum += s[0] }); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
	_ = sum
}

// Alloc, every element written through Slice, Close: Go memory, pinned,
// wrapped by the library (the memory is zeroed by Go where the C library's
// calloc leaves fresh pages to the kernel, so the writes are counted too).
func BenchmarkAllocFillClose(b *testing.B) {
	for _, n := range []int64{256, 1 << 20} {
		b.Run(fmt.Sprintf("float32x%d", n), func(b *testing.B) {
			start := cpuTime()
			for b.Loop() {
				buf, err := Alloc("float32", n)
				if err != nil {
					b.Fatal(err)
				}
				s, err := Slice[float32](buf)
				if err != nil {
					b.Fatal(err)
				}
				for i := range s {
					s[i] = 1
				}
				buf.Close()
			}
			reportCPU(b, start)
		})
	}
}
