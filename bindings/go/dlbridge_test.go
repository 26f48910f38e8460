package dlbridge

// The binding against the native library of tests/lang (testlib), which
// takes tensors (running their deleters) and hands out its own (counting
// their deleters). Every test ends with dlb_live_exports() back where it
// started after runtime.GC(); TestMain checks the whole run the same way.
// Run by scripts/test.d/57-go.sh, which sets DLB_TEST_NATIVE_LIBRARY.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"dlbridge.dev/dlbridge/internal/testlib"
)

func TestMain(m *testing.M) {
	if err := testlib.Open(); err != nil {
		fmt.Fprintln(os.Stderr, "dlbridge tests: the native library:", err)
		os.Exit(1)
	}
	code := m.Run()
	if !settled(func() bool { return LiveExports() == 0 && testlib.Live() == 0 && wrapped.Load() == 0 }) {
		fmt.Fprintf(os.Stderr, "dlbridge tests: leaked: %d exports, %d native tensors, %d wrapped Go slices\n",
			LiveExports(), testlib.Live(), wrapped.Load())
		code = 1
	}
	os.Exit(code)
}

// settled collects garbage (running cleanups) until cond holds, for up to
// two seconds.
func settled(cond func() bool) bool {
	for i := 0; i < 400 && !cond(); i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// noLeaks checks at the end of a test that exports and native tensors are
// back where they started once the garbage collector has run.
func noLeaks(t *testing.T) {
	live, native, calls := LiveExports(), testlib.Live(), testlib.DeleterCalls()
	t.Cleanup(func() {
		if !settled(func() bool { return LiveExports() == live && testlib.Live() == native }) {
			t.Errorf("leaked: %d exports, %d native tensors (%d native deleter calls)",
				LiveExports()-live, testlib.Live()-native, testlib.DeleterCalls()-calls)
		}
	})
}

// must is v, or a panic (a failed test, with its stack) on an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// wantStatus checks that err is an *Error of status s whose message holds part.
func wantStatus(t *testing.T, err error, s Status, part string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, s) {
		t.Fatalf("got error %v, want %v", err, s)
	}
	if e.Name != s.String() || !strings.Contains(e.Message, part) || !strings.HasPrefix(err.Error(), "dlbridge: "+e.Name) {
		t.Fatalf("error %q (name %q): want name %q and %q in the message", err, e.Name, s, part)
	}
}

func TestStatusNamesAreTheLibrarys(t *testing.T) {
	if ErrDeleted.String() != "DLB_ERR_DELETED" || Status(99).String() != "DLB_UNKNOWN_STATUS" {
		t.Fatal(ErrDeleted.String(), Status(99).String())
	}
	if errors.Is(newError(ErrDeleted, "x"), ErrMalformed) {
		t.Fatal("an ErrDeleted error matched ErrMalformed")
	}
}

func TestExportToANativeConsumer(t *testing.T) {
	noLeaks(t)
	b := must(Alloc("float64", 2, 3))
	defer b.Close()
	x := must(Slice[float64](b))
	for i := range x {
		x[i] = float64(i)
	}
	live := LiveExports()
	m := must(b.Export(nil))
	if LiveExports() != live+1 || b.RefCount() != 2 {
		t.Fatalf("live exports %d, refcount %d", LiveExports()-live, b.RefCount())
	}
	// The native library writes through the borrowed tensor: the same memory.
	if !testlib.StoreF64(m.UnsafeDLTensor(), 5, 50) || x[5] != 50 {
		t.Fatalf("native write not seen: %v", x)
	}
	sum, ok := testlib.ConsumeVersioned(m.Release())
	if !ok || sum != 0+1+2+3+4+50 {
		t.Fatalf("native sum %v (ok %v)", sum, ok)
	}
	if m.UnsafePointer() != nil || LiveExports() != live || b.RefCount() != 1 {
		t.Fatalf("after the native deleter: live %d, refcount %d", LiveExports()-live, b.RefCount())
	}
	l := must(b.ExportLegacy(nil))
	if sum, ok := testlib.ConsumeLegacy(l.Release()); !ok || sum != 60 {
		t.Fatalf("legacy native sum %v (ok %v)", sum, ok)
	}
	info := must(b.Info())
	if info.DType != "float64" || fmt.Sprint(info.Shape, info.Strides) != "[2 3] [3 1]" || info.Device != (Device{1, 0}) {
		t.Fatalf("info %+v", info)
	}
}

