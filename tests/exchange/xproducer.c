/* xproducer: an independent DLPack producer for the tests, a CPython
 * extension that shares no code with dlbridge. Its type, XTensor, holds
 * float64 (or, when wrapping someone else's tensor, any dtype) host memory
 * and publishes the DLPack 1.3 C exchange table as
 * XTensor.__dlpack_c_exchange_api__, with all five functions, beside the
 * Python protocol (__dlpack__, __dlpack_device__). Every entry point and
 * every deleter counts its calls, so that tests can prove which path a
 * consumer took and that every export was released exactly once.
 *
 * Built by the tests with the interpreter's own include directory and
 * flags, against the DLPack 1.3 header in tests/header/dlpack13.
 *
 *   XTensor(values, shape, strides=None, offset=0, readonly=False)
 *     float64 storage holding `values`; element 0 at `offset`; strides in
 *     elements (default: compact row-major), non-negative, within storage.
 *   FrozenXTensor(...): the same as an immutable type (attributes fixed,
 *     not a base type), with the same table.
 *   BoundXTensor(...): the same data with a __dlpack__ as binding libraries
 *     (pybind11, nanobind) make it: no keywords, no text signature, its own
 *     TypeError wording; no exchange table.
 *   xproducer.counts() -> dict of counters; xproducer.reset()
 *   xproducer.capsule(kind) -> a table capsule: "ok", "bad_name",
 *     "null_from_py", "major2" (a 2.0 table, nothing else), "major2_prev"
 *     (a 2.0 table whose prev_api is the 1.3 one)
 *   xproducer.set_failing(flag): from-py-object fails with RuntimeError
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if DLPACK_MAJOR_VERSION != 1 || DLPACK_MINOR_VERSION < 3
#error "xproducer needs a DLPack 1.3 dlpack.h (tests/header/dlpack13)"
#endif

#define XMAX_NDIM 8

/* Calls of each entry point, exports made and deleters run. Touched with
 * the GIL held only. */
static struct {
  long long dlpack;       /* __dlpack__ */
  long long allocator;    /* managed_tensor_allocator */
  long long from_py;      /* managed_tensor_from_py_object_no_sync */
  long long to_py;        /* managed_tensor_to_py_object_no_sync */
  long long dltensor;     /* dltensor_from_py_object_no_sync */
  long long stream;       /* current_work_stream */
  long long major2;       /* any function of the 2.0 table */
  long long exports;      /* managed tensors this module made */
  long long deleters;     /* their deleters run */
  long long foreign_freed; /* deleters of wrapped foreign tensors called */
  long long bound_calls;    /* BoundXTensor.__dlpack__ calls */
  long long bound_refusals; /* ... refused for keyword arguments */
} counts;

static int failing = 0;

typedef struct {
  PyObject_HEAD
  char* data; /* address of element 0 (byte_offset folded in) */
  double* storage; /* owned storage, or NULL */
  DLManagedTensorVersioned* foreign; /* owned foreign tensor, or NULL */
  DLDataType dtype;
  int32_t ndim;
  int readonly;
  int64_t shape[XMAX_NDIM];
  int64_t strides[XMAX_NDIM];
} XTensor;

static PyTypeObject* XTensorType = NULL;
static PyTypeObject* FrozenXTensorType = NULL; /* the same, immutable */

static int is_xtensor(PyObject* obj) {
  return PyObject_TypeCheck(obj, XTensorType) || (FrozenXTensorType != NULL && Py_TYPE(obj) == FrozenXTensorType);
}

/* ---- exports ------------------------------------------------------------ */

typedef struct {
  DLManagedTensorVersioned mt;
  DLManagedTensor legacy;
  int64_t shape[XMAX_NDIM];
  int64_t strides[XMAX_NDIM];
  PyObject* owner; /* a reference to the XTensor, or NULL */
  void* storage;   /* memory of an allocator tensor, or NULL */
} XExport;

