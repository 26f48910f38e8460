// The C parts of the Python binding: capsules, the buffer protocol, and
// releases that take the GIL themselves.
//
// The library has no link-time dependency on Python. The few CPython
// functions used here are looked up with dlsym(RTLD_DEFAULT, ...) in the
// running process the first time one of these entry points is called; the
// Python binding loads the library with ctypes, so they are there. The
// declarations below are the CPython 3.x ABI on 64-bit platforms (the
// stable parts: Py_buffer's layout and the PyBUF_* numbers have not changed
// since 3.3). Only the functions that take or give PyObject* run with the
// GIL held by the caller; release callbacks and the import deleters take it
// themselves and do nothing once the interpreter is gone (a leak at exit,
// never a crash).

#include <dlbridge/dlbridge.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "dtype.hpp"
#include "errors.hpp"

namespace {

// ---------------------------------------------------------------------------
// The CPython ABI this file relies on
// ---------------------------------------------------------------------------

using PyObject = void;
using Py_ssize_t = std::ptrdiff_t;
using PyCapsule_Destructor = void (*)(PyObject*);

// Py_buffer (Include/pybuffer.h), unchanged since Python 3.3.
struct Py_buffer {
  void* buf;
  PyObject* obj;
  Py_ssize_t len;
  Py_ssize_t itemsize;
  int readonly;
  int ndim;
  char* format;
  Py_ssize_t* shape;
  Py_ssize_t* strides;
  Py_ssize_t* suboffsets;
  void* internal;
};
static_assert(sizeof(Py_buffer) == 80, "Py_buffer layout of 64-bit CPython 3.x");
static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "64-bit platforms only");

constexpr int kPyBUF_STRIDES = 0x0010 | 0x0008;
constexpr int kPyBUF_FORMAT = 0x0004;
constexpr int kPyBUF_RECORDS_RO = kPyBUF_STRIDES | kPyBUF_FORMAT;
constexpr int kPyBufMaxNdim = 64;

// Capsule names: static strings, since a capsule keeps the pointer.
constexpr const char kNameVersioned[] = "dltensor_versioned";
constexpr const char kNameLegacy[] = "dltensor";
constexpr const char kNameUsedVersioned[] = "used_dltensor_versioned";
constexpr const char kNameUsedLegacy[] = "used_dltensor";

struct PythonApi {
  // Interpreter state.
  int (*Py_IsInitialized)();
  int (*IsFinalizing)();  // Py_IsFinalizing (3.13+) or _Py_IsFinalizing; may be NULL.
  int (*PyGILState_Ensure)();  // returns PyGILState_STATE, an int-sized enum
  void (*PyGILState_Release)(int);
  // Objects and errors.
  void (*Py_DecRef)(PyObject*);
  PyObject** PyExc_BufferError;
  void (*PyErr_SetString)(PyObject*, const char*);
  PyObject* (*PyErr_Occurred)();
  void (*PyErr_Fetch)(PyObject**, PyObject**, PyObject**);
  void (*PyErr_Clear)();
  PyObject* (*PyObject_Str)(PyObject*);
  const char* (*PyUnicode_AsUTF8)(PyObject*);
  // Capsules.
  PyObject* (*PyCapsule_New)(void*, const char*, PyCapsule_Destructor);
  void* (*PyCapsule_GetPointer)(PyObject*, const char*);
  int (*PyCapsule_IsValid)(PyObject*, const char*);
  int (*PyCapsule_SetName)(PyObject*, const char*);
  const char* (*PyCapsule_GetName)(PyObject*);
  // Buffer protocol.
  int (*PyObject_GetBuffer)(PyObject*, Py_buffer*, int);
  void (*PyBuffer_Release)(Py_buffer*);
  bool complete;
  // Only for the builtins of dlb_py_method_table().
  void (*Py_IncRef)(PyObject*);
  PyObject* Py_None;  // &_Py_NoneStruct
  PyObject** PyExc_TypeError;
  void (*PyErr_SetObject)(PyObject*, PyObject*);
  PyObject* (*PyLong_FromVoidPtr)(void*);
  void* (*PyLong_AsVoidPtr)(PyObject*);
  PyObject* (*PyLong_FromLongLong)(long long);
  PyObject* (*PyLong_FromUnsignedLongLong)(unsigned long long);
  long long (*PyLong_AsLongLong)(PyObject*);
  PyObject* (*PyBool_FromLong)(long);
  PyObject* (*PyTuple_New)(Py_ssize_t);
  int (*PyTuple_SetItem)(PyObject*, Py_ssize_t, PyObject*);  // steals the item
  PyObject* (*PyUnicode_DecodeUTF8)(const char*, Py_ssize_t, const char*);
  PyObject* (*PyUnicode_FromString)(const char*);
  bool fast_complete;
};