func TestImportFromANativeProducer(t *testing.T) {
	noLeaks(t)
	calls := testlib.DeleterCalls()
	m := NewManagedTensor(testlib.MakeVersioned(5, 1))
	b := must(Import(m, nil))
	if m.UnsafePointer() != nil {
		t.Fatal("Import left the tensor with its old owner")
	}
	// The native library's memory is not Go's: no slice that could outlive
	// it, but a view lent to a function.
	_, err := Slice[float64](b)
	wantStatus(t, err, ErrNotZeroCopy, "not Go's")
	var seen string
	if err := Read(b, func(x []float64) { seen = fmt.Sprint(x) }); err != nil || seen != "[1 2 3 4 5]" ||
		b.Flags()&FlagImported == 0 {
		t.Fatalf("imported %v (%v), flags %#x", seen, err, b.Flags())
	}
	// Re-exported to the native library's consumer: still one deleter call, at the end.
	re := must(b.Export(nil))
	if sum, ok := testlib.ConsumeVersioned(re.Release()); !ok || sum != 15 {
		t.Fatalf("sum %v", sum)
	}
	if testlib.DeleterCalls() != calls {
		t.Fatal("the producer's deleter ran while the buffer was open")
	}
	// Imported twice: refused, and the deleter still runs once.
	_, err = Import(m, nil)
	wantStatus(t, err, ErrInvalidArgument, "imported, released or closed already")
	b.Close()
	if testlib.DeleterCalls() != calls+1 {
		t.Fatalf("the producer's deleter ran %d times", testlib.DeleterCalls()-calls)
	}
	// Legacy, read-only by request: only Copy reads it.
	lb := must(ImportLegacy(NewLegacyManagedTensor(testlib.MakeLegacy(3, 7)), &ImportOptions{LegacyReadOnly: true}))
	_, err = Slice[float64](lb)
	wantStatus(t, err, ErrReadOnly, "read-only")
	err = Write(lb, func([]float64) { t.Fatal("Write lent a read-only buffer") })
	wantStatus(t, err, ErrReadOnly, "read-only")
	if err := Read(lb, func(x []float64) { seen = fmt.Sprint(x) }); err != nil || seen != "[7 8 9]" {
		t.Fatalf("read %v (%v)", seen, err)
	}
	if v := must(Copy[float64](lb)); fmt.Sprint(v) != "[7 8 9]" {
		t.Fatalf("copy %v", v)
	}
	lb.Close()
	if testlib.DeleterCalls() != calls+2 {
		t.Fatal("the legacy deleter did not run once")
	}
}

func TestARefusedImportLeavesTheTensorWithItsOwner(t *testing.T) {
	noLeaks(t)
	calls := testlib.DeleterCalls()
	m := NewManagedTensor(testlib.MakeVersioned(4, 0))
	_, err := Import(m, &ImportOptions{Alignment: 1 << 20})
	wantStatus(t, err, ErrAlignment, "")
	if m.UnsafePointer() == nil || testlib.DeleterCalls() != calls {
		t.Fatal("a refused import took the tensor")
	}
	// A refused native consume leaves it with the caller too.
	b := must(Alloc("int8", 2))
	defer b.Close()
	e := must(b.Export(nil))
	p := e.Release()
	if _, ok := testlib.ConsumeVersioned(p); ok {
		t.Fatal("the native library took an int8 tensor")
	}
	NewManagedTensor(p).Close()
	m.Close()
	m.Close()
	if testlib.DeleterCalls() != calls+1 {
		t.Fatalf("deleter ran %d times", testlib.DeleterCalls()-calls)
	}
}

func TestBadInputIsRefusedWithTheLibrarysWords(t *testing.T) {
	noLeaks(t)
	_, err := Alloc("float33", 2)
	wantStatus(t, err, ErrUnsupportedDtype, "float33")
	_, err = Alloc("float32", 2, -3)
	wantStatus(t, err, ErrMalformed, "-3")
	_, err = Wrap([]float32{1, 2}, 2, -1)
	wantStatus(t, err, ErrMalformed, "-1")
	_, err = Wrap([]float32{1, 2, 3}, 2, 2)
	wantStatus(t, err, ErrInvalidArgument, "needs 16 bytes, the slice holds 12")
	_, err = Alloc("float32", make([]int64, 65)...)
	wantStatus(t, err, ErrInvalidArgument, "65")
	// More than the machine holds: refused, not a Go out-of-memory crash.
	_, err = Alloc("float64", 1<<30, 1<<20)
	wantStatus(t, err, ErrOutOfMemory, "more than this machine's memory")

	b := must(Alloc("float64", 3))
	_, err = Slice[float32](b)
	wantStatus(t, err, ErrUnsupportedDtype, "float64")
	before := must(b.Export(nil))
	if err := b.Delete(); err != nil {
		t.Fatal(err)
	}
	_, err = b.Export(nil)
	wantStatus(t, err, ErrDeleted, "")
	_, err = Slice[float64](b)
	wantStatus(t, err, ErrDeleted, "")
	if b.Flags()&FlagDeleted == 0 {
		t.Fatal("not flagged deleted")
	}
	before.Close() // made before Delete: still valid until now

	// A closed buffer used again.
	b.Close()
	b.Close()
	_, err = b.Export(nil)
	wantStatus(t, err, ErrInvalidArgument, "closed")
	_, err = b.Ticket(0)
	wantStatus(t, err, ErrInvalidArgument, "closed")
	_, err = Slice[float64](b)
	wantStatus(t, err, ErrInvalidArgument, "closed")
	if b.RefCount() != 0 || b.Flags() != 0 {
		t.Fatal("a closed buffer reports a reference")
	}
	_, err = OpenTicket([]byte("not a ticket"), 0)
	wantStatus(t, err, ErrMalformed, "")
}

