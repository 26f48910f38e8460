package dlbridge

// Memory safety without package unsafe: a slice outlives its forgotten
// Buffer, a Close waits for the views lent by Read and Write, concurrent
// Closes and uses neither crash nor free twice. The first test runs
// itself again in a child process with glibc's MALLOC_PERTURB_ (freed C
// memory is overwritten) and GODEBUG=clobberfree=1 (freed Go memory is
// overwritten), so that a read of freed memory shows as a wrong value.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"dlbridge.dev/dlbridge/internal/testlib"
)

// underPerturbation runs the calling test again in a child process whose
// freed memory, C's and Go's, is overwritten; it reports whether the
// caller is that child.
func underPerturbation(t *testing.T) bool {
	if os.Getenv("MALLOC_PERTURB_") != "" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "MALLOC_PERTURB_=165", "GODEBUG=clobberfree=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("under MALLOC_PERTURB_=165 GODEBUG=clobberfree=1: %v\n%s", err, out)
	}
	return false
}

// sliceOfAForgottenBuffer is the helper a user writes: it returns the
// elements and forgets the Buffer.
func sliceOfAForgottenBuffer(n int) []float32 {
	b, err := Alloc("float32", int64(n))
	if err != nil {
		panic(err)
	}
	s, err := Slice[float32](b)
	if err != nil {
		panic(err)
	}
	for i := range s {
		s[i] = 42
	}
	return s
}

func TestASliceOutlivesItsForgottenBuffer(t *testing.T) {
	if !underPerturbation(t) {
		return
	}
	noLeaks(t)
	before := wrapped.Load()
	s := sliceOfAForgottenBuffer(256)
	// The Buffer's cleanup runs and the library lets go of the memory...
	if !settled(func() bool { return wrapped.Load() == before }) {
		t.Fatal("the forgotten Buffer was not released")
	}
	// ...and memory is allocated, written and freed again, in C and in Go.
	for i := 0; i < 50; i++ {
		b := must(AllocShared("float32", 256))
		_ = Write(b, func(x []float32) {
			for j := range x {
				x[j] = -1
			}
		})
		b.Close()
		_ = make([]float32, 256)
		runtime.GC()
	}
	for i, v := range s {
		if v != 42 {
			t.Fatalf("s[%d] is %v, not 42, once its Buffer was collected", i, v)
		}
	}
	for i := range s {
		s[i] = 7
	}
	runtime.GC()
	if s[100] != 7 {
		t.Fatalf("s[100] is %v after a write", s[100])
	}
}

func TestSliceLendsOnlyGoMemory(t *testing.T) {
	noLeaks(t)
	b := must(AllocShared("float32", 4))
	defer b.Close()
	_, err := Slice[float32](b)
	wantStatus(t, err, ErrNotZeroCopy, "use dlbridge.Read, dlbridge.Write or dlbridge.Copy")
	// A Retain of a Go-memory buffer lends the same Go memory.
	a := must(Alloc("int64", 3))
	r := must(a.Retain())
	a.Close()
	x, y := must(Slice[int64](r)), must(Slice[int64](r))
	if &x[0] != &y[0] || len(x) != 3 {
		t.Fatal("two slices of one buffer differ")
	}
	r.Close()
	// Empty tensors have an empty slice.
	e := must(Alloc("float64", 0, 3))
	defer e.Close()
	if z := must(Slice[float64](e)); len(z) != 0 {
		t.Fatal(z)
	}
	if err := Read(e, func(z []float64) {
		if len(z) != 0 {
			t.Error(z)
		}
	}); err != nil {
		t.Fatal(err)
	}
}

func TestACloseDuringReadWaitsForIt(t *testing.T) {
	noLeaks(t)
	calls := testlib.DeleterCalls()
	b := must(Import(NewManagedTensor(testlib.MakeVersioned(4, 10)), nil))
	var inside string
	err := Read(b, func(x []float64) {
		b.Close() // from inside: takes effect when Read returns
		runtime.GC()
		inside = fmt.Sprint(x, testlib.DeleterCalls()-calls)
	})
	if err != nil || inside != "[10 11 12 13] 0" {
		t.Fatalf("inside Read: %q (%v)", inside, err)
	}
	if testlib.DeleterCalls() != calls+1 {
		t.Fatal("the deleter did not run when Read returned")
	}
	_, err = Copy[float64](b)
	wantStatus(t, err, ErrInvalidArgument, "closed")

	// From another goroutine, while Write holds the view.
	b = must(Import(NewManagedTensor(testlib.MakeVersioned(3, 0)), nil))
	entered, closedNow := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- Write(b, func(x []float64) {
			close(entered)
			<-closedNow
			for i := range x {
				x[i] = 5 // still the native library's live memory
			}
		})
	}()
	<-entered
	b.Close()
	if testlib.DeleterCalls() != calls+1 {
		t.Fatal("Close freed the memory under a Write")
	}
	close(closedNow)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if testlib.DeleterCalls() != calls+2 {
		t.Fatal("the deleter did not run when Write returned")
	}
}

