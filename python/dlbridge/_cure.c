/* The host-copy cure of from_dlpack (see _consumer.c and _glue.h): what a
 * refusal of a producer's __dlpack__ becomes.
 *
 * A producer that says it deleted the array (obj.is_deleted() true, as JAX
 * arrays say after delete() or a donation) gets dlbridge.Error with
 * DLB_ERR_DELETED, carrying the producer's own exception and message. A
 * BufferError (the protocol's "cannot export") becomes a buffer of a small
 * backend: its storage has no zero-copy access, its layout is the
 * producer's shape and dtype, and its copy_to_host asks the producer for
 * host memory in the order the array API standard and Python provide:
 *
 *   1. __dlpack__(max_version=..., dl_device=(kDLCPU, 0), copy=True)
 *      (1.x producers only),
 *   2. the buffer protocol,
 *   3. __array__(),
 *   4. __array_interface__,
 *
 * and copies the first that works into the memory the library gives it.
 * dlb_buffer_resolve then decides, as it decides every export: with copy
 * allowed the result is a fresh host copy flagged DLB_BUFFER_COPIED
 * (Tensor.copied); with copy=False the planner refuses with
 * DLB_ERR_NOT_ZERO_COPY, raised as BufferError whose message names the
 * producer's refusal (the backend's name) and the copy that was forbidden,
 * chained to the producer's exception. Any other exception of the producer
 * is raised as it is.
 */
#include "_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The storage of a refused producer: what copy_to_host asks. */
typedef struct cure_storage {
  PyObject* obj;    /* owned */
  PyObject* method; /* owned: obj.__dlpack__ */
  int modern;       /* the producer takes the 1.x keywords */
  DLTensor layout;  /* shape and dtype the producer said it has */
  int64_t shape[DLB_MAX_NDIM];
  char refusal[512]; /* the producer's refusal in words */
  char tried[900];  /* why each step failed, for the message */
} cure_storage;

static void note(cure_storage* st, const char* step) {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  PyObject* text = value != NULL ? PyObject_Str(value) : NULL;
  const char* utf8 = text != NULL ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
  if (utf8 == NULL) PyErr_Clear();
  PyObject* tname = type != NULL ? PyObject_GetAttrString(type, "__name__") : NULL;
  const char* tn = tname != NULL ? PyUnicode_AsUTF8AndSize(tname, NULL) : NULL;
  if (tn == NULL) PyErr_Clear();
  const size_t used = strlen(st->tried);
  snprintf(st->tried + used, sizeof st->tried - used, "%s%s: %s: %.160s", used ? "; " : "", step,
           tn != NULL ? tn : "error", utf8 != NULL ? utf8 : "(no message)");
  Py_XDECREF(tname);
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
}

/* Copies `src` (a buffer of host memory) into dst when it has the shape and
 * dtype the producer said; 0, or -1 with a Python exception set. */
static int copy_source(cure_storage* st, dlb_buffer* src, void* dst, uint64_t size) {
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(src, &t);
  if (s != DLB_OK) {
    dlbpy_raise_status(s);
    return -1;
  }
  int same = t.ndim == st->layout.ndim && t.dtype.code == st->layout.dtype.code &&
             t.dtype.bits == st->layout.dtype.bits && t.dtype.lanes == st->layout.dtype.lanes;
  for (int i = 0; same && i < t.ndim; ++i) same = t.shape[i] == st->shape[i];
  if (!same) {
    PyErr_SetString(PyExc_BufferError, "it gave another shape or dtype than the producer's shape and dtype");
    return -1;
  }
  dlb_buffer* host = NULL;
  if (t.data == NULL && size > 0) {
    /* Not host memory (a backend's): the library copies it over first. */
    s = dlb_buffer_to_host(src, &host);
    if (s == DLB_OK) s = dlb_buffer_dltensor(host, &t);
  }
  if (s == DLB_OK) s = dlb_copy_to_contiguous(&t, dst, size);
  dlb_buffer_release(host);
  if (s != DLB_OK) {
    dlbpy_raise_status(s);
    return -1;
  }
  return 0;
}

/* A capsule's buffer (NULL with an exception set); steals `capsule`. */
static dlb_buffer* capsule_buffer(PyObject* capsule) {
  if (capsule == NULL) return NULL;
  dlb_buffer* buffer = NULL;
  const int bad = dlbpy_import_capsule(capsule, 1, &buffer);
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  Py_DECREF(capsule); /* a refused capsule still holds its tensor: its destructor frees it */
  PyErr_Restore(type, value, trace);
  return bad ? NULL : buffer;
}

/* __array_interface__ (version 3) as a borrowed view of host memory, valid
 * while `obj` lives; NULL with an exception set. */