func TestWrappedGoMemoryStaysPinnedWhileAnExportLives(t *testing.T) {
	noLeaks(t)
	data := []float64{1, 2, 3, 4}
	b := must(Wrap(data, 2, 2))
	if x := must(Slice[float64](b)); &x[0] != &data[0] {
		t.Fatal("Wrap copied the slice")
	}
	e := must(b.ExportLegacy(nil))
	b.Close()
	if wrapped.Load() == 0 {
		t.Fatal("released while an export still uses the memory")
	}
	runtime.GC()
	testlib.StoreF64(e.UnsafeDLTensor(), 3, 40)
	if data[3] != 40 {
		t.Fatalf("native write not seen in the Go slice: %v", data)
	}
	// The deleter runs on another goroutine, hence possibly another thread.
	done := make(chan float64)
	p := e.Release()
	go func() { sum, _ := testlib.ConsumeLegacy(p); done <- sum }()
	if sum := <-done; sum != 1+2+3+40 {
		t.Fatalf("sum %v", sum)
	}
	if wrapped.Load() != 0 {
		t.Fatal("the pin outlived the last export")
	}
	// A refused wrap pins nothing.
	if _, err := Wrap(data, 5); err == nil || wrapped.Load() != 0 {
		t.Fatal(err, wrapped.Load())
	}
}

func TestForgottenClosesAreCaughtByTheGarbageCollector(t *testing.T) {
	noLeaks(t)
	calls := testlib.DeleterCalls()
	func() {
		b, _ := Alloc("float32", 8)
		_, _ = b.Export(nil)
		_, _ = Wrap(make([]int32, 4), 4)
		_, _ = Import(NewManagedTensor(testlib.MakeVersioned(2, 0)), nil)
		NewLegacyManagedTensor(testlib.MakeLegacy(2, 0))
	}()
	if !settled(func() bool { return testlib.DeleterCalls() == calls+2 && wrapped.Load() == 0 }) {
		t.Fatalf("native deleters %d, wrapped %d", testlib.DeleterCalls()-calls, wrapped.Load())
	}
}

func TestExportOptionsReachTheLibrary(t *testing.T) {
	noLeaks(t)
	b := must(Alloc("float32", 2))
	defer b.Close()
	x := must(Slice[float32](b))
	c := must(b.Export(&ExportOptions{Copy: CopyAlways, ReadOnly: true}))
	defer c.Close()
	if !c.ReadOnly() || uintptr(*(*unsafe.Pointer)(c.UnsafeDLTensor())) == uintptr(unsafe.Pointer(&x[0])) {
		t.Fatal("CopyAlways shared the memory, or READ_ONLY was lost")
	}
	_, err := b.ExportLegacy(&ExportOptions{ReadOnly: true})
	wantStatus(t, err, ErrReadOnly, "")
	r := must(b.Retain())
	if b.RefCount() != 2 || r.UnsafePointer() != b.UnsafePointer() {
		t.Fatal("Retain")
	}
	r.Close()
}

func TestConcurrentExportsAndDeleters(t *testing.T) {
	noLeaks(t)
	b := must(Alloc("float64", 16))
	defer b.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				m, err := b.Export(nil)
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					m.Close()
				} else if _, ok := testlib.ConsumeVersioned(m.Release()); !ok {
					t.Error("native consume refused")
				}
			}
		}()
	}
	wg.Wait()
	if b.RefCount() != 1 {
		t.Fatalf("refcount %d", b.RefCount())
	}
}
