/* The Python buffer protocol (see _glue.h): from_buffer(), a zero-copy
 * tensor over any object that exports a buffer, and the buffer step of
 * from_dlpack's host-copy cure (_consumer.c).
 *
 * Py_buffer, PyObject_GetBuffer() and PyBuffer_Release() joined the limited
 * API in CPython 3.11. This file alone is compiled against the 3.11 limited
 * API (python/dlbridge/meson.build), with the declarations of <Python.h>
 * itself; the rest of the extension keeps to 3.10's. On CPython 3.10 the
 * same two functions exist in the interpreter under the same names and with
 * the same structure (public since 3.3, unchanged since), so the one binary
 * still loads and works there; what 3.10 lacks is only the promise of the
 * stable ABI for them, which 3.11 later gave for exactly this layout.
 */
#include "_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Against CPython 3.11 and later headers the file is built for the 3.11
 * limited API; against 3.10's (whose limited API lacks the buffer protocol)
 * with the full headers, calling only what 3.11's stable ABI kept as is. */
#if PY_VERSION_HEX >= 0x030B0000 && (!defined(Py_LIMITED_API) || Py_LIMITED_API + 0 < 0x030B0000)
#error "_buffer.c is built against the CPython 3.11 limited API (-DPy_LIMITED_API=0x030B0000)"
#endif

/* ------------------------------------------------------------------------ */

/* A struct-module format and item size as a DLPack dtype. The format names
 * the kind; the item size gives the bits (so '@' native sizes and '=' / '<'
 * standard sizes agree); the library says which pairs DLPack allows.
 * Big-endian formats ('>', '!'; this machine is little-endian) are refused
 * when `swapped` is NULL (a zero-copy view would show other values), else
 * accepted with *swapped set: a copy converts them. */
static int format_to_dtype(const char* format, Py_ssize_t itemsize, DLDataType* out, int* swapped) {
  const char* given = format != NULL ? format : "B";
  const char* f = given;
  char text[160];
  if (swapped != NULL) *swapped = 0;
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (*f == '>' || *f == '!') {
    if (swapped == NULL) {
      snprintf(text, sizeof text, "buffer format '%.40s' is big-endian; DLPack data is native-endian",
               given);
      dlbpy_raise_error(DLB_ERR_UNSUPPORTED_DTYPE, text);
      return -1;
    }
    *swapped = 1;
    ++f;
  }
  int complex = 0;
  if (f[0] == 'Z' && f[1] != '\0' && f[2] == '\0') {
    complex = 1;
    ++f;
  }
  uint8_t code = 0;
  int known = f[0] != '\0' && f[1] == '\0';
  if (known) {
    switch (*f) {
      case '?': code = kDLBool; break;
      case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': code = kDLInt; break;
      case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c': code = kDLUInt; break;
      case 'e': case 'f': case 'd': code = complex ? kDLComplex : kDLFloat; break;
      default: known = 0;
    }
  }
  if (complex && (code != kDLComplex || *f == 'e')) known = 0;
  if (!known) {
    snprintf(text, sizeof text, "buffer format '%.40s' has no DLPack dtype", given);
    dlbpy_raise_error(DLB_ERR_UNSUPPORTED_DTYPE, text);
    return -1;
  }
  if (itemsize <= 0 || itemsize > 16) {
    snprintf(text, sizeof text, "buffer item size %lld for format '%.40s'", (long long)itemsize,
             given);
    dlbpy_raise_error(DLB_ERR_UNSUPPORTED_DTYPE, text);
    return -1;
  }
  DLDataType dtype;
  dtype.code = code;
  dtype.bits = (uint8_t)(itemsize * 8);
  dtype.lanes = 1;
  const dlb_status s = dlb_dtype_check(dtype);
  if (s != DLB_OK) {
    dlbpy_raise_status(s);
    return -1;
  }
  *out = dtype;
  return 0;
}

/* Release callback of buffers made by from_buffer(): ends the buffer export
 * under the GIL (from any thread), then frees the view. */