template <class F>
bool resolve(F& slot, const char* name) noexcept {
  void* sym = dlsym(RTLD_DEFAULT, name);
  // POSIX guarantees that object pointers and function pointers convert.
  slot = reinterpret_cast<F>(sym);
  return sym != nullptr;
}

PythonApi load_api() noexcept {
  PythonApi api{};
  bool ok = true;
  ok &= resolve(api.Py_IsInitialized, "Py_IsInitialized");
  ok &= resolve(api.PyGILState_Ensure, "PyGILState_Ensure");
  ok &= resolve(api.PyGILState_Release, "PyGILState_Release");
  ok &= resolve(api.Py_DecRef, "Py_DecRef");
  ok &= resolve(api.PyExc_BufferError, "PyExc_BufferError");
  ok &= resolve(api.PyErr_SetString, "PyErr_SetString");
  ok &= resolve(api.PyErr_Occurred, "PyErr_Occurred");
  ok &= resolve(api.PyErr_Fetch, "PyErr_Fetch");
  ok &= resolve(api.PyErr_Clear, "PyErr_Clear");
  ok &= resolve(api.PyObject_Str, "PyObject_Str");
  ok &= resolve(api.PyUnicode_AsUTF8, "PyUnicode_AsUTF8");
  ok &= resolve(api.PyCapsule_New, "PyCapsule_New");
  ok &= resolve(api.PyCapsule_GetPointer, "PyCapsule_GetPointer");
  ok &= resolve(api.PyCapsule_IsValid, "PyCapsule_IsValid");
  ok &= resolve(api.PyCapsule_SetName, "PyCapsule_SetName");
  ok &= resolve(api.PyCapsule_GetName, "PyCapsule_GetName");
  ok &= resolve(api.PyObject_GetBuffer, "PyObject_GetBuffer");
  ok &= resolve(api.PyBuffer_Release, "PyBuffer_Release");
  // The finalizing query moved from private to public in 3.13.
  if (!resolve(api.IsFinalizing, "Py_IsFinalizing")) {
    (void)resolve(api.IsFinalizing, "_Py_IsFinalizing");
  }
  api.complete = ok;
  bool fast = ok;
  fast &= resolve(api.Py_IncRef, "Py_IncRef");
  fast &= resolve(api.Py_None, "_Py_NoneStruct");
  fast &= resolve(api.PyExc_TypeError, "PyExc_TypeError");
  fast &= resolve(api.PyErr_SetObject, "PyErr_SetObject");
  fast &= resolve(api.PyLong_FromVoidPtr, "PyLong_FromVoidPtr");
  fast &= resolve(api.PyLong_AsVoidPtr, "PyLong_AsVoidPtr");
  fast &= resolve(api.PyLong_FromLongLong, "PyLong_FromLongLong");
  fast &= resolve(api.PyLong_FromUnsignedLongLong, "PyLong_FromUnsignedLongLong");
  fast &= resolve(api.PyLong_AsLongLong, "PyLong_AsLongLong");
  fast &= resolve(api.PyBool_FromLong, "PyBool_FromLong");
  fast &= resolve(api.PyTuple_New, "PyTuple_New");
  fast &= resolve(api.PyTuple_SetItem, "PyTuple_SetItem");
  fast &= resolve(api.PyUnicode_DecodeUTF8, "PyUnicode_DecodeUTF8");
  fast &= resolve(api.PyUnicode_FromString, "PyUnicode_FromString");
  api.fast_complete = fast;
  return api;
}

// NULL when the process has no (complete) CPython in it.
const PythonApi* python() noexcept {
  static const PythonApi api = load_api();  // thread-safe initialisation
  return api.complete ? &api : nullptr;
}

// True while Python code may run: initialised and not shutting down.
bool interpreter_alive(const PythonApi& py) noexcept {
  if (py.Py_IsInitialized() == 0) return false;
  if (py.IsFinalizing != nullptr && py.IsFinalizing() != 0) return false;
  return true;
}

// Holds the GIL for its scope if the interpreter is alive; `held` says
// whether it is. Re-entrant: fine on a thread that already holds the GIL.
class GilGuard {
 public:
  GilGuard() noexcept : py_(python()) {
    if (py_ != nullptr && interpreter_alive(*py_)) {
      state_ = py_->PyGILState_Ensure();
      held_ = true;
    }
  }
  ~GilGuard() {
    if (held_) py_->PyGILState_Release(state_);
  }
  GilGuard(const GilGuard&) = delete;
  GilGuard& operator=(const GilGuard&) = delete;
  const PythonApi* api() const noexcept { return held_ ? py_ : nullptr; }