func TestConcurrentClosesAndUses(t *testing.T) {
	noLeaks(t)
	for round := 0; round < 20; round++ {
		b := must(Alloc("float32", 64))
		m := must(b.Export(nil))
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					if e, err := b.Export(nil); err == nil {
						e.Close()
					} else if !errors.Is(err, ErrInvalidArgument) {
						t.Error(err)
					}
					_ = Read(b, func(x []float32) { _ = x[63] })
					m.Close() // one deleter run, whichever goroutine wins
					b.Close()
				}
			}()
		}
		wg.Wait()
		if m.UnsafePointer() != nil || b.RefCount() != 0 {
			t.Fatal("not closed")
		}
	}
}

func TestForgottenExportsAreCollectedFromAPartlyUsedSlab(t *testing.T) {
	noLeaks(t)
	b := must(Alloc("float32", 4))
	defer b.Close()
	live := LiveExports()
	for i := 0; i < slabSize+slabSize/2; i++ {
		_ = must(b.Export(nil))
	}
	if !settled(func() bool { return LiveExports() == live }) {
		t.Fatalf("%d forgotten exports still live", LiveExports()-live)
	}
	if b.RefCount() != 1 {
		t.Fatalf("refcount %d", b.RefCount())
	}
}

// A buffer made by a helper and never closed keeps no export alive once
// collected, and its memory stays readable through an export.
func TestAnExportOutlivesItsForgottenBuffer(t *testing.T) {
	noLeaks(t)
	m := func() *ManagedTensor {
		b := must(Wrap([]float64{1, 2, 3}, 3))
		return must(b.Export(nil))
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	sum, ok := testlib.Sum(m.UnsafeDLTensor())
	runtime.KeepAlive(m)
	if !ok || sum != 6 {
		t.Fatalf("sum %v (ok %v)", sum, ok)
	}
	m.Close()
}

// A copy of a ManagedTensor value owns the same tensor: its deleter runs
// once, whichever copy closes it.
func TestACopiedManagedTensorClosesOnce(t *testing.T) {
	noLeaks(t)
	calls := testlib.DeleterCalls()
	m := NewManagedTensor(testlib.MakeVersioned(2, 0))
	c := *m
	c.Close()
	m.Close()
	if testlib.DeleterCalls() != calls+1 || m.UnsafePointer() != nil {
		t.Fatalf("deleter ran %d times", testlib.DeleterCalls()-calls)
	}
	l := NewLegacyManagedTensor(testlib.MakeLegacy(2, 0))
	d := *l
	if sum, ok := testlib.ConsumeLegacy(d.Release()); !ok || sum != 1 {
		t.Fatalf("sum %v (ok %v)", sum, ok)
	}
	l.Close()
	if testlib.DeleterCalls() != calls+2 {
		t.Fatalf("deleter ran %d times", testlib.DeleterCalls()-calls)
	}
}

// A copy of a Buffer value is the same reference (closed once, kept alive
// by either copy); zero values are closed, not crashes.
func TestCopiedAndZeroValues(t *testing.T) {
	noLeaks(t)
	calls := testlib.DeleterCalls()
	b := must(Import(NewManagedTensor(testlib.MakeVersioned(3, 1)), nil))
	c := *b
	b = nil
	runtime.GC()
	runtime.GC()
	if got := must(Copy[float64](&c)); fmt.Sprint(got) != "[1 2 3]" || testlib.DeleterCalls() != calls {
		t.Fatalf("the copy reads %v after the original was collected", got)
	}
	d := c
	c.Close()
	d.Close()
	if testlib.DeleterCalls() != calls+1 {
		t.Fatalf("deleter ran %d times", testlib.DeleterCalls()-calls)
	}
	var zb Buffer
	_, err := zb.Export(nil)
	wantStatus(t, err, ErrInvalidArgument, "closed")
	if zb.Close() != nil || zb.RefCount() != 0 || zb.UnsafePointer() != nil {
		t.Fatal("the zero Buffer")
	}
	var zm ManagedTensor
	_, err = Import(&zm, nil)
	wantStatus(t, err, ErrInvalidArgument, "already")
	if zm.Close() != nil || zm.Release() != nil || zm.UnsafeDLTensor() != nil || zm.ReadOnly() {
		t.Fatal("the zero ManagedTensor")
	}
}