static void release_view(void* ctx) {
  Py_buffer* view = (Py_buffer*)ctx;
  if (!dlbpy_interpreter_alive()) return; /* interpreter gone: leak the export */
  PyGILState_STATE state = PyGILState_Ensure();
  PyBuffer_Release(view);
  PyGILState_Release(state);
  free(view);
}

/* A compact host copy of a buffer whose strides are not whole elements
 * (dlb_copy_to_contiguous_flags with DLB_COPY_FLAG_BYTE_STRIDES), as a new
 * owned buffer in *out; its bytes in the source's byte order (the cure
 * swaps them as it copies on). 0, or -1 with dlbridge.Error set. */
static int byte_strided_copy(const Py_buffer* view, DLDataType dtype, int ndim, const int64_t* shape,
                             dlb_buffer** out) {
  int64_t byte_strides[DLB_MAX_NDIM];
  for (int i = 0; i < ndim; ++i) byte_strides[i] = view->strides[i];
  DLTensor src;
  src.data = view->buf;
  src.device.device_type = kDLCPU;
  src.device.device_id = 0;
  src.ndim = ndim;
  src.dtype = dtype;
  src.shape = ndim > 0 ? (int64_t*)shape : NULL;
  src.strides = ndim > 0 ? byte_strides : NULL;
  src.byte_offset = 0;
  dlb_buffer* copy = NULL;
  dlb_status s = dlb_buffer_alloc(src.device, dtype, ndim, src.shape, &copy);
  DLTensor dst;
  if (s == DLB_OK) s = dlb_buffer_dltensor(copy, &dst);
  if (s == DLB_OK) {
    Py_BEGIN_ALLOW_THREADS
    s = dlb_copy_to_contiguous_flags(&src, (char*)dst.data + dst.byte_offset, dlb_buffer_nbytes(copy),
                                     DLB_COPY_FLAG_BYTE_STRIDES);
    Py_END_ALLOW_THREADS
  }
  if (s != DLB_OK) {
    dlb_buffer_release(copy); /* the library's own memory: no producer's deleter */
    dlbpy_raise_status(s);
    return -1;
  }
  *out = copy;
  return 0;
}