 private:
  const PythonApi* py_;
  int state_ = 0;
  bool held_ = false;
};

dlb_status no_python(const char* function) noexcept {
  return dlb::set_error(DLB_ERR_INTERNAL, "%s: no Python interpreter found in this process",
                        function);
}

// Takes the pending Python exception, clears it, and records its text as the
// library's last error with `code`. Called with the GIL held.
dlb_status error_from_python(const PythonApi& py, dlb_status code, const char* what) noexcept {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* trace = nullptr;
  py.PyErr_Fetch(&type, &value, &trace);
  const char* text = nullptr;
  PyObject* str = value != nullptr ? py.PyObject_Str(value) : nullptr;
  if (str != nullptr) text = py.PyUnicode_AsUTF8(str);
  const dlb_status s =
      dlb::set_error(code, "%s: %s", what, text != nullptr ? text : "(no message)");
  if (str != nullptr) py.Py_DecRef(str);
  if (type != nullptr) py.Py_DecRef(type);
  if (value != nullptr) py.Py_DecRef(value);
  if (trace != nullptr) py.Py_DecRef(trace);
  py.PyErr_Clear();  // PyObject_Str or AsUTF8 may have failed too
  return s;
}

// ---------------------------------------------------------------------------
// Capsules
// ---------------------------------------------------------------------------

// Destructor of the capsules dlb_py_export_capsule() makes. Python calls it
// with the GIL held when the capsule dies. A consumer that took the tensor
// renamed the capsule to used_*; then the tensor is not ours to free.
void capsule_destructor(PyObject* capsule) {
  const PythonApi* py = python();
  if (py == nullptr) return;
  if (py->PyCapsule_IsValid(capsule, kNameVersioned) != 0) {
    auto* t = static_cast<DLManagedTensorVersioned*>(
        py->PyCapsule_GetPointer(capsule, kNameVersioned));
    dlb_managed_free_versioned(t);
  } else if (py->PyCapsule_IsValid(capsule, kNameLegacy) != 0) {
    auto* t = static_cast<DLManagedTensor*>(py->PyCapsule_GetPointer(capsule, kNameLegacy));
    dlb_managed_free_legacy(t);
  }
}

// Exports `buffer` into a new capsule; NULL with BufferError (or
// MemoryError) set on failure, nothing left allocated. GIL held.
PyObject* export_to_capsule(const PythonApi& pyref, dlb_buffer* buffer,
                            const dlb_export_options* options, int32_t versioned) noexcept {
  const PythonApi* py = &pyref;
  void* managed = nullptr;
  const char* name = nullptr;
  dlb_status s;
  if (versioned != 0) {
    DLManagedTensorVersioned* t = nullptr;
    s = dlb_export_versioned(buffer, options, &t);
    managed = t;
    name = kNameVersioned;
  } else {
    DLManagedTensor* t = nullptr;
    s = dlb_export_legacy(buffer, options, &t);
    managed = t;
    name = kNameLegacy;
  }
  if (s != DLB_OK) {
    char text[600];
    std::snprintf(text, sizeof text, "%s: %s", dlb_status_name(s), dlb_last_error_message());
    py->PyErr_SetString(*py->PyExc_BufferError, text);
    return nullptr;
  }
  PyObject* capsule = py->PyCapsule_New(managed, name, capsule_destructor);
  if (capsule == nullptr) {  // MemoryError is set
    if (versioned != 0) {
      dlb_managed_free_versioned(static_cast<DLManagedTensorVersioned*>(managed));
    } else {
      dlb_managed_free_legacy(static_cast<DLManagedTensor*>(managed));
    }
    return nullptr;
  }
  return capsule;
}

// Imports hand the library a shim whose deleter takes the GIL before calling
// the producer's deleter: producers such as numpy 1.x free Python objects in
// their deleters without taking the GIL, and the library may run a deleter
// on any thread. If the interpreter is gone, the producer's tensor leaks.
void shim_deleter_versioned(DLManagedTensorVersioned* shim) {
  auto* original = static_cast<DLManagedTensorVersioned*>(shim->manager_ctx);
  delete shim;
  if (original == nullptr || original->deleter == nullptr) return;
  GilGuard gil;
  if (gil.api() != nullptr) original->deleter(original);
}

void shim_deleter_legacy(DLManagedTensor* shim) {
  auto* original = static_cast<DLManagedTensor*>(shim->manager_ctx);
  delete shim;
  if (original == nullptr || original->deleter == nullptr) return;
  GilGuard gil;
  if (gil.api() != nullptr) original->deleter(original);
}

