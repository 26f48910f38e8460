/* The refusal rule of from_dlpack (see _consumer.c and _glue.h): what an
 * exception of a producer's __dlpack__ or __dlpack_device__ becomes. One
 * rule for every producer, whatever the exception's class (the array API
 * standard asks for BufferError; JAX raises JaxRuntimeError, TensorFlow
 * InvalidArgumentError, pyarrow ArrowTypeError):
 *
 *   - MemoryError, RecursionError and exceptions that are not Exceptions
 *     (KeyboardInterrupt, SystemExit) are not about the array: raised as
 *     they are. So is a plain TypeError (exactly that class) that the
 *     legacy retry of _consumer.c did not answer: the protocol's refusal of
 *     arguments, not of the array (a producer's subclass, as pyarrow's
 *     ArrowTypeError, is a refusal of the array).
 *   - A producer that says it deleted the array (obj.is_deleted() true, as
 *     JAX arrays say after delete() or a donation; a dlbridge.Tensor after
 *     delete()): dlbridge.Error with DLB_ERR_DELETED.
 *   - Anything else is a refusal to export, answered by the host-copy cure:
 *     a buffer of a small backend whose layout is the producer's shape and
 *     dtype (read from obj.shape and obj.dtype, or from obj.__array__()
 *     when obj has neither, as a pyarrow array) and whose copy_to_host asks
 *     the producer for host memory in the order the array API standard and
 *     Python provide:
 *
 *       1. __dlpack__(max_version=..., dl_device=(kDLCPU, 0), copy=True)
 *          (1.x producers only),
 *       2. the buffer protocol,
 *       3. __array__(), read through the buffer protocol, or as the bytes
 *          of its elements when its dtype is one the buffer protocol
 *          cannot name (ml_dtypes' int4, float8_*, bfloat16),
 *       4. __array_interface__,
 *
 *     and copies the first that works into the memory the library gives
 *     it. A dtype of fewer than 8 bits (int4, uint2, ...) is copied one
 *     element per byte, as ml_dtypes and JAX's host copies hold it, and
 *     the result is flagged DLB_BUFFER_SUBBYTE_PADDED.
 *
 * dlb_buffer_resolve then decides, as it decides every export: with copy
 * allowed the result is a fresh host copy flagged DLB_BUFFER_COPIED
 * (Tensor.copied); with copy=False the planner refuses with
 * DLB_ERR_NOT_ZERO_COPY, raised as BufferError. When no copy can be made,
 * dlbridge.Error says why: DLB_ERR_UNSUPPORTED_DTYPE for a dtype DLPack
 * cannot describe (numpy StringDType, object arrays, JAX PRNG keys),
 * DLB_ERR_UNSUPPORTED_LAYOUT for an object without a shape, DLB_ERR_BACKEND
 * (the cure's copy failed) naming why each step failed. Every one of these
 * messages keeps the producer's exception class and words, and has the
 * producer's exception as __cause__.
 */
#include "_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Whether an exception (its class) is a refusal the cure may answer: every
 * Exception except MemoryError and RecursionError. */
static int is_refusal(PyObject* type) {
  return type != NULL && PyErr_GivenExceptionMatches(type, PyExc_Exception) &&
         !PyErr_GivenExceptionMatches(type, PyExc_MemoryError) &&
         !PyErr_GivenExceptionMatches(type, PyExc_RecursionError);
}

int dlbpy_exception_is_refusal(void) {
  PyObject* type = PyErr_Occurred();  /* borrowed */
  return is_refusal(type);
}

/* "Name" for a builtin exception class, "module.Name" for another
 * (jax.errors.JaxRuntimeError); NULL-safe; a new reference or NULL. */
static PyObject* class_name(PyObject* type) {
  if (type == NULL) return NULL;
  PyObject* name = PyObject_GetAttrString(type, "__qualname__");
  PyObject* module = name != NULL ? PyObject_GetAttrString(type, "__module__") : NULL;
  PyObject* full = NULL;
  if (module != NULL && PyUnicode_Check(module) && PyUnicode_CompareWithASCIIString(module, "builtins") != 0) {
    full = PyUnicode_FromFormat("%U.%U", module, name);
  } else if (name != NULL) {
    full = name;
    Py_INCREF(full);
  }
  Py_XDECREF(module);
  Py_XDECREF(name);
  if (full == NULL) PyErr_Clear();
  return full;
}

