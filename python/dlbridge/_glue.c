/* dlbridge._glue: the C side of the dlbridge Python package.
 *
 * An extension module built against the CPython 3.10 limited API (one
 * binary for CPython 3.10 and later), linked against libdlbridge. It holds
 * everything of the package that touches CPython objects:
 *
 * - dlbridge.Tensor itself: one dlb_buffer reference, released by the
 *   object's deallocator, its properties, and the DLPack producer side
 *   (__dlpack__, __dlpack_device__) with the protocol's argument rules. The
 *   type is immutable and its instances are not tracked by the garbage
 *   collector (they reference no Python object that could lead back to
 *   them), so that making and dropping one costs a small allocation;
 * - capsules: export into "dltensor_versioned" / "dltensor" capsules whose
 *   destructor frees an unconsumed tensor, import from them (renamed used_*);
 * - from_dlpack(), the consumer side with the protocol negotiation;
 * - from_buffer(), a zero-copy wrap of the Python buffer protocol;
 * - releases that take the GIL themselves, since the library may run a
 *   producer's deleter or a release callback on any thread.
 *
 * Facts about tensors (dtypes, devices, layouts, export rules) are the
 * library's: this file asks for them and turns statuses into exceptions.
 */
#define _GNU_SOURCE /* dladdr */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>

#include "_glue.h"
#include "_glue_buffer.h"
#include "_exchange.h"

/* ------------------------------------------------------------------------ */
/* Module state (one interpreter: the module is single-phase initialised)   */
/* ------------------------------------------------------------------------ */

static PyTypeObject* g_tensor_type; /* dlbridge.Tensor */
static PyObject* g_error_type;      /* dlbridge.Error, set by register() */
static PyObject* g_legacy_types;    /* producer types that refused max_version */
static PyObject* g_str_dlpack;
static PyObject* g_max_version;     /* (DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR) */
/* Py_IsFinalizing (3.13) or _Py_IsFinalizing (3.10-3.12), looked up once in
 * the running interpreter: neither is in the 3.10 limited API. May be NULL. */
static int (*g_is_finalizing)(void);

static const char kNameVersioned[] = "dltensor_versioned";
static const char kNameLegacy[] = "dltensor";
static const char kNameUsedVersioned[] = "used_dltensor_versioned";
static const char kNameUsedLegacy[] = "used_dltensor";

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

static PyObject* raise_error(dlb_status status, const char* text) {
  PyObject* type = g_error_type != NULL ? g_error_type : PyExc_RuntimeError;
  PyObject* message = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
  if (message == NULL) return NULL;
  PyObject* args = Py_BuildValue("(iN)", (int)status, message);
  if (args == NULL) return NULL;
  PyErr_SetObject(type, args);
  Py_DECREF(args);
  return NULL;
}

PyObject* dlbpy_raise_status(dlb_status status) {
  return raise_error(status, dlb_last_error_message());
}

/* An export failure, "DLB_ERR_X: message": BufferError when the data cannot
 * be exported, as the protocol asks of __dlpack__; ValueError when the
 * library refused an argument (a stream for host memory, stream 0 on CUDA,
 * an unknown copy policy), which the standard keeps apart from BufferError. */