static void xexport_free(XExport* e) {
  /* Deleters may run on any thread; take the GIL unless it is held. */
  const int held = PyGILState_Check();
  PyGILState_STATE g = PyGILState_UNLOCKED;
  if (!held) g = PyGILState_Ensure();
  counts.deleters++;
  Py_XDECREF(e->owner);
  if (!held) PyGILState_Release(g);
  free(e->storage);
  free(e);
}

static void xexport_deleter(DLManagedTensorVersioned* self) { xexport_free((XExport*)self->manager_ctx); }
static void xexport_legacy_deleter(DLManagedTensor* self) { xexport_free((XExport*)self->manager_ctx); }

static XExport* xexport_new(XTensor* t) {
  XExport* e = (XExport*)calloc(1, sizeof *e);
  if (e == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  DLTensor* d = &e->mt.dl_tensor;
  memcpy(e->shape, t->shape, sizeof e->shape);
  memcpy(e->strides, t->strides, sizeof e->strides);
  d->data = t->data;
  d->device.device_type = kDLCPU;
  d->device.device_id = 0;
  d->ndim = t->ndim;
  d->dtype = t->dtype;
  d->shape = e->shape;
  d->strides = e->strides;
  d->byte_offset = 0;
  e->mt.version.major = DLPACK_MAJOR_VERSION;
  e->mt.version.minor = DLPACK_MINOR_VERSION;
  e->mt.manager_ctx = e;
  e->mt.deleter = xexport_deleter;
  e->mt.flags = t->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  e->legacy.dl_tensor = *d;
  e->legacy.manager_ctx = e;
  e->legacy.deleter = xexport_legacy_deleter;
  Py_INCREF(t);
  e->owner = (PyObject*)t;
  counts.exports++;
  return e;
}

static void capsule_versioned_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    DLManagedTensorVersioned* mt = (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (mt->deleter) mt->deleter(mt);
  }
}

static void capsule_legacy_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* mt = (DLManagedTensor*)PyCapsule_GetPointer(capsule, "dltensor");
    if (mt->deleter) mt->deleter(mt);
  }
}

/* ---- the exchange table --------------------------------------------------- */

static int x_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                       void (*SetError)(void* error_ctx, const char* kind, const char* message)) {
  counts.allocator++;
  if (prototype == NULL || out == NULL) {
    SetError(error_ctx, "ValueError", "xproducer: prototype or out is NULL");
    return -1;
  }
  if (prototype->device.device_type != kDLCPU) {
    SetError(error_ctx, "ValueError", "xproducer: allocates on the CPU only");
    return -1;
  }
  if (prototype->ndim < 0 || prototype->ndim > XMAX_NDIM || prototype->dtype.lanes != 1 ||
      prototype->dtype.bits % 8 != 0 || prototype->dtype.bits == 0) {
    SetError(error_ctx, "ValueError", "xproducer: unsupported prototype");
    return -1;
  }
  XExport* e = (XExport*)calloc(1, sizeof *e);
  if (e == NULL) {
    SetError(error_ctx, "MemoryError", "xproducer: out of memory");
    return -1;
  }
  size_t n = 1;
  for (int i = prototype->ndim - 1; i >= 0; --i) {
    if (prototype->shape[i] < 0) {
      free(e);
      SetError(error_ctx, "ValueError", "xproducer: negative extent");
      return -1;
    }
    e->shape[i] = prototype->shape[i];
    e->strides[i] = (int64_t)n;
    n *= (size_t)prototype->shape[i];
  }
  e->storage = calloc(n ? n : 1, prototype->dtype.bits / 8);
  if (e->storage == NULL) {
    free(e);
    SetError(error_ctx, "MemoryError", "xproducer: out of memory");
    return -1;
  }
  DLTensor* d = &e->mt.dl_tensor;
  d->data = e->storage;
  d->device.device_type = kDLCPU;
  d->ndim = prototype->ndim;
  d->dtype = prototype->dtype;
  d->shape = e->shape;
  d->strides = e->strides;
  e->mt.version.major = DLPACK_MAJOR_VERSION;
  e->mt.version.minor = DLPACK_MINOR_VERSION;
  e->mt.manager_ctx = e;
  e->mt.deleter = xexport_deleter;
  counts.exports++;
  *out = &e->mt;
  return 0;
}