/* "Name: message" of an exception instance, into out. */
static void describe_exception(PyObject* value, char* out, size_t size) {
  PyObject* text = value != NULL ? PyObject_Str(value) : NULL;
  const char* message = text != NULL ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
  PyObject* name = value != NULL ? class_name((PyObject*)Py_TYPE(value)) : NULL;
  const char* error = name != NULL ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
  if (PyErr_Occurred()) PyErr_Clear();
  snprintf(out, size, "%.80s: %.300s", error != NULL ? error : "an error", message != NULL ? message : "");
  Py_XDECREF(text);
  Py_XDECREF(name);
}

/* The storage of a refused producer: what copy_to_host asks. */
typedef struct cure_storage {
  PyObject* obj;    /* owned */
  PyObject* method; /* owned: obj.__dlpack__ */
  PyObject* host;   /* owned or NULL: obj.__array__(), when the layout was read from it */
  int modern;       /* the producer takes the 1.x keywords */
  int padded;       /* a dtype of fewer than 8 bits, copied one element per byte */
  int failed;       /* set by cure_copy when no step gave memory */
  DLTensor layout;  /* shape and dtype the producer said it has */
  int64_t shape[DLB_MAX_NDIM];
  char tried[1200]; /* why each step failed, for the message */
} cure_storage;

/* Appends "step: Name: message" of the exception set to st->tried and
 * clears it; 0. An exception that is not a refusal (MemoryError,
 * KeyboardInterrupt, ...) is left set: -1. */