static dlb_buffer* interface_buffer(PyObject* obj) {
  PyObject* face = PyObject_GetAttrString(obj, "__array_interface__");
  if (face == NULL) return NULL;
  dlb_buffer* buffer = NULL;
  PyObject* data = PyDict_Check(face) ? PyDict_GetItemString(face, "data") : NULL;
  PyObject* shape = PyDict_Check(face) ? PyDict_GetItemString(face, "shape") : NULL;
  PyObject* typestr = PyDict_Check(face) ? PyDict_GetItemString(face, "typestr") : NULL;
  PyObject* strides = PyDict_Check(face) ? PyDict_GetItemString(face, "strides") : NULL;
  const char* ts = typestr != NULL && PyUnicode_Check(typestr) ? PyUnicode_AsUTF8AndSize(typestr, NULL) : NULL;
  if (data == NULL || !PyTuple_Check(data) || PyTuple_Size(data) != 2 || shape == NULL || !PyTuple_Check(shape) ||
      ts == NULL || strlen(ts) < 3 || PyTuple_Size(shape) > DLB_MAX_NDIM) {
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError, "not a version 3 __array_interface__ with a data tuple");
    Py_DECREF(face);
    return NULL;
  }
  DLDataType dtype;
  int known = 1;
  switch (ts[1]) {
    case 'b': dtype.code = kDLBool; break;
    case 'i': dtype.code = kDLInt; break;
    case 'u': dtype.code = kDLUInt; break;
    case 'f': dtype.code = kDLFloat; break;
    case 'c': dtype.code = kDLComplex; break;
    default: known = 0;
  }
  const long bytes = strtol(ts + 2, NULL, 10);
  dtype.bits = (uint8_t)(bytes * 8);
  dtype.lanes = 1;
  if (!known || ts[0] == '>' || bytes <= 0 || bytes > 16) {
    PyErr_Format(PyExc_BufferError, "typestr '%s' has no DLPack dtype here", ts);
    Py_DECREF(face);
    return NULL;
  }
  int64_t dims[DLB_MAX_NDIM];
  int64_t steps[DLB_MAX_NDIM];
  const int ndim = (int)PyTuple_Size(shape);
  const int strided = strides != NULL && strides != Py_None;
  for (int i = 0; i < ndim; ++i) {
    dims[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
    if (strided) {
      PyObject* step = PyTuple_Check(strides) && PyTuple_Size(strides) == ndim ? PyTuple_GetItem(strides, i) : NULL;
      steps[i] = step != NULL ? PyLong_AsLongLong(step) / bytes : 0;
    }
  }
  void* address = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
  const int readonly = PyObject_IsTrue(PyTuple_GetItem(data, 1));
  if (!PyErr_Occurred()) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = address;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype = dtype;
    t.shape = ndim > 0 ? dims : NULL;
    t.strides = strided && ndim > 0 ? steps : NULL;
    const dlb_status s = dlb_buffer_wrap(&t, readonly > 0 ? DLB_BUFFER_READ_ONLY : 0, NULL, NULL, &buffer);
    if (s != DLB_OK) dlbpy_raise_status(s);
  }
  Py_DECREF(face);
  return buffer;
}

/* The backend's copy_to_host: the steps above, the first that works. */
static int32_t cure_copy(void* ctx, void* storage, void* dst, uint64_t size) {
  (void)ctx;
  cure_storage* st = (cure_storage*)storage;
  const dlbpy_state* state = dlbpy_state_get();
  if (state == NULL) return -1;
  for (int step = 0; step < 4; ++step) {
    static const char* const names[] = {"__dlpack__(dl_device=(1, 0), copy=True)", "the buffer protocol",
                                        "__array__()", "__array_interface__"};
    dlb_buffer* src = NULL;
    PyObject* keep = NULL; /* what src borrows from */
    if (step == 0) {
      if (!st->modern) continue;
      const long long cpu[2] = {kDLCPU, 0};
      PyObject* kwargs = Py_BuildValue("{sOs(LL)sO}", "max_version", state->max_version, "dl_device", cpu[0],
                                       cpu[1], "copy", Py_True);
      PyObject* empty = kwargs != NULL ? PyTuple_New(0) : NULL;
      src = capsule_buffer(empty != NULL ? PyObject_Call(st->method, empty, kwargs) : NULL);
      Py_XDECREF(empty);
      Py_XDECREF(kwargs);
    } else if (step == 1) {
      if (dlbpy_buffer_of(st->obj, &src) != 0) src = NULL;
    } else if (step == 2) {
      keep = PyObject_CallMethod(st->obj, "__array__", NULL);
      if (keep != NULL && dlbpy_buffer_of(keep, &src) != 0) {
        /* an array the buffer protocol cannot describe: its own export */
        PyErr_Clear();
        PyObject* method = PyObject_GetAttrString(keep, "__dlpack__");
        PyObject* capsule = NULL;
        if (method != NULL) {
          /* versioned where the array takes it (read-only arrays need it),
           * else the legacy call */
          PyObject* kwargs = Py_BuildValue("{sO}", "max_version", state->max_version);
          PyObject* empty = kwargs != NULL ? PyTuple_New(0) : NULL;
          capsule = empty != NULL ? PyObject_Call(method, empty, kwargs) : NULL;
          Py_XDECREF(empty);
          Py_XDECREF(kwargs);
          if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            capsule = PyObject_CallObject(method, NULL);
          }
        }
        src = capsule_buffer(capsule);
        Py_XDECREF(method);
      }
    } else {
      src = interface_buffer(st->obj);
    }
    if (src == NULL) {
      note(st, names[step]);
      Py_XDECREF(keep);
      continue;
    }
    const int bad = copy_source(st, src, dst, size);
    dlb_buffer_release(src);
    Py_XDECREF(keep);
    if (!bad) return 0;
    note(st, names[step]);
  }
  PyErr_Format(PyExc_BufferError, "%s; and no host copy could be made instead (%s)", st->refusal, st->tried);
  return -1;
}

