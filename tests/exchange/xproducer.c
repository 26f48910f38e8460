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
 * flags, against the DLPack 1.3 header in tests/header/dlpack13, from this
 * file and the parts xproducer.h lists (tests/exchange/build_ext.py).
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
 *   xproducer.set_failing(flag): from-py-object fails with RuntimeError (flag
 *     true) or with the exception class given; false: it works again
 */
#include "xproducer.h"

struct xcounts counts;

PyObject* failing = NULL; /* the exception class from-py-object raises, NULL: none */

PyTypeObject* XTensorType = NULL;
PyTypeObject* FrozenXTensorType = NULL; /* the same, immutable */

int is_xtensor(PyObject* obj) {
  return PyObject_TypeCheck(obj, XTensorType) || (FrozenXTensorType != NULL && Py_TYPE(obj) == FrozenXTensorType);
}

/* ---- exports ------------------------------------------------------------ */

void xexport_free(XExport* e) {
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

void xexport_deleter(DLManagedTensorVersioned* self) { xexport_free((XExport*)self->manager_ctx); }
static void xexport_legacy_deleter(DLManagedTensor* self) { xexport_free((XExport*)self->manager_ctx); }

void xtensor_describe(const XTensor* t, int64_t* shape, int64_t* strides, DLTensor* out) {
  out->data = t->data;
  out->device.device_type = kDLCPU;
  out->device.device_id = 0;
  out->ndim = t->ndim;
  out->dtype = t->dtype;
  out->shape = shape;
  out->strides = strides;
  out->byte_offset = 0;
}

XExport* xexport_new(XTensor* t) {
  XExport* e = (XExport*)calloc(1, sizeof *e);
  if (e == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  DLTensor* d = &e->mt.dl_tensor;
  memcpy(e->shape, t->shape, sizeof e->shape);
  memcpy(e->strides, t->strides, sizeof e->strides);
  xtensor_describe(t, e->shape, e->strides, d);
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
  PyObject* old = failing;
  failing = NULL;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

static PyObject* mod_set_failing(PyObject* m, PyObject* flag) {
  (void)m;
  /* an exception class, or a truth value (true: RuntimeError) */
  PyObject* type = NULL;
  if (PyExceptionClass_Check(flag)) {
    type = flag;
  } else {
    const int on = PyObject_IsTrue(flag);
    if (on < 0) return NULL;
    if (on) type = PyExc_RuntimeError;
  }
  Py_XINCREF(type);
  PyObject* old = failing;
  failing = type;
  Py_XDECREF(old);
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