dlb_status import_versioned(const PythonApi& py, PyObject* capsule,
                            const dlb_import_options* options, dlb_buffer** out) noexcept {
  auto* original =
      static_cast<DLManagedTensorVersioned*>(py.PyCapsule_GetPointer(capsule, kNameVersioned));
  if (original == nullptr) {
    py.PyErr_Clear();
    return dlb::set_error(DLB_ERR_MALFORMED, "dlb_py_import_capsule: capsule holds NULL");
  }
  dlb_buffer* buffer = nullptr;
  if (original->version.major != 1) {
    // Only the stable prefix may be read: let the library refuse it.
    return dlb_import_versioned(original, options, out);
  }
  auto* shim = new (std::nothrow) DLManagedTensorVersioned;
  if (shim == nullptr) {
    return dlb::set_error(DLB_ERR_OUT_OF_MEMORY, "dlb_py_import_capsule: out of memory");
  }
  shim->version = original->version;
  shim->manager_ctx = original;
  shim->deleter = original->deleter != nullptr ? shim_deleter_versioned : nullptr;
  shim->flags = original->flags;
  shim->dl_tensor = original->dl_tensor;
  const dlb_status s = dlb_import_versioned(shim, options, &buffer);
  if (s != DLB_OK) {
    delete shim;  // the capsule still owns `original`
    return s;
  }
  py.PyCapsule_SetName(capsule, kNameUsedVersioned);
  *out = buffer;
  return DLB_OK;
}

dlb_status import_legacy(const PythonApi& py, PyObject* capsule,
                         const dlb_import_options* options, dlb_buffer** out) noexcept {
  auto* original = static_cast<DLManagedTensor*>(py.PyCapsule_GetPointer(capsule, kNameLegacy));
  if (original == nullptr) {
    py.PyErr_Clear();
    return dlb::set_error(DLB_ERR_MALFORMED, "dlb_py_import_capsule: capsule holds NULL");
  }
  auto* shim = new (std::nothrow) DLManagedTensor;
  if (shim == nullptr) {
    return dlb::set_error(DLB_ERR_OUT_OF_MEMORY, "dlb_py_import_capsule: out of memory");
  }
  shim->dl_tensor = original->dl_tensor;
  shim->manager_ctx = original;
  shim->deleter = original->deleter != nullptr ? shim_deleter_legacy : nullptr;
  dlb_buffer* buffer = nullptr;
  const dlb_status s = dlb_import_legacy(shim, options, &buffer);
  if (s != DLB_OK) {
    delete shim;
    return s;
  }
  py.PyCapsule_SetName(capsule, kNameUsedLegacy);
  *out = buffer;
  return DLB_OK;
}

// Imports from a "dltensor_versioned" or "dltensor" capsule, refusing
// anything else with DLB_ERR_INVALID_ARGUMENT. GIL held.
dlb_status import_any(const PythonApi& py, PyObject* capsule, const dlb_import_options* options,
                      dlb_buffer** out) noexcept {
  if (py.PyCapsule_IsValid(capsule, kNameVersioned) != 0) {
    return import_versioned(py, capsule, options, out);
  }
  if (py.PyCapsule_IsValid(capsule, kNameLegacy) != 0) {
    return import_legacy(py, capsule, options, out);
  }
  const char* name = py.PyCapsule_GetName(capsule);
  if (name == nullptr && py.PyErr_Occurred() != nullptr) {
    py.PyErr_Clear();
    return dlb::set_error(DLB_ERR_INVALID_ARGUMENT,
                          "dlb_py_import_capsule: the object is not a PyCapsule");
  }
  if (name != nullptr &&
      (std::strcmp(name, kNameUsedVersioned) == 0 || std::strcmp(name, kNameUsedLegacy) == 0)) {
    return dlb::set_error(DLB_ERR_INVALID_ARGUMENT,
                          "dlb_py_import_capsule: the capsule was already consumed (named '%s')",
                          name);
  }
  return dlb::set_error(DLB_ERR_INVALID_ARGUMENT,
                        "dlb_py_import_capsule: capsule named '%s' is not a DLPack capsule",
                        name != nullptr ? name : "(null)");
}

// ---------------------------------------------------------------------------
// Buffer protocol
// ---------------------------------------------------------------------------