static int x_from_py(void* py_object, DLManagedTensorVersioned** out) {
  counts.from_py++;
  PyObject* obj = (PyObject*)py_object;
  if (failing) {
    PyErr_SetString(PyExc_RuntimeError, "xproducer: from_py_object failure requested");
    return -1;
  }
  if (!is_xtensor(obj)) {
    PyErr_Format(PyExc_TypeError, "xproducer: not an XTensor but %s", Py_TYPE(obj)->tp_name);
    return -1;
  }
  XExport* e = xexport_new((XTensor*)obj);
  if (e == NULL) return -1;
  *out = &e->mt;
  return 0;
}

static int xtensor_adopt(XTensor* t, DLManagedTensorVersioned* mt);

static int x_to_py(DLManagedTensorVersioned* tensor, void** out_py_object) {
  counts.to_py++;
  if (tensor == NULL) {
    PyErr_SetString(PyExc_ValueError, "xproducer: tensor is NULL");
    return -1;
  }
  XTensor* t = (XTensor*)XTensorType->tp_alloc(XTensorType, 0);
  if (t == NULL) {
    counts.foreign_freed++;
    if (tensor->deleter) tensor->deleter(tensor);
    return -1;
  }
  if (xtensor_adopt(t, tensor) != 0) {
    Py_DECREF(t); /* calls the deleter: t owns tensor now */
    return -1;
  }
  *out_py_object = t;
  return 0;
}

static int x_dltensor(void* py_object, DLTensor* out) {
  counts.dltensor++;
  PyObject* obj = (PyObject*)py_object;
  if (!is_xtensor(obj)) {
    PyErr_Format(PyExc_TypeError, "xproducer: not an XTensor but %s", Py_TYPE(obj)->tp_name);
    return -1;
  }
  XTensor* t = (XTensor*)obj;
  out->data = t->data;
  out->device.device_type = kDLCPU;
  out->device.device_id = 0;
  out->ndim = t->ndim;
  out->dtype = t->dtype;
  out->shape = t->shape;
  out->strides = t->strides;
  out->byte_offset = 0;
  return 0;
}

static int x_stream(DLDeviceType device_type, int32_t device_id, void** out_current_stream) {
  (void)device_id;
  counts.stream++;
  if (device_type != kDLCPU) {
    PyErr_SetString(PyExc_ValueError, "xproducer: CPU only");
    return -1;
  }
  *out_current_stream = NULL;
  return 0;
}

static int m2_allocator(DLTensor* p, DLManagedTensorVersioned** o, void* c,
                        void (*SetError)(void*, const char*, const char*)) {
  (void)p, (void)o;
  counts.major2++;
  SetError(c, "RuntimeError", "xproducer: 2.0 table called");
  return -1;
}
static int m2_from_py(void* p, DLManagedTensorVersioned** o) {
  (void)p, (void)o;
  counts.major2++;
  PyErr_SetString(PyExc_RuntimeError, "xproducer: 2.0 table called");
  return -1;
}
static int m2_to_py(DLManagedTensorVersioned* t, void** o) {
  (void)t, (void)o;
  counts.major2++;
  PyErr_SetString(PyExc_RuntimeError, "xproducer: 2.0 table called");
  return -1;
}
static int m2_dltensor(void* p, DLTensor* o) {
  (void)p, (void)o;
  counts.major2++;
  PyErr_SetString(PyExc_RuntimeError, "xproducer: 2.0 table called");
  return -1;
}
static int m2_stream(DLDeviceType d, int32_t i, void** o) {
  (void)d, (void)i, (void)o;
  counts.major2++;
  PyErr_SetString(PyExc_RuntimeError, "xproducer: 2.0 table called");
  return -1;
}

