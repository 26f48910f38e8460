/* The refusal rule of from_dlpack (see _consumer.c and _glue.h): what an
 * exception of a producer's __dlpack__ or __dlpack_device__ becomes, and
 * the producer state a DLPack tensor cannot carry. One rule: a consumer
 * receives the producer's values, or the call raises.
 *
 * An exception of the producer, whatever its class (the array API
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
 *     delete()): RefusalError with DLB_ERR_DELETED.
 *   - Anything else is a refusal to export, answered by the host-copy cure:
 *     a buffer of a small backend whose layout is the producer's shape and
 *     dtype (read from obj.shape and obj.dtype; from obj.__array__() when
 *     obj has neither, as a pyarrow array; from obj.__array_interface__,
 *     which carries both, when it has no __array__ either) and whose
 *     copy_to_host asks the producer for host memory in the order the
 *     array API standard and Python provide:
 *
 *       1. __dlpack__(max_version=..., dl_device=(kDLCPU, 0), copy=True)
 *          (1.x producers only),
 *       2. the buffer protocol,
 *       3. __array__(), read through the buffer protocol, or as the bytes
 *          of its elements when its dtype is one the buffer protocol
 *          cannot name (ml_dtypes' int4, float8_*, bfloat16),
 *       4. __array_interface__,
 *       5. when the consumer asked for a device (the host) and the producer
 *          refused it: __dlpack__() on the producer's own device, taken in
 *          and copied over by the library's backend for that device (an
 *          OpenCL or CUDA producer that cannot copy to the host itself),
 *
 *     and copies the first that works into the memory the library gives
 *     it. A dtype of fewer than 8 bits (int4, uint2, ...) is copied one
 *     element per byte, as ml_dtypes and JAX's host copies hold it, and
 *     the result is flagged DLB_BUFFER_SUBBYTE_PADDED.
 *
 * Byte order: memory a step gives in the other byte order (a big-endian
 * numpy array's __array__(), a '>' buffer format or typestr) is converted
 * to the machine's by the copy itself (DLB_COPY_FLAG_SWAP_BYTES), never
 * relabelled.
 *
 * A producer that contradicts itself (a step whose memory has another
 * shape or dtype than the producer said, an __array__() that is a subclass
 * of numpy.ndarray such as numpy.matrix, a typestr that names no dtype or
 * strides that are not whole elements) ends the cure: nothing is copied
 * from it, and RefusalError (DLB_ERR_MALFORMED) says what it contradicted.
 * A producer without a dtype of its own whose own declaration of its
 * element type (pyarrow's `type`, onnxruntime's `data_type()`, "tensor(
 * float8e4m3fn)") does not name the dtype its __array__() gave (onnxruntime
 * gives float8 bytes as uint8) is refused (DLB_ERR_UNSUPPORTED_DTYPE):
 * dlbridge cannot establish the dtype, and relabels nothing.
 *
 * dlb_buffer_resolve then decides, as it decides every export: with copy
 * allowed the result is a fresh host copy flagged DLB_BUFFER_COPIED
 * (Tensor.copied); with copy=False the planner refuses with
 * DLB_ERR_NOT_ZERO_COPY. Every refusal is a dlbridge.RefusalError (a
 * BufferError and a dlbridge.Error): DLB_ERR_UNSUPPORTED_DTYPE for a dtype
 * DLPack cannot describe (numpy StringDType, object arrays, JAX PRNG keys),
 * DLB_ERR_UNSUPPORTED_LAYOUT for an object without a shape,
 * DLB_ERR_BACKEND (the cure's copy failed) naming why each step failed.
 * Every one of these messages keeps the producer's exception class and
 * words, and has the producer's exception as __cause__.
 *
 * Producer state a DLPack tensor cannot carry (torch's conjugate and
 * negative bits, seen through is_conj() and is_neg() on any producer type
 * that has them): asked before the producer's export (its exchange table
 * or __dlpack__, which carry neither bit); under copy=False a refusal
 * naming the bit, otherwise the producer's own resolve_conj() /
 * resolve_neg(), a new tensor, imported as a copy.
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
  for (size_t n = strlen(out); n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '); --n) out[n - 1] = '\0';
  Py_XDECREF(text);
  Py_XDECREF(name);
}

/* The storage of a refused producer: what copy_to_host asks. */
typedef struct cure_storage {
  PyObject* obj;    /* owned */
  PyObject* method; /* owned: obj.__dlpack__ */
  PyObject* host;   /* owned or NULL: obj.__array__(), when the layout was read from it */
  int modern;       /* the producer takes the 1.x keywords */
  int asked_device; /* the refused request named a device (dl_device) */
  int padded;       /* a dtype of fewer than 8 bits, copied one element per byte */
  int failed;       /* set by cure_copy when no step gave memory */
  int lied;         /* set when a step contradicted the producer: `lie` says how */
  DLTensor layout;  /* shape and dtype the producer said it has */
  int64_t shape[DLB_MAX_NDIM];
  char tried[1200]; /* why each step failed, for the message */
  char lie[600];
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

/* "int32 of shape (2, 3)" into out. */
static void describe_layout(DLDataType dtype, int ndim, const int64_t* shape, char* out, size_t size) {
  char name[64];
  if (dlb_dtype_name(dtype, name, sizeof name) != DLB_OK) {
    snprintf(name, sizeof name, "(code %u, %u bits, %u lanes)", (unsigned)dtype.code, (unsigned)dtype.bits,
             (unsigned)dtype.lanes);
  }
  size_t used = (size_t)snprintf(out, size, "%s of shape (", name);
  for (int i = 0; i < ndim && used < size; ++i)
    used += (size_t)snprintf(out + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (used < size) snprintf(out + used, size - used, "%s)", ndim == 1 ? "," : "");
}

/* Copies `src` (a buffer of host memory) into dst when it has the shape and
 * dtype the producer said; `relabel`: src holds the bytes of the elements
 * under an unsigned dtype of their width, to be read as the producer's
 * dtype; `swapped`: its scalars are in the other byte order, which the
 * copy converts. 0; -1 with a Python exception set (the step failed: the
 * next is tried); -2, no exception, when src contradicts the producer's
 * shape or dtype (st->lie says how: the cure ends). */
static int copy_source(cure_storage* st, const char* step, dlb_buffer* src, int relabel, int swapped, void* dst,
                       uint64_t size) {
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
    char gave[200], said[200];
    describe_layout(t.dtype, t.ndim, t.shape, gave, sizeof gave);
    describe_layout(st->layout.dtype, st->layout.ndim, st->shape, said, sizeof said);
    snprintf(st->lie, sizeof st->lie, "%s gave another shape or dtype than the producer's own: %s, where it says %s",
             step, gave, said);
    return -2;
  }
  if (padded != st->padded) {
    PyErr_SetString(PyExc_BufferError, st->padded ? "it gave packed sub-byte elements, not one per byte"
                                                  : "it gave sub-byte elements padded to a byte each, not packed");
    return -1;
  }
  dlb_buffer* host = NULL;
  dlb_host_view view;
  view.struct_size = sizeof view;
  const dlb_status readable = dlb_buffer_host_view(src, DLB_HOST_VIEW_READ, &view);
  dlb_clear_last_error();
  if (readable != DLB_OK && readable != DLB_ERR_UNSUPPORTED_LAYOUT) {
    /* Memory the CPU cannot read as it is (a backend's, a device's), by the
     * library's host-view rule: the library copies it over first. A strided
     * layout of readable memory is read by the copy below. */
    s = dlb_buffer_to_host(src, &host);
    if (s == DLB_OK) s = dlb_buffer_dltensor(host, &t);
  }
  const uint32_t flags = (swapped ? DLB_COPY_FLAG_SWAP_BYTES : 0u) | (st->padded ? DLB_COPY_FLAG_SUBBYTE_PADDED : 0u);
  if (s == DLB_OK) s = dlb_copy_to_contiguous_flags(&t, dst, size, flags);
  dlbpy_buffer_release(host);
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

/* Whether an array's dtype says its elements are in the other byte order
 * (numpy's dtype.isnative false, as for a '>i8' array here): 1, else 0. No
 * exception is left set. */
static int swapped_order(PyObject* arr) {
  PyObject* dtype = PyObject_GetAttrString(arr, "dtype");
  PyObject* native = dtype != NULL ? PyObject_GetAttrString(dtype, "isnative") : NULL;
  const int swapped = native != NULL && PyObject_IsTrue(native) == 0;
  Py_XDECREF(native);
  Py_XDECREF(dtype);
  PyErr_Clear();
  return swapped;
}

/* 1 with the class's name in `name` when `arr` is an instance of a strict
 * subclass of numpy.ndarray (numpy.matrix, a masked array): what __array__
 * must not return, since such a class may stand for other values than its
 * memory holds. No exception is left set. */
static int ndarray_subclass(PyObject* arr, char* name, size_t size) {
  PyObject* mro = PyObject_GetAttrString((PyObject*)Py_TYPE(arr), "__mro__");
  int found = 0;
  for (Py_ssize_t i = 1; !found && mro != NULL && PyTuple_Check(mro) && i < PyTuple_Size(mro); ++i) {
    PyObject* base = PyTuple_GetItem(mro, i);
    PyObject* module = PyObject_GetAttrString(base, "__module__");
    PyObject* qual = PyObject_GetAttrString(base, "__qualname__");
    found = module != NULL && qual != NULL && PyUnicode_Check(module) && PyUnicode_Check(qual) &&
            PyUnicode_CompareWithASCIIString(module, "numpy") == 0 &&
            PyUnicode_CompareWithASCIIString(qual, "ndarray") == 0;
    Py_XDECREF(module);
    Py_XDECREF(qual);
    PyErr_Clear();
  }
  Py_XDECREF(mro);
  PyErr_Clear();
  if (found) {
    PyObject* cname = class_name((PyObject*)Py_TYPE(arr));
    const char* text = cname != NULL ? PyUnicode_AsUTF8AndSize(cname, NULL) : NULL;
    snprintf(name, size, "%.100s", text != NULL ? text : "a subclass");
    Py_XDECREF(cname);
    PyErr_Clear();
  }
  return found;
}

/* The bytes of an array's elements as a buffer, for a dtype the buffer
 * protocol cannot name (ml_dtypes' int4, float8_*, bfloat16) or a byte
 * order it refuses: arr.view() as the unsigned integer of the element's
 * width, when arr's dtype names the producer's dtype and the element is
 * that wide (one byte for a sub-byte dtype); *swapped says whether its
 * elements are in the other byte order. NULL with an exception set. */
static dlb_buffer* element_bytes(cure_storage* st, PyObject* arr, int* swapped) {
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
  *swapped = swapped_order(arr);
  char as[16];
  snprintf(as, sizeof as, "uint%u", width);
  PyObject* view = PyObject_CallMethod(arr, "view", "s", as);
  if (view == NULL) return NULL;
  dlb_buffer* buffer = NULL;
  const int bad = dlbpy_buffer_of(view, &buffer); /* the buffer keeps the view alive */
  Py_DECREF(view);
  return bad ? NULL : buffer;
}

/* A parsed version 3 __array_interface__. */
typedef struct interface {
  PyObject* face;  /* owned: the dict, which keeps `data` alive while it lives */
  void* address;
  int readonly;
  int swapped;     /* typestr in the other byte order */
  int ndim;
  int strided;
  DLDataType dtype;
  int64_t shape[DLB_MAX_NDIM];
  int64_t strides[DLB_MAX_NDIM]; /* in elements */
} interface;

/* Reads obj.__array_interface__ into `f` (f->face owned by the caller on
 * success): 0; -1 with BufferError naming what the dict does not say
 * right, or the attribute's own exception. */
static int read_interface(PyObject* obj, interface* f) {
  memset(f, 0, sizeof *f);
  PyObject* face = PyObject_GetAttrString(obj, "__array_interface__");
  if (face == NULL) return -1;
  PyObject* data = PyDict_Check(face) ? PyDict_GetItemString(face, "data") : NULL;
  PyObject* shape = PyDict_Check(face) ? PyDict_GetItemString(face, "shape") : NULL;
  PyObject* typestr = PyDict_Check(face) ? PyDict_GetItemString(face, "typestr") : NULL;
  PyObject* strides = PyDict_Check(face) ? PyDict_GetItemString(face, "strides") : NULL;
  const char* ts = typestr != NULL && PyUnicode_Check(typestr) ? PyUnicode_AsUTF8AndSize(typestr, NULL) : NULL;
  if (data == NULL || !PyTuple_Check(data) || PyTuple_Size(data) != 2 || shape == NULL || !PyTuple_Check(shape) ||
      ts == NULL || PyTuple_Size(shape) > DLB_MAX_NDIM) {
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError, "not a version 3 __array_interface__ with a data tuple");
    Py_DECREF(face);
    return -1;
  }
  /* typestr: a byte order ('<', '>', '|', '='), a kind and a byte count,
   * nothing else. */
  const char order = ts[0];
  char* end = NULL;
  const long bytes = strlen(ts) >= 3 ? strtol(ts + 2, &end, 10) : 0;
  f->dtype.lanes = 1;
  f->dtype.bits = (uint8_t)(bytes * 8);
  int known = end != NULL && *end == '\0' && bytes > 0 && bytes <= 16 && ts[2] >= '0' && ts[2] <= '9' &&
              (order == '<' || order == '>' || order == '|' || order == '=');
  switch (known ? ts[1] : 0) {
    case 'b': f->dtype.code = kDLBool; known = bytes == 1; break;
    case 'i': f->dtype.code = kDLInt; break;
    case 'u': f->dtype.code = kDLUInt; break;
    case 'f': f->dtype.code = kDLFloat; break;
    case 'c': f->dtype.code = kDLComplex; break;
    default: known = 0;
  }
  if (known && dlb_dtype_check(f->dtype) != DLB_OK) known = 0;
  dlb_clear_last_error();
  if (!known) {
    PyErr_Format(PyExc_BufferError, "typestr '%.40s' names no DLPack dtype", ts);
    Py_DECREF(face);
    return -1;
  }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  f->swapped = order == '<' && bytes > 1;
#else
  f->swapped = order == '>' && bytes > 1;
#endif
  f->ndim = (int)PyTuple_Size(shape);
  f->strided = strides != NULL && strides != Py_None;
  if (f->strided && (!PyTuple_Check(strides) || PyTuple_Size(strides) != f->ndim)) {
    PyErr_Format(PyExc_BufferError, "its strides are not a tuple of %d ints", f->ndim);
    Py_DECREF(face);
    return -1;
  }
  for (int i = 0; i < f->ndim; ++i) {
    f->shape[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
    if (!f->strided) continue;
    const long long step = PyLong_AsLongLong(PyTuple_GetItem(strides, i));
    if (step % bytes != 0 && !PyErr_Occurred()) {
      PyErr_Format(PyExc_BufferError, "its strides[%d] is %lld bytes, not a whole number of %ld-byte elements", i,
                   step, bytes);
      Py_DECREF(face);
      return -1;
    }
    f->strides[i] = step / bytes;
  }
  f->address = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
  f->readonly = PyObject_IsTrue(PyTuple_GetItem(data, 1)) > 0;
  if (PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_SetString(PyExc_BufferError, "its shape, strides or data address are not ints");
    Py_DECREF(face);
    return -1;
  }
  f->face = face;
  return 0;
}

/* __array_interface__ (version 3) as a borrowed view of host memory, valid
 * while `obj` lives; *swapped set for a typestr in the other byte order.
 * NULL with an exception set. */
static dlb_buffer* interface_buffer(PyObject* obj, int* swapped) {
  interface f;
  if (read_interface(obj, &f) != 0) return NULL;
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = f.address;
  t.device.device_type = kDLCPU;
  t.ndim = f.ndim;
  t.dtype = f.dtype;
  t.shape = f.ndim > 0 ? f.shape : NULL;
  t.strides = f.strided && f.ndim > 0 ? f.strides : NULL;
  dlb_buffer* buffer = NULL;
  const dlb_status s = dlb_buffer_wrap(&t, f.readonly ? DLB_BUFFER_READ_ONLY : 0, NULL, NULL, &buffer);
  Py_DECREF(f.face);
  if (s != DLB_OK) return dlbpy_raise_status(s), (dlb_buffer*)NULL;
  *swapped = f.swapped;
  return buffer;
}

/* The backend's copy_to_host: the steps above, the first that works. When
 * none does, st->failed is set and no exception is left, unless a step
 * raised one that is not a refusal (left set); when one contradicts the
 * producer, st->lied is set too, and no later step is asked. */
static int32_t cure_copy(void* ctx, void* storage, void* dst, uint64_t size) {
  (void)ctx;
  cure_storage* st = (cure_storage*)storage;
  const dlbpy_state* state = dlbpy_state_get();
  if (state == NULL) return -1;
  for (int step = 0; step < 5; ++step) {
    static const char* const names[] = {"__dlpack__(dl_device=(1, 0), copy=True)", "the buffer protocol",
                                        "__array__()", "__array_interface__", "__dlpack__() on its own device"};
    dlb_buffer* src = NULL;
    int relabel = 0;
    int swapped = 0;
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
      if (dlbpy_buffer_of_any_order(st->obj, &src, &swapped) != 0) src = NULL;
    } else if (step == 2) {
      PyObject* arr = st->host;
      if (arr != NULL) Py_INCREF(arr);
      else arr = PyObject_CallMethod(st->obj, "__array__", NULL);
      char subclass[120];
      if (arr != NULL && ndarray_subclass(arr, subclass, sizeof subclass)) {
        snprintf(st->lie, sizeof st->lie, "__array__() gave a %s, a subclass of numpy.ndarray, not an ndarray",
                 subclass);
        Py_DECREF(arr);
        st->lied = 1;
        break;
      }
      if (arr != NULL && dlbpy_buffer_of_any_order(arr, &src, &swapped) != 0) {
        /* a dtype the buffer protocol cannot name: the elements' bytes */
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        if (type != NULL && !is_refusal(type)) {
          PyErr_Restore(type, value, trace);
        } else {
          Py_XDECREF(type);
          Py_XDECREF(value);
          Py_XDECREF(trace);
          src = element_bytes(st, arr, &swapped);
          relabel = src != NULL;
        }
      }
      Py_XDECREF(arr); /* src, when made, holds what it reads */
    } else if (step == 3) {
      src = interface_buffer(st->obj, &swapped);
    } else {
      if (!st->asked_device) continue;
      PyObject* kwargs = st->modern ? Py_BuildValue("{sO}", "max_version", state->max_version) : PyDict_New();
      PyObject* empty = kwargs != NULL ? PyTuple_New(0) : NULL;
      src = capsule_buffer(empty != NULL ? PyObject_Call(st->method, empty, kwargs) : NULL);
      Py_XDECREF(empty);
      Py_XDECREF(kwargs);
    }
    if (src == NULL) {
      if (note(st, names[step]) != 0) return -1;
      continue;
    }
    const int bad = copy_source(st, names[step], src, relabel, swapped, dst, size);
    dlbpy_buffer_release(src);
    if (bad == 0) return 0;
    if (bad == -2) {
      st->lied = 1;
      break;
    }
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

/* Sets st->layout from a shape and dtype. */
static void set_layout(cure_storage* st, int ndim, const int64_t* shape, DLDataType dt) {
  memset(&st->layout, 0, sizeof st->layout);
  for (int i = 0; i < ndim; ++i) st->shape[i] = shape[i];
  st->layout.device.device_type = kDLCPU;
  st->layout.ndim = ndim;
  st->layout.dtype = dt;
  st->layout.shape = ndim > 0 ? st->shape : NULL;
  st->padded = (unsigned)dt.bits * dt.lanes < 8;
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
  int64_t dims[DLB_MAX_NDIM];
  for (int i = 0; i < ndim; ++i) dims[i] = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
  Py_DECREF(tuple);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    snprintf(why, size, "its shape is not a tuple of ints");
    return DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  DLDataType dt;
  const dlb_status s = dtype_of(obj, &dt, why, size);
  if (s != DLB_OK) return s;
  set_layout(st, ndim, dims, dt);
  return DLB_OK;
}

/* The layout of an object that carries it in its __array_interface__ (its
 * shape and typestr; the object itself is not asked for a shape): DLB_OK,
 * or DLB_ERR_UNSUPPORTED_LAYOUT with the reason in `why`. An exception that
 * is not a refusal is left set. */
static dlb_status interface_layout(PyObject* obj, cure_storage* st, char* why, size_t size) {
  interface f;
  if (read_interface(obj, &f) != 0) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyErr_NormalizeException(&type, &value, &trace);
    if (type != NULL && !is_refusal(type)) {
      PyErr_Restore(type, value, trace);
      return DLB_ERR_UNSUPPORTED_LAYOUT;
    }
    char failed[300];
    describe_exception(value, failed, sizeof failed);
    snprintf(why, size, "it has no shape attribute, and its __array_interface__ says no layout (%s)", failed);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
    return DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  set_layout(st, f.ndim, f.shape, f.dtype);
  Py_DECREF(f.face);
  return DLB_OK;
}

/* For a producer without a dtype of its own, whose layout came from its
 * __array__(): what it declares of its element type itself (its `type`
 * attribute, as pyarrow's arrays; else its data_type(), as onnxruntime's
 * OrtValue, "tensor(float8e4m3fn)"), the text inside parentheses where
 * there are some, must name the dtype __array__() gave; a producer that
 * declares nothing leaves __array__()'s word standing. DLB_OK, or
 * DLB_ERR_UNSUPPORTED_DTYPE with the reason in `why` (dlbridge cannot
 * establish the dtype: it refuses rather than relabel). An exception that
 * is not a refusal is left set. */
static dlb_status check_declared(PyObject* obj, const cure_storage* st, char* why, size_t size) {
  PyObject* text = NULL;
  const char* where = "type";
  PyObject* type = PyObject_GetAttrString(obj, "type");
  if (type != NULL && !PyCallable_Check(type)) text = PyObject_Str(type);
  Py_XDECREF(type);
  PyErr_Clear();
  if (text == NULL) {
    where = "data_type()";
    PyObject* method = PyObject_GetAttrString(obj, "data_type");
    PyObject* answer = method != NULL && PyCallable_Check(method) ? PyObject_CallObject(method, NULL) : NULL;
    if (answer != NULL) text = PyObject_Str(answer);
    Py_XDECREF(answer);
    Py_XDECREF(method);
    if (PyErr_Occurred()) {
      if (!dlbpy_exception_is_refusal()) {
        Py_XDECREF(text);
        return DLB_ERR_UNSUPPORTED_DTYPE;
      }
      PyErr_Clear();
    }
  }
  if (text == NULL) return DLB_OK;
  const char* full = PyUnicode_AsUTF8AndSize(text, NULL);
  char name[80];
  snprintf(name, sizeof name, "%s", full != NULL ? full : "");
  PyErr_Clear();
  char* open = strchr(name, '(');
  char* close = strrchr(name, ')');
  const char* inner = name;
  if (open != NULL && close != NULL && close > open && close[1] == '\0') {
    *close = '\0';
    inner = open + 1;
    /* ONNX's element type names ("tensor(float)") where they are not
     * dlbridge's: float is 32 bits there, and float8 kinds have no '_'. */
    static const char* const onnx[][2] = {
        {"float", "float32"},           {"double", "float64"},
        {"float8e4m3fn", "float8_e4m3fn"}, {"float8e4m3fnuz", "float8_e4m3fnuz"},
        {"float8e5m2", "float8_e5m2"},   {"float8e5m2fnuz", "float8_e5m2fnuz"},
    };
    if (strncmp(name, "tensor(", 7) == 0)
      for (size_t i = 0; i < sizeof onnx / sizeof onnx[0]; ++i)
        if (strcmp(inner, onnx[i][0]) == 0) inner = onnx[i][1];
  }
  char gave[64];
  if (dlb_dtype_name(st->layout.dtype, gave, sizeof gave) != DLB_OK) snprintf(gave, sizeof gave, "(unnamed)");
  DLDataType declared;
  dlb_status s = dlb_dtype_from_name(inner, &declared);
  dlb_clear_last_error();
  if (s != DLB_OK) {
    snprintf(why, size,
             "its %s is '%.60s', which names no dtype dlbridge knows, while its __array__() gave %s: dlbridge "
             "cannot establish the dtype and does not relabel it",
             where, full != NULL ? full : "", gave);
  } else if (declared.code != st->layout.dtype.code || declared.bits != st->layout.dtype.bits ||
             declared.lanes != st->layout.dtype.lanes) {
    char said[64];
    if (dlb_dtype_name(declared, said, sizeof said) != DLB_OK) snprintf(said, sizeof said, "(unnamed)");
    snprintf(why, size, "its %s is '%.60s' (%s), but its __array__() gave %s: dlbridge does not relabel it", where,
             full != NULL ? full : "", said, gave);
    s = DLB_ERR_UNSUPPORTED_DTYPE;
  }
  Py_DECREF(text);
  return s == DLB_OK ? DLB_OK : DLB_ERR_UNSUPPORTED_DTYPE;
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

PyObject* dlbpy_raise_refusal(dlb_status status, const char* text) {
  const dlbpy_state* state = dlbpy_state_get();
  if (status == DLB_ERR_INVALID_ARGUMENT || state == NULL || state->refusal_type == NULL) {
    PyErr_Format(status == DLB_ERR_INVALID_ARGUMENT ? PyExc_ValueError : PyExc_BufferError, "%s: %s",
                 dlb_status_name(status), text);
    return NULL;
  }
  PyObject* message = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
  PyObject* args = message != NULL ? Py_BuildValue("(iN)", (int)status, message) : NULL;
  if (args == NULL) return NULL;
  PyErr_SetObject(state->refusal_type, args);
  Py_DECREF(args);
  return NULL;
}

PyObject* dlbpy_as_refusal(dlbpy_state* state) {
  if (state->error_type == NULL || state->refusal_type == NULL || PyErr_Occurred() != state->error_type) return NULL;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  PyObject* status = value != NULL ? PyObject_GetAttrString(value, "status") : NULL;
  PyObject* message = value != NULL ? PyObject_GetAttrString(value, "message") : NULL;
  PyObject* refusal = status != NULL && message != NULL
                          ? PyObject_CallFunctionObjArgs(state->refusal_type, status, message, NULL)
                          : NULL;
  Py_XDECREF(status);
  Py_XDECREF(message);
  if (refusal == NULL) { /* left as it was */
    PyErr_Clear();
    PyErr_Restore(type, value, trace);
    return NULL;
  }
  PyObject* cause = PyException_GetCause(value);
  if (cause != NULL) PyException_SetCause(refusal, cause); /* steals */
  PyObject* context = PyException_GetContext(value);
  if (context != NULL) PyException_SetContext(refusal, context); /* steals */
  if (trace != NULL) PyException_SetTraceback(refusal, trace);
  Py_DECREF(value);
  Py_XDECREF(type);
  Py_INCREF(state->refusal_type);
  PyErr_Restore(state->refusal_type, refusal, trace);
  return NULL;
}

/* Raises RefusalError (`type` NULL; ValueError when `type` is ValueError)
 * with `status` and `text`, and `cause` (stolen) as its __cause__.
 * Returns NULL. */
static PyObject* raise_caused(PyObject* type, dlb_status status, const char* text, PyObject* cause) {
  dlbpy_raise_refusal(type == PyExc_ValueError ? DLB_ERR_INVALID_ARGUMENT : status, text);
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
  char why[600];
  char text[2000];
  dlb_status s = read_layout(obj, st, why, sizeof why);
  if (s == DLB_ERR_UNSUPPORTED_LAYOUT && policy != DLB_COPY_NEVER && PyObject_HasAttrString(obj, "__array__")) {
    /* No shape or dtype of its own (a pyarrow array): its __array__() says,
     * checked against what it declares of its element type. */
    PyObject* host = PyObject_CallMethod(obj, "__array__", NULL);
    char subclass[120];
    if (host != NULL && ndarray_subclass(host, subclass, sizeof subclass)) {
      snprintf(why, sizeof why, "it contradicts itself: __array__() gave a %s, a subclass of numpy.ndarray, not an "
               "ndarray", subclass);
      Py_DECREF(host);
      s = DLB_ERR_MALFORMED;
    } else if (host != NULL) {
      s = read_layout(host, st, why, sizeof why);
      st->host = host;
      if (s == DLB_OK) s = check_declared(obj, st, why, sizeof why);
    } else {
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
  } else if (s == DLB_ERR_UNSUPPORTED_LAYOUT && policy != DLB_COPY_NEVER &&
             PyObject_HasAttrString(obj, "__array_interface__")) {
    /* Neither, nor an __array__(): the interface carries shape and dtype. */
    s = interface_layout(obj, st, why, sizeof why);
  }
  if (PyErr_Occurred()) { /* not a refusal: as it is */
    cure_free(NULL, st);
    Py_XDECREF(value);
    return NULL;
  }
  if (s != DLB_OK) {
    /* No layout to copy by: the refusal, with that reason. */
    cure_free(NULL, st);
    snprintf(text, sizeof text, "%s; dlbridge cannot copy it to the host either: %s", refusal, why);
    return raise_caused(NULL, s, text, value);
  }
  Py_INCREF(obj);
  Py_INCREF(method);
  st->obj = obj;
  st->method = method;
  st->modern = modern;
  st->asked_device = device != NULL;

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
      dlbpy_buffer_release(refused);
      Py_XDECREF(value);
      return NULL;
    }
    if (st->lied) {
      snprintf(text, sizeof text, "%.600s; and the producer contradicts itself, so nothing was copied from it: %.600s",
               refusal, st->lie);
      s = DLB_ERR_MALFORMED;
    } else if (st->failed) {
      snprintf(text, sizeof text, "%.600s; and no host copy could be made instead (%.1200s)", refusal, st->tried);
    } else {
      /* The planner's refusal (copy=False, a device a copy cannot reach),
       * after the producer's own. */
      snprintf(text, sizeof text, "%s; dlbridge made no host copy of it: %s", refusal, dlb_last_error_message());
    }
    const int planner = !st->failed;
    dlbpy_buffer_release(refused); /* frees st */
    return raise_caused(planner && s == DLB_ERR_INVALID_ARGUMENT ? PyExc_ValueError : NULL, s, text, value);
  }
  dlbpy_buffer_release(refused);
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

/* ------------------------------------------------------------------------ */
/* Producer state a DLPack tensor cannot carry                              */
/* ------------------------------------------------------------------------ */

static const char* const kBitName[2] = {"conjugate", "negative"};

int dlbpy_set_bits(dlbpy_state* state, PyObject* obj, unsigned type_bits) {
  dlbpy_vectorcall_method_fn call = dlbpy_vectorcall_method();
  int set = 0;
  for (int i = 0; i < 2; ++i) {
    if ((type_bits & (1u << i)) == 0) continue;
    PyObject* name = state->cache.bit_query[i];
    PyObject* answer = call != NULL ? call(name, &obj, 1, NULL) : PyObject_CallMethodObjArgs(obj, name, NULL);
    const int truth = answer == Py_True ? 1 : answer == Py_False ? 0 : answer != NULL ? PyObject_IsTrue(answer) : -1;
    Py_XDECREF(answer);
    if (truth < 0) {
      /* The query itself failed: the values cannot be established. */
      PyObject *t, *v, *tb;
      PyErr_Fetch(&t, &v, &tb);
      PyErr_NormalizeException(&t, &v, &tb);
      if (t != NULL && !is_refusal(t)) {
        PyErr_Restore(t, v, tb);
        return -1;
      }
      char what[420];
      char text[600];
      describe_exception(v, what, sizeof what);
      PyObject* producer = class_name((PyObject*)Py_TYPE(obj));
      snprintf(text, sizeof text, "%s.%s() raised %s: dlbridge cannot tell whether its %s bit is set",
               producer != NULL ? PyUnicode_AsUTF8AndSize(producer, NULL) : "object",
               PyUnicode_AsUTF8AndSize(name, NULL), what, kBitName[i]);
      Py_XDECREF(producer);
      Py_XDECREF(t);
      Py_XDECREF(tb);
      raise_caused(NULL, DLB_ERR_BACKEND, text, v);
      return -1;
    }
    if (truth) set |= 1 << i;
  }
  return set;
}

PyObject* dlbpy_resolve_bits(dlbpy_state* state, PyObject* obj, unsigned set, const long long* device, int policy) {
  PyObject* pname = class_name((PyObject*)Py_TYPE(obj));
  const char* producer = pname != NULL ? PyUnicode_AsUTF8AndSize(pname, NULL) : NULL;
  char bits[200] = "";
  for (int i = 0; i < 2; ++i) {
    if ((set & (1u << i)) == 0) continue;
    const size_t used = strlen(bits);
    snprintf(bits + used, sizeof bits - used, "%sits %s bit (%s() is True)", used ? " and " : "", kBitName[i],
             PyUnicode_AsUTF8AndSize(state->cache.bit_query[i], NULL));
  }
  char text[800];
  PyObject* result = NULL;
  if (policy == DLB_COPY_NEVER) {
    snprintf(text, sizeof text,
             "%.100s has %s set: state a DLPack tensor cannot carry, so its memory holds other values than the "
             "tensor; copy=False forbids the copy that resolves it (%s)",
             producer != NULL ? producer : "the tensor", bits,
             (set & DLBPY_BIT_CONJ) != 0 ? "resolve_conj()" : "resolve_neg()");
    Py_XDECREF(pname);
    return dlbpy_raise_refusal(DLB_ERR_NOT_ZERO_COPY, text);
  }
  /* The producer's own resolution: a new tensor holding the values. */
  PyObject* resolved = obj;
  Py_INCREF(resolved);
  for (int i = 0; i < 2 && resolved != NULL; ++i) {
    if ((set & (1u << i)) == 0) continue;
    PyObject* next = PyObject_CallMethodObjArgs(resolved, state->cache.bit_resolve[i], NULL);
    Py_DECREF(resolved);
    resolved = next;
    if (resolved == NULL) {
      PyObject *t, *v, *tb;
      PyErr_Fetch(&t, &v, &tb);
      PyErr_NormalizeException(&t, &v, &tb);
      if (t != NULL && !is_refusal(t)) {
        PyErr_Restore(t, v, tb);
        Py_XDECREF(pname);
        return NULL;
      }
      char what[420];
      describe_exception(v, what, sizeof what);
      snprintf(text, sizeof text, "%.100s has %s set, and its %s() raised %s", producer != NULL ? producer : "the tensor",
               bits, PyUnicode_AsUTF8AndSize(state->cache.bit_resolve[i], NULL), what);
      Py_XDECREF(t);
      Py_XDECREF(tb);
      Py_XDECREF(pname);
      return raise_caused(NULL, DLB_ERR_BACKEND, text, v);
    }
  }
  const int left = dlbpy_set_bits(state, resolved, dlbpy_exchange_type_bits(state, (PyObject*)Py_TYPE(resolved)));
  if (left != 0 || resolved == obj) {
    if (left >= 0) {
      snprintf(text, sizeof text, "%.100s has %s set, and its resolve_conj() / resolve_neg() gave %s",
               producer != NULL ? producer : "the tensor", bits,
               resolved == obj ? "the same tensor back" : "a tensor with a bit still set");
      dlbpy_raise_refusal(DLB_ERR_BACKEND, text);
    }
  } else {
    result = dlbpy_from_dlpack_fresh(state, resolved, device);
  }
  Py_DECREF(resolved);
  Py_XDECREF(pname);
  return result;
}
