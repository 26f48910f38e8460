/* xproducer's types: XTensor (float64 storage, or a foreign tensor it
 * adopted), FrozenXTensor (the same as an immutable type) and BoundXTensor
 * (a __dlpack__ as binding libraries make it), with the Python protocol's
 * __dlpack__ and __dlpack_device__. */
#include "xproducer.h"

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
int xtensor_adopt(XTensor* t, DLManagedTensorVersioned* mt) {
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

PyType_Spec bound_spec = {"xproducer.BoundXTensor", sizeof(XTensor), 0, Py_TPFLAGS_DEFAULT, bound_slots};

PyType_Spec xtensor_spec = {"xproducer.XTensor", sizeof(XTensor), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                                   xtensor_slots};
PyType_Spec frozen_spec = {"xproducer.FrozenXTensor", sizeof(XTensor), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE, xtensor_slots};
