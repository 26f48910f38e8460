// Package testlib is what the binding's tests call in C: the native
// library of tests/lang (a DLPack consumer and producer that knows nothing
// of dlbridge, loaded with dlopen from DLB_TEST_NATIVE_LIBRARY), and the C
// loop the export benchmark sets beside Go's. Test files may not use cgo.
package testlib

/*
#cgo pkg-config: dlbridge
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <dlbridge/dlbridge.h>

static void* nl;
static int (*p_sum)(const DLTensor*, double*);
static int (*p_consume_versioned)(DLManagedTensorVersioned*, double*);
static int (*p_consume_legacy)(DLManagedTensor*, double*);
static int (*p_store_f64)(const DLTensor*, int64_t, double);
static DLManagedTensorVersioned* (*p_make_versioned)(int64_t, double);
static DLManagedTensor* (*p_make_legacy)(int64_t, double);
static long long (*p_deleter_calls)(void);
static long long (*p_live)(void);

static const char* nl_open(const char* path) {
  if (nl) return NULL;
  nl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!nl) return dlerror();
#define NL_SYM(p, name) if (!(*(void**)&p = dlsym(nl, name))) return dlerror();
  NL_SYM(p_sum, "nl_sum")
  NL_SYM(p_consume_versioned, "nl_consume_versioned")
  NL_SYM(p_consume_legacy, "nl_consume_legacy")
  NL_SYM(p_store_f64, "nl_store_f64")
  NL_SYM(p_make_versioned, "nl_make_versioned")
  NL_SYM(p_make_legacy, "nl_make_legacy")
  NL_SYM(p_deleter_calls, "nl_deleter_calls")
  NL_SYM(p_live, "nl_live")
  return NULL;
}
static int nl_sum(void* t, double* out) { return p_sum((const DLTensor*)t, out); }
static int nl_consume_versioned(void* t, double* out) { return p_consume_versioned(t, out); }
static int nl_consume_legacy(void* t, double* out) { return p_consume_legacy(t, out); }
static int nl_store_f64(void* t, int64_t i, double v) { return p_store_f64((const DLTensor*)t, i, v); }
static void* nl_make_versioned(int64_t n, double start) { return p_make_versioned(n, start); }
static void* nl_make_legacy(int64_t n, double start) { return p_make_legacy(n, start); }
static long long nl_deleter_calls(void) { return p_deleter_calls(); }
static long long nl_live(void) { return p_live(); }

// n exports of a buffer, each ended by its deleter, in C: the yardstick
// of the Go benchmark. Returns the first failing status.
static dlb_status export_delete_loop(void* b, long long n) {
  for (long long i = 0; i < n; ++i) {
    DLManagedTensorVersioned* t;
    dlb_status s = dlb_export_versioned((dlb_buffer*)b, NULL, &t);
    if (s != DLB_OK) return s;
    t->deleter(t);
  }
  return DLB_OK;
}

// An empty C function: two calls of it are the floor of the Go benchmark
// (what any binding pays to call C twice, export and deleter).
static int bare_call(void* p) { return p != NULL; }
*/
import "C"

import (
	"errors"
	"os"
	"sync"
	"unsafe"
)

var (
	once    sync.Once
	openErr error
)

// Open loads the native library named by DLB_TEST_NATIVE_LIBRARY (the
// build's tests/lang/libnative_library.so).
func Open() error {
	once.Do(func() {
		path := os.Getenv("DLB_TEST_NATIVE_LIBRARY")
		if path == "" {
			openErr = errors.New("DLB_TEST_NATIVE_LIBRARY must name the build's tests/lang/libnative_library.so")
			return
		}
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		if msg := C.nl_open(cpath); msg != nil {
			openErr = errors.New(C.GoString(msg))
		}
	})
	return openErr
}

// Sum reads a borrowed DLTensor*; ok is false when the library refused it.
func Sum(t unsafe.Pointer) (sum float64, ok bool) {
	var s C.double
	r := C.nl_sum(t, &s)
	return float64(s), r == 0
}

// ConsumeVersioned hands a DLManagedTensorVersioned* over: the library
// sums it and runs its deleter; on refusal (ok false) the caller keeps it.
func ConsumeVersioned(t unsafe.Pointer) (sum float64, ok bool) {
	var s C.double
	r := C.nl_consume_versioned(t, &s)
	return float64(s), r == 0
}

// ConsumeLegacy is ConsumeVersioned for a DLManagedTensor*.
func ConsumeLegacy(t unsafe.Pointer) (sum float64, ok bool) {
	var s C.double
	r := C.nl_consume_legacy(t, &s)
	return float64(s), r == 0
}

// StoreF64 writes element i of a borrowed float64 DLTensor*.
func StoreF64(t unsafe.Pointer, i int64, v float64) bool {
	return C.nl_store_f64(t, C.int64_t(i), C.double(v)) == 0
}

// MakeVersioned is a tensor of the library's own, [start, start+1, ...].
func MakeVersioned(n int64, start float64) unsafe.Pointer {
	return C.nl_make_versioned(C.int64_t(n), C.double(start))
}

// MakeLegacy is MakeVersioned as a legacy managed tensor.
func MakeLegacy(n int64, start float64) unsafe.Pointer {
	return C.nl_make_legacy(C.int64_t(n), C.double(start))
}

// DeleterCalls and Live count the library's own tensors.
func DeleterCalls() int64 { return int64(C.nl_deleter_calls()) }
func Live() int64         { return int64(C.nl_live()) }

// ExportDeleteLoop runs n versioned exports of a dlb_buffer*, each ended
// by its deleter, in one C loop; the status of the first failure, or 0.
func ExportDeleteLoop(b unsafe.Pointer, n int) int {
	return int(C.export_delete_loop(b, C.longlong(n)))
}

// BareCall is one cgo call of an empty C function (the benchmark's floor).
func BareCall(p unsafe.Pointer) int { return int(C.bare_call(p)) }
