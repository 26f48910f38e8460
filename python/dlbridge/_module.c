/* dlbridge._glue: the module itself (see _glue.h for the other files).
 *
 * The extension is built against the CPython 3.10 limited API (one binary
 * for CPython 3.10 and later) and linked against libdlbridge. This file
 * holds the module's state and setup and the small module functions
 * (empty, live_exports, status_name, library_path, register, device_info);
 * what every file calls (errors, argument helpers, the state, the
 * interpreter-exit flag) is in _support.c.
 *
 * Facts about tensors (dtypes, devices, layouts, export rules) are the
 * library's: the extension asks for them and turns statuses into
 * exceptions.
 */
#define _GNU_SOURCE /* dladdr */
#include "_glue.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>


/* ------------------------------------------------------------------------ */
/* Interpreter exit                                                         */
/* ------------------------------------------------------------------------ */

static PyObject* glue_on_exit(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  dlbpy_mark_exiting();
  Py_RETURN_NONE;
}

static PyMethodDef on_exit_def = {"_on_exit", glue_on_exit, METH_NOARGS, NULL};

/* atexit.register(_on_exit): 0, or -1 with an exception set. */
static int register_exit_flag(PyObject* module) {
  PyObject* atexit = PyImport_ImportModule("atexit");
  if (atexit == NULL) return -1;
  PyObject* callback = PyCFunction_NewEx(&on_exit_def, module, NULL);
  PyObject* r = callback != NULL ? PyObject_CallMethod(atexit, "register", "O", callback) : NULL;
  Py_XDECREF(r);
  Py_XDECREF(callback);
  Py_DECREF(atexit);
  return r != NULL ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

/* empty(shape, dtype_name) -> a zero-filled compact host Tensor. */
static PyObject* glue_empty(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
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
    return dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, text);
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
  return dlbpy_tensor_new_in((dlbpy_state*)PyModule_GetState(module), buffer);
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
  /* GCOVR_EXCL_START: dladdr always names the file of a loaded library */
  if (dladdr((void*)&dlb_version_string, &info) == 0 || info.dli_fname == NULL) {
    PyErr_SetString(PyExc_OSError, "dladdr cannot name the file of libdlbridge");
    return NULL;
  }
  /* GCOVR_EXCL_STOP */
  return PyUnicode_DecodeFSDefault(info.dli_fname);
}

/* register(error_class, refusal_class): the exception classes (defined in
 * Python) that library failures raise: dlbridge.Error, and
 * dlbridge.RefusalError (a subclass of it and of BufferError) for
 * from_dlpack's refusals. */
static PyObject* glue_register(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (nargs > 2 || !PyType_Check(args[i]) || !PyType_IsSubtype((PyTypeObject*)args[i], (PyTypeObject*)PyExc_Exception) ||
        (i == 1 && (!PyType_IsSubtype((PyTypeObject*)args[1], (PyTypeObject*)args[0]) ||
                    !PyType_IsSubtype((PyTypeObject*)args[1], (PyTypeObject*)PyExc_BufferError)))) {
      PyErr_SetString(PyExc_TypeError, "register(error_class, refusal_class=None): Exception subclasses, "
                                       "the second one a subclass of the first and of BufferError");
      return NULL;
    }
  }
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "register(error_class, refusal_class=None) takes 1 or 2 arguments");
    return NULL;
  }
  dlbpy_state* state = (dlbpy_state*)PyModule_GetState(module);
  PyObject* old_error = state->error_type;
  PyObject* old_refusal = state->refusal_type;
  Py_INCREF(args[0]);
  state->error_type = args[0];
  state->refusal_type = nargs > 1 ? args[1] : NULL;
  Py_XINCREF(state->refusal_type);
  Py_XDECREF(old_error);
  Py_XDECREF(old_refusal);
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
    return dlbpy_raise_error(DLB_ERR_UNSUPPORTED_DEVICE, text);
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

/* ------------------------------------------------------------------------ */
/* Module                                                                   */
/* ------------------------------------------------------------------------ */

