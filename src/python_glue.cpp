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

DLB_API dlb_status dlb_py_import_capsule(void* capsule, const dlb_import_options* options,
                                         dlb_buffer** out) {
  if (capsule == nullptr || out == nullptr) {
    return dlb::set_error(DLB_ERR_INVALID_ARGUMENT, "dlb_py_import_capsule: %s is NULL",
                          capsule == nullptr ? "capsule" : "out");
  }
  const PythonApi* py = python();
  if (py == nullptr) return no_python("dlb_py_import_capsule");
  if (py->PyCapsule_IsValid(capsule, kNameVersioned) != 0) {
    return import_versioned(*py, capsule, options, out);
  }
  if (py->PyCapsule_IsValid(capsule, kNameLegacy) != 0) {
    return import_legacy(*py, capsule, options, out);
  }
  const char* name = py->PyCapsule_GetName(capsule);
  if (name == nullptr && py->PyErr_Occurred() != nullptr) {
    py->PyErr_Clear();
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
