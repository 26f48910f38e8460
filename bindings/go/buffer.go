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

typedef struct {
  void* data;
  uint64_t numel;
  DLDataType dtype;
  int32_t contiguous;
  int32_t host_readable;
} dlbgo_elements;

// Where a buffer's elements are, and the library's facts about them.
static dlb_status dlbgo_host_elements(dlb_buffer* b, dlbgo_elements* out) {
  DLTensor t;
  dlb_layout_info info;
  dlb_device_info dev;
  dlb_status s = dlb_buffer_dltensor(b, &t);
  if (s != DLB_OK) return s;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if ((s = dlb_layout_describe(&t, &info)) != DLB_OK) return s;
  memset(&dev, 0, sizeof dev);
  dev.struct_size = sizeof dev;
  if ((s = dlb_device_type_info(t.device.device_type, &dev)) != DLB_OK) return s;
  out->data = t.data ? (char*)t.data + t.byte_offset : NULL;
  out->numel = info.numel;
  out->dtype = t.dtype;
  out->contiguous = info.contiguous;
  out->host_readable = (dev.flags & DLB_DEVICE_HOST_READABLE) != 0;
  return DLB_OK;
}

static dlb_status dlbgo_copy_out(dlb_buffer* b, void* dst, uint64_t size) {
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

// Buffer is one reference on a library buffer. Close it when done; its
// exports keep the memory alive on their own until their deleters run.
// A Buffer may be used from several goroutines, but not while it is being
// closed.
type Buffer struct {
	p       *C.dlb_buffer
	cleanup runtime.Cleanup
}

func newBuffer(p *C.dlb_buffer) *Buffer {
	b := &Buffer{p: p}
	b.cleanup = runtime.AddCleanup(b, func(p *C.dlb_buffer) { C.dlb_buffer_release(p) }, p)
	return b
}

func (b *Buffer) handle() (*C.dlb_buffer, error) {
	if b == nil || b.p == nil {
		return nil, newError(ErrInvalidArgument, "the Buffer is closed")
	}
	return b.p, nil
}

// made runs a call that makes a buffer and wraps what it made.
func made(f func(out **C.dlb_buffer) C.dlb_status) (*Buffer, error) {
	var out *C.dlb_buffer
	if err := call(func() C.dlb_status { return f(&out) }); err != nil {
		return nil, err
	}
	return newBuffer(out), nil
}

func shapeArgs(shape []int64) (C.int32_t, *C.int64_t) {
	if len(shape) == 0 {
		return 0, nil
	}
	return C.int32_t(min(len(shape), C.DLB_MAX_NDIM+1)), (*C.int64_t)(unsafe.Pointer(&shape[0]))
}

// Alloc allocates zero-filled host memory for a compact row-major tensor of
// a dtype named as the library names them ("float32", "int64", "bool").
func Alloc(dtype string, shape ...int64) (*Buffer, error) {
	dt, err := parseDType(dtype)
	if err != nil {
		return nil, err
	}
	ndim, dims := shapeArgs(shape)
	return made(func(out **C.dlb_buffer) C.dlb_status {
		return C.dlb_buffer_alloc(C.DLDevice{device_type: C.kDLCPU}, dt, ndim, dims, out)
	})
}

type pinned struct {
	pin  runtime.Pinner
	data any
}

// wrapped counts the Go slices pinned for the library (for leak checks).
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
	p := &pinned{data: data}
	ptr := unsafe.Pointer(unsafe.SliceData(data))
	if len(data) > 0 {
		p.pin.Pin(ptr)
	}
	h := cgo.NewHandle(p)
	wrapped.Add(1)
	b, err := made(func(out **C.dlb_buffer) C.dlb_status { return C.dlbgo_wrap(ptr, dt, ndim, dims, C.uintptr_t(h), out) })
	if err != nil { // the library does not call the release callback when it refuses
		h.Delete()
		p.pin.Unpin()
		wrapped.Add(-1)
	}
	return b, err
}

// Close drops this reference. The memory goes when the last reference and
// the last export are gone. Closing twice is harmless; any other use of a
// closed Buffer is refused with ErrInvalidArgument.
func (b *Buffer) Close() error {
	if b == nil || b.p == nil {
		return nil
	}
	b.cleanup.Stop()
	C.dlb_buffer_release(b.p)
	b.p = nil
	return nil
}