static PyObject* raise_buffer_error(dlb_status status) {
  PyObject* type = status == DLB_ERR_INVALID_ARGUMENT ? PyExc_ValueError : PyExc_BufferError;
  PyErr_Format(type, "%s: %s", dlb_status_name(status), dlb_last_error_message());
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* The GIL from threads Python may never have seen                          */
/* ------------------------------------------------------------------------ */

/* True while Python code may run: initialised and not shutting down. Once
 * it is false, callbacks leak what they would free (never a crash). */
static int interpreter_alive(void) {
  if (!Py_IsInitialized()) return 0;
  if (g_is_finalizing != NULL && g_is_finalizing()) return 0;
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

dlb_buffer* dlbpy_tensor_buffer(PyObject* obj) {
  if (g_tensor_type == NULL || Py_TYPE(obj) != g_tensor_type) {
    PyErr_Format(PyExc_TypeError, "expected a dlbridge.Tensor, not %R", (PyObject*)Py_TYPE(obj));
    return NULL;
  }
  return ((dlbpy_tensor*)obj)->buffer;
}

PyObject* dlbpy_tensor_new(dlb_buffer* buffer) {
  /* Not tracked by the collector and never subclassed: the object's memory
   * is PyObject_Malloc'd and initialised here, which is what tp_alloc would
   * do less directly. */
  dlbpy_tensor* t = (dlbpy_tensor*)PyObject_Malloc(sizeof(dlbpy_tensor));
  if (t == NULL) {
    dlb_buffer_release(buffer);
    return PyErr_NoMemory();
  }
  t->buffer = buffer;
  t->meta = NULL;
  t->weaklist = NULL;
  return PyObject_Init((PyObject*)t, g_tensor_type); /* takes a reference on the type */
}

static PyObject* tensor_tp_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  (void)type;
  (void)args;
  (void)kwargs;
  PyErr_SetString(PyExc_TypeError,
                  "dlbridge.Tensor is made by dlbridge.empty(), dlbridge.from_buffer() or "
                  "dlbridge.from_dlpack()");
  return NULL;
}

static void tensor_dealloc(PyObject* self) {
  dlbpy_tensor* t = (dlbpy_tensor*)self;
  PyTypeObject* type = Py_TYPE(self);
  if (t->weaklist != NULL) PyObject_ClearWeakRefs(self);
  Py_CLEAR(t->meta);
  dlb_buffer* buffer = t->buffer;
  t->buffer = NULL;
  dlb_buffer_release(buffer); /* may run a producer's deleter: GIL held */
  PyObject_Free(self);
  Py_DECREF(type); /* instances of heap types own a reference to the type */
}

static PyObject* int_tuple(const int64_t* values, int n) {
  PyObject* tuple = PyTuple_New(n);
  if (tuple == NULL) return NULL;
  for (int i = 0; i < n; ++i) {
    PyObject* item = PyLong_FromLongLong(values[i]);
    if (item == NULL) {
      Py_DECREF(tuple);
      return NULL;
    }
    PyTuple_SetItem(tuple, i, item); /* steals */
  }
  return tuple;
}

/* (device_type, device_id) of a buffer, or NULL with dlbridge.Error set. */
static PyObject* device_tuple(const DLDevice* device) {
  return Py_BuildValue("(ii)", (int)device->device_type, (int)device->device_id);
}

/* The metadata tuple Tensor's properties read: (shape, strides, dtype name,
 * (device_type, device_id), data_ptr, readonly, nbytes). Strides in
 * elements; data_ptr is data + byte_offset as the buffer holds them. */
static PyObject* make_meta(dlb_buffer* buffer) {
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(buffer, &t);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  char name[64];
  s = dlb_dtype_name(t.dtype, name, sizeof name);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  uintptr_t data = (uintptr_t)t.data + (uintptr_t)t.byte_offset;
  if (t.data == NULL && (dlb_buffer_flags(buffer) & DLB_BUFFER_BACKEND) != 0) {
    /* A backend's memory (CUDA device memory) is only reached through an
     * export: one that orders nothing (stream -1) and copies nothing, read
     * and freed. */
    dlb_export_options options;
    dlb_export_options_init(&options);
    options.copy = DLB_COPY_NEVER;
    options.stream = -1;
    options.flags |= DLB_EXPORT_STREAM_GIVEN;
    DLManagedTensorVersioned* view = NULL;
    if (dlb_export_versioned(buffer, &options, &view) == DLB_OK) {
      data = (uintptr_t)view->dl_tensor.data + (uintptr_t)view->dl_tensor.byte_offset;
      dlb_managed_free_versioned(view);
    }
  }
  return Py_BuildValue("(NNsNNNN)", int_tuple(t.shape, t.ndim), int_tuple(t.strides, t.ndim), name,
                       device_tuple(&t.device), PyLong_FromUnsignedLongLong(data),
                       PyBool_FromLong((dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0),
                       PyLong_FromUnsignedLongLong(dlb_buffer_nbytes(buffer)));
}

/* The cached metadata tuple, borrowed; NULL with dlbridge.Error set when
 * it cannot be read (a tensor deleted before it was ever read). */
static PyObject* meta_of(PyObject* self) {
  dlbpy_tensor* t = (dlbpy_tensor*)self;
  if (t->meta == NULL) t->meta = make_meta(t->buffer);
  return t->meta;
}

static PyObject* tensor_get_meta(PyObject* self, void* closure) {
  (void)closure;
  PyObject* meta = meta_of(self);
  Py_XINCREF(meta);
  return meta;
}

/* The properties: items of the metadata tuple, chosen by the closure. */
static PyObject* tensor_get_item(PyObject* self, void* closure) {
  PyObject* meta = meta_of(self);
  if (meta == NULL) return NULL;
  PyObject* item = PyTuple_GetItem(meta, (Py_ssize_t)(intptr_t)closure);
  Py_XINCREF(item);
  return item;
}

static PyObject* tensor_get_ndim(PyObject* self, void* closure) {
  (void)closure;
  PyObject* meta = meta_of(self);
  if (meta == NULL) return NULL;
  return PyLong_FromSsize_t(PyTuple_Size(PyTuple_GetItem(meta, 0)));
}

/* The number of elements, as a Python int (no overflow however the
 * extents multiply). */
static PyObject* tensor_get_size(PyObject* self, void* closure) {
  (void)closure;
  PyObject* meta = meta_of(self);
  if (meta == NULL) return NULL;
  PyObject* shape = PyTuple_GetItem(meta, 0);
  PyObject* n = PyLong_FromLong(1);
  for (Py_ssize_t i = 0; n != NULL && i < PyTuple_Size(shape); ++i) {
    PyObject* product = PyNumber_Multiply(n, PyTuple_GetItem(shape, i));
    Py_DECREF(n);
    n = product;
  }
  return n;
}

static Py_ssize_t tensor_length(PyObject* self) {
  PyObject* meta = meta_of(self);
  if (meta == NULL) return -1;
  PyObject* shape = PyTuple_GetItem(meta, 0);
  if (PyTuple_Size(shape) == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
    return -1;
  }
  return PyLong_AsSsize_t(PyTuple_GetItem(shape, 0));
}

static PyObject* tensor_repr(PyObject* self) {
  dlbpy_tensor* t = (dlbpy_tensor*)self;
  PyObject* meta = meta_of(self);
  if (meta == NULL) {
    if (g_error_type == NULL || !PyErr_ExceptionMatches(g_error_type)) return NULL;
    PyErr_Clear();
    return PyUnicode_FromString("dlbridge.Tensor(<deleted>)");
  }
  const int readonly = PyObject_IsTrue(PyTuple_GetItem(meta, 5));
  const int deleted = (dlb_buffer_flags(t->buffer) & DLB_BUFFER_DELETED) != 0;
  return PyUnicode_FromFormat("dlbridge.Tensor(shape=%R, dtype=%U, device=%R%s%s)", PyTuple_GetItem(meta, 0),
                              PyTuple_GetItem(meta, 2), PyTuple_GetItem(meta, 3),
                              readonly ? ", readonly=True" : "", deleted ? ", deleted=True" : "");
}

static PyObject* tensor_reduce(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  /* A copy would share the handle and release it twice. */
  PyErr_SetString(PyExc_TypeError, "dlbridge.Tensor cannot be pickled or copied; export it with DLPack");
  return NULL;
}

static PyObject* tensor_get_handle(PyObject* self, void* closure) {
  (void)closure;
  return PyLong_FromVoidPtr(((dlbpy_tensor*)self)->buffer);
}

static PyObject* tensor_get_deleted(PyObject* self, void* closure) {
  (void)closure;
  return PyBool_FromLong((dlb_buffer_flags(((dlbpy_tensor*)self)->buffer) & DLB_BUFFER_DELETED) != 0);
}

static PyObject* tensor_delete(PyObject* self, PyObject* unused) {
  (void)unused;
  if (meta_of(self) == NULL) return NULL; /* the properties keep working after the delete */
  const dlb_status s = dlb_buffer_delete(((dlbpy_tensor*)self)->buffer);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  Py_RETURN_NONE;
}

/* set_stream(stream): records the stream value of the buffer's last writer
 * (dlb_cuda_buffer_set_stream); dlbridge.Error for a tensor that is not
 * CUDA memory of the library's backend or a value below -1. */
static PyObject* tensor_set_stream(PyObject* self, PyObject* arg) {
  if (!PyLong_Check(arg) || PyBool_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "stream must be an int, not %R", arg);
    return NULL;
  }
  const long long value = PyLong_AsLongLong(arg);
  if (value == -1 && PyErr_Occurred()) return NULL;
  const dlb_status s = dlb_cuda_buffer_set_stream(((dlbpy_tensor*)self)->buffer, (int64_t)value);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  Py_RETURN_NONE;
}

/* The stream value of the last writer of CUDA memory (dlb_cuda_buffer_stream),
 * None for a tensor the CUDA backend does not hold. */
static PyObject* tensor_get_stream(PyObject* self, void* closure) {
  (void)closure;
  int64_t value = 0;
  if (dlb_cuda_buffer_stream(((dlbpy_tensor*)self)->buffer, &value) != DLB_OK) Py_RETURN_NONE;
  return PyLong_FromLongLong((long long)value);
}

static PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused) {
  (void)unused;
  DLTensor t;
  const dlb_status s = dlb_buffer_dltensor(((dlbpy_tensor*)self)->buffer, &t);
  if (s != DLB_OK) {
    /* A deleted tensor still says where it was. */
    dlbpy_tensor* tensor = (dlbpy_tensor*)self;
    if (tensor->meta != NULL) {
      PyObject* device = PyTuple_GetItem(tensor->meta, 3);
      Py_XINCREF(device);
      return device;
    }
    return dlbpy_raise_status(s);
  }
  return device_tuple(&t.device);
}

/* ------------------------------------------------------------------------ */
/* Export                                                                   */
/* ------------------------------------------------------------------------ */

/* Destructor of the capsules this module makes, called with the GIL held.
 * A consumer that took the tensor renamed the capsule used_*: then the
 * tensor is no longer ours to free. */
static void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kNameVersioned)) {
    dlb_managed_free_versioned(
        (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, kNameVersioned));
  } else if (PyCapsule_IsValid(capsule, kNameLegacy)) {
    dlb_managed_free_legacy((DLManagedTensor*)PyCapsule_GetPointer(capsule, kNameLegacy));
  }
}