// Maps a struct-module format and item size to a DLPack dtype. The format
// names the kind; the item size gives the bits, which also makes '@' (native
// sizes) and '=' / '<' (standard sizes, little-endian here) agree.
dlb_status format_to_dtype(const char* format, Py_ssize_t itemsize, DLDataType* out) noexcept {
  const char* f = format != nullptr ? format : "B";
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (*f == '>' || *f == '!') {
    return dlb::set_error(DLB_ERR_UNSUPPORTED_DTYPE,
                          "buffer format '%s' is big-endian; DLPack data is native-endian", format);
  }
  uint8_t code = 0;
  bool complex = false;
  if (f[0] == 'Z' && f[1] != '\0' && f[2] == '\0') {
    complex = true;
    ++f;
  } else if (f[0] == '\0' || f[1] != '\0') {
    return dlb::set_error(DLB_ERR_UNSUPPORTED_DTYPE,
                          "buffer format '%s' has no DLPack dtype", format != nullptr ? format : "");
  }
  switch (*f) {
    case '?': code = kDLBool; break;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': code = kDLInt; break;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c': code = kDLUInt; break;
    case 'e': case 'f': case 'd': code = complex ? kDLComplex : kDLFloat; break;
    default:
      return dlb::set_error(DLB_ERR_UNSUPPORTED_DTYPE, "buffer format '%s' has no DLPack dtype",
                            format);
  }
  if (complex && *f == 'e') {
    return dlb::set_error(DLB_ERR_UNSUPPORTED_DTYPE, "buffer format '%s' has no DLPack dtype",
                          format);
  }
  if (itemsize <= 0 || itemsize > 16) {
    return dlb::set_error(DLB_ERR_UNSUPPORTED_DTYPE, "buffer item size %lld for format '%s'",
                          static_cast<long long>(itemsize), format != nullptr ? format : "B");
  }
  DLDataType dtype;
  dtype.code = code;
  dtype.bits = static_cast<uint8_t>(itemsize * 8);
  dtype.lanes = 1;
  // The library knows which (code, bits) pairs DLPack allows.
  DLB_TRY(dlb_dtype_check(dtype));
  *out = dtype;
  return DLB_OK;
}

// Release callback of buffers made by dlb_py_wrap_buffer(): ends the buffer
// export under the GIL, then frees the view.
void release_view(void* ctx) {
  auto* view = static_cast<Py_buffer*>(ctx);
  {
    GilGuard gil;
    if (gil.api() == nullptr) return;  // interpreter gone: leak the export
    gil.api()->PyBuffer_Release(view);
  }
  delete view;
}

}  // namespace

extern "C" {

DLB_API void dlb_py_release_object(void* obj) {
  if (obj == nullptr) return;
  GilGuard gil;
  if (gil.api() != nullptr) gil.api()->Py_DecRef(obj);
}

DLB_API void* dlb_py_export_capsule(dlb_buffer* buffer, const dlb_export_options* options,
                                    int32_t versioned) {
  const PythonApi* py = python();
  if (py == nullptr) {
    (void)no_python("dlb_py_export_capsule");
    return nullptr;
  }
  return export_to_capsule(*py, buffer, options, versioned);
}

DLB_API dlb_status dlb_py_import_capsule(void* capsule, const dlb_import_options* options,
                                         dlb_buffer** out) {
  if (capsule == nullptr || out == nullptr) {
    return dlb::set_error(DLB_ERR_INVALID_ARGUMENT, "dlb_py_import_capsule: %s is NULL",
                          capsule == nullptr ? "capsule" : "out");
  }
  const PythonApi* py = python();
  if (py == nullptr) return no_python("dlb_py_import_capsule");
  return import_any(*py, capsule, options, out);
}

DLB_API dlb_status dlb_py_wrap_buffer(void* obj, dlb_buffer** out) {
  if (obj == nullptr || out == nullptr) {
    return dlb::set_error(DLB_ERR_INVALID_ARGUMENT, "dlb_py_wrap_buffer: %s is NULL",
                          obj == nullptr ? "obj" : "out");
  }
  const PythonApi* py = python();
  if (py == nullptr) return no_python("dlb_py_wrap_buffer");
  auto* view = new (std::nothrow) Py_buffer;
  if (view == nullptr) {
    return dlb::set_error(DLB_ERR_OUT_OF_MEMORY, "dlb_py_wrap_buffer: out of memory");
  }
  std::memset(view, 0, sizeof *view);
  if (py->PyObject_GetBuffer(obj, view, kPyBUF_RECORDS_RO) != 0) {
    delete view;
    return error_from_python(*py, DLB_ERR_INVALID_ARGUMENT, "dlb_py_wrap_buffer");
  }
  // From here on, every failure ends the buffer export again.
  auto fail = [&](dlb_status s) {
    py->PyBuffer_Release(view);
    delete view;
    return s;
  };
  if (view->ndim < 0 || view->ndim > kPyBufMaxNdim) {
    return fail(dlb::set_error(DLB_ERR_UNSUPPORTED_LAYOUT, "dlb_py_wrap_buffer: ndim is %d",
                               view->ndim));
  }
  if (view->suboffsets != nullptr) {
    return fail(dlb::set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                               "dlb_py_wrap_buffer: indirect (suboffset) buffers have no "
                               "DLPack layout"));
  }
  DLDataType dtype;
  const dlb_status ds = format_to_dtype(view->format, view->itemsize, &dtype);
  if (ds != DLB_OK) return fail(ds);

  int64_t shape[kPyBufMaxNdim];
  int64_t strides[kPyBufMaxNdim];
  const int ndim = view->ndim;
  if (ndim > 0 && view->shape == nullptr) {
    // Only requested-but-absent shape: a flat buffer of bytes.
    return fail(dlb::set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                               "dlb_py_wrap_buffer: the exporter gave no shape"));
  }
  for (int i = 0; i < ndim; ++i) {
    shape[i] = view->shape[i];
    if (view->strides == nullptr) continue;
    const Py_ssize_t bytes = view->strides[i];
    if (bytes % view->itemsize != 0) {
      return fail(dlb::set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                                 "dlb_py_wrap_buffer: strides[%d] is %lld bytes, not a multiple "
                                 "of the item size %lld",
                                 i, static_cast<long long>(bytes),
                                 static_cast<long long>(view->itemsize)));
    }
    strides[i] = bytes / view->itemsize;
  }

  DLTensor t;
  t.data = view->buf;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = ndim > 0 ? shape : nullptr;
  t.strides = (ndim > 0 && view->strides != nullptr) ? strides : nullptr;
  t.byte_offset = 0;
  const uint64_t flags = view->readonly != 0 ? DLB_BUFFER_READ_ONLY : 0;
  dlb_buffer* buffer = nullptr;
  const dlb_status s = dlb_buffer_wrap(&t, flags, release_view, view, &buffer);
  if (s != DLB_OK) return fail(s);
  *out = buffer;
  return DLB_OK;
}

}  // extern "C"

