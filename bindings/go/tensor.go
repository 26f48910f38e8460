package dlbridge

/*
#include <stdlib.h>
#include <string.h>
#include <dlbridge/dlbridge.h>

// What dlbgo_export returns: the tensor, or the status and a copy of the
// thread's message (malloc; 0 when out of memory).
typedef struct {
  uintptr_t tensor;
  uintptr_t message;
  dlb_status status;
} dlbgo_exported;

// One C call per export, options included, the message of a failure read
// in the same call: no thread locking on the Go side. Pointers pass as
// uintptr_t and the result comes back by value, so cgo checks no pointer
// and the Go side allocates nothing.
static dlbgo_exported dlbgo_export(uintptr_t buffer, int32_t has_options, int32_t copy, uint64_t flags,
                                   int32_t legacy) {
  dlbgo_exported r = {0, 0, DLB_OK};
  dlb_buffer* b = (dlb_buffer*)buffer;
  dlb_export_options o;
  if (has_options) {
    dlb_export_options_init(&o);
    o.copy = copy;
    o.flags |= flags;
  }
  if (legacy) {
    DLManagedTensor* t = NULL;
    r.status = dlb_export_legacy(b, has_options ? &o : NULL, &t);
    r.tensor = (uintptr_t)t;
  } else {
    DLManagedTensorVersioned* t = NULL;
    r.status = dlb_export_versioned(b, has_options ? &o : NULL, &t);
    r.tensor = (uintptr_t)t;
  }
  if (r.status != DLB_OK) r.message = (uintptr_t)strdup(dlb_last_error_message());
  return r;
}

static void dlbgo_free_tensor(uintptr_t t, int32_t legacy) {
  if (legacy) dlb_managed_free_legacy((DLManagedTensor*)t);
  else dlb_managed_free_versioned((DLManagedTensorVersioned*)t);
}
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// owner holds one DLPack managed tensor and runs its deleter once. Owners
// are handed out from slabs of slabSize, each slab with one cleanup
// (runtime.AddCleanup) that runs the deleters its owners' users forgot,
// once the whole slab is unreachable: a backstop without a cleanup to
// register and stop per export. An owner points to its tensor's slot, in
// memory apart from the slab, where the cleanup can reach it; a copy of an
// owner (of a ManagedTensor value) points to the same slot, and finds it
// empty once the slab's cleanup ran.
type owner struct{ slot *tensorSlot }

const slabSize = 256

// A tensorSlot holds a DLManagedTensorVersioned* or, with the low bit
// set (legacyBit), a DLManagedTensor*: C memory, aligned; 0 when nothing
// is owned.
type tensorSlot struct{ p atomic.Uintptr }

const legacyBit = 1

// tensorSlots are the tensors of one slab's owners.
type tensorSlots [slabSize]tensorSlot

type slab [slabSize]owner

// slabRef is the slab owners are taken from.
type slabRef struct {
	slab *slab
	next atomic.Int32
}

// currentSlab is the slab owners are taken from; two goroutines that find
// it used up at once each make one, and one of the two is used for one
// owner only. It is dropped after every garbage collection (dropSlabEachGC),
// so that a slab not yet used up is collected, and its cleanup run, like
// any other.
var currentSlab atomic.Pointer[slabRef]

// gcTick is an object whose only reference is dropped at once: its
// cleanup runs after each garbage collection and arms the next one.
type gcTick struct{ _ *int }

func dropSlabEachGC(int) {
	currentSlab.Store(nil)
	runtime.AddCleanup(&gcTick{}, dropSlabEachGC, 0)
}

func init() { runtime.AddCleanup(&gcTick{}, dropSlabEachGC, 0) }

func boolC(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// freeTensor runs the deleter of a slot's tensor.
func freeTensor(v uintptr) {
	C.dlbgo_free_tensor(C.uintptr_t(v&^legacyBit), C.int32_t(v&legacyBit))
}

func freeSlots(slots *tensorSlots) {
	for i := range slots {
		if p := slots[i].p.Swap(0); p != 0 {
			freeTensor(p)
		}
	}
}

// newOwner is an owner of the managed tensor p.
func newOwner(p unsafe.Pointer, legacy bool) *owner {
	var s *slab
	var i int32
	if r := currentSlab.Load(); r != nil {
		if i = r.next.Add(1) - 1; i < slabSize {
			s = r.slab
		}
	}
	if s == nil {
		s, i = newSlab(), 0
	}
	v := uintptr(p)
	if legacy {
		v |= legacyBit
	}
	o := &s[i]
	o.slot.p.Store(v)
	return o
}

// newSlab makes the next slab; the caller takes its first owner.
func newSlab() *slab {
	s, slots := new(slab), new(tensorSlots)
	for i := range s {
		s[i].slot = &slots[i]
	}
	runtime.AddCleanup(s, freeSlots, slots)
	r := &slabRef{slab: s}
	r.next.Store(1)
	currentSlab.Store(r)
	return s
}

// ptr is a C pointer kept as a uintptr (its bits read as a pointer:
// unsafe.Add(nil, p) would let the compiler assume the result is not nil).
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// UnsafePointer is the managed tensor, lent (nil once released, imported
// or closed): valid only while the owner is open and reachable, so keep it
// open and call runtime.KeepAlive on it after the last use of the pointer.
func (o *owner) UnsafePointer() unsafe.Pointer { return ptr(o.load() &^ legacyBit) }

// load is the slot's word; 0 for the zero ManagedTensor.
func (o *owner) load() uintptr {
	if o == nil || o.slot == nil {
		return 0
	}
	return o.slot.p.Load()
}

// take empties the slot and returns what it held.
func (o *owner) take() uintptr {
	if o == nil || o.slot == nil {
		return 0
	}
	return o.slot.p.Swap(0)
}

// UnsafeDLTensor is the managed tensor's DLTensor, lent for a native call
// that reads or writes a tensor without taking it (nil when empty): valid
// only while the owner is open and reachable, so keep it open and call
// runtime.KeepAlive on it after the native call.
func (o *owner) UnsafeDLTensor() unsafe.Pointer {
	v := o.load()
	p := ptr(v &^ legacyBit)
	switch {
	case v == 0:
		return nil
	case v&legacyBit != 0:
		return unsafe.Pointer(&(*C.DLManagedTensor)(p).dl_tensor)
	default:
		return unsafe.Pointer(&(*C.DLManagedTensorVersioned)(p).dl_tensor)
	}
}

// Release hands the managed tensor to the caller, a native consumer that
// will run its deleter (nil when it was released, imported or closed
// already). If the consumer refuses it, the caller still owns it: wrap it
// again (NewManagedTensor) or run its deleter.
func (o *owner) Release() unsafe.Pointer {
	return ptr(o.take() &^ legacyBit)
}

// Close runs the deleter (once, whichever goroutines call it; closing
// again, or after Release or Import, does nothing).
func (o *owner) Close() error {
	if v := o.take(); v != 0 {
		freeTensor(v)
	}
	return nil
}

func errTaken() error {
	return newError(ErrInvalidArgument, "the managed tensor was imported, released or closed already")
}

// ManagedTensor owns a DLPack 1.x managed tensor (DLManagedTensorVersioned).
type ManagedTensor struct{ owner }

// LegacyManagedTensor owns a legacy managed tensor (DLManagedTensor).
type LegacyManagedTensor struct{ owner }

// NewManagedTensor takes ownership of a DLManagedTensorVersioned* that a
// native library handed out (nil for nil). Wrap each pointer once.
func NewManagedTensor(p unsafe.Pointer) *ManagedTensor {
	if p == nil {
		return nil
	}
	return (*ManagedTensor)(unsafe.Pointer(newOwner(p, false))) // the same layout
}

// NewLegacyManagedTensor takes ownership of a DLManagedTensor* (nil for
// nil). Wrap each pointer once.
func NewLegacyManagedTensor(p unsafe.Pointer) *LegacyManagedTensor {
	if p == nil {
		return nil
	}
	return (*LegacyManagedTensor)(unsafe.Pointer(newOwner(p, true))) // the same layout
}

// ReadOnly reports the READ_ONLY flag of a versioned tensor (false once
// released, imported or closed).
func (t *ManagedTensor) ReadOnly() bool {
	p := (*C.DLManagedTensorVersioned)(ptr(t.load() &^ legacyBit))
	ro := p != nil && p.flags&C.DLPACK_FLAG_BITMASK_READ_ONLY != 0
	runtime.KeepAlive(t)
	return ro
}

// Copy policies of an export (ExportOptions.Copy).
const (
	CopyIfNeeded = C.DLB_COPY_IF_NEEDED // zero-copy when possible (the default)
	CopyNever    = C.DLB_COPY_NEVER     // refuse when a copy would be needed
	CopyAlways   = C.DLB_COPY_ALWAYS    // always a fresh compact copy
)

// ExportOptions are an export's options; nil means the defaults.
type ExportOptions struct {
	Copy                int  // CopyIfNeeded, CopyNever or CopyAlways
	ReadOnly            bool // mark the export READ_ONLY
	AllowReadOnlyLegacy bool // share read-only memory in a legacy export
}

// export runs one C call that exports and, on failure, returns the
// library's message with it.
func (b *Buffer) export(opts *ExportOptions, legacy bool) (unsafe.Pointer, error) {
	p, err := b.acquire()
	if err != nil {
		return nil, err
	}
	var has, copyPolicy C.int32_t
	var flags C.uint64_t
	if opts != nil {
		has, copyPolicy = 1, C.int32_t(opts.Copy)
		if opts.ReadOnly {
			flags |= C.DLB_EXPORT_READ_ONLY
		}
		if opts.AllowReadOnlyLegacy {
			flags |= C.DLB_EXPORT_ALLOW_READ_ONLY_LEGACY
		}
	}
	r := C.dlbgo_export(C.uintptr_t(uintptr(unsafe.Pointer(p))), has, copyPolicy, flags, boolC(legacy))
	b.done()
	if r.status != C.DLB_OK {
		return nil, failed(r.status, (*C.char)(ptr(uintptr(r.message))))
	}
	return ptr(uintptr(r.tensor)), nil
}

// Export exports the buffer as a DLPack 1.x managed tensor, for a native
// library: hand it over with Release, or Close it. The export holds its
// own reference on the buffer's memory until its deleter runs.
func (b *Buffer) Export(opts *ExportOptions) (*ManagedTensor, error) {
	out, err := b.export(opts, false)
	if err != nil {
		return nil, err
	}
	return NewManagedTensor(out), nil
}

// ExportLegacy exports the buffer as a legacy managed tensor
// (DLManagedTensor); a read-only buffer exports as the library's rule for
// legacy exports says (a copy, or ErrReadOnly with CopyNever, unless
// AllowReadOnlyLegacy).
func (b *Buffer) ExportLegacy(opts *ExportOptions) (*LegacyManagedTensor, error) {
	out, err := b.export(opts, true)
	if err != nil {
		return nil, err
	}
	return NewLegacyManagedTensor(out), nil
}

// ImportOptions are an import's requirements; nil means none.
type ImportOptions struct {
	Alignment      uint64 // bytes the data must be aligned to (0: any)
	Contiguous     bool   // refuse a layout that is not compact row-major
	Writable       bool   // refuse a READ_ONLY tensor
	LegacyReadOnly bool   // take a legacy tensor in as read-only
}

func (o *ImportOptions) c() *C.dlb_import_options {
	if o == nil {
		return nil
	}
	var c C.dlb_import_options
	C.dlb_import_options_init(&c)
	c.require_alignment = C.uint64_t(o.Alignment)
	if o.Contiguous {
		c.require_contiguous = 1
	}
	if o.Writable {
		c.require_writable = 1
	}
	if o.LegacyReadOnly {
		c.flags |= C.DLB_IMPORT_LEGACY_READ_ONLY
	}
	return &c
}

// importTensor takes o's tensor in; o gives it up only on success.
func importTensor(o *owner, opts *ImportOptions) (*Buffer, error) {
	// Taken out while the library decides, so that no other goroutine
	// hands the same tensor over meanwhile.
	v := o.take()
	if v == 0 {
		return nil, errTaken()
	}
	p := ptr(v &^ legacyBit)
	co := opts.c()
	b, err := made(func(out **C.dlb_buffer) C.dlb_status {
		if v&legacyBit != 0 {
			return C.dlb_import_legacy((*C.DLManagedTensor)(p), co, out)
		}
		return C.dlb_import_versioned((*C.DLManagedTensorVersioned)(p), co, out)
	})
	if err != nil {
		o.slot.p.Store(v)
		return nil, err
	}
	return b, nil
}

// Import takes a managed tensor in as a buffer. On success the buffer owns
// it (its deleter runs once, after the buffer and its exports are gone)
// and t is left empty; on failure t still owns it. Its memory is not Go's:
// Read, Write and Copy reach the elements.
func Import(t *ManagedTensor, opts *ImportOptions) (*Buffer, error) {
	if t == nil {
		return nil, errTaken()
	}
	return importTensor(&t.owner, opts)
}

// ImportLegacy is Import for a legacy managed tensor.
func ImportLegacy(t *LegacyManagedTensor, opts *ImportOptions) (*Buffer, error) {
	if t == nil {
		return nil, errTaken()
	}
	return importTensor(&t.owner, opts)
}