PyObject* dlbpy_export_capsule(dlb_buffer* buffer, const dlb_export_options* options,
                               int versioned) {
  void* managed = NULL;
  const char* name;
  dlb_status s;
  if (versioned) {
    DLManagedTensorVersioned* t = NULL;
    s = dlb_export_versioned(buffer, options, &t);
    managed = t;
    name = kNameVersioned;
  } else {
    DLManagedTensor* t = NULL;
    s = dlb_export_legacy(buffer, options, &t);
    managed = t;
    name = kNameLegacy;
  }
  if (s != DLB_OK) return raise_buffer_error(s);
  PyObject* capsule = PyCapsule_New(managed, name, capsule_destructor);
  if (capsule == NULL) {
    if (versioned) {
      dlb_managed_free_versioned((DLManagedTensorVersioned*)managed);
    } else {
      dlb_managed_free_legacy((DLManagedTensor*)managed);
    }
  }
  return capsule;
}

/* Keyword-only arguments of a METH_FASTCALL | METH_KEYWORDS call: values[i]
 * is the argument called names[i] (borrowed), or NULL when not given.
 * 0, or -1 with TypeError set. */
static int keyword_only(const char* function, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames, const char* const* names, int count,
                        PyObject** values) {
  for (int i = 0; i < count; ++i) values[i] = NULL;
  if (nargs != 0) {
    PyErr_Format(PyExc_TypeError, "%s() takes no positional arguments", function);
    return -1;
  }
  if (kwnames == NULL) return 0;
  const Py_ssize_t given = PyTuple_Size(kwnames);
  for (Py_ssize_t k = 0; k < given; ++k) {
    PyObject* key = PyTuple_GetItem(kwnames, k);
    int found = 0;
    for (int i = 0; i < count && !found; ++i) {
      if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0) {
        values[i] = args[k];
        found = 1;
      }
    }
    if (!found) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", function, key);
      return -1;
    }
  }
  return 0;
}

/* A (int, int) pair from any sequence of two integers; 0, or -1 with
 * TypeError naming `what` set. */
static int int_pair(PyObject* value, const char* what, const char* form, long long out[2]) {
  PyObject* tuple = PySequence_Check(value) ? PySequence_Tuple(value) : NULL;
  if (tuple != NULL && PyTuple_Size(tuple) == 2) {
    out[0] = PyLong_AsLongLong(PyTuple_GetItem(tuple, 0));
    if (!PyErr_Occurred()) out[1] = PyLong_AsLongLong(PyTuple_GetItem(tuple, 1));
    Py_DECREF(tuple);
    if (!PyErr_Occurred()) return 0;
  } else {
    Py_XDECREF(tuple);
  }
  PyErr_Clear();
  PyErr_Format(PyExc_TypeError, "%s must be a %s tuple, not %R", what, form, value);
  return -1;
}

/* copy=None/True/False as a dlb_copy_policy; -1 with TypeError otherwise. */
static int copy_policy(PyObject* copy) {
  if (copy == NULL || copy == Py_None) return DLB_COPY_IF_NEEDED;
  if (copy == Py_True) return DLB_COPY_ALWAYS;
  if (copy == Py_False) return DLB_COPY_NEVER;
  PyErr_Format(PyExc_TypeError, "copy must be True, False or None, not %R", copy);
  return -1;
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) */
static PyObject* tensor_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  dlb_buffer* buffer = ((dlbpy_tensor*)self)->buffer;
  if (nargs == 0 && kwnames == NULL) return dlbpy_export_capsule(buffer, NULL, 0);

  static const char* const names[] = {"stream", "max_version", "dl_device", "copy"};
  PyObject* v[4];
  if (keyword_only("__dlpack__", args, nargs, kwnames, names, 4, v) != 0) return NULL;
  PyObject* stream = v[0] == Py_None ? NULL : v[0];
  PyObject* max_version = v[1] == Py_None ? NULL : v[1];
  PyObject* dl_device = v[2] == Py_None ? NULL : v[2];
  PyObject* copy = v[3] == Py_None ? NULL : v[3];

  dlb_export_options options;
  dlb_export_options_init(&options);
  int versioned = 0;
  if (max_version != NULL) {
    long long version[2];
    if (int_pair(max_version, "max_version", "(major, minor)", version) != 0) return NULL;
    versioned = version[0] >= 1;
  }
  const int policy = copy_policy(copy);
  if (policy < 0) return NULL;
  options.copy = policy;
  if (dl_device != NULL) {
    long long device[2];
    if (int_pair(dl_device, "dl_device", "(device_type, device_id)", device) != 0) return NULL;
    if (device[0] < INT32_MIN || device[0] > INT32_MAX || device[1] < INT32_MIN ||
        device[1] > INT32_MAX) {
      PyErr_Format(PyExc_ValueError, "dl_device %R is out of range", dl_device);
      return NULL;
    }
    options.has_target_device = 1;
    options.target_device.device_type = (DLDeviceType)device[0];
    options.target_device.device_id = (int32_t)device[1];
  }
  if (stream != NULL) {
    /* The library decides what a stream means for the buffer's device
     * (refused for host memory, 0 refused where streams exist, ...): the
     * value goes through as given. */
    if (!PyLong_Check(stream)) {
      PyErr_Format(PyExc_TypeError, "stream must be an int or None, not %R", stream);
      return NULL;
    }
    const long long value = PyLong_AsLongLong(stream);
    if (value == -1 && PyErr_Occurred()) return NULL;
    options.stream = (int64_t)value;
    options.flags |= DLB_EXPORT_STREAM_GIVEN;
  }
  return dlbpy_export_capsule(buffer, &options, versioned);
}

/* ------------------------------------------------------------------------ */
/* Import                                                                   */
/* ------------------------------------------------------------------------ */

/* The library gets a shim whose deleter takes the GIL before calling the
 * producer's deleter: producers such as numpy 1.x free Python objects in
 * their deleters without taking it, and the library may run a deleter on
 * any thread. If the interpreter is gone, the producer's tensor leaks. */
