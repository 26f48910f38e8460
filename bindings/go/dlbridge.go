// Package dlbridge hands tensors between Go and native libraries through
// DLPack, over dlbridge's C library (found with pkg-config, `dlbridge`).
//
// A Buffer is one reference on a dlb_buffer: Go memory the library views
// without a copy (Alloc, Wrap), memory other processes can map
// (AllocShared, OpenTicket), or a tensor a native library handed over
// (Import). Buffers export to DLPack managed tensors (Export, ExportLegacy)
// for native libraries, and may be shared with other processes by ticket
// (Ticket, OpenTicket).
//
// # Memory safety
//
// What this package hands out never outlives the memory under it:
//
//   - Slice returns Go memory only (buffers made by Alloc or Wrap): the
//     garbage collector keeps it alive as long as the slice is reachable,
//     whether or not the Buffer was closed or collected.
//   - Memory Go does not own (shared memory, imported tensors) is reached
//     through Read and Write, which lend it to a function and keep the
//     buffer open until the function returns (a Close meanwhile, from any
//     goroutine, takes effect then), or copied out by Copy. The slice given
//     to the function must not be kept after it returns: the one rule the
//     package cannot enforce.
//   - The methods that hand out C pointers for other cgo code are named
//     Unsafe...: their results are valid only while the object is open and
//     reachable (runtime.KeepAlive).
//   - A copy of a Buffer value is the same reference, and keeps it alive
//     as the original does. A copy of a ManagedTensor value shares its
//     tensor (Close runs the deleter once, whichever copy calls it, from any
//     goroutine), but only the *ManagedTensor the package returned keeps it
//     from the backstop cleanup below; a copy then finds it empty.
//
// Lifetimes are explicit: call Close on every Buffer and on every
// ManagedTensor that is not handed to native code (Release). A forgotten
// Close is caught by a cleanup (runtime.AddCleanup) when the garbage
// collector finds the object unreachable (managed tensors share one
// cleanup per 256 made one after the other): a backstop, not a plan.
//
// Every DLPack rule (dtypes, layouts, devices, ownership, whether the CPU
// may view a buffer's elements) is the C library's: this package asks it
// and reports its refusals as *Error, with the library's status names
// (dlb_status_name) and messages.
package dlbridge

/*
#cgo pkg-config: dlbridge
#include <stdlib.h>
#include <dlbridge/dlbridge.h>
*/
import "C"

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"unsafe"
)

// Status is a status code of the library. The non-zero ones are sentinel
// errors: errors.Is(err, dlbridge.ErrDeleted) tells what refused a call.
type Status int32

// The library's status codes (their numbers never change).
const (
	OK                   Status = C.DLB_OK
	ErrInvalidArgument   Status = C.DLB_ERR_INVALID_ARGUMENT
	ErrOutOfMemory       Status = C.DLB_ERR_OUT_OF_MEMORY
	ErrDeleted           Status = C.DLB_ERR_DELETED
	ErrNotZeroCopy       Status = C.DLB_ERR_NOT_ZERO_COPY
	ErrUnsupportedDtype  Status = C.DLB_ERR_UNSUPPORTED_DTYPE
	ErrUnsupportedDevice Status = C.DLB_ERR_UNSUPPORTED_DEVICE
	ErrUnsupportedLayout Status = C.DLB_ERR_UNSUPPORTED_LAYOUT
	ErrReadOnly          Status = C.DLB_ERR_READ_ONLY
	ErrVersion           Status = C.DLB_ERR_VERSION
	ErrOverflow          Status = C.DLB_ERR_OVERFLOW
	ErrMalformed         Status = C.DLB_ERR_MALFORMED
	ErrAlignment         Status = C.DLB_ERR_ALIGNMENT
	ErrBackend           Status = C.DLB_ERR_BACKEND
	ErrInternal          Status = C.DLB_ERR_INTERNAL
)

// String is the constant's name from the library's table
// (dlb_status_name): "DLB_ERR_DELETED", "DLB_UNKNOWN_STATUS" for a number
// the library does not know.
func (s Status) String() string { return C.GoString(C.dlb_status_name(C.dlb_status(s))) }

// Error makes a Status usable as a sentinel error value.
func (s Status) Error() string { return "dlbridge: " + s.String() }

// Error is a refusal: the library's status, its name and its message.
type Error struct {
	Status  Status // the status code
	Name    string // its name from the library's table, "DLB_ERR_MALFORMED"
	Message string // what was wrong with which value ("shape[1] is -3")
}

// Error is "dlbridge: NAME: MESSAGE".
func (e *Error) Error() string { return "dlbridge: " + e.Name + ": " + e.Message }

// Is reports whether target is this error's Status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

func newError(s Status, format string, args ...any) *Error {
	return &Error{Status: s, Name: s.String(), Message: fmt.Sprintf(format, args...)}
}

// call runs one library call and, when it fails, reads the calling
// thread's message before the goroutine can move to another thread.
func call(f func() C.dlb_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if s := f(); s != C.DLB_OK {
		return &Error{Status: Status(s), Name: Status(s).String(), Message: C.GoString(C.dlb_last_error_message())}
	}
	return nil
}

// failed is the error of a call whose C wrapper copied the thread's
// message (malloc) in the same C call: no thread locking on the way.
func failed(s C.dlb_status, msg *C.char) error {
	e := &Error{Status: Status(s), Name: Status(s).String(), Message: "(the message was lost: out of memory)"}
	if msg != nil {
		e.Message = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return e
}

// LiveExports is the number of managed tensors the library exported whose
// deleter has not run yet (in this process).
func LiveExports() int64 { return int64(C.dlb_live_exports()) }

// Version is the library's version ("0.1.0").
func Version() string { return C.GoString(C.dlb_version_string()) }

func parseDType(name string) (C.DLDataType, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var dt C.DLDataType
	err := call(func() C.dlb_status { return C.dlb_dtype_from_name(cs, &dt) })
	return dt, err
}

func dtypeName(dt C.DLDataType) string {
	var buf [64]C.char
	if C.dlb_dtype_name(dt, &buf[0], C.size_t(len(buf))) != C.DLB_OK {
		return fmt.Sprintf("(code %d, bits %d, lanes %d)", dt.code, dt.bits, dt.lanes)
	}
	return C.GoString(&buf[0])
}

// Element is a Go type whose slices a Buffer's elements can be: its kind's
// name ("float32", "int64", "uint8") is the dtype's name.
type Element interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

type kindDType struct {
	dt  C.DLDataType
	err error
}

// kindDTypes is the library's dtype for each Element kind's name, asked
// once per kind.
var kindDTypes sync.Map // reflect.Kind -> kindDType

func dtypeOf[T Element]() (C.DLDataType, error) {
	k := reflect.TypeFor[T]().Kind()
	if v, ok := kindDTypes.Load(k); ok {
		return v.(kindDType).dt, v.(kindDType).err
	}
	dt, err := parseDType(k.String())
	kindDTypes.Store(k, kindDType{dt, err})
	return dt, err
}