static int buffer_of(PyObject* obj, dlb_buffer** out, int* swapped) {
  Py_buffer* view = (Py_buffer*)calloc(1, sizeof *view);
  if (view == NULL) {  /* GCOVR_EXCL_START: the C heap refusing 80 bytes, which no test arranges */
    PyErr_NoMemory();
    return -1;
  }  /* GCOVR_EXCL_STOP */
  if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) != 0) {
    free(view);
    /* TypeError: the object has no buffer protocol; ValueError or
     * BufferError: its exporter refused this view (numpy: "cannot include
     * dtype 'E' in a buffer" for a dtype the protocol has no letter for).
     * Said as the library would, with the exporter's words. */
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
        PyErr_ExceptionMatches(PyExc_BufferError)) {
      PyObject *type, *value, *trace;
      PyErr_Fetch(&type, &value, &trace);
      PyObject* text = value != NULL ? PyObject_Str(value) : NULL;
      const char* utf8 = text != NULL ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
      char message[300];
      snprintf(message, sizeof message, "from_buffer: %.250s", utf8 != NULL ? utf8 : "no buffer");
      Py_XDECREF(text);
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(trace);
      PyErr_Clear();
      dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, message);
    }
    return -1;
  }
  char text[200];
  dlb_status s = DLB_OK;
  int64_t shape[DLB_MAX_NDIM];
  int64_t strides[DLB_MAX_NDIM];
  DLDataType dtype;
  const int ndim = view->ndim;
  /* GCOVR_EXCL_START: an exporter breaking the protocol (ndim past 64, no shape) or a PIL-style one (suboffsets); no exporter the tests reach makes one */
  if (ndim < 0 || ndim > DLB_MAX_NDIM) {
    snprintf(text, sizeof text, "from_buffer: ndim is %d", ndim);
    s = DLB_ERR_UNSUPPORTED_LAYOUT;
  } else if (view->suboffsets != NULL) {
    snprintf(text, sizeof text, "from_buffer: indirect (suboffset) buffers have no DLPack layout");
    s = DLB_ERR_UNSUPPORTED_LAYOUT;
  } else if (ndim > 0 && view->shape == NULL) {
    snprintf(text, sizeof text, "from_buffer: the exporter gave no shape");
    s = DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  if (s != DLB_OK) {
    PyBuffer_Release(view);
    free(view);
    dlbpy_raise_error(s, text);
    return -1;
  }
  /* GCOVR_EXCL_STOP */
  if (format_to_dtype(view->format, view->itemsize, &dtype, swapped) != 0) {
    PyBuffer_Release(view);
    free(view);
    return -1;
  }
  int byte_strides = 0;
  for (int i = 0; i < ndim; ++i) {
    shape[i] = view->shape[i];
    if (view->strides != NULL && view->strides[i] % view->itemsize != 0) byte_strides = 1;
  }
  if (byte_strides && swapped != NULL) {
    /* The cure's buffer step: strides DLPack cannot say (a structured
     * array's field, 4-byte elements 5 bytes apart) are read by the copy
     * engine as byte strides into a compact copy, which is what the cure
     * hands on. */
    const int bad = byte_strided_copy(view, dtype, ndim, shape, out);
    PyBuffer_Release(view);
    free(view);
    return bad;
  }
  for (int i = 0; i < ndim; ++i) {
    if (view->strides == NULL) continue;
    const Py_ssize_t bytes = view->strides[i];
    if (bytes % view->itemsize != 0) {
      snprintf(text, sizeof text,
               "from_buffer: strides[%d] is %lld bytes, not a multiple of the item size %lld", i,
               (long long)bytes, (long long)view->itemsize);
      PyBuffer_Release(view);
      free(view);
      dlbpy_raise_error(DLB_ERR_UNSUPPORTED_LAYOUT, text);
      return -1;
    }
    strides[i] = bytes / view->itemsize;
  }
  DLTensor t;
  t.data = view->buf;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = ndim > 0 ? shape : NULL;
  t.strides = (ndim > 0 && view->strides != NULL) ? strides : NULL;
  t.byte_offset = 0;
  const uint64_t flags = view->readonly ? DLB_BUFFER_READ_ONLY : 0;
  dlb_buffer* buffer = NULL;
  s = dlb_buffer_wrap(&t, flags, release_view, view, &buffer);
  if (s != DLB_OK) {
    PyBuffer_Release(view);
    free(view);
    dlbpy_raise_status(s);
    return -1;
  }
  *out = buffer;
  return 0;
}


int dlbpy_buffer_of(PyObject* obj, dlb_buffer** out) { return buffer_of(obj, out, NULL); }

int dlbpy_buffer_of_any_order(PyObject* obj, dlb_buffer** out, int* swapped) { return buffer_of(obj, out, swapped); }

const char dlbpy_from_buffer_doc[] =
    "from_buffer(obj, /)\n--\n\n"
    "A zero-copy Tensor over an object with the Python buffer protocol.\n\n"
    "bytes give a read-only tensor; bytearray, memoryview (of writable memory)\n"
    "and array.array writable ones. The object's buffer stays exported (for a\n"
    "bytearray: it cannot be resized) until the tensor and the last export\n"
    "made from it are gone. dlbridge.Error (DLB_ERR_INVALID_ARGUMENT) for an\n"
    "object without the buffer protocol, DLB_ERR_UNSUPPORTED_DTYPE or\n"
    "DLB_ERR_UNSUPPORTED_LAYOUT for what DLPack cannot describe.";

PyObject* dlbpy_from_buffer(PyObject* module, PyObject* obj) {
  dlb_buffer* buffer = NULL;
  if (dlbpy_buffer_of(obj, &buffer) != 0) return NULL;
  return dlbpy_tensor_new_in((dlbpy_state*)PyModule_GetState(module), buffer);
}