// ---------------------------------------------------------------------------
// Builtins: the hot entry points as CPython functions
// ---------------------------------------------------------------------------
//
// ctypes pays a fixed cost per call and per converted argument that is
// larger than numpy's whole DLPack round trip. The functions below are
// CPython builtins instead (METH_O / METH_FASTCALL), which the package makes
// with PyCFunction_NewEx from the table dlb_py_method_table() returns. A
// buffer handle travels between them inside an "owner" capsule: a PyCapsule
// named "dlbridge.buffer" holding one reference, which its destructor
// releases, so that dropping the Python object that keeps the owner releases
// the handle without any Python code running.

namespace {

// PyMethodDef (Include/methodobject.h), unchanged through CPython 3.x.
using PyCFunction = PyObject* (*)(PyObject*, PyObject*);
struct PyMethodDef {
  const char* ml_name;
  PyCFunction ml_meth;
  int ml_flags;
  const char* ml_doc;
};
static_assert(sizeof(PyMethodDef) == 32, "PyMethodDef layout of 64-bit CPython 3.x");

constexpr int kMETH_O = 0x0008;
constexpr int kMETH_FASTCALL = 0x0080;

constexpr const char kNameOwner[] = "dlbridge.buffer";

// The exception class failures other than exports raise: set once by the
// package (dlbridge.Error, called as Error(status, message)); BufferError
// until then. A strong reference, kept for the life of the process.
PyObject* g_error_type = nullptr;

// The fast entry points run only once python() is complete and the extra
// functions were found; dlb_py_method_table() checks that before handing
// them out.
const PythonApi& api() noexcept { return *python(); }

PyObject* new_none(const PythonApi& py) noexcept {
  py.Py_IncRef(py.Py_None);
  return py.Py_None;
}

// Raises the error class with (status, the library's last message).
PyObject* raise_status(const PythonApi& py, dlb_status status) noexcept {
  PyObject* type = g_error_type != nullptr ? g_error_type : *py.PyExc_BufferError;
  const char* text = dlb_last_error_message();
  PyObject* args = py.PyTuple_New(2);
  if (args == nullptr) return nullptr;
  PyObject* code = py.PyLong_FromLongLong(status);
  PyObject* message = py.PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(std::strlen(text)),
                                              "replace");
  if (code == nullptr || message == nullptr) {
    if (code != nullptr) py.Py_DecRef(code);
    if (message != nullptr) py.Py_DecRef(message);
    py.Py_DecRef(args);
    return nullptr;
  }
  py.PyTuple_SetItem(args, 0, code);
  py.PyTuple_SetItem(args, 1, message);
  py.PyErr_SetObject(type, args);
  py.Py_DecRef(args);
  return nullptr;
}

PyObject* type_error(const PythonApi& py, const char* text) noexcept {
  py.PyErr_SetString(*py.PyExc_TypeError, text);
  return nullptr;
}