static DLPackExchangeAPI table_ok = {
    {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    x_allocator, x_from_py, x_to_py, x_dltensor, x_stream};
static DLPackExchangeAPI table_null_from_py = {
    {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    x_allocator, NULL, x_to_py, x_dltensor, x_stream};
static DLPackExchangeAPI table_major2 = {
    {{2, 0}, NULL}, m2_allocator, m2_from_py, m2_to_py, m2_dltensor, m2_stream};
static DLPackExchangeAPI table_major2_prev = {
    {{2, 0}, &table_ok.header}, m2_allocator, m2_from_py, m2_to_py, m2_dltensor, m2_stream};

/* ---- XTensor -------------------------------------------------------------- */

static int xtensor_adopt(XTensor* t, DLManagedTensorVersioned* mt) {
  t->foreign = mt; /* owned from here on, whatever happens */
  if (mt->version.major != 1) {
    PyErr_Format(PyExc_BufferError, "xproducer: DLPack major version %u is not 1", (unsigned)mt->version.major);
    return -1;
  }
  const DLTensor* d = &mt->dl_tensor;
  if (d->device.device_type != kDLCPU || d->ndim < 0 || d->ndim > XMAX_NDIM || d->dtype.bits % 8 != 0) {
    PyErr_SetString(PyExc_BufferError, "xproducer: only CPU tensors of whole-byte dtypes, ndim <= 8");
    return -1;
  }
  t->data = (char*)d->data + d->byte_offset;
  t->dtype = d->dtype;
  t->ndim = d->ndim;
  t->readonly = (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  int64_t step = 1;
  for (int i = d->ndim - 1; i >= 0; --i) {
    t->shape[i] = d->shape[i];
    t->strides[i] = d->strides ? d->strides[i] : step;
    step *= d->shape[i] > 1 ? d->shape[i] : 1;
  }
  return 0;
}

static void xtensor_dealloc(XTensor* self) {
  PyTypeObject* tp = Py_TYPE(self);
  if (self->foreign != NULL) {
    counts.foreign_freed++;
    if (self->foreign->deleter) self->foreign->deleter(self->foreign);
  }
  free(self->storage);
  tp->tp_free((PyObject*)self);
  Py_DECREF(tp);
}

static int read_int64s(PyObject* seq, int64_t* out, int max, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > max) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "%s: at most %d entries", what, max);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
  }
  Py_DECREF(fast);
  return (int)n;
}

static int xtensor_init(XTensor* self, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"values", "shape", "strides", "offset", "readonly", NULL};
  PyObject *values, *shape, *strides = Py_None;
  Py_ssize_t offset = 0;
  int readonly = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|Onp", kwlist, &values, &shape, &strides, &offset, &readonly))
    return -1;
  if (self->storage != NULL || self->foreign != NULL) {
    PyErr_SetString(PyExc_TypeError, "XTensor is initialised once");
    return -1;
  }
  PyObject* fast = PySequence_Fast(values, "values must be a sequence");
  if (fast == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  double* storage = (double*)calloc(n ? (size_t)n : 1, sizeof(double));
  if (storage == NULL) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    storage[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
    if (storage[i] == -1.0 && PyErr_Occurred()) {
      Py_DECREF(fast);
      free(storage);
      return -1;
    }
  }
  Py_DECREF(fast);
  self->storage = storage;
  int ndim = read_int64s(shape, self->shape, XMAX_NDIM, "shape");
  if (ndim < 0) return -1;
  self->ndim = ndim;
  if (strides == Py_None) {
    int64_t step = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      self->strides[i] = step;
      step *= self->shape[i] > 1 ? self->shape[i] : 1;
    }
  } else if (read_int64s(strides, self->strides, XMAX_NDIM, "strides") != ndim) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "strides must have ndim entries");
    return -1;
  }
  int64_t last = offset, count = 1;
  for (int i = 0; i < ndim; ++i) {
    if (self->shape[i] < 0 || self->strides[i] < 0) {
      PyErr_SetString(PyExc_ValueError, "extents and strides must be >= 0");
      return -1;
    }
    count *= self->shape[i];
    if (self->shape[i] > 0) last += (self->shape[i] - 1) * self->strides[i];
  }
  if (offset < 0 || (count > 0 && last >= n)) {
    PyErr_SetString(PyExc_ValueError, "the view reaches past the values");
    return -1;
  }
  self->data = (char*)(storage + offset);
  self->dtype.code = kDLFloat;
  self->dtype.bits = 64;
  self->dtype.lanes = 1;
  self->readonly = readonly;
  return 0;
}