static void cure_free(void* ctx, void* storage) {
  (void)ctx;
  cure_storage* st = (cure_storage*)storage;
  Py_XDECREF(st->obj); /* GIL held: the buffer lives only inside dlbpy_cure */
  Py_XDECREF(st->method);
  free(st);
}

/* Reads shape and dtype from obj into st->layout; 0, or -1 (exception set). */
static int read_layout(PyObject* obj, cure_storage* st) {
  PyObject* shape = PyObject_GetAttrString(obj, "shape");
  PyObject* tuple = shape != NULL ? PySequence_Tuple(shape) : NULL;
  Py_XDECREF(shape);
  if (tuple == NULL || PyTuple_Size(tuple) > DLB_MAX_NDIM) {
    Py_XDECREF(tuple);
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError, "it has no shape attribute of at most 32 extents to copy by");
    return -1;
  }
  const int ndim = (int)PyTuple_Size(tuple);
  for (int i = 0; i < ndim; ++i) st->shape[i] = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
  Py_DECREF(tuple);
  PyObject* dtype = PyErr_Occurred() ? NULL : PyObject_GetAttrString(obj, "dtype");
  PyObject* text = dtype != NULL ? PyObject_Str(dtype) : NULL;
  Py_XDECREF(dtype);
  const char* name = text != NULL ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
  if (name != NULL && strncmp(name, "torch.", 6) == 0) name += 6;
  DLDataType dt;
  const int known = name != NULL && dlb_dtype_from_name(name, &dt) == DLB_OK;
  Py_XDECREF(text);
  if (!known) {
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError, "it has no dtype attribute that names a DLPack dtype");
    return -1;
  }
  memset(&st->layout, 0, sizeof st->layout);
  st->layout.device.device_type = kDLCPU;
  st->layout.ndim = ndim;
  st->layout.dtype = dt;
  st->layout.shape = ndim > 0 ? st->shape : NULL;
  return 0;
}

/* The producer's exception (fetched) as "Type.__dlpack__ raised Name: message". */
static void describe_refusal(PyObject* obj, PyObject* value, char* out, size_t size) {
  PyObject* text = value != NULL ? PyObject_Str(value) : NULL;
  const char* message = text != NULL ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
  PyObject* tname = PyObject_GetAttrString((PyObject*)Py_TYPE(obj), "__qualname__");
  const char* producer = tname != NULL ? PyUnicode_AsUTF8AndSize(tname, NULL) : NULL;
  PyObject* ename = value != NULL ? PyObject_GetAttrString((PyObject*)Py_TYPE(value), "__name__") : NULL;
  const char* error = ename != NULL ? PyUnicode_AsUTF8AndSize(ename, NULL) : NULL;
  if (PyErr_Occurred()) PyErr_Clear();
  snprintf(out, size, "%.80s.__dlpack__ raised %.40s: %.300s", producer != NULL ? producer : "object",
           error != NULL ? error : "an error", message != NULL ? message : "");
  Py_XDECREF(text);
  Py_XDECREF(tname);
  Py_XDECREF(ename);
}

