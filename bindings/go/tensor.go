package dlbridge

// #include <dlbridge/dlbridge.h>
import "C"

import (
	"runtime"
	"unsafe"
)

// owner holds one DLPack managed tensor and runs its deleter once.
type owner struct {
	p       unsafe.Pointer // DLManagedTensorVersioned* or DLManagedTensor*, C memory
	legacy  bool
	cleanup runtime.Cleanup
}

type ownedTensor struct {
	p      unsafe.Pointer
	legacy bool
}

func freeTensor(t ownedTensor) {
	if t.legacy {
		C.dlb_managed_free_legacy((*C.DLManagedTensor)(t.p))
	} else {
		C.dlb_managed_free_versioned((*C.DLManagedTensorVersioned)(t.p))
	}
}

func (o *owner) init(p unsafe.Pointer, legacy bool) {
	o.p, o.legacy = p, legacy
	o.cleanup = runtime.AddCleanup(o, freeTensor, ownedTensor{p, legacy})
}

// Pointer is the managed tensor, borrowed (nil once released, imported or
// closed).
func (o *owner) Pointer() unsafe.Pointer { return o.p }

// DLTensor is the managed tensor's DLTensor, borrowed, for a native call
// that reads or writes a tensor without taking it (nil when empty).
func (o *owner) DLTensor() unsafe.Pointer {
	switch {
	case o.p == nil:
		return nil
	case o.legacy:
		return unsafe.Pointer(&(*C.DLManagedTensor)(o.p).dl_tensor)
	default:
		return unsafe.Pointer(&(*C.DLManagedTensorVersioned)(o.p).dl_tensor)
	}
}

// Release hands the managed tensor to the caller, a native consumer that
// will run its deleter. If the consumer refuses it, the caller still owns
// it: wrap it again (NewManagedTensor) or run its deleter.
func (o *owner) Release() unsafe.Pointer {
	p := o.p
	if p != nil {
		o.cleanup.Stop()
		o.p = nil
	}
	return p
}

// Close runs the deleter (once; closing again, or after Release or Import,
// does nothing).
func (o *owner) Close() error {
	if p := o.Release(); p != nil {
		freeTensor(ownedTensor{p, o.legacy})
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
	t := &ManagedTensor{}
	t.init(p, false)
	return t
}

// NewLegacyManagedTensor takes ownership of a DLManagedTensor*.
func NewLegacyManagedTensor(p unsafe.Pointer) *LegacyManagedTensor {
	if p == nil {
		return nil
	}
	t := &LegacyManagedTensor{}
	t.init(p, true)
	return t
}

// ReadOnly reports the READ_ONLY flag of a versioned tensor.
func (t *ManagedTensor) ReadOnly() bool {
	return t.p != nil && (*C.DLManagedTensorVersioned)(t.p).flags&C.DLPACK_FLAG_BITMASK_READ_ONLY != 0
}

// Copy policies of an export.
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

func (o *ExportOptions) c() *C.dlb_export_options {
	if o == nil {
		return nil
	}
	var c C.dlb_export_options
	C.dlb_export_options_init(&c)
	c.copy = C.int32_t(o.Copy)
	if o.ReadOnly {
		c.flags |= C.DLB_EXPORT_READ_ONLY
	}
	if o.AllowReadOnlyLegacy {
		c.flags |= C.DLB_EXPORT_ALLOW_READ_ONLY_LEGACY
	}
	return &c
}

// Export exports the buffer as a DLPack 1.x managed tensor, for a native
// library: hand it over with Release, or Close it.
func (b *Buffer) Export(opts *ExportOptions) (*ManagedTensor, error) {
	p, err := b.handle()
	if err != nil {
		return nil, err
	}
	co := opts.c()
	var out *C.DLManagedTensorVersioned
	if err := call(func() C.dlb_status { return C.dlb_export_versioned(p, co, &out) }); err != nil {
		return nil, err
	}
	return NewManagedTensor(unsafe.Pointer(out)), nil
}

// ExportLegacy exports the buffer as a legacy managed tensor.
func (b *Buffer) ExportLegacy(opts *ExportOptions) (*LegacyManagedTensor, error) {
	p, err := b.handle()
	if err != nil {
		return nil, err
	}
	co := opts.c()
	var out *C.DLManagedTensor
	if err := call(func() C.dlb_status { return C.dlb_export_legacy(p, co, &out) }); err != nil {
		return nil, err
	}
	return NewLegacyManagedTensor(unsafe.Pointer(out)), nil
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

// Import takes a managed tensor in as a buffer. On success the buffer owns
// it (its deleter runs once, after the buffer and its exports are gone)
// and t is left empty; on failure t still owns it.
func Import(t *ManagedTensor, opts *ImportOptions) (*Buffer, error) {
	if t == nil || t.p == nil {
		return nil, errTaken()
	}
	co := opts.c()
	b, err := made(func(out **C.dlb_buffer) C.dlb_status {
		return C.dlb_import_versioned((*C.DLManagedTensorVersioned)(t.p), co, out)
	})
	if err == nil {
		t.Release()
	}
	return b, err
}

// ImportLegacy is Import for a legacy managed tensor.
func ImportLegacy(t *LegacyManagedTensor, opts *ImportOptions) (*Buffer, error) {
	if t == nil || t.p == nil {
		return nil, errTaken()
	}
	co := opts.c()
	b, err := made(func(out **C.dlb_buffer) C.dlb_status {
		return C.dlb_import_legacy((*C.DLManagedTensor)(t.p), co, out)
	})
	if err == nil {
		t.Release()
	}
	return b, err
}