void owner_destructor(PyObject* owner) {
  const PythonApi* py = python();
  if (py == nullptr) return;
  // The capsule is valid by construction; GetPointer cannot fail here.
  dlb_buffer_release(static_cast<dlb_buffer*>(py->PyCapsule_GetPointer(owner, kNameOwner)));
}

// A new owner for `buffer`, taking over the caller's reference (released
// again if the capsule cannot be made).
PyObject* new_owner(const PythonApi& py, dlb_buffer* buffer) noexcept {
  PyObject* owner = py.PyCapsule_New(buffer, kNameOwner, owner_destructor);
  if (owner == nullptr) dlb_buffer_release(buffer);
  return owner;
}

// The handle inside an owner (borrowed); NULL with TypeError set otherwise.
dlb_buffer* owned(const PythonApi& py, PyObject* owner) noexcept {
  if (py.PyCapsule_IsValid(owner, kNameOwner) == 0) {
    (void)type_error(py, "dlbridge: expected a buffer owner (a 'dlbridge.buffer' capsule)");
    return nullptr;
  }
  return static_cast<dlb_buffer*>(py.PyCapsule_GetPointer(owner, kNameOwner));
}

// export(owner) -> a "dltensor" capsule with the default options, or
// export(owner, versioned, copy, has_device, device_type, device_id,
//        stream, flags) -> a "dltensor_versioned" / "dltensor" capsule;
// stream None means DLB_STREAM_NONE. Failures raise BufferError.
PyObject* py_export(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  const PythonApi& py = api();
  if (nargs != 1 && nargs != 8) {
    return type_error(py, "export() takes 1 or 8 arguments");
  }
  dlb_buffer* buffer = owned(py, args[0]);
  if (buffer == nullptr) return nullptr;
  if (nargs == 1) return export_to_capsule(py, buffer, nullptr, 0);

  long long v[7];
  for (int i = 0; i < 7; ++i) {
    if (i == 5 && args[1 + i] == py.Py_None) {
      v[i] = DLB_STREAM_NONE;
      continue;
    }
    v[i] = py.PyLong_AsLongLong(args[1 + i]);
    if (v[i] == -1 && py.PyErr_Occurred() != nullptr) return nullptr;
  }
  dlb_export_options options;
  dlb_export_options_init(&options);
  options.copy = static_cast<int32_t>(v[1]);
  options.has_target_device = v[2] != 0 ? 1 : 0;
  dlb::set_device_type(options.target_device, static_cast<int32_t>(v[3]));
  options.target_device.device_id = static_cast<int32_t>(v[4]);
  options.stream = static_cast<int64_t>(v[5]);
  options.flags = static_cast<uint64_t>(v[6]);
  return export_to_capsule(py, buffer, &options, v[0] != 0 ? 1 : 0);
}

// import_capsule(capsule) -> owner; renames the capsule used_* on success.
// Failures raise the error class (dlbridge.Error).
PyObject* py_import_capsule(PyObject* /*self*/, PyObject* capsule) {
  const PythonApi& py = api();
  dlb_buffer* buffer = nullptr;
  const dlb_status s = import_any(py, capsule, nullptr, &buffer);
  if (s != DLB_OK) return raise_status(py, s);
  return new_owner(py, buffer);
}

// wrap_buffer(obj) -> owner over the object's buffer protocol export.
PyObject* py_wrap_buffer(PyObject* /*self*/, PyObject* obj) {
  const PythonApi& py = api();
  dlb_buffer* buffer = nullptr;
  const dlb_status s = dlb_py_wrap_buffer(obj, &buffer);
  if (s != DLB_OK) return raise_status(py, s);
  return new_owner(py, buffer);
}

// own(handle) -> owner taking over one reference the caller holds (an int
// from a ctypes call such as dlb_buffer_alloc).
PyObject* py_own(PyObject* /*self*/, PyObject* handle) {
  const PythonApi& py = api();
  void* p = py.PyLong_AsVoidPtr(handle);
  if (p == nullptr) {
    if (py.PyErr_Occurred() != nullptr) return nullptr;
    return type_error(py, "own() needs a buffer handle, not 0");
  }
  return new_owner(py, static_cast<dlb_buffer*>(p));
}

// handle(owner) -> the dlb_buffer* as an int (borrowed: valid while the
// owner lives).
PyObject* py_handle(PyObject* /*self*/, PyObject* owner) {
  const PythonApi& py = api();
  dlb_buffer* buffer = owned(py, owner);
  if (buffer == nullptr) return nullptr;
  return py.PyLong_FromVoidPtr(buffer);
}