static PyObject* xtensor_dlpack(XTensor* self, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  counts.dlpack++;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", kwlist, &stream, &max_version, &dl_device, &copy))
    return NULL;
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError, "xproducer: copies are not made");
    return NULL;
  }
  long major = 0;
  if (max_version != Py_None) {
    PyObject* m = PySequence_GetItem(max_version, 0);
    if (m == NULL) return NULL;
    major = PyLong_AsLong(m);
    Py_DECREF(m);
    if (major == -1 && PyErr_Occurred()) return NULL;
  }
  if (major < 1 && self->readonly) {
    PyErr_SetString(PyExc_BufferError, "xproducer: read-only data needs a versioned capsule");
    return NULL;
  }
  XExport* e = xexport_new(self);
  if (e == NULL) return NULL;
  PyObject* capsule = major >= 1 ? PyCapsule_New(&e->mt, "dltensor_versioned", capsule_versioned_destructor)
                                 : PyCapsule_New(&e->legacy, "dltensor", capsule_legacy_destructor);
  if (capsule == NULL) xexport_free(e);
  return capsule;
}

static PyObject* xtensor_dlpack_device(XTensor* self, PyObject* unused) {
  (void)self, (void)unused;
  return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

/* Element i in row-major order (float64 tensors only). */
static double* element(XTensor* self, Py_ssize_t i) {
  int64_t off = 0;
  for (int d = self->ndim - 1; d >= 0; --d) {
    int64_t extent = self->shape[d];
    off += (i % extent) * self->strides[d];
    i /= extent;
  }
  return (double*)self->data + off;
}

static Py_ssize_t numel(XTensor* self) {
  Py_ssize_t n = 1;
  for (int d = 0; d < self->ndim; ++d) n *= (Py_ssize_t)self->shape[d];
  return n;
}

static PyObject* xtensor_tolist(XTensor* self, PyObject* unused) {
  (void)unused;
  if (self->dtype.code != kDLFloat || self->dtype.bits != 64) {
    PyErr_SetString(PyExc_TypeError, "xproducer: tolist() reads float64 only");
    return NULL;
  }
  Py_ssize_t n = numel(self);
  PyObject* list = PyList_New(n);
  if (list == NULL) return NULL;
  for (Py_ssize_t i = 0; i < n; ++i) PyList_SET_ITEM(list, i, PyFloat_FromDouble(*element(self, i)));
  return list;
}

static PyObject* xtensor_set(XTensor* self, PyObject* args) {
  Py_ssize_t i;
  double v;
  if (!PyArg_ParseTuple(args, "nd", &i, &v)) return NULL;
  if (self->dtype.code != kDLFloat || self->dtype.bits != 64 || i < 0 || i >= numel(self)) {
    PyErr_SetString(PyExc_IndexError, "xproducer: set() of a float64 element in range only");
    return NULL;
  }
  *element(self, i) = v;
  Py_RETURN_NONE;
}

static PyObject* xtensor_get_shape(XTensor* self, void* unused) {
  (void)unused;
  PyObject* t = PyTuple_New(self->ndim);
  for (int i = 0; t != NULL && i < self->ndim; ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->shape[i]));
  return t;
}

static PyObject* xtensor_get_strides(XTensor* self, void* unused) {
  (void)unused;
  PyObject* t = PyTuple_New(self->ndim);
  for (int i = 0; t != NULL && i < self->ndim; ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(self->strides[i]));
  return t;
}

static PyObject* xtensor_get_data_ptr(XTensor* self, void* unused) {
  (void)unused;
  return PyLong_FromVoidPtr(self->data);
}