static void shim_deleter_versioned(DLManagedTensorVersioned* shim) {
  DLManagedTensorVersioned* original = (DLManagedTensorVersioned*)shim->manager_ctx;
  free(shim);
  if (original == NULL || original->deleter == NULL || !interpreter_alive()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  original->deleter(original);
  PyGILState_Release(state);
}

static void shim_deleter_legacy(DLManagedTensor* shim) {
  DLManagedTensor* original = (DLManagedTensor*)shim->manager_ctx;
  free(shim);
  if (original == NULL || original->deleter == NULL || !interpreter_alive()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  original->deleter(original);
  PyGILState_Release(state);
}

/* ---- CUDA memory in ---------------------------------------------------- */

/* Memory the library's CUDA backend takes in (dlb_cuda_import_*). */
static int is_cuda_kind(DLDeviceType type) {
  return type == kDLCUDA || type == kDLCUDAHost || type == kDLCUDAManaged;
}

/* A shim (see above) in as a buffer: CUDA memory through the CUDA backend,
 * so that the buffer carries `stream` (the stream its producer ordered the
 * data before), re-exports stream-ordered and can be copied to the host.
 * What the backend does not take (DLB_ERR_UNSUPPORTED_DEVICE: no driver or
 * no device, built without CUDA, or memory the driver does not know as the
 * kind the tensor says) comes in as a plain buffer, as any other memory
 * does. On failure the dlbridge.Error is set and the shim is still the
 * caller's. */
static dlb_status take_in(void* shim, int versioned, DLDeviceType type, int64_t stream,
                          dlb_buffer** out) {
  dlb_status s = DLB_ERR_UNSUPPORTED_DEVICE;
  if (is_cuda_kind(type)) {
    s = versioned ? dlb_cuda_import_versioned(NULL, (DLManagedTensorVersioned*)shim, stream, out)
                  : dlb_cuda_import_legacy(NULL, (DLManagedTensor*)shim, stream, out);
  }
  if (s == DLB_ERR_UNSUPPORTED_DEVICE) {
    s = versioned ? dlb_import_versioned((DLManagedTensorVersioned*)shim, NULL, out)
                  : dlb_import_legacy((DLManagedTensor*)shim, NULL, out);
  }
  if (s != DLB_OK) dlbpy_raise_status(s);
  return s;
}

/* Imports a capsule; `stream` is the stream value CUDA memory is ordered
 * before (1 when the producer was asked without a stream, as the protocol
 * then has it assume the legacy default stream). */
static int import_versioned(PyObject* capsule, int64_t stream, dlb_buffer** out) {
  DLManagedTensorVersioned* original =
      (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, kNameVersioned);
  if (original == NULL) {
    PyErr_Clear();
    raise_error(DLB_ERR_MALFORMED, "the dltensor_versioned capsule holds NULL");
    return -1;
  }
  dlb_buffer* buffer = NULL;
  if (original->version.major != 1) {
    /* Only the stable prefix may be read: the library refuses it. */
    const dlb_status s = dlb_import_versioned(original, NULL, &buffer);
    if (s != DLB_OK) {
      dlbpy_raise_status(s);
      return -1;
    }
    /* Unreachable for a major the library does not speak; kept exact. */
    PyCapsule_SetName(capsule, kNameUsedVersioned);
    *out = buffer;
    return 0;
  }
  DLManagedTensorVersioned* shim = (DLManagedTensorVersioned*)malloc(sizeof *shim);
  if (shim == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  *shim = *original;
  shim->manager_ctx = original;
  shim->deleter = original->deleter != NULL ? shim_deleter_versioned : NULL;
  if (take_in(shim, 1, original->dl_tensor.device.device_type, stream, &buffer) != DLB_OK) {
    free(shim); /* the capsule still owns `original` */
    return -1;
  }
  PyCapsule_SetName(capsule, kNameUsedVersioned);
  *out = buffer;
  return 0;
}

static int import_legacy(PyObject* capsule, int64_t stream, dlb_buffer** out) {
  DLManagedTensor* original = (DLManagedTensor*)PyCapsule_GetPointer(capsule, kNameLegacy);
  if (original == NULL) {
    PyErr_Clear();
    raise_error(DLB_ERR_MALFORMED, "the dltensor capsule holds NULL");
    return -1;
  }
  DLManagedTensor* shim = (DLManagedTensor*)malloc(sizeof *shim);
  if (shim == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  shim->dl_tensor = original->dl_tensor;
  shim->manager_ctx = original;
  shim->deleter = original->deleter != NULL ? shim_deleter_legacy : NULL;
  dlb_buffer* buffer = NULL;
  if (take_in(shim, 0, original->dl_tensor.device.device_type, stream, &buffer) != DLB_OK) {
    free(shim);
    return -1;
  }
  PyCapsule_SetName(capsule, kNameUsedLegacy);
  *out = buffer;
  return 0;
}

static int import_capsule_on(PyObject* capsule, int64_t stream, dlb_buffer** out) {
  if (PyCapsule_IsValid(capsule, kNameVersioned)) return import_versioned(capsule, stream, out);
  if (PyCapsule_IsValid(capsule, kNameLegacy)) return import_legacy(capsule, stream, out);
  char text[200];
  if (!PyCapsule_CheckExact(capsule)) {
    PyObject* type_name = PyObject_GetAttrString((PyObject*)Py_TYPE(capsule), "__name__");
    const char* name = type_name != NULL ? PyUnicode_AsUTF8AndSize(type_name, NULL) : NULL;
    if (name == NULL) PyErr_Clear();
    snprintf(text, sizeof text, "a %.100s is not a PyCapsule", name != NULL ? name : "object");
    Py_XDECREF(type_name);
    raise_error(DLB_ERR_INVALID_ARGUMENT, text);
    return -1;
  }
  const char* name = PyCapsule_GetName(capsule);
  if (name == NULL) PyErr_Clear();
  if (name != NULL && (strcmp(name, kNameUsedVersioned) == 0 || strcmp(name, kNameUsedLegacy) == 0)) {
    snprintf(text, sizeof text, "the capsule was already consumed (named '%s')", name);
  } else {
    snprintf(text, sizeof text, "capsule named '%.100s' is not a DLPack capsule",
             name != NULL ? name : "(null)");
  }
  raise_error(DLB_ERR_INVALID_ARGUMENT, text);
  return -1;
}

int dlbpy_import_capsule(PyObject* capsule, dlb_buffer** out) {
  return import_capsule_on(capsule, 1, out);
}

dlb_status dlbpy_import_managed(DLManagedTensorVersioned* tensor, int64_t stream, dlb_buffer** out) {
  return take_in(tensor, 1, tensor->dl_tensor.device.device_type, stream, out);
}

/* Drops a producer's capsule. One the import refused still holds the
 * tensor, and the producer's capsule destructor, which may run Python code,
 * deletes it: the import's exception is kept aside meanwhile. */
static void drop_capsule(PyObject* capsule) {
  if (!PyErr_Occurred()) {
    Py_DECREF(capsule);
    return;
  }
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  Py_DECREF(capsule);
  PyErr_Restore(type, value, trace);
}

static PyObject* import_to_tensor(PyObject* capsule, int64_t stream) {
  dlb_buffer* buffer = NULL;
  if (import_capsule_on(capsule, stream, &buffer) != 0) return NULL;
  return dlbpy_tensor_new(buffer);
}

/* `tensor` (consumed) as the consumer's device and copy policy ask: itself
 * when it satisfies them, else the library's copy (dlb_buffer_resolve, the
 * export planner's decision for a producer that could not be asked). */
static PyObject* resolve(PyObject* tensor, const long long* device, int policy) {
  if (tensor == NULL || (device == NULL && policy == DLB_COPY_IF_NEEDED)) return tensor;
  dlb_export_options options;
  dlb_export_options_init(&options);
  options.copy = policy;
  if (device != NULL) {
    options.has_target_device = 1;
    options.target_device.device_type = (DLDeviceType)device[0];
    options.target_device.device_id = (int32_t)device[1];
  }
  dlb_buffer* buffer = ((dlbpy_tensor*)tensor)->buffer;
  dlb_buffer* out = NULL;
  const dlb_status s = dlb_buffer_resolve(buffer, &options, &out);
  if (s != DLB_OK) {
    Py_DECREF(tensor);
    return raise_buffer_error(s);
  }
  dlb_buffer_release(out == buffer ? out : NULL);
  if (out != buffer) {
    Py_DECREF(tensor);
    return dlbpy_tensor_new(out);
  }
  DLTensor t;
  if (device == NULL || dlb_buffer_dltensor(buffer, &t) != DLB_OK ||
      ((long long)t.device.device_type == device[0] && (long long)t.device.device_id == device[1])) {
    return tensor;
  }
  /* Memory the asked device reads directly (managed memory for the CPU):
   * the planner's zero-copy export to that device, taken back in, is the
   * same memory described on the device asked for. */
  DLManagedTensorVersioned* view = NULL;
  dlb_status st = dlb_export_versioned(buffer, &options, &view);
  Py_DECREF(tensor);
  if (st != DLB_OK) return raise_buffer_error(st);
  dlb_buffer* moved = NULL;
  st = dlb_import_versioned(view, NULL, &moved);
  if (st != DLB_OK) {
    dlb_managed_free_versioned(view);
    return dlbpy_raise_status(st);
  }
  return dlbpy_tensor_new(moved);
}

/* Whether a TypeError from __dlpack__(max_version=..., ...) is CPython
 * refusing the keyword arguments themselves (a producer of the protocol
 * before DLPack 1.0): one of CPython's own messages for an unknown keyword.
 * Any other TypeError came from inside the producer and is the caller's. */
static int is_keyword_refusal(PyObject* error) {
  PyObject* text = PyObject_Str(error);
  if (text == NULL) {
    PyErr_Clear();
    return 0;
  }
  static const char* const phrases[] = {"unexpected keyword argument",
                                        "is an invalid keyword argument",
                                        "takes no keyword arguments"};
  int found = 0;
  for (size_t i = 0; i < sizeof phrases / sizeof phrases[0] && !found; ++i) {
    PyObject* phrase = PyUnicode_FromString(phrases[i]);
    if (phrase == NULL) break;
    found = PyUnicode_Contains(text, phrase) == 1;
    Py_DECREF(phrase);
  }
  Py_DECREF(text);
  PyErr_Clear();
  return found;
}

/* The legacy protocol: the producer cannot be asked for a copy or a device,
 * so the library decides both on what it got. `stream` (a borrowed int, or
 * NULL for none) is passed on as the protocol's stream; `stream_value` is
 * its value, 1 for none. */
static PyObject* legacy_import(PyObject* method, PyObject* stream, int64_t stream_value,
                               const long long* device, int policy) {
  PyObject* capsule;
  if (stream == NULL) {
    capsule = PyObject_CallObject(method, NULL);
  } else {
    PyObject* kwargs = Py_BuildValue("{sO}", "stream", stream);
    PyObject* empty = kwargs != NULL ? PyTuple_New(0) : NULL;
    capsule = empty != NULL ? PyObject_Call(method, empty, kwargs) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(kwargs);
  }
  if (capsule == NULL) return NULL;
  PyObject* tensor = import_to_tensor(capsule, stream_value);
  drop_capsule(capsule);
  return resolve(tensor, device, policy);
}

/* The consumer's stream of from_dlpack(obj, stream=...), checked against
 * the device obj says its memory is on (obj.__dlpack_device__(), as the
 * standard's consumers ask before __dlpack__) and the device asked for.
 * The array API standard: only None where there are no streams (the
 * library's device table says where), and for CUDA and ROCm a stream value
 * of -1, 1, 2 or above; never 0 (ambiguous). 0 with *value set, or -1
 * with TypeError / ValueError set. */
static int consumer_stream(PyObject* obj, PyObject* stream, const long long* device,
                           long long* value) {
  if (!PyLong_Check(stream) || PyBool_Check(stream)) {
    PyErr_Format(PyExc_TypeError, "stream must be an int or None, not %R", stream);
    return -1;
  }
  *value = PyLong_AsLongLong(stream);
  if (*value == -1 && PyErr_Occurred()) return -1;
  if (*value == 0 || *value < -1) {
    PyErr_Format(PyExc_ValueError,
                 "stream %lld is not a consumer stream: the array API standard allows -1 (no "
                 "synchronisation), 1 (legacy default stream), 2 (per-thread default stream) or "
                 "a stream handle; 0 is ambiguous",
                 *value);
    return -1;
  }
  PyObject* where = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  if (where == NULL) return -1;
  long long producer[2];
  const int bad = int_pair(where, "__dlpack_device__()", "(device_type, device_id)", producer);
  Py_DECREF(where);
  if (bad) return -1;
  const long long* targets[2] = {producer, device};
  for (int i = 0; i < 2; ++i) {
    const long long* d = targets[i];
    if (d == NULL) continue;
    dlb_device_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    const int known = d[0] >= INT32_MIN && d[0] <= INT32_MAX &&
                      dlb_device_type_info((int32_t)d[0], &info) == DLB_OK;
    if (!known || (info.flags & DLB_DEVICE_HAS_STREAMS) == 0) {
      PyErr_Format(PyExc_ValueError,
                   "stream=%lld given, but %s (%lld, %lld) has no streams: the array API standard "
                   "allows only stream=None there",
                   *value, i == 0 ? "the producer's memory is on" : "the requested device",
                   d[0], d[1]);
      return -1;
    }
  }
  return 0;
}

/* from_dlpack(obj, *, device=None, copy=None, stream=None) */
static PyObject* glue_from_dlpack(PyObject* module, PyObject* const* args, Py_ssize_t nargs,
                                  PyObject* kwnames) {
  (void)module;
  if (nargs != 1) {
    PyErr_Format(PyExc_TypeError, "from_dlpack() takes 1 positional argument (%zd given)", nargs);
    return NULL;
  }
  PyObject* obj = args[0];
  PyObject* producer = (PyObject*)Py_TYPE(obj);
  if (kwnames == NULL) {
    /* The fastest path: a producer publishing a DLPack C exchange table. */
    int handled = 0;
    PyObject* tensor = dlbpy_exchange_from_dlpack(obj, NULL, DLB_COPY_IF_NEEDED, &handled);
    if (handled) return tensor;
    /* The hot path: a producer known to speak only the legacy protocol. */
    const int legacy = PySet_Contains(g_legacy_types, producer);
    if (legacy < 0) return NULL;
    if (legacy) {
      PyObject* capsule = PyObject_CallMethodObjArgs(obj, g_str_dlpack, NULL);
      if (capsule == NULL) return NULL;
      PyObject* tensor = import_to_tensor(capsule, 1);
      drop_capsule(capsule);
      return tensor;
    }
  }
  static const char* const names[] = {"device", "copy", "stream"};
  PyObject* v[3];
  if (keyword_only("from_dlpack", args + 1, 0, kwnames, names, 3, v) != 0) return NULL;
  /* keyword values sit after the positional one */
  PyObject* device_arg = v[0] == Py_None ? NULL : v[0];
  PyObject* copy = v[1] == Py_None ? NULL : v[1];
  PyObject* stream = v[2] == Py_None ? NULL : v[2];
  long long device[2];
  if (device_arg != NULL &&
      int_pair(device_arg, "device", "(device_type, device_id)", device) != 0) {
    return NULL;
  }
  const int policy = copy_policy(copy);
  if (policy < 0) return NULL;
  if (kwnames != NULL && stream == NULL) {
    /* (without keywords the table was tried above; with a stream the
     * producer is asked through __dlpack__, which takes one) */
    int handled = 0;
    PyObject* tensor = dlbpy_exchange_from_dlpack(obj, device_arg != NULL ? device : NULL, policy, &handled);
    if (handled) return tensor;
  }

  PyObject* method = PyObject_GetAttr(obj, g_str_dlpack);
  if (method == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    if (PyCapsule_CheckExact(obj)) { /* a capsule straight from a to_dlpack() */
      PyErr_Clear();
      if (stream != NULL) {
        PyErr_SetString(PyExc_ValueError,
                        "stream= is for a producer's __dlpack__; a capsule is made already");
        return NULL;
      }
      return resolve(import_to_tensor(obj, 1), device_arg != NULL ? device : NULL, policy);
    }
    PyErr_Clear();
    PyErr_Format(PyExc_AttributeError,
                 "%R does not implement the DLPack protocol (it has no __dlpack__)", producer);
    return NULL;
  }

  PyObject* result = NULL;
  long long stream_value = 1; /* none given: the producer assumes the legacy default stream */
  if (stream != NULL &&
      consumer_stream(obj, stream, device_arg != NULL ? device : NULL, &stream_value) != 0) {
    goto done;
  }
  const int legacy = PySet_Contains(g_legacy_types, producer);
  if (legacy < 0) goto done;
  if (!legacy) {
    PyObject* kwargs = PyDict_New();
    if (kwargs == NULL) goto done;
    int bad = PyDict_SetItemString(kwargs, "max_version", g_max_version);
    if (!bad && device_arg != NULL) {
      PyObject* pair = Py_BuildValue("(LL)", device[0], device[1]);
      bad = pair == NULL || PyDict_SetItemString(kwargs, "dl_device", pair) != 0;
      Py_XDECREF(pair);
    }
    if (!bad && copy != NULL) bad = PyDict_SetItemString(kwargs, "copy", copy);
    if (!bad && stream != NULL) bad = PyDict_SetItemString(kwargs, "stream", stream);
    PyObject* empty = bad ? NULL : PyTuple_New(0);
    PyObject* capsule = empty != NULL ? PyObject_Call(method, empty, kwargs) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(kwargs);
    if (capsule != NULL) {
      result = import_to_tensor(capsule, (int64_t)stream_value);
      drop_capsule(capsule);
      goto done;
    }
    if (bad || !PyErr_ExceptionMatches(PyExc_TypeError)) goto done;
    /* Look at the TypeError without losing it. */
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyErr_NormalizeException(&type, &value, &trace);
    if (!is_keyword_refusal(value)) {
      PyErr_Restore(type, value, trace);
      goto done;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
    result = legacy_import(method, stream, (int64_t)stream_value, device_arg != NULL ? device : NULL, policy);
    /* Remembered only once the legacy call worked. */
    if (result != NULL && PySet_Add(g_legacy_types, producer) != 0) Py_CLEAR(result);
    goto done;
  }
  result = legacy_import(method, stream, (int64_t)stream_value, device_arg != NULL ? device : NULL, policy);
done:
  Py_DECREF(method);
  return result;
}

/* ------------------------------------------------------------------------ */
/* The buffer protocol                                                      */
/* ------------------------------------------------------------------------ */

/* A struct-module format and item size as a DLPack dtype. The format names
 * the kind; the item size gives the bits (so '@' native sizes and '=' / '<'
 * standard sizes agree); the library says which pairs DLPack allows. */
static int format_to_dtype(const char* format, Py_ssize_t itemsize, DLDataType* out) {
  const char* given = format != NULL ? format : "B";
  const char* f = given;
  char text[160];
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (*f == '>' || *f == '!') {
    snprintf(text, sizeof text, "buffer format '%.40s' is big-endian; DLPack data is native-endian",
             given);
    raise_error(DLB_ERR_UNSUPPORTED_DTYPE, text);
    return -1;
  }
  int complex = 0;
  if (f[0] == 'Z' && f[1] != '\0' && f[2] == '\0') {
    complex = 1;
    ++f;
  }
  uint8_t code = 0;
  int known = f[0] != '\0' && f[1] == '\0';
  if (known) {
    switch (*f) {
      case '?': code = kDLBool; break;
      case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': code = kDLInt; break;
      case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c': code = kDLUInt; break;
      case 'e': case 'f': case 'd': code = complex ? kDLComplex : kDLFloat; break;
      default: known = 0;
    }
  }
  if (complex && (code != kDLComplex || *f == 'e')) known = 0;
  if (!known) {
    snprintf(text, sizeof text, "buffer format '%.40s' has no DLPack dtype", given);
    raise_error(DLB_ERR_UNSUPPORTED_DTYPE, text);
    return -1;
  }
  if (itemsize <= 0 || itemsize > 16) {
    snprintf(text, sizeof text, "buffer item size %lld for format '%.40s'", (long long)itemsize,
             given);
    raise_error(DLB_ERR_UNSUPPORTED_DTYPE, text);
    return -1;
  }
  DLDataType dtype;
  dtype.code = code;
  dtype.bits = (uint8_t)(itemsize * 8);
  dtype.lanes = 1;
  const dlb_status s = dlb_dtype_check(dtype);
  if (s != DLB_OK) {
    dlbpy_raise_status(s);
    return -1;
  }
  *out = dtype;
  return 0;
}

/* Release callback of buffers made by from_buffer(): ends the buffer export
 * under the GIL (from any thread), then frees the view. */
static void release_view(void* ctx) {
  Py_buffer* view = (Py_buffer*)ctx;
  if (!interpreter_alive()) return; /* interpreter gone: leak the export */
  PyGILState_STATE state = PyGILState_Ensure();
  PyBuffer_Release(view);
  PyGILState_Release(state);
  free(view);
}

static PyObject* glue_from_buffer(PyObject* module, PyObject* obj) {
  (void)module;
  Py_buffer* view = (Py_buffer*)calloc(1, sizeof *view);
  if (view == NULL) return PyErr_NoMemory();
  if (PyObject_GetBuffer(obj, view, DLBPY_BUF_RECORDS_RO) != 0) {
    free(view);
    /* TypeError: the object has no buffer protocol; say so as the library would. */
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyObject *type, *value, *trace;
      PyErr_Fetch(&type, &value, &trace);
      PyObject* text = value != NULL ? PyObject_Str(value) : NULL;
      const char* utf8 = text != NULL ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
      char message[300];
      snprintf(message, sizeof message, "from_buffer: %.250s", utf8 != NULL ? utf8 : "no buffer");
      Py_XDECREF(text);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(trace);
      PyErr_Clear();
      return raise_error(DLB_ERR_INVALID_ARGUMENT, message);
    }
    return NULL;
  }
  char text[200];
  dlb_status s = DLB_OK;
  int64_t shape[DLB_MAX_NDIM];
  int64_t strides[DLB_MAX_NDIM];
  DLDataType dtype;
  const int ndim = view->ndim;
  if (ndim < 0 || ndim > DLB_MAX_NDIM) {
    snprintf(text, sizeof text, "from_buffer: ndim is %d", ndim);
    s = DLB_ERR_UNSUPPORTED_LAYOUT;
  } else if (view->suboffsets != NULL) {
    snprintf(text, sizeof text, "from_buffer: indirect (suboffset) buffers have no DLPack layout");
    s = DLB_ERR_UNSUPPORTED_LAYOUT;
  } else if (ndim > 0 && view->shape == NULL) {
    snprintf(text, sizeof text, "from_buffer: the exporter gave no shape");
    s = DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  if (s != DLB_OK) {
    PyBuffer_Release(view);
    free(view);
    return raise_error(s, text);
  }
  if (format_to_dtype(view->format, view->itemsize, &dtype) != 0) {
    PyBuffer_Release(view);
    free(view);
    return NULL;
  }
  for (int i = 0; i < ndim; ++i) {
    shape[i] = view->shape[i];
    if (view->strides == NULL) continue;
    const Py_ssize_t bytes = view->strides[i];
    if (bytes % view->itemsize != 0) {
      snprintf(text, sizeof text,
               "from_buffer: strides[%d] is %lld bytes, not a multiple of the item size %lld", i,
               (long long)bytes, (long long)view->itemsize);
      PyBuffer_Release(view);
      free(view);
      return raise_error(DLB_ERR_UNSUPPORTED_LAYOUT, text);
    }
    strides[i] = bytes / view->itemsize;
  }
  DLTensor t;
  t.data = view->buf;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = ndim > 0 ? shape : NULL;
  t.strides = (ndim > 0 && view->strides != NULL) ? strides : NULL;
  t.byte_offset = 0;
  const uint64_t flags = view->readonly ? DLB_BUFFER_READ_ONLY : 0;
  dlb_buffer* buffer = NULL;
  s = dlb_buffer_wrap(&t, flags, release_view, view, &buffer);
  if (s != DLB_OK) {
    PyBuffer_Release(view);
    free(view);
    return dlbpy_raise_status(s);
  }
  return dlbpy_tensor_new(buffer);
}

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

/* empty(shape, dtype_name) -> a zero-filled compact host Tensor. */
static PyObject* glue_empty(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "empty() takes a shape and a dtype name");
    return NULL;
  }
  PyObject* shape = PySequence_Tuple(args[0]);
  if (shape == NULL) return NULL;
  const Py_ssize_t ndim = PyTuple_Size(shape);
  if (ndim > DLB_MAX_NDIM) {
    Py_DECREF(shape);
    char text[80];
    snprintf(text, sizeof text, "ndim %zd is more than %d", ndim, DLB_MAX_NDIM);
    return raise_error(DLB_ERR_INVALID_ARGUMENT, text);
  }
  int64_t dims[DLB_MAX_NDIM];
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    dims[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
    if (dims[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(shape);
      return NULL;
    }
  }
  Py_DECREF(shape);
  const char* name = PyUnicode_AsUTF8AndSize(args[1], NULL);
  if (name == NULL) return NULL;
  DLDataType dtype;
  dlb_status s = dlb_dtype_from_name(name, &dtype);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  DLDevice cpu;
  cpu.device_type = kDLCPU;
  cpu.device_id = 0;
  dlb_buffer* buffer = NULL;
  s = dlb_buffer_alloc(cpu, dtype, (int32_t)ndim, dims, &buffer);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  return dlbpy_tensor_new(buffer);
}

static PyObject* glue_live_exports(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLongLong(dlb_live_exports());
}

static PyObject* glue_status_name(PyObject* module, PyObject* code) {
  (void)module;
  const long value = PyLong_AsLong(code);
  if (value == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(dlb_status_name((dlb_status)value));
}

/* The file libdlbridge was loaded from, as the dynamic linker found it. */
static PyObject* glue_library_path(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  Dl_info info;
  if (dladdr((void*)&dlb_version_string, &info) == 0 || info.dli_fname == NULL) {
    PyErr_SetString(PyExc_OSError, "dladdr cannot name the file of libdlbridge");
    return NULL;
  }
  return PyUnicode_DecodeFSDefault(info.dli_fname);
}

/* register(error_class): the exception class (dlbridge.Error, defined in
 * Python) that library failures raise. */
static PyObject* glue_register(PyObject* module, PyObject* arg) {
  (void)module;
  if (!PyType_Check(arg) || !PyType_IsSubtype((PyTypeObject*)arg, (PyTypeObject*)PyExc_Exception)) {
    PyErr_SetString(PyExc_TypeError, "register(error_class): an Exception subclass");
    return NULL;
  }
  PyObject* old_error = g_error_type;
  Py_INCREF(arg);
  g_error_type = arg;
  Py_XDECREF(old_error);
  Py_RETURN_NONE;
}

/* device_info(device_type) -> (device_type, name, host_readable, address,
 * has_streams), the library's device table; dlbridge.Error
 * (DLB_ERR_UNSUPPORTED_DEVICE) for a type DLPack does not define. */
static PyObject* glue_device_info(PyObject* module, PyObject* arg) {
  (void)module;
  const long long value = PyLong_AsLongLong(arg);
  if (value == -1 && PyErr_Occurred()) return NULL;
  if (value < INT32_MIN || value > INT32_MAX) {
    char text[80];
    snprintf(text, sizeof text, "device type %lld is not an int32", value);
    return raise_error(DLB_ERR_UNSUPPORTED_DEVICE, text);
  }
  dlb_device_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  const dlb_status s = dlb_device_type_info((int32_t)value, &info);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  return Py_BuildValue("(isNNN)", (int)info.device_type, info.name,
                       PyBool_FromLong((info.flags & DLB_DEVICE_HOST_READABLE) != 0),
                       PyBool_FromLong((info.flags & DLB_DEVICE_ADDRESS) != 0),
                       PyBool_FromLong((info.flags & DLB_DEVICE_HAS_STREAMS) != 0));
}

static PyObject* glue_is_legacy_producer(PyObject* module, PyObject* type) {
  (void)module;
  const int found = PySet_Contains(g_legacy_types, type);
  if (found < 0) return NULL;
  return PyBool_FromLong(found);
}

/* ------------------------------------------------------------------------ */
/* Types and module                                                         */
/* ------------------------------------------------------------------------ */

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "Exports the tensor as a DLPack capsule (the array API standard's protocol)."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\n(device_type, device_id) in DLPack's numbering."},
    {"set_stream", tensor_set_stream, METH_O,
     "set_stream(stream, /)\n--\n\n"
     "Records the CUDA stream of the tensor's last writer (a stream value: 1 the\n"
     "legacy default stream, 2 the per-thread default stream, -1 no pending work,\n"
     "or a CUstream handle as an int), so that later exports and copies are\n"
     "ordered after that work. dlbridge.Error (DLB_ERR_INVALID_ARGUMENT) for a\n"
     "tensor that is not CUDA memory of dlbridge's CUDA backend."},
    {"delete", tensor_delete, METH_NOARGS,
     "delete()\n--\n\nDeletes (donates) the buffer: later exports raise BufferError."},
    {"__reduce__", tensor_reduce, METH_NOARGS,
     "Refused: a tensor is a handle, shared through DLPack, not pickled or copied."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"_m", tensor_get_meta, NULL, "metadata tuple (cached)", NULL},
    {"shape", tensor_get_item, NULL, "Extents, a tuple of ints.", (void*)0},
    {"strides", tensor_get_item, NULL, "Strides in elements (not bytes), a tuple of ints.", (void*)1},
    {"dtype", tensor_get_item, NULL,
     "numpy-style dtype name: \"float32\", \"bfloat16\", \"bool\", \"complex64\", ...", (void*)2},
    {"device", tensor_get_item, NULL, "(device_type, device_id), DLPack's numbering (CPU is (1, 0)).",
     (void*)3},
    {"data_ptr", tensor_get_item, NULL,
     "Address of the element at index (0, ..., 0): the buffer's data pointer plus\n"
     "its byte offset, as an int. A zero-size tensor has an address too (never\n"
     "NULL; DLPack consumers skip the deleter of a tensor whose data is NULL),\n"
     "which must not be read through.",
     (void*)4},
    {"readonly", tensor_get_item, NULL, "True when the memory must not be written through exports.",
     (void*)5},
    {"nbytes", tensor_get_item, NULL, "Bytes the elements take when compact.", (void*)6},
    {"ndim", tensor_get_ndim, NULL, "Number of dimensions.", NULL},
    {"size", tensor_get_size, NULL, "Number of elements.", NULL},
    {"_handle", tensor_get_handle, NULL, "the dlb_buffer* as an int (borrowed)", NULL},
    {"deleted", tensor_get_deleted, NULL, "True once delete() was called.", NULL},
    {"stream", tensor_get_stream, NULL,
     "The stream value of the last writer of CUDA memory (see set_stream); None for a\n"
     "tensor dlbridge's CUDA backend does not hold.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef tensor_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(dlbpy_tensor, weaklist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static const char tensor_doc[] =
    "A reference to a dlbridge buffer; a producer and consumer of DLPack.\n\n"
    "Made by dlbridge.empty(), dlbridge.from_buffer() and dlbridge.from_dlpack(),\n"
    "not by calling the class. Dropping the tensor releases its reference (in C;\n"
    "the class has no __del__). Metadata is read from the library once, on first\n"
    "use, and cached. strides are in elements, as DLPack counts them.\n\n"
    "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n"
    "exports a DLPack capsule: max_version None or with a major below 1 gives a\n"
    "legacy \"dltensor\" capsule (refused with BufferError for read-only data,\n"
    "which the legacy struct cannot mark), a major of 1 or more a\n"
    "\"dltensor_versioned\" one; copy True always copies, False never (BufferError\n"
    "when a copy is needed), None copies only when needed; dl_device is the\n"
    "consumer's (device_type, device_id); stream must be None for host memory.\n"
    "The type publishes the DLPack 1.3 C exchange table as\n"
    "__dlpack_c_exchange_api__.\n\n"
    "CUDA memory (tensors taken in with from_dlpack() from a CUDA producer)\n"
    "remembers the stream of its last writer: stream reads it (None for other\n"
    "tensors), set_stream(s) records a new one after enqueueing work that writes\n"
    "the memory. Exports to a consumer's stream and copies to the host are\n"
    "ordered after that stream.\n\n"
    "The type is immutable and cannot be subclassed.";

static PyType_Slot tensor_slots[] = {
    {Py_tp_new, (void*)tensor_tp_new},
    {Py_tp_dealloc, (void*)tensor_dealloc},
    {Py_tp_repr, (void*)tensor_repr},
    {Py_sq_length, (void*)tensor_length},
    {Py_tp_methods, tensor_methods},
    {Py_tp_getset, tensor_getset},
    {Py_tp_members, tensor_members},
    {Py_tp_doc, (void*)tensor_doc},
    {0, NULL},
};

/* Immutable (its attributes, the exchange table among them, cannot be
 * replaced, which lets consumers cache the table for good) and not a base
 * type; no Py_TPFLAGS_HAVE_GC: see the comment at the top. */
static PyType_Spec tensor_spec = {
    "dlbridge.Tensor",
    sizeof(dlbpy_tensor),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    tensor_slots,
};

static PyMethodDef module_methods[] = {
    {"register", glue_register, METH_O, "register(error_class)"},
    {"empty", (PyCFunction)(void (*)(void))glue_empty, METH_FASTCALL,
     "empty(shape, dtype_name) -> Tensor"},
    {"from_buffer", glue_from_buffer, METH_O,
     "from_buffer(obj, /)\n--\n\n"
     "A zero-copy Tensor over an object with the Python buffer protocol.\n\n"
     "bytes give a read-only tensor; bytearray, memoryview (of writable memory)\n"
     "and array.array writable ones. The object's buffer stays exported (for a\n"
     "bytearray: it cannot be resized) until the tensor and the last export\n"
     "made from it are gone. dlbridge.Error (DLB_ERR_INVALID_ARGUMENT) for an\n"
     "object without the buffer protocol, DLB_ERR_UNSUPPORTED_DTYPE or\n"
     "DLB_ERR_UNSUPPORTED_LAYOUT for what DLPack cannot describe."},
    {"from_dlpack", (PyCFunction)(void (*)(void))glue_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(obj, /, *, device=None, copy=None, stream=None)\n--\n\n"
     "A Tensor over what any DLPack producer (numpy, torch, dlbridge) exports.\n\n"
     "Asks for a versioned capsule (max_version=(1, 3), with dl_device and copy\n"
     "when given). A producer whose __dlpack__ refuses those keyword arguments\n"
     "(CPython's own TypeError for an unknown keyword) is asked again without\n"
     "them, and its type is remembered as legacy once that worked; any other\n"
     "TypeError from the producer is raised as it is. Also takes a DLPack\n"
     "capsule itself. An object without __dlpack__ raises AttributeError.\n"
     "device: the (device_type, device_id) the result must be on; copy: True\n"
     "always copies, False never copies (BufferError when a copy would be\n"
     "needed), None copies only when needed.\n\n"
     "stream (an extension of the standard's from_dlpack): the consumer's CUDA\n"
     "stream, passed to the producer's __dlpack__; -1, 1, 2 or a stream handle.\n"
     "ValueError for 0, or for any stream when the producer's memory or the\n"
     "device asked for has no streams (the standard allows only None there).\n"
     "CUDA memory comes in through dlbridge's CUDA backend, carrying that\n"
     "stream (1, the legacy default stream, when none is given: the protocol's\n"
     "producer then assumes it); without a usable CUDA driver it comes in as\n"
     "plain memory, which can be exported again but not copied to the host."},
    {"live_exports", glue_live_exports, METH_NOARGS,
     "live_exports()\n--\n\n"
     "Managed tensors exported by the library whose deleter has not yet run."},
    {"status_name", glue_status_name, METH_O, "status_name(code) -> str"},
    {"library_path", glue_library_path, METH_NOARGS, "library_path() -> str"},
    {"device_info", glue_device_info, METH_O,
     "device_info(device_type) -> (device_type, name, host_readable, address, has_streams)"},
    {"is_legacy_producer", glue_is_legacy_producer, METH_O,
     "is_legacy_producer(type) -> bool: whether the type was found to refuse max_version"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef glue_module = {
    PyModuleDef_HEAD_INIT, "dlbridge._glue", "The C side of the dlbridge package.", -1,
    module_methods,        NULL,             NULL,                                   NULL,
    NULL,
};

/* Puts the DLPack C exchange table in the type's dictionary as
 * __dlpack_c_exchange_api__. The type is immutable, so type.__setattr__
 * refuses: the attribute is stored as that method would store it (the
 * generic attribute store into the type's dictionary, then the type marked
 * modified), once, before any code can have looked the type up. */
static int publish_exchange_table(PyTypeObject* type) {
  PyObject* name = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  PyObject* table = dlbpy_exchange_capsule();
  int bad = name == NULL || table == NULL || PyObject_GenericSetAttr((PyObject*)type, name, table) != 0;
  if (!bad) PyType_Modified(type);
  Py_XDECREF(table);
  Py_XDECREF(name);
  return bad ? -1 : 0;
}

PyMODINIT_FUNC PyInit__glue(void) {
  void* symbol = dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
  if (symbol == NULL) symbol = dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
  /* POSIX: object and function pointers convert. */
  memcpy(&g_is_finalizing, &symbol, sizeof symbol);

  PyObject* module = PyModule_Create(&glue_module);
  if (module == NULL) return NULL;
  g_tensor_type = (PyTypeObject*)PyType_FromSpec(&tensor_spec);
  g_legacy_types = PySet_New(NULL);
  g_str_dlpack = PyUnicode_InternFromString("__dlpack__");
  g_max_version = Py_BuildValue("(ii)", DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR);
  const DLPackVersion written = dlb_dlpack_version();
  if (g_tensor_type == NULL || g_legacy_types == NULL || g_str_dlpack == NULL ||
      g_max_version == NULL || publish_exchange_table(g_tensor_type) != 0 ||
      PyModule_AddObject(module, "Tensor", (PyObject*)g_tensor_type) != 0) {
    Py_DECREF(module);
    return NULL;
  }
  Py_INCREF(g_tensor_type); /* AddObject stole one */
  if (PyModule_AddStringConstant(module, "version", dlb_version_string()) != 0 ||
      PyModule_AddObject(module, "dlpack_version",
                         Py_BuildValue("(II)", written.major, written.minor)) != 0) {
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
