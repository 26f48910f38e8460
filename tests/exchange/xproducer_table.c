/* xproducer's DLPack 1.3 C exchange table: the allocator, from-py-object
 * (refused on request), to-py-object (wrapping a foreign tensor in an
 * XTensor), the borrowed DLTensor view and the current stream; and a 2.0
 * table whose every call fails and counts, alone or with the 1.3 table as
 * its prev_api. */
#include "xproducer.h"

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
  if (failing != NULL) {
    PyErr_SetString(failing, "xproducer: from_py_object failure requested");
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
  xtensor_describe(t, t->shape, t->strides, out);
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

DLPackExchangeAPI table_ok = {
    {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    x_allocator, x_from_py, x_to_py, x_dltensor, x_stream};
DLPackExchangeAPI table_null_from_py = {
    {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    x_allocator, NULL, x_to_py, x_dltensor, x_stream};
DLPackExchangeAPI table_major2 = {
    {{2, 0}, NULL}, m2_allocator, m2_from_py, m2_to_py, m2_dltensor, m2_stream};
DLPackExchangeAPI table_major2_prev = {
    {{2, 0}, &table_ok.header}, m2_allocator, m2_from_py, m2_to_py, m2_dltensor, m2_stream};
