/* Pickling a dlbridge.Tensor: Tensor.__reduce_ex__ and its rebuild, the one
 * place of the extension that decides how a tensor goes into a pickle.
 *
 *   protocol < 5   the elements copied into the pickle as bytes
 *                  (tensor_payload / tensor_from_payload, _share.c);
 *   protocol >= 5  a pickle.PickleBuffer over host memory (PEP 574), with a
 *                  small in-band header. A compact row-major CPU tensor
 *                  hands out its own memory; any other layout or device is
 *                  copied once to compact host memory (dlb_buffer_to_host).
 *                  A pickler with a buffer_callback (Ray, Dask) takes the
 *                  buffer out of band; without one, pickle writes it in-band.
 *
 * The header is (version, code, bits, lanes, shape, strides, read_only),
 * strides in elements: version 1; a tensor of padded sub-byte elements
 * (DLB_BUFFER_SUBBYTE_PADDED, one byte each: the int4 the cure makes from
 * JAX) adds an eighth field, padded (True), as version 2, which a reader
 * of version 1 refuses rather than misread. tensor_from_pickle(header,
 * buffer) lays a tensor over the buffer it is given, without copying, and
 * holds the buffer's export (so its owner) until the tensor and its
 * exports are gone. The header is checked by the library
 * (dlb_layout_describe_flags: dtype, extents, overflow, and the byte size
 * rule of padded elements) and then against the buffer: its size must be
 * the layout's compact size, and every element the strides reach must lie
 * inside it. A read-only buffer (Ray's object store) or a read-only header
 * gives a read-only tensor.
 *
 * Compiled with _buffer.c against the 3.11 limited API (buffer protocol:
 * PyObject_GetBuffer, Py_bf_getbuffer); see there for CPython 3.10.
 */
#include "_glue.h"

#include <stdio.h>
#include <stdlib.h>

#if PY_VERSION_HEX >= 0x030B0000 && (!defined(Py_LIMITED_API) || Py_LIMITED_API + 0 < 0x030B0000)
#error "_pickle.c is built against the CPython 3.11 limited API (-DPy_LIMITED_API=0x030B0000)"
#endif

#define PICKLE_VERSION 1        /* the header of every tensor but padded sub-byte ones */
#define PICKLE_VERSION_PADDED 2 /* with an eighth field: padded */
#define HEADER_FIELDS 7

/* ---- the memory handed out: a buffer exporter holding a dlb_buffer ------ */

typedef struct host_memory {
  PyObject_HEAD
  dlb_buffer* buffer; /* one reference, owned */
  void* data;
  Py_ssize_t len;
  int readonly;
} host_memory;

static int host_memory_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  host_memory* m = (host_memory*)self;
  return PyBuffer_FillInfo(view, self, m->data, m->len, m->readonly, flags);
}

static void host_memory_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  dlbpy_buffer_release(((host_memory*)self)->buffer);
  freefunc free_slot = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_slot(self);
  Py_DECREF(type);
}

static PyType_Slot host_memory_slots[] = {
    {Py_tp_dealloc, (void*)host_memory_dealloc},
    {Py_bf_getbuffer, (void*)host_memory_getbuffer},
    {Py_tp_doc, (void*)"The bytes of a pickled dlbridge.Tensor (keeps its memory alive)."},
    {0, NULL},
};

static PyType_Spec host_memory_spec = {
    "dlbridge._glue.PickledMemory", sizeof(host_memory), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE, host_memory_slots,
};

/* Made on first use, kept for the life of the process. */
static PyObject* host_memory_type = NULL;
static PyObject* pickle_buffer_type = NULL;

/* A pickle.PickleBuffer over `host`'s memory (taking over the caller's
 * reference on `host`, released on failure too). */
static PyObject* pickle_buffer_of(dlb_buffer* host, const DLTensor* t, int readonly) {
  if (host_memory_type == NULL) host_memory_type = PyType_FromSpec(&host_memory_spec);
  if (host_memory_type != NULL && pickle_buffer_type == NULL) { /* no import while an exception is set */
    PyObject* pickle = PyImport_ImportModule("pickle");
    if (pickle != NULL) pickle_buffer_type = PyObject_GetAttrString(pickle, "PickleBuffer");
    Py_XDECREF(pickle);
  }
  if (host_memory_type == NULL || pickle_buffer_type == NULL) {
    dlbpy_buffer_release(host);
    /* CPython 3.11's PyType_FromSpec can fail on an allocation without saying so */
    if (!PyErr_Occurred()) PyErr_NoMemory();
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)host_memory_type, Py_tp_alloc);
  host_memory* m = (host_memory*)alloc((PyTypeObject*)host_memory_type, 0);
  if (m == NULL) {
    dlbpy_buffer_release(host);
    return NULL;
  }
  m->buffer = host;
  m->data = t->data != NULL ? (char*)t->data + t->byte_offset : NULL;
  m->len = (Py_ssize_t)dlb_buffer_nbytes(host);
  m->readonly = readonly;
  PyObject* result = PyObject_CallFunctionObjArgs(pickle_buffer_type, (PyObject*)m, NULL);
  Py_DECREF(m);
  return result;
}