// Retain returns another reference on the same buffer, closed on its own.
func (b *Buffer) Retain() (*Buffer, error) {
	p, err := b.handle()
	if err != nil {
		return nil, err
	}
	return newBuffer(C.dlb_buffer_retain(p)), nil
}

// Pointer is the dlb_buffer* (borrowed: valid until Close), for other cgo
// code that calls the C library.
func (b *Buffer) Pointer() unsafe.Pointer {
	if b == nil {
		return nil
	}
	return unsafe.Pointer(b.p)
}

// Delete marks the buffer deleted (donated): later exports fail with
// ErrDeleted; exports made before stay valid. Close it as usual.
func (b *Buffer) Delete() error {
	p, err := b.handle()
	if err != nil {
		return err
	}
	return call(func() C.dlb_status { return C.dlb_buffer_delete(p) })
}

// Flags are the buffer's Flag* bits (0 when closed).
func (b *Buffer) Flags() uint64 { return uint64(C.dlb_buffer_flags(b.p)) }

// NBytes is the size of the elements when compact (0 when closed).
func (b *Buffer) NBytes() uint64 { return uint64(C.dlb_buffer_nbytes(b.p)) }

// RefCount is the number of references (handles and zero-copy exports).
func (b *Buffer) RefCount() int64 { return int64(C.dlb_buffer_refcount(b.p)) }

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
	p, err := b.handle()
	if err != nil {
		return Info{}, err
	}
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
	runtime.KeepAlive(b)
	return info, nil
}

// elementsOf is what the library says of b's elements (dlbgo_host_elements),
// refused unless they are T's dtype.
func elementsOf[T Element](b *Buffer) (*C.dlb_buffer, C.dlbgo_elements, error) {
	var e C.dlbgo_elements
	p, err := b.handle()
	if err != nil {
		return nil, e, err
	}
	want, err := dtypeOf[T]()
	if err != nil {
		return nil, e, err
	}
	if err := call(func() C.dlb_status { return C.dlbgo_host_elements(p, &e) }); err != nil {
		return nil, e, err
	}
	if e.dtype != want {
		return nil, e, newError(ErrUnsupportedDtype, "the buffer holds %s, not %s", dtypeName(e.dtype), dtypeName(want))
	}
	return p, e, nil
}

// Slice is the buffer's elements without a copy. It is valid while the
// Buffer is open: keep the Buffer reachable (defer b.Close()) while the
// slice is used. Refused: another dtype (ErrUnsupportedDtype), memory the
// CPU cannot read (ErrUnsupportedDevice), a layout that is not compact
// row-major (ErrUnsupportedLayout; Copy reads any layout), a read-only
// buffer (ErrReadOnly; Copy reads it), and what the library refuses.
func Slice[T Element](b *Buffer) ([]T, error) {
	_, e, err := elementsOf[T](b)
	if err != nil {
		return nil, err
	}
	switch {
	case e.host_readable == 0:
		return nil, newError(ErrUnsupportedDevice, "the buffer's memory is not readable by the CPU")
	case e.contiguous == 0:
		return nil, newError(ErrUnsupportedLayout, "the buffer is not compact row-major (Copy reads it)")
	case b.Flags()&FlagReadOnly != 0:
		return nil, newError(ErrReadOnly, "the buffer is read-only (Copy reads it)")
	case e.numel == 0:
		return []T{}, nil
	}
	return unsafe.Slice((*T)(e.data), int(e.numel)), nil
}

// Copy is the buffer's elements, copied into a new compact row-major
// slice whatever the layout, read-only buffers included.
func Copy[T Element](b *Buffer) ([]T, error) {
	p, e, err := elementsOf[T](b)
	if err != nil {
		return nil, err
	}
	out := make([]T, int(e.numel))
	size := C.uint64_t(uintptr(len(out)) * unsafe.Sizeof(*new(T)))
	err = call(func() C.dlb_status { return C.dlbgo_copy_out(p, unsafe.Pointer(unsafe.SliceData(out)), size) })
	runtime.KeepAlive(b)
	return out, err
}