static PyObject* xtensor_get_readonly(XTensor* self, void* unused) {
  (void)unused;
  return PyBool_FromLong(self->readonly);
}

static PyObject* xtensor_get_dtype(XTensor* self, void* unused) {
  (void)unused;
  return Py_BuildValue("(iii)", (int)self->dtype.code, (int)self->dtype.bits, (int)self->dtype.lanes);
}

static PyMethodDef xtensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))xtensor_dlpack, METH_VARARGS | METH_KEYWORDS, "DLPack export"},
    {"__dlpack_device__", (PyCFunction)xtensor_dlpack_device, METH_NOARGS, "(1, 0)"},
    {"tolist", (PyCFunction)xtensor_tolist, METH_NOARGS, "elements in row-major order"},
    {"set", (PyCFunction)xtensor_set, METH_VARARGS, "set(i, value): element i in row-major order"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef xtensor_getset[] = {
    {"shape", (getter)xtensor_get_shape, NULL, NULL, NULL},
    {"strides", (getter)xtensor_get_strides, NULL, NULL, NULL},
    {"data_ptr", (getter)xtensor_get_data_ptr, NULL, NULL, NULL},
    {"readonly", (getter)xtensor_get_readonly, NULL, NULL, NULL},
    {"dtype", (getter)xtensor_get_dtype, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot xtensor_slots[] = {
    {Py_tp_dealloc, (void*)xtensor_dealloc},
    {Py_tp_init, (void*)xtensor_init},
    {Py_tp_new, (void*)PyType_GenericNew},
    {Py_tp_methods, xtensor_methods},
    {Py_tp_getset, xtensor_getset},
    {0, NULL}};

/* BoundXTensor: what a binding library (pybind11, nanobind) makes of a
 * __dlpack__ bound without keyword arguments: a C method with no text
 * signature that refuses any keyword with its own words. No exchange table. */
static PyObject* bound_dlpack(XTensor* self, PyObject* args, PyObject* kwargs) {
  counts.bound_calls++;
  if (PyTuple_Size(args) != 0 || (kwargs != NULL && PyDict_Size(kwargs) != 0)) {
    counts.bound_refusals++;
    PyErr_SetString(PyExc_TypeError,
                    "__dlpack__(): incompatible function arguments. The following argument types are "
                    "supported:\n    1. (self: xproducer.BoundXTensor) -> capsule");
    return NULL;
  }
  return xtensor_dlpack(self, args, NULL);
}

static PyMethodDef bound_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))bound_dlpack, METH_VARARGS | METH_KEYWORDS, "DLPack export"},
    {"__dlpack_device__", (PyCFunction)xtensor_dlpack_device, METH_NOARGS, "(1, 0)"},
    {"tolist", (PyCFunction)xtensor_tolist, METH_NOARGS, "elements in row-major order"},
    {NULL, NULL, 0, NULL}};

static PyType_Slot bound_slots[] = {
    {Py_tp_dealloc, (void*)xtensor_dealloc},
    {Py_tp_init, (void*)xtensor_init},
    {Py_tp_new, (void*)PyType_GenericNew},
    {Py_tp_methods, bound_methods},
    {Py_tp_getset, xtensor_getset},
    {0, NULL}};

static PyType_Spec bound_spec = {"xproducer.BoundXTensor", sizeof(XTensor), 0, Py_TPFLAGS_DEFAULT, bound_slots};

static PyType_Spec xtensor_spec = {"xproducer.XTensor", sizeof(XTensor), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                                   xtensor_slots};
static PyType_Spec frozen_spec = {"xproducer.FrozenXTensor", sizeof(XTensor), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE, xtensor_slots};

/* ---- module --------------------------------------------------------------- */

static PyObject* mod_counts(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  return Py_BuildValue("{sLsLsLsLsLsLsLsLsLsLsLsL}", "dlpack", counts.dlpack, "allocator", counts.allocator,
                       "from_py", counts.from_py, "to_py", counts.to_py, "dltensor", counts.dltensor,
                       "stream", counts.stream, "major2", counts.major2, "exports", counts.exports,
                       "deleters", counts.deleters, "foreign_freed", counts.foreign_freed, "bound_calls",
                       counts.bound_calls, "bound_refusals", counts.bound_refusals);
}