static int note(cure_storage* st, const char* step) {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  if (type != NULL && !is_refusal(type)) {
    PyErr_Restore(type, value, trace);
    return -1;
  }
  char text[400];
  describe_exception(value, text, sizeof text);
  const size_t used = strlen(st->tried);
  snprintf(st->tried + used, sizeof st->tried - used, "%s%s: %.220s", used ? "; " : "", step, text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return 0;
}

/* Copies `src` (a buffer of host memory) into dst when it has the shape and
 * dtype the producer said; `relabel`: src holds the bytes of the elements
 * under an unsigned dtype of their width, to be read as the producer's
 * dtype. 0, or -1 with a Python exception set. */
static int copy_source(cure_storage* st, dlb_buffer* src, int relabel, void* dst, uint64_t size) {
  DLTensor t;
  dlb_status s = dlb_buffer_dltensor(src, &t);
  if (s != DLB_OK) {
    dlbpy_raise_status(s);
    return -1;
  }
  int padded = (dlb_buffer_flags(src) & DLB_BUFFER_SUBBYTE_PADDED) != 0;
  if (relabel) {
    t.dtype = st->layout.dtype;
    padded = st->padded;
  }
  int same = t.ndim == st->layout.ndim && t.dtype.code == st->layout.dtype.code &&
             t.dtype.bits == st->layout.dtype.bits && t.dtype.lanes == st->layout.dtype.lanes;
  for (int i = 0; same && i < t.ndim; ++i) same = t.shape[i] == st->shape[i];
  if (!same) {
    PyErr_SetString(PyExc_BufferError, "it gave another shape or dtype than the producer's shape and dtype");
    return -1;
  }
  if (padded != st->padded) {
    PyErr_SetString(PyExc_BufferError, st->padded ? "it gave packed sub-byte elements, not one per byte"
                                                  : "it gave sub-byte elements padded to a byte each, not packed");
    return -1;
  }
  dlb_buffer* host = NULL;
  if (t.data == NULL && size > 0) {
    /* Not host memory (a backend's): the library copies it over first. */
    s = dlb_buffer_to_host(src, &host);
    if (s == DLB_OK) s = dlb_buffer_dltensor(host, &t);
  }
  if (st->padded) {
    /* one byte per element: copied as bytes */
    t.dtype.code = kDLUInt;
    t.dtype.bits = 8;
    t.dtype.lanes = 1;
  }
  if (s == DLB_OK) s = dlb_copy_to_contiguous(&t, dst, size);
  dlb_buffer_release(host);
  if (s != DLB_OK) {
    dlbpy_raise_status(s);
    return -1;
  }
  return 0;
}

/* A capsule's buffer (NULL with an exception set); steals `capsule`. A
 * result that is not a capsule is refused by the import. */
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

/* The DLPack dtype an object's `dtype` attribute names (its .name where it
 * has one, as numpy, JAX and TensorFlow dtypes do, else str() without
 * torch's "torch." prefix): DLB_OK, or DLB_ERR_UNSUPPORTED_DTYPE with the
 * name in `why`. No exception is left set. */
static dlb_status dtype_of(PyObject* obj, DLDataType* out, char* why, size_t size) {
  PyObject* dtype = PyObject_GetAttrString(obj, "dtype");
  if (dtype == NULL) {
    PyErr_Clear();
    snprintf(why, size, "it has no dtype attribute");
    return DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  PyObject* text = PyUnicode_Check(dtype) ? NULL : PyObject_GetAttrString(dtype, "name");
  if (text == NULL || !PyUnicode_Check(text)) {
    PyErr_Clear();
    Py_XDECREF(text);
    text = PyObject_Str(dtype);
  }
  Py_DECREF(dtype);
  const char* name = text != NULL ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
  if (name != NULL && strncmp(name, "torch.", 6) == 0) name += 6;
  const dlb_status s = name != NULL ? dlb_dtype_from_name(name, out) : DLB_ERR_UNSUPPORTED_DTYPE;
  if (s != DLB_OK) snprintf(why, size, "its dtype %.80s has no DLPack equivalent", name != NULL ? name : "(unnamed)");
  Py_XDECREF(text);
  PyErr_Clear();
  return s == DLB_OK ? DLB_OK : DLB_ERR_UNSUPPORTED_DTYPE;
}

/* The bytes of an array's elements as a buffer, for a dtype the buffer
 * protocol cannot name (ml_dtypes' int4, float8_*, bfloat16): arr.view() as
 * the unsigned integer of the element's width, when arr's dtype names the
 * producer's dtype and the element is that wide (one byte for a sub-byte
 * dtype). NULL with an exception set. */
static dlb_buffer* element_bytes(cure_storage* st, PyObject* arr) {
  DLDataType dt;
  char why[200];
  if (dtype_of(arr, &dt, why, sizeof why) != DLB_OK || dt.code != st->layout.dtype.code ||
      dt.bits != st->layout.dtype.bits || dt.lanes != st->layout.dtype.lanes) {
    PyErr_SetString(PyExc_BufferError, "the buffer protocol cannot read it, and its dtype is not the producer's");
    return NULL;
  }
  const unsigned width = st->padded ? 8u : (unsigned)dt.bits * dt.lanes;
  PyObject* dtype = PyObject_GetAttrString(arr, "dtype");
  PyObject* itemsize = dtype != NULL ? PyObject_GetAttrString(dtype, "itemsize") : NULL;
  const long bytes = itemsize != NULL ? PyLong_AsLong(itemsize) : -1;
  Py_XDECREF(itemsize);
  Py_XDECREF(dtype);
  PyErr_Clear();
  if (bytes * 8 != (long)width || (width != 8 && width != 16 && width != 32 && width != 64)) {
    PyErr_Format(PyExc_BufferError, "the buffer protocol cannot read it, and its elements are %ld bytes, not %u bits",
                 bytes, width);
    return NULL;
  }
  char as[16];
  snprintf(as, sizeof as, "uint%u", width);
  PyObject* view = PyObject_CallMethod(arr, "view", "s", as);
  if (view == NULL) return NULL;
  dlb_buffer* buffer = NULL;
  const int bad = dlbpy_buffer_of(view, &buffer); /* the buffer keeps the view alive */
  Py_DECREF(view);
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

/* The backend's copy_to_host: the steps above, the first that works. When
 * none does, st->failed is set and no exception is left, unless a step
 * raised one that is not a refusal (left set). */
static int32_t cure_copy(void* ctx, void* storage, void* dst, uint64_t size) {
  (void)ctx;
  cure_storage* st = (cure_storage*)storage;
  const dlbpy_state* state = dlbpy_state_get();
  if (state == NULL) return -1;
  for (int step = 0; step < 4; ++step) {
    static const char* const names[] = {"__dlpack__(dl_device=(1, 0), copy=True)", "the buffer protocol",
                                        "__array__()", "__array_interface__"};
    dlb_buffer* src = NULL;
    int relabel = 0;
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
      PyObject* arr = st->host;
      if (arr != NULL) Py_INCREF(arr);
      else arr = PyObject_CallMethod(st->obj, "__array__", NULL);
      if (arr != NULL && dlbpy_buffer_of(arr, &src) != 0) {
        /* a dtype the buffer protocol cannot name: the elements' bytes */
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        if (type != NULL && !is_refusal(type)) {
          PyErr_Restore(type, value, trace);
        } else {
          Py_XDECREF(type);
          Py_XDECREF(value);
          Py_XDECREF(trace);
          src = element_bytes(st, arr);
          relabel = src != NULL;
        }
      }
      Py_XDECREF(arr); /* src, when made, holds what it reads */
    } else {
      src = interface_buffer(st->obj);
    }
    if (src == NULL) {
      if (note(st, names[step]) != 0) return -1;
      continue;
    }
    const int bad = copy_source(st, src, relabel, dst, size);
    dlb_buffer_release(src);
    if (!bad) return 0;
    if (note(st, names[step]) != 0) return -1;
  }
  st->failed = 1;
  return -1;
}

static void cure_free(void* ctx, void* storage) {
  (void)ctx;
  cure_storage* st = (cure_storage*)storage;
  Py_XDECREF(st->obj); /* GIL held: the buffer lives only inside dlbpy_cure */
  Py_XDECREF(st->method);
  Py_XDECREF(st->host);
  free(st);
}

/* Reads shape and dtype from obj into st->layout: DLB_OK, or the status
 * and its reason in `why` (DLB_ERR_UNSUPPORTED_LAYOUT: no shape;
 * DLB_ERR_UNSUPPORTED_DTYPE: a dtype DLPack cannot describe). No exception
 * is left set. */
static dlb_status read_layout(PyObject* obj, cure_storage* st, char* why, size_t size) {
  PyObject* shape = PyObject_GetAttrString(obj, "shape");
  PyObject* tuple = shape != NULL ? PySequence_Tuple(shape) : NULL;
  Py_XDECREF(shape);
  if (tuple == NULL || PyTuple_Size(tuple) > DLB_MAX_NDIM) {
    Py_XDECREF(tuple);
    PyErr_Clear();
    snprintf(why, size, "it has no shape attribute of at most %d extents to copy by", DLB_MAX_NDIM);
    return DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  const int ndim = (int)PyTuple_Size(tuple);
  for (int i = 0; i < ndim; ++i) st->shape[i] = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
  Py_DECREF(tuple);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    snprintf(why, size, "its shape is not a tuple of ints");
    return DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  DLDataType dt;
  const dlb_status s = dtype_of(obj, &dt, why, size);
  if (s != DLB_OK) return s;
  memset(&st->layout, 0, sizeof st->layout);
  st->layout.device.device_type = kDLCPU;
  st->layout.ndim = ndim;
  st->layout.dtype = dt;
  st->layout.shape = ndim > 0 ? st->shape : NULL;
  st->padded = (unsigned)dt.bits * dt.lanes < 8;
  return DLB_OK;
}

/* Whether obj says it was deleted (obj.is_deleted() true; a
 * dlbridge.Tensor's buffer says it itself). */
static int says_deleted(PyObject* obj) {
  const dlbpy_state* state = dlbpy_state_get();
  if (state != NULL && state->tensor_type != NULL && PyObject_TypeCheck(obj, state->tensor_type)) {
    dlb_buffer* buffer = dlbpy_tensor_buffer(obj);
    return buffer != NULL && (dlb_buffer_flags(buffer) & DLB_BUFFER_DELETED) != 0;
  }
  PyObject* method = PyObject_GetAttrString(obj, "is_deleted");
  PyObject* answer = method != NULL && PyCallable_Check(method) ? PyObject_CallObject(method, NULL) : NULL;
  const int deleted = answer != NULL && PyObject_IsTrue(answer) == 1;
  Py_XDECREF(answer);
  Py_XDECREF(method);
  if (PyErr_Occurred()) PyErr_Clear();
  return deleted;
}

/* Raises `type` (NULL: dlbridge.Error with `status`) with the message
 * "STATUS: text" for a Python exception class, `text` for dlbridge.Error
 * (which adds the name itself), and `cause` (stolen) as its __cause__.
 * Returns NULL. */
static PyObject* raise_caused(PyObject* type, dlb_status status, const char* text, PyObject* cause) {
  if (type == NULL) dlbpy_raise_error(status, text);
  else PyErr_Format(type, "%s: %s", dlb_status_name(status), text);
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (v != NULL && cause != NULL) PyException_SetCause(v, cause); /* steals */
  else Py_XDECREF(cause);
  PyErr_Restore(t, v, tb);
  return NULL;
}

PyObject* dlbpy_cure(dlbpy_state* state, PyObject* obj, PyObject* method, int modern, const long long* device,
                     int policy, const char* called) {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  if (!is_refusal(type)) {
    PyErr_Restore(type, value, trace);
    return NULL;
  }
  if (trace != NULL && value != NULL) PyException_SetTraceback(value, trace);
  Py_XDECREF(trace);
  Py_DECREF(type);
  char refusal[600];
  {
    char what[420];
    describe_exception(value, what, sizeof what);
    PyObject* tname = PyObject_GetAttrString((PyObject*)Py_TYPE(obj), "__qualname__");
    const char* producer = tname != NULL ? PyUnicode_AsUTF8AndSize(tname, NULL) : NULL;
    if (PyErr_Occurred()) PyErr_Clear();
    snprintf(refusal, sizeof refusal, "%.80s.%s raised %s", producer != NULL ? producer : "object", called, what);
    Py_XDECREF(tname);
  }
  if (says_deleted(obj)) return raise_caused(NULL, DLB_ERR_DELETED, refusal, value);

  cure_storage* st = (cure_storage*)calloc(1, sizeof *st);
  if (st == NULL) {  /* GCOVR_EXCL_START: the C heap refusing two kilobytes, which no test arranges */
    Py_XDECREF(value);
    return PyErr_NoMemory();
  }  /* GCOVR_EXCL_STOP */
  char why[400];
  char text[2000];
  dlb_status s = read_layout(obj, st, why, sizeof why);
  if (s == DLB_ERR_UNSUPPORTED_LAYOUT && policy != DLB_COPY_NEVER) {
    /* No shape or dtype of its own (a pyarrow array): its __array__() says. */
    PyObject* host = PyObject_HasAttrString(obj, "__array__") ? PyObject_CallMethod(obj, "__array__", NULL) : NULL;
    if (host != NULL) {
      s = read_layout(host, st, why, sizeof why);
      st->host = host;
    } else if (PyErr_Occurred()) {
      char failed[420];
      PyObject *t2, *v2, *tb2;
      PyErr_Fetch(&t2, &v2, &tb2);
      PyErr_NormalizeException(&t2, &v2, &tb2);
      if (!is_refusal(t2)) {
        PyErr_Restore(t2, v2, tb2);
        cure_free(NULL, st);
        Py_XDECREF(value);
        return NULL;
      }
      describe_exception(v2, failed, sizeof failed);
      const size_t used = strlen(why);
      snprintf(why + used, sizeof why - used, ", and __array__() raised %.200s", failed);
      Py_XDECREF(t2);
      Py_XDECREF(v2);
      Py_XDECREF(tb2);
    }
  }
  if (s != DLB_OK) {
    /* No layout to copy by: the refusal, with that reason. */
    cure_free(NULL, st);
    snprintf(text, sizeof text, "%s; dlbridge cannot copy it to the host either: %s", refusal, why);
    return raise_caused(policy == DLB_COPY_NEVER ? PyExc_BufferError : NULL, s, text, value);
  }
  Py_INCREF(obj);
  Py_INCREF(method);
  st->obj = obj;
  st->method = method;
  st->modern = modern;

  dlb_backend_vtable vt;
  memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "refused export";
  vt.copy_to_host = cure_copy;
  vt.free_storage = cure_free;
  dlb_backend* backend = NULL;
  dlb_buffer* refused = NULL;
  s = dlb_backend_create(&vt, NULL, &backend);
  if (s == DLB_OK) {
    s = dlb_buffer_from_backend(backend, st, &st->layout, st->padded ? DLB_BUFFER_SUBBYTE_PADDED : 0, &refused);
    dlb_backend_release(backend);
  }
  if (s != DLB_OK) {
    cure_free(NULL, st);
    return raise_caused(NULL, s, dlb_last_error_message(), value);
  }
  dlb_export_options options;
  dlbpy_request_options(device, policy, &options);
  dlb_buffer* copy = NULL;
  s = dlb_buffer_resolve(refused, &options, &copy);
  if (s != DLB_OK) {
    if (PyErr_Occurred()) {
      /* not a refusal (MemoryError, KeyboardInterrupt in a step): as it is */
      dlb_buffer_release(refused);
      Py_XDECREF(value);
      return NULL;
    }
    if (st->failed) {
      snprintf(text, sizeof text, "%.600s; and no host copy could be made instead (%.1200s)", refusal, st->tried);
    } else {
      /* The planner's refusal (copy=False, a device a copy cannot reach),
       * after the producer's own. */
      snprintf(text, sizeof text, "%s; dlbridge made no host copy of it: %s", refusal, dlb_last_error_message());
    }
    const int planner = !st->failed;
    dlb_buffer_release(refused); /* frees st */
    PyObject* as = !planner ? NULL : s == DLB_ERR_INVALID_ARGUMENT ? PyExc_ValueError : PyExc_BufferError;
    return raise_caused(as, s, text, value);
  }
  dlb_buffer_release(refused);
  Py_XDECREF(value);
  return dlbpy_tensor_new_in(state, copy);
}

PyObject* dlbpy_refuse_without_dlpack(PyObject* obj) {
  /* An array-like (it has a dtype) whose dtype DLPack cannot describe (a
   * JAX PRNG key array): named as such, with its __array__'s refusal. */
  DLDataType dt;
  char why[200];
  const int arraylike = PyObject_HasAttrString(obj, "dtype") && PyObject_HasAttrString(obj, "shape");
  if (arraylike && dtype_of(obj, &dt, why, sizeof why) == DLB_ERR_UNSUPPORTED_DTYPE) {
    PyObject* tname = PyObject_GetAttrString((PyObject*)Py_TYPE(obj), "__qualname__");
    const char* producer = tname != NULL ? PyUnicode_AsUTF8AndSize(tname, NULL) : NULL;
    PyErr_Clear();
    PyObject* cause = NULL;
    char failed[420] = "";
    PyObject* host = PyObject_HasAttrString(obj, "__array__") ? PyObject_CallMethod(obj, "__array__", NULL) : NULL;
    Py_XDECREF(host);
    if (PyErr_Occurred()) {
      PyObject *t, *tb;
      PyErr_Fetch(&t, &cause, &tb);
      PyErr_NormalizeException(&t, &cause, &tb);
      if (!is_refusal(t)) {
        PyErr_Restore(t, cause, tb);
        Py_XDECREF(tname);
        return NULL;
      }
      char what[400];
      describe_exception(cause, what, sizeof what);
      snprintf(failed, sizeof failed, "; its __array__() raised %.380s", what);
      Py_XDECREF(t);
      Py_XDECREF(tb);
    }
    char text[900];
    snprintf(text, sizeof text, "%.80s has no __dlpack__, and %s%s", producer != NULL ? producer : "the object",
             why, failed);
    Py_XDECREF(tname);
    return raise_caused(NULL, DLB_ERR_UNSUPPORTED_DTYPE, text, cause);
  }
  PyErr_Clear();
  PyErr_Format(PyExc_AttributeError, "%R does not implement the DLPack protocol (it has no __dlpack__)",
               (PyObject*)Py_TYPE(obj));
  return NULL;
}