static PyMethodDef module_methods[] = {
    {"register", (PyCFunction)(void (*)(void))glue_register, METH_FASTCALL,
     "register(error_class, refusal_class=None)"},
    {"empty", (PyCFunction)(void (*)(void))glue_empty, METH_FASTCALL,
     "empty(shape, dtype_name) -> Tensor"},
    {"from_buffer", dlbpy_from_buffer, METH_O, dlbpy_from_buffer_doc},
    {"from_dlpack", (PyCFunction)(void (*)(void))dlbpy_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     dlbpy_from_dlpack_doc},
    {"live_exports", glue_live_exports, METH_NOARGS,
     "live_exports()\n--\n\n"
     "Managed tensors exported by the library whose deleter has not yet run."},
    {"status_name", glue_status_name, METH_O, "status_name(code) -> str"},
    {"library_path", glue_library_path, METH_NOARGS, "library_path() -> str"},
    {"device_info", glue_device_info, METH_O,
     "device_info(device_type) -> (device_type, name, host_readable, address, has_streams)"},
    {"is_legacy_producer", dlbpy_is_legacy_producer, METH_O,
     "is_legacy_producer(type) -> bool: whether the type's __dlpack__ was found to speak\n"
     "only the protocol before DLPack 1.0 (no max_version)"},
    {"share_descriptor", (PyCFunction)(void (*)(void))dlbpy_share_descriptor, METH_FASTCALL | METH_KEYWORDS,
     dlbpy_share_descriptor_doc},
    {"share_copy", (PyCFunction)(void (*)(void))dlbpy_share_copy, METH_FASTCALL | METH_KEYWORDS,
     dlbpy_share_copy_doc},
    {"is_shared", dlbpy_is_shared, METH_O, dlbpy_is_shared_doc},
    {"open_shared", (PyCFunction)(void (*)(void))dlbpy_open_shared, METH_FASTCALL | METH_KEYWORDS,
     dlbpy_open_shared_doc},
    {"share_send", (PyCFunction)(void (*)(void))dlbpy_share_send, METH_FASTCALL, dlbpy_share_send_doc},
    {"share_recv", dlbpy_share_recv, METH_O, dlbpy_share_recv_doc},
    {"shared_mappings", dlbpy_shared_mappings, METH_NOARGS, dlbpy_shared_mappings_doc},
    {"share_ticket", dlbpy_share_ticket, METH_O, dlbpy_share_ticket_doc},
    {"share_ticket_open", (PyCFunction)(void (*)(void))dlbpy_share_ticket_open, METH_FASTCALL | METH_KEYWORDS,
     dlbpy_share_ticket_open_doc},
    {"share_server_state", dlbpy_share_server_state, METH_NOARGS, dlbpy_share_server_state_doc},
    {"share_ticket_withdraw", dlbpy_share_ticket_withdraw, METH_O, dlbpy_share_ticket_withdraw_doc},
    {"share_ticket_wait", dlbpy_share_ticket_wait, METH_O, dlbpy_share_ticket_wait_doc},
    {"tensor_payload", dlbpy_tensor_payload, METH_O, dlbpy_tensor_payload_doc},
    {"tensor_from_payload", (PyCFunction)(void (*)(void))dlbpy_tensor_from_payload, METH_FASTCALL,
     dlbpy_tensor_from_payload_doc},
    {"tensor_from_pickle", (PyCFunction)(void (*)(void))dlbpy_tensor_from_pickle, METH_FASTCALL,
     dlbpy_tensor_from_pickle_doc},
    {NULL, NULL, 0, NULL},
};

static int glue_traverse(PyObject* module, visitproc visit, void* arg) {
  dlbpy_state* state = (dlbpy_state*)PyModule_GetState(module);
  if (state == NULL) return 0;
  Py_VISIT(state->tensor_type);
  Py_VISIT(state->exchange_base);
  Py_VISIT(state->exchange_capsule);
  Py_VISIT(state->error_type);
  Py_VISIT(state->refusal_type);
  Py_VISIT(state->protocol_of);
  Py_VISIT(state->max_version_kwargs);
  return dlbpy_exchange_cache_traverse(&state->cache, visit, arg);
}

static int glue_clear(PyObject* module) {
  dlbpy_state* state = (dlbpy_state*)PyModule_GetState(module);
  if (state == NULL) return 0;
  Py_CLEAR(state->tensor_type);
  Py_CLEAR(state->exchange_base);
  Py_CLEAR(state->exchange_capsule);
  Py_CLEAR(state->error_type);
  Py_CLEAR(state->refusal_type);
  Py_CLEAR(state->protocol_of);
  Py_CLEAR(state->str_dlpack);
  Py_CLEAR(state->max_version);
  Py_CLEAR(state->str_max_version);
  Py_CLEAR(state->max_version_kwargs);
  Py_CLEAR(state->max_version_names);
  dlbpy_exchange_cache_clear(&state->cache);
  return 0;
}

static void glue_free(void* module) { (void)glue_clear((PyObject*)module); }

/* Single-phase initialisation (the state is found with PyState_FindModule
 * by callbacks that get no module, such as the exchange table's). */
