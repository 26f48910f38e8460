package dlbridge

/*
#include <string.h>
#include <dlbridge/dlbridge.h>

extern void dlbgoRelease(uintptr_t handle);
static void dlbgo_release(void* ctx) { dlbgoRelease((uintptr_t)ctx); }

// A host view built here, so that no Go struct holding Go pointers is
// handed to C.
static DLTensor dlbgo_view(void* data, DLDataType dtype, int32_t ndim, int64_t* shape) {
  DLTensor v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.device.device_type = kDLCPU;
  v.ndim = ndim;
  v.dtype = dtype;
  v.shape = shape;
  return v;
}

static dlb_status dlbgo_nbytes(DLDataType dtype, int32_t ndim, int64_t* shape, uint64_t* out) {
  DLTensor v = dlbgo_view(NULL, dtype, ndim, shape);
  dlb_layout_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  dlb_status s = dlb_layout_describe(&v, &info);
  if (s == DLB_OK) *out = info.nbytes;
  return s;
}

static dlb_status dlbgo_wrap(void* data, DLDataType dtype, int32_t ndim, int64_t* shape, uintptr_t handle,
                             dlb_buffer** out) {
  DLTensor v = dlbgo_view(data, dtype, ndim, shape);
  return dlb_buffer_wrap(&v, 0, dlbgo_release, (void*)handle, out);
}

// The library's one host-view rule (dlb_buffer_host_view).
static dlb_status dlbgo_host_view(const dlb_buffer* b, uint32_t access, dlb_host_view* out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  return dlb_buffer_host_view(b, access, out);
}

// The element count and dtype of any layout, for a copy.
static dlb_status dlbgo_describe(const dlb_buffer* b, uint64_t* numel, DLDataType* dtype) {
  DLTensor t;
  dlb_layout_info info;
  dlb_status s = dlb_buffer_dltensor(b, &t);
  if (s != DLB_OK) return s;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if ((s = dlb_layout_describe(&t, &info)) != DLB_OK) return s;
  *numel = info.numel;
  *dtype = t.dtype;
  return DLB_OK;
}

static dlb_status dlbgo_copy_out(const dlb_buffer* b, void* dst, uint64_t size) {
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(b, &t);
  return s != DLB_OK ? s : dlb_copy_to_contiguous(&t, dst, size);
}
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// Buffer flags (Flags).
const (
	FlagReadOnly = uint64(C.DLB_BUFFER_READ_ONLY) // no export may be written
	FlagDeleted  = uint64(C.DLB_BUFFER_DELETED)   // Delete was called
	FlagCopied   = uint64(C.DLB_BUFFER_COPIED)    // the producer handed over a copy
	FlagImported = uint64(C.DLB_BUFFER_IMPORTED)  // a tensor taken in from a producer
)

// closed is the bit of Buffer.uses that Close sets; the bits below count
// the calls in progress.
const closed = int64(1) << 62

// Buffer is one reference on a library buffer. Close it when done; its
// exports keep the memory alive on their own until their deleters run.
// A Buffer may be used from several goroutines, Close included: a Close
// during a call (a Read or Write function included) takes effect when the
// call returns; any use after Close is refused with ErrInvalidArgument. A
// copy of a Buffer value is the same reference; the zero Buffer is a
// closed one.
type Buffer struct{ st *bufferState }

// bufferState is a Buffer's reference, shared by copies of the Buffer
// value; the cleanup watches it.
type bufferState struct {
	p *C.dlb_buffer
	// mem is the Go memory the buffer views (Alloc, Wrap), memLen its
	// bytes; nil for memory Go does not own. It keeps that memory reachable
	// for Slice.
	mem     unsafe.Pointer
	memLen  uintptr
	uses    atomic.Int64
	cleanup runtime.Cleanup
}

func newBuffer(p *C.dlb_buffer, mem unsafe.Pointer, memLen uintptr) *Buffer {
	st := &bufferState{p: p, mem: mem, memLen: memLen}
	st.cleanup = runtime.AddCleanup(st, func(p *C.dlb_buffer) { C.dlb_buffer_release(p) }, p)
	return &Buffer{st}
}

func errClosed() error { return newError(ErrInvalidArgument, "the Buffer is closed") }

// acquire marks a call in progress: the handle stays valid until done.
func (b *Buffer) acquire() (*C.dlb_buffer, error) {
	if b == nil || b.st == nil {
		return nil, errClosed()
	}
	st := b.st
	for {
		s := st.uses.Load()
		if s&closed != 0 {
			return nil, errClosed()
		}
		if st.uses.CompareAndSwap(s, s+1) {
			return st.p, nil
		}
	}
}

// done ends a call; the last one after a Close releases the reference.
func (b *Buffer) done() {
	if b.st.uses.Add(-1) == closed {
		b.st.free()
	}
}

func (st *bufferState) free() {
	st.cleanup.Stop()
	C.dlb_buffer_release(st.p)
}

// made runs a call that makes a buffer and wraps what it made.
func made(f func(out **C.dlb_buffer) C.dlb_status) (*Buffer, error) {
	var out *C.dlb_buffer
	if err := call(func() C.dlb_status { return f(&out) }); err != nil {
		return nil, err
	}
	return newBuffer(out, nil, 0), nil
}

func shapeArgs(shape []int64) (C.int32_t, *C.int64_t) {
	if len(shape) == 0 {
		return 0, nil
	}
	return C.int32_t(min(len(shape), C.DLB_MAX_NDIM+1)), (*C.int64_t)(unsafe.Pointer(&shape[0]))
}

// Alloc allocates zero-filled memory for a compact row-major host tensor
// of a dtype named as the library names them ("float32", "int64",
// "bool"). The memory is Go's, aligned to 64 bytes and pinned
// (runtime.Pinner) while the library uses it, as Wrap pins: so Slice can
// lend it without a copy, kept alive by the garbage collector as long as
// the slice is reachable.
func Alloc(dtype string, shape ...int64) (*Buffer, error) {
	dt, err := parseDType(dtype)
	if err != nil {
		return nil, err
	}
	ndim, dims := shapeArgs(shape)
	var need C.uint64_t
	if err := call(func() C.dlb_status { return C.dlbgo_nbytes(dt, ndim, dims, &need) }); err != nil {
		return nil, err
	}
	// Go cannot report a failed allocation (it ends the process), so a
	// size the machine cannot hold is refused before make.
	if limit := allocLimit(); uint64(need) > limit {
		return nil, newError(ErrOutOfMemory, "%d bytes are more than this machine's memory and swap (%d bytes)",
			uint64(need), limit)
	}
	var mem []byte
	var data unsafe.Pointer
	if need > 0 {
		mem = make([]byte, uintptr(need)+63)
		data = unsafe.Pointer(&mem[0])
		data = unsafe.Add(data, (64-uintptr(data)%64)%64)
	}
	return wrapGo(mem, data, uintptr(need), dt, ndim, dims)
}

type pinned struct {
	pin  runtime.Pinner
	data any
}

// wrapped counts the Go memory pinned for the library (for leak checks).
var wrapped atomic.Int64

// Wrap makes a buffer over Go memory without a copy: data holds the
// elements of a compact row-major tensor of the given shape. The memory is
// pinned (runtime.Pinner) until the library lets go of it: after Close and
// after the deleter of every export has run, so a native library may keep
// an export as long as it likes. data must not be written by Go while a
// consumer reads it.
func Wrap[T Element](data []T, shape ...int64) (*Buffer, error) {
	dt, err := dtypeOf[T]()
	if err != nil {
		return nil, err
	}
	ndim, dims := shapeArgs(shape)
	var need C.uint64_t
	if err := call(func() C.dlb_status { return C.dlbgo_nbytes(dt, ndim, dims, &need) }); err != nil {
		return nil, err
	}
	have := uint64(len(data)) * uint64(unsafe.Sizeof(*new(T)))
	if uint64(need) > have {
		return nil, newError(ErrInvalidArgument, "shape %v needs %d bytes, the slice holds %d", shape, uint64(need), have)
	}
	return wrapGo(data, unsafe.Pointer(unsafe.SliceData(data)), uintptr(have), dt, ndim, dims)
}

// wrapGo makes a buffer over Go memory at at (nbytes long), which owner
// keeps alive; the memory is pinned until the library's release callback.
func wrapGo(owner any, at unsafe.Pointer, nbytes uintptr, dt C.DLDataType, ndim C.int32_t, dims *C.int64_t) (*Buffer, error) {
	p := &pinned{data: owner}
	if nbytes > 0 {
		p.pin.Pin(at)
	} else {
		at = nil
	}
	h := cgo.NewHandle(p)
	wrapped.Add(1)
	var out *C.dlb_buffer
	err := call(func() C.dlb_status { return C.dlbgo_wrap(at, dt, ndim, dims, C.uintptr_t(h), &out) })
	if err != nil { // the library does not call the release callback when it refuses
		h.Delete()
		p.pin.Unpin()
		wrapped.Add(-1)
		return nil, err
	}
	return newBuffer(out, at, nbytes), nil
}

// Close drops this reference; the memory goes when the last reference and
// the last export are gone (Go memory when, besides, no slice of it is
// reachable). A Close during another goroutine's call takes effect when
// that call returns. Closing twice is harmless; any other use of a closed
// Buffer is refused with ErrInvalidArgument.
func (b *Buffer) Close() error {
	if b == nil || b.st == nil {
		return nil
	}
	st := b.st
	for {
		s := st.uses.Load()
		if s&closed != 0 {
			return nil
		}
		if st.uses.CompareAndSwap(s, s|closed) {
			if s == 0 {
				st.free()
			}
			return nil
		}
	}
}

// Retain returns another reference on the same buffer, closed on its own.
func (b *Buffer) Retain() (*Buffer, error) {
	p, err := b.acquire()
	if err != nil {
		return nil, err
	}
	defer b.done()
	return newBuffer(C.dlb_buffer_retain(p), b.st.mem, b.st.memLen), nil
}

// UnsafePointer is the dlb_buffer*, lent to other cgo code that calls the
// C library: valid only while b is open and reachable, so keep b open and
// call runtime.KeepAlive(b) after the last use of the pointer (nil when b
// is closed).
func (b *Buffer) UnsafePointer() unsafe.Pointer {
	if b == nil || b.st == nil || b.st.uses.Load()&closed != 0 {
		return nil
	}
	return unsafe.Pointer(b.st.p)
}

// Delete marks the buffer deleted (donated): later exports fail with
// ErrDeleted; exports made before stay valid. Close it as usual.
func (b *Buffer) Delete() error {
	p, err := b.acquire()
	if err != nil {
		return err
	}
	defer b.done()
	return call(func() C.dlb_status { return C.dlb_buffer_delete(p) })
}

// Flags are the buffer's Flag* bits (0 when closed).
func (b *Buffer) Flags() uint64 {
	p, err := b.acquire()
	if err != nil {
		return 0
	}
	defer b.done()
	return uint64(C.dlb_buffer_flags(p))
}

// NBytes is the size of the elements when compact (0 when closed).
func (b *Buffer) NBytes() uint64 {
	p, err := b.acquire()
	if err != nil {
		return 0
	}
	defer b.done()
	return uint64(C.dlb_buffer_nbytes(p))
}

// RefCount is the number of references (handles and zero-copy exports);
// 0 when closed.
func (b *Buffer) RefCount() int64 {
	p, err := b.acquire()
	if err != nil {
		return 0
	}
	defer b.done()
	return int64(C.dlb_buffer_refcount(p))
}

// Device is a DLPack device: its type (1 is the CPU) and ordinal.
type Device struct{ Type, ID int32 }

// Info is what a buffer holds, as the library describes it.
type Info struct {
	DType   string  // the library's name of the dtype
	Shape   []int64 // extents
	Strides []int64 // in elements
	Device  Device
}

// Info describes the buffer (dlb_buffer_dltensor).
func (b *Buffer) Info() (Info, error) {
	p, err := b.acquire()
	if err != nil {
		return Info{}, err
	}
	defer b.done()
	var t C.DLTensor
	if err := call(func() C.dlb_status { return C.dlb_buffer_dltensor(p, &t) }); err != nil {
		return Info{}, err
	}
	n := int(t.ndim)
	info := Info{DType: dtypeName(t.dtype), Device: Device{int32(t.device.device_type), int32(t.device.device_id)}}
	if n > 0 {
		info.Shape = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(t.shape)), n)...)
		info.Strides = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(t.strides)), n)...)
	}
	return info, nil
}

// hostView asks the library whether and where the CPU may see p's
// elements (dlb_buffer_host_view), refused unless they are T's dtype.
func hostView[T Element](p *C.dlb_buffer, write bool) (C.dlb_host_view, error) {
	var v C.dlb_host_view
	want, err := dtypeOf[T]()
	if err != nil {
		return v, err
	}
	access := C.uint32_t(C.DLB_HOST_VIEW_READ)
	if write {
		access = C.DLB_HOST_VIEW_WRITE
	}
	if err := call(func() C.dlb_status { return C.dlbgo_host_view(p, access, &v) }); err != nil {
		return v, err
	}
	if v.dtype != want {
		return v, newError(ErrUnsupportedDtype, "the buffer holds %s, not %s", dtypeName(v.dtype), dtypeName(want))
	}
	return v, nil
}

// Slice is the elements of a buffer over Go memory (Alloc, Wrap), without
// a copy, for reading and writing. The slice is Go memory: it stays valid
// as long as it is reachable, after Close and after the Buffer itself is
// collected. Refused: memory Go does not own (ErrNotZeroCopy: shared
// memory, imported tensors; Read, Write and Copy reach it), another dtype
// (ErrUnsupportedDtype), and whatever the library's host-view rule refuses
// (dlb_buffer_host_view: a deleted buffer, a layout that is not compact
// row-major, a read-only buffer).
func Slice[T Element](b *Buffer) ([]T, error) {
	p, err := b.acquire()
	if err != nil {
		return nil, err
	}
	defer b.done()
	v, err := hostView[T](p, true)
	if err != nil {
		return nil, err
	}
	if v.numel == 0 {
		return []T{}, nil
	}
	mem := b.st.mem
	off := uintptr(v.data) - uintptr(mem)
	if mem == nil || uintptr(v.data) < uintptr(mem) || off+uintptr(v.nbytes) > b.st.memLen {
		return nil, newError(ErrNotZeroCopy, "the buffer's memory is not Go's, so a slice could outlive it: "+
			"use dlbridge.Read, dlbridge.Write or dlbridge.Copy")
	}
	return unsafe.Slice((*T)(unsafe.Add(mem, off)), int(v.numel)), nil
}

// view lends p's elements to f, the buffer kept open until f returns.
func view[T Element](b *Buffer, write bool, f func(s []T)) error {
	p, err := b.acquire()
	if err != nil {
		return err
	}
	defer b.done()
	v, err := hostView[T](p, write)
	if err != nil {
		return err
	}
	if v.numel == 0 {
		f([]T{})
		return nil
	}
	f(unsafe.Slice((*T)(v.data), int(v.numel)))
	return nil
}

// Read calls f with the buffer's elements, without a copy, whatever memory
// they are in (read-only buffers included); f must not write them, and s
// must not be used after f returns. The buffer stays open until f returns
// (a Close meanwhile takes effect then). Refused, without calling f:
// another dtype (ErrUnsupportedDtype) and whatever the library's host-view
// rule refuses (dlb_buffer_host_view: a deleted buffer, a backend's
// storage, memory the CPU cannot read, a layout that is not compact
// row-major; Copy reads any layout).
func Read[T Element](b *Buffer, f func(s []T)) error { return view(b, false, f) }

// Write is Read for reading and writing: a read-only buffer is refused
// with ErrReadOnly. s must not be used after f returns.
func Write[T Element](b *Buffer, f func(s []T)) error { return view(b, true, f) }

// Copy is the buffer's elements, copied into a new compact row-major
// slice whatever the layout, read-only buffers included.
func Copy[T Element](b *Buffer) ([]T, error) {
	p, err := b.acquire()
	if err != nil {
		return nil, err
	}
	defer b.done()
	want, err := dtypeOf[T]()
	if err != nil {
		return nil, err
	}
	var numel C.uint64_t
	var dt C.DLDataType
	if err := call(func() C.dlb_status { return C.dlbgo_describe(p, &numel, &dt) }); err != nil {
		return nil, err
	}
	if dt != want {
		return nil, newError(ErrUnsupportedDtype, "the buffer holds %s, not %s", dtypeName(dt), dtypeName(want))
	}
	out := make([]T, int(numel))
	size := C.uint64_t(uintptr(len(out)) * unsafe.Sizeof(*new(T)))
	err = call(func() C.dlb_status { return C.dlbgo_copy_out(p, unsafe.Pointer(unsafe.SliceData(out)), size) })
	return out, err
}
