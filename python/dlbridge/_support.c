/* dlbridge._glue's support layer, called by every other file of the
 * extension and calling none of them: the module state of this
 * interpreter, the errors the extension raises, the argument helpers of the
 * protocol's calls, and the flag that tells callbacks on other threads that
 * the interpreter is exiting (set by _module.c's atexit callback). */
#include "_glue.h"

#include <stdatomic.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* State                                                                    */
/* ------------------------------------------------------------------------ */

dlbpy_state* dlbpy_state_get(void) {
  PyObject* module = PyState_FindModule(&dlbpy_module_def); /* borrowed */
  return module != NULL ? (dlbpy_state*)PyModule_GetState(module) : NULL;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

PyObject* dlbpy_raise_error(dlb_status status, const char* text) {
  const dlbpy_state* state = dlbpy_state_get();
  PyObject* type = state != NULL && state->error_type != NULL ? state->error_type : PyExc_RuntimeError;
  PyObject* message = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
  if (message == NULL) return NULL;
  PyObject* args = Py_BuildValue("(iN)", (int)status, message);
  if (args == NULL) return NULL;
  PyErr_SetObject(type, args);
  Py_DECREF(args);
  /* CPython 3.11 drops the exception when making it fails inside
   * PyErr_SetObject (dlbridge.Error.__init__ running out of memory). */
  if (!PyErr_Occurred()) PyErr_NoMemory();
  return NULL;
}

PyObject* dlbpy_raise_status(dlb_status status) {
  return dlbpy_raise_error(status, dlb_last_error_message());
}

PyObject* dlbpy_raise_buffer_error(dlb_status status) {
  PyObject* type = status == DLB_ERR_INVALID_ARGUMENT ? PyExc_ValueError : PyExc_BufferError;
  PyErr_Format(type, "%s: %s", dlb_status_name(status), dlb_last_error_message());
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Interpreter exit                                                         */
/* ------------------------------------------------------------------------ */

/* Set by an atexit callback when the interpreter starts to exit, read by
 * deleters on any thread without the GIL: a process-wide fact, so an atomic
 * flag rather than module state (which is freed during the exit). Neither
 * Py_IsFinalizing (3.13) nor _Py_IsFinalizing is in the limited API. */
static atomic_int g_exiting;

int dlbpy_interpreter_alive(void) {
  return Py_IsInitialized() && !atomic_load_explicit(&g_exiting, memory_order_acquire);
}

void dlbpy_mark_exiting(void) { atomic_store_explicit(&g_exiting, 1, memory_order_release); }

/* ------------------------------------------------------------------------ */
/* Argument helpers                                                         */
/* ------------------------------------------------------------------------ */

int dlbpy_keyword_only(const char* function, PyObject* const* args, Py_ssize_t nargs,
                       PyObject* kwnames, const char* const* names, int count, PyObject** values) {
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

int dlbpy_int_pair(PyObject* value, const char* what, const char* form, long long out[2]) {
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

int dlbpy_copy_policy(PyObject* copy) {
  if (copy == NULL || copy == Py_None) return DLB_COPY_IF_NEEDED;
  if (copy == Py_True) return DLB_COPY_ALWAYS;
  if (copy == Py_False) return DLB_COPY_NEVER;
  PyErr_Format(PyExc_TypeError, "copy must be True, False or None, not %R", copy);
  return -1;
}

void dlbpy_request_options(const long long* device, int policy, dlb_export_options* options) {
  dlb_export_options_init(options);
  options->copy = policy;
  if (device != NULL) {
    options->has_target_device = 1;
    const int32_t device_type = (int32_t)device[0];
    memcpy(&options->target_device.device_type, &device_type, sizeof device_type);
    options->target_device.device_id = (int32_t)device[1];
  }
}