struct PyModuleDef dlbpy_module_def = {
    PyModuleDef_HEAD_INIT,
    "dlbridge._glue",
    "The C side of the dlbridge package.",
    sizeof(dlbpy_state),
    module_methods,
    NULL,
    glue_traverse,
    glue_clear,
    glue_free,
};

static PyType_Slot exchange_base_slots[] = {
    {Py_tp_doc, (void*)"Holds dlbridge.Tensor's DLPack C exchange table (__dlpack_c_exchange_api__)."},
    {0, NULL},
};

static PyType_Spec exchange_base_spec = {
    "dlbridge._glue._ExchangeTable",
    0,
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    exchange_base_slots,
};

typedef PyObject* (*from_metaclass_fn)(PyTypeObject*, PyObject*, PyType_Spec*, PyObject*);

/* dlbridge.Tensor, immutable, with __dlpack_c_exchange_api__ readable on the
 * class (where the protocol looks: type(x).__dlpack_c_exchange_api__) and on
 * instances, without writing into an immutable type's dictionary:
 *
 * - CPython 3.12 and later: the class attribute is a getter of the
 *   metaclass dlbridge._glue.TensorType (immutable too), through
 *   PyType_FromMetaclass, a function of the stable ABI since 3.12 that the
 *   3.10 headers do not declare: it is found in the running interpreter by
 *   its public name. Instances have a getter of their own.
 * - CPython 3.10 and 3.11: the capsule sits in the dictionary of a plain
 *   base class, dlbridge._glue._ExchangeTable, put there by ordinary
 *   attribute assignment (3.12 deprecates immutable types with mutable
 *   bases, which is why newer versions take the first route).
 *
 * NULL with an exception set. */
static PyTypeObject* make_tensor_type(PyObject* module, dlbpy_state* state) {
  from_metaclass_fn from_metaclass = NULL;
  void* symbol = dlsym(RTLD_DEFAULT, "PyType_FromMetaclass");
  memcpy(&from_metaclass, &symbol, sizeof symbol); /* POSIX: object and function pointers convert */
  if (from_metaclass != NULL) {
    PyObject* meta = PyType_FromModuleAndSpec(module, &dlbpy_tensor_meta_spec, (PyObject*)&PyType_Type);
    if (meta == NULL) return NULL;
    PyObject* type = from_metaclass((PyTypeObject*)meta, module, dlbpy_tensor_spec(1), NULL);
    Py_DECREF(meta); /* the type holds its metaclass */
    return (PyTypeObject*)type;
  }
  state->exchange_base = PyType_FromModuleAndSpec(module, &exchange_base_spec, NULL);
  if (state->exchange_base == NULL ||
      PyObject_SetAttrString(state->exchange_base, "__dlpack_c_exchange_api__", state->exchange_capsule) != 0) {
    return NULL;
  }
  return (PyTypeObject*)PyType_FromModuleAndSpec(module, dlbpy_tensor_spec(0), state->exchange_base);
}

PyMODINIT_FUNC PyInit__glue(void) {
  PyObject* module = PyModule_Create(&dlbpy_module_def);
  if (module == NULL) return NULL;
  dlbpy_state* state = (dlbpy_state*)PyModule_GetState(module);
  memset(state, 0, sizeof *state);
  state->exchange_capsule = dlbpy_exchange_capsule();
  state->tensor_type = state->exchange_capsule != NULL ? make_tensor_type(module, state) : NULL;
  state->protocol_of = PyDict_New();
  state->str_dlpack = PyUnicode_InternFromString("__dlpack__");
  state->max_version = Py_BuildValue("(ii)", DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR);
  state->str_max_version = PyUnicode_InternFromString("max_version");
  state->max_version_names = state->str_max_version != NULL ? PyTuple_Pack(1, state->str_max_version) : NULL;
  const DLPackVersion written = dlb_dlpack_version();
  if (state->tensor_type == NULL || state->protocol_of == NULL || state->str_dlpack == NULL ||
      state->max_version == NULL || state->str_max_version == NULL || state->max_version_names == NULL || dlbpy_exchange_cache_init(&state->cache) != 0 ||
      register_exit_flag(module) != 0 ||
      PyModule_AddObject(module, "Tensor", (PyObject*)state->tensor_type) != 0) {
    Py_DECREF(module);
    return NULL;
  }
  Py_INCREF(state->tensor_type); /* AddObject stole one */
  if (PyModule_AddStringConstant(module, "version", dlb_version_string()) != 0 ||
      PyModule_AddObject(module, "dlpack_version",
                         Py_BuildValue("(II)", written.major, written.minor)) != 0) {
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