/* Whether obj says it was deleted (obj.is_deleted() true). */
static int says_deleted(PyObject* obj) {
  PyObject* method = PyObject_GetAttrString(obj, "is_deleted");
  PyObject* answer = method != NULL && PyCallable_Check(method) ? PyObject_CallObject(method, NULL) : NULL;
  const int deleted = answer != NULL && PyObject_IsTrue(answer) == 1;
  Py_XDECREF(answer);
  Py_XDECREF(method);
  if (PyErr_Occurred()) PyErr_Clear();
  return deleted;
}

/* Sets `raised` (a new exception instance, stolen) with `cause` (stolen)
 * as its __cause__. */
static void raise_with_cause(PyObject* raised, PyObject* cause) {
  if (raised == NULL) {
    Py_XDECREF(cause);
    if (!PyErr_Occurred()) PyErr_NoMemory();
    return;
  }
  if (cause != NULL) PyException_SetCause(raised, cause);
  PyErr_SetObject((PyObject*)Py_TYPE(raised), raised);
  Py_DECREF(raised);
}

PyObject* dlbpy_cure(dlbpy_state* state, PyObject* obj, PyObject* method, int modern, const long long* device,
                     int policy) {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  if (trace != NULL && value != NULL) PyException_SetTraceback(value, trace);
  Py_XDECREF(trace);
  char refusal[512];
  describe_refusal(obj, value, refusal, sizeof refusal);
  if (says_deleted(obj)) {
    Py_XDECREF(type);
    dlbpy_raise_error(DLB_ERR_DELETED, refusal);
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    Py_XDECREF(t2);
    Py_XDECREF(tb2);
    raise_with_cause(v2, value);
    return NULL;
  }
  if (type == NULL || !PyErr_GivenExceptionMatches(type, PyExc_BufferError)) {
    PyErr_Restore(type, value, NULL);
    return NULL;
  }
  Py_DECREF(type);

  cure_storage* st = (cure_storage*)calloc(1, sizeof *st);
  if (st == NULL) {
    Py_XDECREF(value);
    return PyErr_NoMemory();
  }
  if (read_layout(obj, st) != 0) {
    /* No layout to copy by: the refusal, with that reason. */
    free(st);
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyObject* why = v2 != NULL ? PyObject_Str(v2) : NULL;
    Py_XDECREF(t2);
    Py_XDECREF(v2);
    Py_XDECREF(tb2);
    PyObject* raised = why != NULL ? PyObject_CallFunction(PyExc_BufferError, "s", "") : NULL;
    PyObject* text = why != NULL ? PyUnicode_FromFormat("%s; dlbridge cannot copy it to the host: %U", refusal, why)
                                 : NULL;
    if (raised != NULL && text != NULL) {
      PyObject* args = PyTuple_Pack(1, text);
      if (args == NULL || PyObject_SetAttrString(raised, "args", args) != 0) Py_CLEAR(raised);
      Py_XDECREF(args);
    }
    Py_XDECREF(text);
    Py_XDECREF(why);
    raise_with_cause(raised, value);
    return NULL;
  }
  Py_INCREF(obj);
  Py_INCREF(method);
  st->obj = obj;
  st->method = method;
  st->modern = modern;
  memcpy(st->refusal, refusal, sizeof refusal);

  dlb_backend_vtable vt;
  memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "refused export";
  vt.copy_to_host = cure_copy;
  vt.free_storage = cure_free;
  dlb_backend* backend = NULL;
  dlb_buffer* refused = NULL;
  dlb_status s = dlb_backend_create(&vt, NULL, &backend);
  if (s == DLB_OK) {
    s = dlb_buffer_from_backend(backend, st, &st->layout, 0, &refused);
    dlb_backend_release(backend);
  }
  if (s != DLB_OK) {
    cure_free(NULL, st);
    dlbpy_raise_status(s);
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    Py_XDECREF(t2);
    Py_XDECREF(tb2);
    raise_with_cause(v2, value);
    return NULL;
  }
  dlb_export_options options;
  dlbpy_request_options(device, policy, &options);
  dlb_buffer* copy = NULL;
  s = dlb_buffer_resolve(refused, &options, &copy);
  dlb_buffer_release(refused); /* frees st */
  if (s != DLB_OK) {
    if (!PyErr_Occurred()) {
      /* The planner's refusal (copy=False, a device a copy cannot reach),
       * after the producer's own. */
      PyErr_Format(s == DLB_ERR_INVALID_ARGUMENT ? PyExc_ValueError : PyExc_BufferError,
                   "%s: %s; dlbridge made no host copy of it: %s", dlb_status_name(s), refusal,
                   dlb_last_error_message());
    }
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    Py_XDECREF(t2);
    Py_XDECREF(tb2);
    raise_with_cause(v2, value);
    return NULL;
  }
  Py_XDECREF(value);
  return dlbpy_tensor_new_in(state, copy);
}