/* ---- Tensor.__reduce_ex__ ----------------------------------------------- */

static PyObject* int_tuple(int32_t n, const int64_t* values) {
  PyObject* tuple = PyTuple_New(n);
  for (int32_t i = 0; tuple != NULL && i < n; ++i) {
    PyObject* item = PyLong_FromLongLong((long long)values[i]);
    if (item == NULL || PyTuple_SetItem(tuple, i, item) != 0) Py_CLEAR(tuple);
  }
  return tuple;
}

static PyObject* reduce_out_of_band(PyObject* module, dlb_buffer* buffer) {
  const int read_only = (dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0;
  const uint64_t padded = dlb_buffer_flags(buffer) & DLB_BUFFER_SUBBYTE_PADDED;
  DLTensor t;
  dlb_layout_info layout;
  layout.struct_size = sizeof layout;
  dlb_status s = dlb_buffer_dltensor(buffer, &t);
  if (s == DLB_OK) s = dlb_layout_describe_flags(&t, padded, &layout);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  dlb_buffer* host = NULL;
  dlb_host_view view;
  view.struct_size = sizeof view;
  /* The library's one host-view rule: compact memory the CPU reads, not a
   * backend's, not deleted. */
  if (dlb_buffer_host_view(buffer, DLB_HOST_VIEW_READ, &view) == DLB_OK) {
    host = dlb_buffer_retain(buffer); /* its own memory, as it is */
  } else {
    dlb_clear_last_error();
    /* Device memory, other layouts: one compact host copy (refuses a
     * deleted buffer with DLB_ERR_DELETED). */
    Py_BEGIN_ALLOW_THREADS
    s = dlb_buffer_to_host(buffer, &host);
    Py_END_ALLOW_THREADS
    if (s == DLB_OK) s = dlb_buffer_dltensor(host, &t);
    if (s != DLB_OK) {
      dlbpy_buffer_release(host);
      return dlbpy_raise_status(s);
    }
  }
  int64_t strides[DLB_MAX_NDIM];
  s = t.strides != NULL ? DLB_OK : dlb_compact_strides(t.ndim, t.shape, strides);
  if (s != DLB_OK) {
    dlbpy_buffer_release(host);
    return dlbpy_raise_status(s);
  }
  PyObject* shape = int_tuple(t.ndim, t.shape);
  PyObject* stride_tuple = shape != NULL ? int_tuple(t.ndim, t.strides != NULL ? t.strides : strides) : NULL;
  PyObject* memory = stride_tuple != NULL ? pickle_buffer_of(host, &t, read_only) : NULL;
  if (stride_tuple == NULL) dlbpy_buffer_release(host); /* else pickle_buffer_of took it */
  PyObject* rebuild = memory != NULL ? PyObject_GetAttrString(module, "tensor_from_pickle") : NULL;
  PyObject* result = NULL;
  if (rebuild != NULL && padded)
    result = Py_BuildValue("(O((iiiiOOOO)O))", rebuild, PICKLE_VERSION_PADDED, (int)t.dtype.code, (int)t.dtype.bits,
                           (int)t.dtype.lanes, shape, stride_tuple, read_only ? Py_True : Py_False, Py_True, memory);
  else if (rebuild != NULL)
    result = Py_BuildValue("(O((iiiiOOO)O))", rebuild, PICKLE_VERSION, (int)t.dtype.code, (int)t.dtype.bits,
                           (int)t.dtype.lanes, shape, stride_tuple, read_only ? Py_True : Py_False, memory);
  Py_XDECREF(rebuild);
  Py_XDECREF(memory);
  Py_XDECREF(stride_tuple);
  Py_XDECREF(shape);
  return result;
}

PyObject* dlbpy_tensor_reduce_ex(PyObject* self, PyObject* protocol) {
  const long value = PyLong_AsLong(protocol);
  if (value == -1 && PyErr_Occurred()) return NULL;
  dlb_buffer* buffer = dlbpy_tensor_buffer(self);
  if (buffer == NULL) return NULL;
  PyObject* module = PyType_GetModule(Py_TYPE(self)); /* borrowed */
  if (module == NULL) return NULL;
  if (value >= 5) return reduce_out_of_band(module, buffer);
  /* Before protocol 5: the elements in the pickle's own bytes, as always. */
  PyObject* payload = dlbpy_tensor_payload(module, self);
  PyObject* rebuild = payload != NULL ? PyObject_GetAttrString(module, "tensor_from_payload") : NULL;
  PyObject* result = rebuild != NULL ? PyTuple_Pack(2, rebuild, payload) : NULL;
  Py_XDECREF(rebuild);
  Py_XDECREF(payload);
  return result;
}

const char dlbpy_tensor_reduce_ex_doc[] =
    "__reduce_ex__(protocol, /)\n--\n\n"
    "How pickle and copy take the tensor apart. Protocol 5 and later: the\n"
    "elements as a pickle.PickleBuffer (out of band for a pickler with a\n"
    "buffer_callback, such as Ray's and Dask's), over the tensor's own memory\n"
    "when it is compact row-major CPU memory, else over one compact host copy.\n"
    "Earlier protocols (and the copy module): the elements copied into bytes.\n"
    "multiprocessing shares the memory instead (dlbridge._share).";

/* ---- the rebuild ------------------------------------------------------- */

static void release_view(void* ctx) {
  Py_buffer* view = (Py_buffer*)ctx;
  if (!dlbpy_interpreter_alive()) return; /* interpreter gone: leak the export */
  PyGILState_STATE state = PyGILState_Ensure();
  PyBuffer_Release(view);
  PyGILState_Release(state);
  free(view);
}

static PyObject* fail(dlb_status status, const char* format, long long a, long long b) {
  char text[240];
  snprintf(text, sizeof text, format, a, b);
  return dlbpy_raise_error(status, text);
}

/* Extents or strides (`what`) from a header's tuple; -1 with dlbridge.Error set. */
static int read_extents(PyObject* tuple, const char* what, Py_ssize_t ndim, int64_t* out) {
  char text[160];
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    PyObject* item = PyTuple_GetItem(tuple, i);
    const long long value = PyLong_Check(item) ? PyLong_AsLongLong(item) : -1;
    if (!PyLong_Check(item) || (value == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      snprintf(text, sizeof text, "tensor_from_pickle: %s[%lld] is %s", what, (long long)i,
               PyLong_Check(item) ? "an int that does not fit in 64 bits" : "not an int");
      dlbpy_raise_error(PyLong_Check(item) ? DLB_ERR_OVERFLOW : DLB_ERR_MALFORMED, text);
      return -1;
    }
    out[i] = (int64_t)value;
  }
  return 0;
}

PyObject* dlbpy_tensor_from_pickle(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "tensor_from_pickle() takes a header and a buffer");
    return NULL;
  }
  PyObject* header = args[0];
  if (!PyTuple_Check(header) || PyTuple_Size(header) < 1)
    return dlbpy_raise_error(DLB_ERR_MALFORMED, "tensor_from_pickle: the header is not a tuple");
  PyObject* version = PyTuple_GetItem(header, 0);
  const long v = PyLong_Check(version) ? PyLong_AsLong(version) : -1;
  if (v == -1 && PyErr_Occurred()) PyErr_Clear();
  if (v != PICKLE_VERSION && v != PICKLE_VERSION_PADDED)
    return fail(DLB_ERR_VERSION, "tensor_from_pickle: a header of version %lld; this dlbridge reads versions %lld and 2",
                (long long)v, PICKLE_VERSION);
  const Py_ssize_t fields = v == PICKLE_VERSION ? HEADER_FIELDS : HEADER_FIELDS + 1;
  if (PyTuple_Size(header) != fields) {
    char text[160];
    snprintf(text, sizeof text, "tensor_from_pickle: a version %ld header has %lld fields, not %lld", v,
             (long long)fields, (long long)PyTuple_Size(header));
    return dlbpy_raise_error(DLB_ERR_MALFORMED, text);
  }
  long dt[3];
  for (int i = 0; i < 3; ++i) {
    PyObject* field = PyTuple_GetItem(header, 1 + i);
    dt[i] = PyLong_Check(field) ? PyLong_AsLong(field) : -1;
    if (dt[i] == -1 && PyErr_Occurred()) PyErr_Clear();
    if (dt[i] < 0 || dt[i] > (i == 2 ? 65535 : 255))
      return dlbpy_raise_error(DLB_ERR_UNSUPPORTED_DTYPE,
                               "tensor_from_pickle: a dtype field (code, bits, lanes) is out of range");
  }
  PyObject* shape_tuple = PyTuple_GetItem(header, 4);
  PyObject* strides_tuple = PyTuple_GetItem(header, 5);
  if (!PyTuple_Check(shape_tuple) || !PyTuple_Check(strides_tuple) ||
      PyTuple_Size(shape_tuple) != PyTuple_Size(strides_tuple))
    return dlbpy_raise_error(DLB_ERR_MALFORMED, "tensor_from_pickle: shape and strides are tuples of one length");
  const Py_ssize_t ndim = PyTuple_Size(shape_tuple);
  if (ndim > DLB_MAX_NDIM)
    return fail(DLB_ERR_INVALID_ARGUMENT, "tensor_from_pickle: %lld dimensions, more than %lld", (long long)ndim,
                DLB_MAX_NDIM);
  int64_t shape[DLB_MAX_NDIM];
  int64_t strides[DLB_MAX_NDIM];
  if (read_extents(shape_tuple, "shape", ndim, shape) != 0 || read_extents(strides_tuple, "strides", ndim, strides) != 0)
    return NULL;
  const int header_read_only = PyObject_IsTrue(PyTuple_GetItem(header, 6));
  if (header_read_only < 0) return NULL;
  const int padded = v == PICKLE_VERSION_PADDED ? PyObject_IsTrue(PyTuple_GetItem(header, 7)) : 0;
  if (padded < 0) return NULL;
  const uint64_t layout_flags = padded ? DLB_BUFFER_SUBBYTE_PADDED : 0;

  DLTensor t;
  t.data = NULL;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = (int32_t)ndim;
  t.dtype.code = (uint8_t)dt[0];
  t.dtype.bits = (uint8_t)dt[1];
  t.dtype.lanes = (uint16_t)dt[2];
  t.shape = ndim > 0 ? shape : NULL;
  t.strides = ndim > 0 ? strides : NULL;
  t.byte_offset = 0;
  dlb_layout_info layout;
  layout.struct_size = sizeof layout;
  /* dtype, extents, overflow, and the byte size of padded elements */
  dlb_status s = dlb_layout_describe_flags(&t, layout_flags, &layout);
  if (s != DLB_OK) return dlbpy_raise_status(s);

  Py_buffer* view = (Py_buffer*)calloc(1, sizeof *view);
  if (view == NULL) return PyErr_NoMemory();  /* GCOVR_EXCL_LINE: the C heap refusing 80 bytes, as above */
  if (PyObject_GetBuffer(args[1], view, PyBUF_C_CONTIGUOUS) != 0) {
    free(view);
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_BufferError)) return NULL;
    PyErr_Clear();
    return dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT,
                             "tensor_from_pickle: the data is not an object with a contiguous buffer");
  }
  const uint64_t len = (uint64_t)view->len;
  const uint64_t element_bytes = layout.element_bits / 8;
  const char* refusal = NULL;
  dlb_status status = DLB_ERR_MALFORMED;
  char text[240];
  if (layout.nbytes != len) {
    snprintf(text, sizeof text, "tensor_from_pickle: the buffer has %llu bytes, the header's shape and dtype need %llu",
             (unsigned long long)len, (unsigned long long)layout.nbytes);
    refusal = text;
  } else if (layout.numel > 0 && !layout.contiguous && layout.element_bits % 8 != 0) {
    refusal = "tensor_from_pickle: strides for a sub-byte dtype (only compact layouts have a byte size)";
    status = DLB_ERR_UNSUPPORTED_LAYOUT;
  } else if (layout.numel > 0 && !layout.contiguous &&
             (layout.min_offset < 0 || (uint64_t)layout.max_offset >= len / element_bytes)) {
    snprintf(text, sizeof text,
             "tensor_from_pickle: the strides reach elements %lld to %lld, outside the buffer's %llu elements",
             (long long)layout.min_offset, (long long)layout.max_offset,
             (unsigned long long)(len / element_bytes));
    refusal = text;
  }
  if (refusal != NULL) {
    PyBuffer_Release(view);
    free(view);
    return dlbpy_raise_error(status, refusal);
  }
  t.data = view->buf;
  const uint64_t flags = ((header_read_only || view->readonly) ? DLB_BUFFER_READ_ONLY : 0) | layout_flags;
  dlb_buffer* buffer = NULL;
  s = dlb_buffer_wrap(&t, flags, release_view, view, &buffer);
  if (s != DLB_OK) {
    PyBuffer_Release(view);
    free(view);
    return dlbpy_raise_status(s);
  }
  return dlbpy_tensor_new_in((dlbpy_state*)PyModule_GetState(module), buffer);
}

const char dlbpy_tensor_from_pickle_doc[] =
    "tensor_from_pickle(header, buffer, /) -> Tensor\n--\n\n"
    "The tensor Tensor.__reduce_ex__ (protocol 5) took apart, laid over `buffer`\n"
    "without a copy; the buffer stays exported until the tensor and its exports\n"
    "are gone. Read-only when the header or the buffer says so. dlbridge.Error\n"
    "for a header this version cannot read (DLB_ERR_VERSION), a buffer of the\n"
    "wrong size or strides reaching outside it (DLB_ERR_MALFORMED), and the\n"
    "statuses of dlb_layout_describe for the dtype and extents.";