static PyObject* mod_reset(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  if (counts.exports != counts.deleters) {
    PyErr_Format(PyExc_RuntimeError, "xproducer: %lld exports still alive", counts.exports - counts.deleters);
    return NULL;
  }
  memset(&counts, 0, sizeof counts);
  failing = 0;
  Py_RETURN_NONE;
}

static PyObject* mod_set_failing(PyObject* m, PyObject* flag) {
  (void)m;
  failing = PyObject_IsTrue(flag);
  Py_RETURN_NONE;
}

static PyObject* mod_capsule(PyObject* m, PyObject* arg) {
  (void)m;
  const char* kind = PyUnicode_AsUTF8(arg);
  if (kind == NULL) return NULL;
  if (strcmp(kind, "ok") == 0) return PyCapsule_New(&table_ok, "dlpack_exchange_api", NULL);
  if (strcmp(kind, "bad_name") == 0) return PyCapsule_New(&table_ok, "dlpack_exchange_api_v0", NULL);
  if (strcmp(kind, "null_from_py") == 0) return PyCapsule_New(&table_null_from_py, "dlpack_exchange_api", NULL);
  if (strcmp(kind, "major2") == 0) return PyCapsule_New(&table_major2, "dlpack_exchange_api", NULL);
  if (strcmp(kind, "major2_prev") == 0) return PyCapsule_New(&table_major2_prev, "dlpack_exchange_api", NULL);
  PyErr_Format(PyExc_ValueError, "unknown table kind %s", kind);
  return NULL;
}

static PyMethodDef module_methods[] = {
    {"counts", mod_counts, METH_NOARGS, "counters"},
    {"reset", mod_reset, METH_NOARGS, "zero the counters (refused while exports are alive)"},
    {"set_failing", mod_set_failing, METH_O, "make from-py-object fail"},
    {"capsule", mod_capsule, METH_O, "a table capsule of the given kind"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "xproducer", NULL, -1, module_methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_xproducer(void) {
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  XTensorType = (PyTypeObject*)PyType_FromSpec(&xtensor_spec);
  if (XTensorType == NULL) goto fail;
  PyObject* capsule = PyCapsule_New(&table_ok, "dlpack_exchange_api", NULL);
  if (capsule == NULL) goto fail;
  int rc = PyObject_SetAttrString((PyObject*)XTensorType, "__dlpack_c_exchange_api__", capsule);
  Py_DECREF(capsule);
  if (rc != 0) goto fail;
  Py_INCREF(XTensorType);
  if (PyModule_AddObject(m, "XTensor", (PyObject*)XTensorType) != 0) {
    Py_DECREF(XTensorType);
    goto fail;
  }
  /* An immutable type: its table goes into its dictionary the way
   * type.__setattr__ would put it there, before anyone looked it up. */
  FrozenXTensorType = (PyTypeObject*)PyType_FromSpec(&frozen_spec);
  if (FrozenXTensorType == NULL) goto fail;
  capsule = PyCapsule_New(&table_ok, "dlpack_exchange_api", NULL);
  PyObject* name = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
  rc = capsule == NULL || name == NULL || PyObject_GenericSetAttr((PyObject*)FrozenXTensorType, name, capsule) != 0;
  Py_XDECREF(capsule);
  Py_XDECREF(name);
  if (rc != 0) goto fail;
  PyType_Modified(FrozenXTensorType);
  Py_INCREF(FrozenXTensorType);
  if (PyModule_AddObject(m, "FrozenXTensor", (PyObject*)FrozenXTensorType) != 0) {
    Py_DECREF(FrozenXTensorType);
    goto fail;
  }
  PyObject* bound = PyType_FromSpec(&bound_spec);
  if (bound == NULL || PyModule_AddObject(m, "BoundXTensor", bound) != 0) {
    Py_XDECREF(bound);
    goto fail;
  }
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
