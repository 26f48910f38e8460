/* A C extension taking any Python tensor through the DLPack 1.3 C exchange
 * API: no __dlpack__ call, no capsule, no Python-level work per tensor.
 *
 *   import exchange_consumer
 *   exchange_consumer.take(t)   # t: a dlbridge.Tensor, or any object whose
 *                               # type publishes __dlpack_c_exchange_api__
 *   -> {"version": (1, 3), "shape": (2, 3), "strides": (3, 1),
 *       "dtype": (2, 64, 1), "data": 140..., "readonly": False, "sum": 15.0}
 *
 * Steps: look the table up on the object's *type* (a PyCapsule named
 * "dlpack_exchange_api"; a real extension caches it per type), check the
 * capsule name and the major version (walking prev_api to a table of a
 * major this code speaks), call managed_tensor_from_py_object_no_sync,
 * read the tensor, call its deleter exactly once.
 *
 * dlbridge.h is included for the exchange API declarations only (it
 * declares them when the installed dlpack.h predates 1.3); nothing is
 * linked. Build with the interpreter's flags, e.g.
 *   cc -shared -fPIC $(python3-config --includes) -I include \
 *      examples/exchange_consumer.c \
 *      -o exchange_consumer$(python3-config --extension-suffix)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlbridge/dlbridge.h>

/* The table of type(obj), or NULL with an exception set. */
static const DLPackExchangeAPI* find_table(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  PyObject* capsule = PyObject_GetAttrString((PyObject*)type, "__dlpack_c_exchange_api__");
  if (capsule == NULL) {
    /* The earlier attribute name, still set by some producers. */
    PyErr_Clear();
    capsule = PyObject_GetAttrString((PyObject*)type, "__c_dlpack_exchange_api__");
  }
  if (capsule == NULL) {
    PyErr_Format(PyExc_TypeError, "%s publishes no DLPack exchange table", type->tp_name);
    return NULL;
  }
  /* Checks the name; NULL with ValueError for another capsule. */
  const DLPackExchangeAPIHeader* header =
      (const DLPackExchangeAPIHeader*)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  /* The type keeps the capsule, and the capsule's table lives as long as
   * the process, so the pointer outlives this reference. */
  Py_DECREF(capsule);
  if (header == NULL) return NULL;
  while (header != NULL && header->version.major != 1) header = header->prev_api;
  if (header == NULL) {
    PyErr_Format(PyExc_TypeError, "%s offers no DLPack 1.x exchange table", type->tp_name);
    return NULL;
  }
  /* The header is the table's first member. */
  const DLPackExchangeAPI* api = (const DLPackExchangeAPI*)header;
  if (api->managed_tensor_from_py_object_no_sync == NULL) {
    PyErr_Format(PyExc_TypeError, "the exchange table of %s has no managed_tensor_from_py_object_no_sync",
                 type->tp_name);
    return NULL;
  }
  return api;
}

static PyObject* int64_tuple(const int64_t* v, int32_t n) {
  PyObject* t = PyTuple_New(n);
  for (int32_t i = 0; t != NULL && i < n; ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(v[i]));
  return t;
}

static PyObject* take(PyObject* module, PyObject* obj) {
  (void)module;
  const DLPackExchangeAPI* api = find_table(obj);
  if (api == NULL) return NULL;

  DLManagedTensorVersioned* mt = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &mt) != 0) return NULL; /* the producer's exception */
  if (mt->version.major != 1) {
    /* Only the stable prefix (version, manager_ctx, deleter, flags) may be read. */
    if (mt->deleter) mt->deleter(mt);
    PyErr_SetString(PyExc_BufferError, "the producer returned a tensor of another DLPack major version");
    return NULL;
  }

  const DLTensor* t = &mt->dl_tensor;
  PyObject* sum = Py_None;
  Py_INCREF(sum);
  if (t->device.device_type == kDLCPU && t->dtype.code == kDLFloat && t->dtype.bits == 64 && t->dtype.lanes == 1 &&
      t->ndim <= 8) {
    /* Sum the elements, following the strides (never NULL from DLPack 1.2 on). */
    int64_t index[8] = {0};
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    const char* base = (const char*)t->data + t->byte_offset;
    double s = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (int32_t d = 0; d < t->ndim; ++d) off += index[d] * t->strides[d];
      s += ((const double*)base)[off];
      for (int32_t d = t->ndim - 1; d >= 0; --d) {
        if (++index[d] < t->shape[d]) break;
        index[d] = 0;
      }
    }
    Py_DECREF(sum);
    sum = PyFloat_FromDouble(s);
  }
  PyObject* result = Py_BuildValue(
      "{s(II)sNsNs(iii)sNsOsN}", "version", (unsigned)mt->version.major, (unsigned)mt->version.minor, "shape",
      int64_tuple(t->shape, t->ndim), "strides", int64_tuple(t->strides, t->ndim), "dtype", (int)t->dtype.code,
      (int)t->dtype.bits, (int)t->dtype.lanes, "data", PyLong_FromVoidPtr((char*)t->data + t->byte_offset),
      "readonly", (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? Py_True : Py_False, "sum", sum);

  /* Done with the tensor: its deleter, exactly once. */
  if (mt->deleter) mt->deleter(mt);
  return result;
}

static PyMethodDef methods[] = {
    {"take", take, METH_O, "take(obj): read a tensor through type(obj).__dlpack_c_exchange_api__"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "exchange_consumer", NULL, -1, methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_exchange_consumer(void) { return PyModule_Create(&module_def); }