// Steals `item` into slot i of `tuple`; false (tuple untouched) when item
// is NULL, i.e. its creation failed.
bool put(const PythonApi& py, PyObject* tuple, Py_ssize_t i, PyObject* item) noexcept {
  if (item == nullptr) return false;
  py.PyTuple_SetItem(tuple, i, item);
  return true;
}

PyObject* int_tuple(const PythonApi& py, const int64_t* values, int n) noexcept {
  PyObject* tuple = py.PyTuple_New(n);
  if (tuple == nullptr) return nullptr;
  for (int i = 0; i < n; ++i) {
    if (!put(py, tuple, i, py.PyLong_FromLongLong(values[i]))) {
      py.Py_DecRef(tuple);
      return nullptr;
    }
  }
  return tuple;
}

// meta(owner) -> (shape, strides, dtype name, (device_type, device_id),
// data_ptr, readonly, nbytes), what Tensor caches. Strides in elements.
PyObject* py_meta(PyObject* /*self*/, PyObject* owner) {
  const PythonApi& py = api();
  dlb_buffer* buffer = owned(py, owner);
  if (buffer == nullptr) return nullptr;
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(buffer, &t);
  if (s != DLB_OK) return raise_status(py, s);
  char name[64];
  s = dlb_dtype_name(t.dtype, name, sizeof name);
  if (s != DLB_OK) return raise_status(py, s);
  const int ndim = t.ndim;
  int64_t compact[kPyBufMaxNdim];
  const int64_t* strides = t.strides;
  if (strides == nullptr && ndim > 0) {  // the library fills them; be safe anyway
    if (ndim > kPyBufMaxNdim) return type_error(py, "meta(): too many dimensions");
    int64_t step = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      compact[i] = step;
      step *= t.shape[i];
    }
    strides = compact;
  }
  const uintptr_t data = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  PyObject* result = py.PyTuple_New(7);
  if (result == nullptr) return nullptr;
  PyObject* device = py.PyTuple_New(2);
  bool ok = device != nullptr &&
            put(py, device, 0, py.PyLong_FromLongLong(dlb::device_type_of(t.device))) &&
            put(py, device, 1, py.PyLong_FromLongLong(t.device.device_id));
  if (!ok) {
    if (device != nullptr) py.Py_DecRef(device);
    py.Py_DecRef(result);
    return nullptr;
  }
  ok = put(py, result, 0, int_tuple(py, t.shape, ndim)) &&
       put(py, result, 1, int_tuple(py, strides, ndim)) &&
       put(py, result, 2, py.PyUnicode_FromString(name)) && put(py, result, 3, device) &&
       put(py, result, 4, py.PyLong_FromUnsignedLongLong(data)) &&
       put(py, result, 5, py.PyBool_FromLong((dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0)) &&
       put(py, result, 6, py.PyLong_FromUnsignedLongLong(dlb_buffer_nbytes(buffer)));
  if (!ok) {
    py.Py_DecRef(result);  // frees the items already in it (NULL slots are skipped)
    return nullptr;
  }
  return result;
}

// set_error_type(cls): the class failures raise, called as cls(status,
// message). Kept (one reference) for the life of the process.
PyObject* py_set_error_type(PyObject* /*self*/, PyObject* type) {
  const PythonApi& py = api();
  py.Py_IncRef(type);
  PyObject* previous = g_error_type;
  g_error_type = type;
  if (previous != nullptr) py.Py_DecRef(previous);
  return new_none(py);
}

template <class F>
PyCFunction as_cfunction(F f) noexcept {
  // Through void(*)() so that no cast-function-type warning fires; CPython
  // calls each entry with the signature its flags name.
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

const PyMethodDef kMethods[] = {
    {"export", as_cfunction(py_export), kMETH_FASTCALL,
     "export(owner[, versioned, copy, has_device, device_type, device_id, stream, flags])"},
    {"import_capsule", as_cfunction(py_import_capsule), kMETH_O, "import_capsule(capsule) -> owner"},
    {"wrap_buffer", as_cfunction(py_wrap_buffer), kMETH_O, "wrap_buffer(obj) -> owner"},
    {"own", as_cfunction(py_own), kMETH_O, "own(handle) -> owner"},
    {"handle", as_cfunction(py_handle), kMETH_O, "handle(owner) -> int"},
    {"meta", as_cfunction(py_meta), kMETH_O, "meta(owner) -> metadata tuple"},
    {"set_error_type", as_cfunction(py_set_error_type), kMETH_O, "set_error_type(cls)"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

extern "C" DLB_API const void* dlb_py_method_table(void) {
  const PythonApi* py = python();
  if (py == nullptr || !py->fast_complete) return nullptr;
  return kMethods;
}
