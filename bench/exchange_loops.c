/* C loops for bench/bench_exchange.py: what a C extension pays per tensor to
 * take a tensor from a Python object, through the DLPack 1.3 exchange table
 * and through the capsule protocol, timed inside C so that no Python call
 * overhead is counted.
 *
 *   table_loop(obj, n)   table looked up once on type(obj) (as a consumer
 *                        caching it per type does), then n times
 *                        managed_tensor_from_py_object_no_sync + deleter
 *   view_loop(obj, n)    n times dltensor_from_py_object_no_sync (borrowed)
 *   capsule_loop(obj, n, versioned)
 *                        n times obj.__dlpack__(max_version=(1, 3)) (or
 *                        obj.__dlpack__() when versioned is 0) +
 *                        PyCapsule_GetPointer + rename + deleter + decref
 * Each returns nanoseconds per tensor (a float).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlbridge/dlbridge.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static const DLPackExchangeAPI* table_of(PyObject* obj) {
  PyObject* capsule = PyObject_GetAttrString((PyObject*)Py_TYPE(obj), "__dlpack_c_exchange_api__");
  if (capsule == NULL) return NULL;
  const DLPackExchangeAPIHeader* h =
      (const DLPackExchangeAPIHeader*)PyCapsule_GetPointer(capsule, DLB_EXCHANGE_API_CAPSULE_NAME);
  Py_DECREF(capsule);
  while (h != NULL && h->version.major != 1) h = h->prev_api;
  if (h == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "no DLPack 1.x exchange table");
    return NULL;
  }
  return (const DLPackExchangeAPI*)h;
}

static PyObject* table_loop(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* obj;
  Py_ssize_t n;
  if (!PyArg_ParseTuple(args, "On", &obj, &n)) return NULL;
  const DLPackExchangeAPI* api = table_of(obj);
  if (api == NULL) return NULL;
  DLPackManagedTensorFromPyObjectNoSync from_py = api->managed_tensor_from_py_object_no_sync;
  const double t0 = now_ns();
  for (Py_ssize_t i = 0; i < n; ++i) {
    DLManagedTensorVersioned* mt;
    if (from_py(obj, &mt) != 0) return NULL;
    mt->deleter(mt);
  }
  return PyFloat_FromDouble((now_ns() - t0) / (double)(n > 0 ? n : 1));
}

static PyObject* view_loop(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* obj;
  Py_ssize_t n;
  if (!PyArg_ParseTuple(args, "On", &obj, &n)) return NULL;
  const DLPackExchangeAPI* api = table_of(obj);
  if (api == NULL) return NULL;
  if (api->dltensor_from_py_object_no_sync == NULL) {
    PyErr_SetString(PyExc_TypeError, "the table has no dltensor_from_py_object_no_sync");
    return NULL;
  }
  volatile void* sink = NULL;
  const double t0 = now_ns();
  for (Py_ssize_t i = 0; i < n; ++i) {
    DLTensor t;
    if (api->dltensor_from_py_object_no_sync(obj, &t) != 0) return NULL;
    sink = t.data;
  }
  (void)sink;
  return PyFloat_FromDouble((now_ns() - t0) / (double)(n > 0 ? n : 1));
}

static PyObject* capsule_loop(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* obj;
  Py_ssize_t n;
  int versioned = 1;
  if (!PyArg_ParseTuple(args, "On|p", &obj, &n, &versioned)) return NULL;
  PyObject* name = PyUnicode_InternFromString("__dlpack__");
  PyObject* kwnames = Py_BuildValue("(s)", "max_version");
  PyObject* version = Py_BuildValue("(ii)", 1, 3);
  if (name == NULL || kwnames == NULL || version == NULL) goto fail;
  const char* cap_name = versioned ? "dltensor_versioned" : "dltensor";
  const char* used_name = versioned ? "used_dltensor_versioned" : "used_dltensor";
  PyObject* call_args[2] = {obj, version};
  const double t0 = now_ns();
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* capsule = versioned ? PyObject_VectorcallMethod(name, call_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                              kwnames)
                                  : PyObject_VectorcallMethod(name, call_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                              NULL);
    if (capsule == NULL) goto fail;
    void* p = PyCapsule_GetPointer(capsule, cap_name);
    if (p == NULL) {
      Py_DECREF(capsule);
      goto fail;
    }
    PyCapsule_SetName(capsule, used_name);
    if (versioned) {
      DLManagedTensorVersioned* mt = (DLManagedTensorVersioned*)p;
      if (mt->deleter) mt->deleter(mt);
    } else {
      DLManagedTensor* mt = (DLManagedTensor*)p;
      if (mt->deleter) mt->deleter(mt);
    }
    Py_DECREF(capsule);
  }
  const double per = (now_ns() - t0) / (double)(n > 0 ? n : 1);
  Py_DECREF(name);
  Py_DECREF(kwnames);
  Py_DECREF(version);
  return PyFloat_FromDouble(per);
fail:
  Py_XDECREF(name);
  Py_XDECREF(kwnames);
  Py_XDECREF(version);
  return NULL;
}

static PyMethodDef methods[] = {
    {"table_loop", table_loop, METH_VARARGS, "ns per tensor: from-py-object + deleter"},
    {"view_loop", view_loop, METH_VARARGS, "ns per tensor: dltensor-from-py-object"},
    {"capsule_loop", capsule_loop, METH_VARARGS, "ns per tensor: __dlpack__ + capsule + deleter"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "exchange_loops", NULL, -1, methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_exchange_loops(void) { return PyModule_Create(&module_def); }
