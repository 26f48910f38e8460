/* The C side of the dlbridge Python package (the dlbridge._glue extension),
 * for the C files of the extension: what a tensor object is and the calls
 * between a tensor, a dlb_buffer and a DLPack capsule. Every function here
 * needs the GIL. Built against the CPython 3.10 limited API. */
#ifndef DLBRIDGE_PYTHON_GLUE_H_
#define DLBRIDGE_PYTHON_GLUE_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlbridge/dlbridge.h>

/* A dlbridge.Tensor (the extension type itself, immutable, not a base type,
 * not tracked by the collector). */
typedef struct dlbpy_tensor {
  PyObject_HEAD
  dlb_buffer* buffer; /* one reference, owned; never NULL once made */
  PyObject* meta;     /* cached metadata tuple or NULL */
  PyObject* weaklist;
} dlbpy_tensor;

/* The buffer of a tensor, borrowed (valid while `obj` lives); NULL with
 * TypeError set when `obj` is not a dlbridge.Tensor. */
dlb_buffer* dlbpy_tensor_buffer(PyObject* obj);

/* A new dlbridge.Tensor taking over the caller's reference on `buffer`
 * (released again when the tensor cannot be made: NULL, exception set). */
PyObject* dlbpy_tensor_new(dlb_buffer* buffer);

/* Raises dlbridge.Error(status, the library's last message); returns NULL. */
PyObject* dlbpy_raise_status(dlb_status status);

/* Exports `buffer` into a new "dltensor_versioned" (versioned != 0) or
 * "dltensor" capsule; NULL with BufferError set on failure, nothing left
 * allocated. The caller keeps its reference on `buffer`. */
PyObject* dlbpy_export_capsule(dlb_buffer* buffer, const dlb_export_options* options,
                               int versioned);

/* Imports a "dltensor_versioned" or "dltensor" capsule, renamed used_* on
 * success, when *out is a new buffer owned by the caller: returns 0. On
 * failure returns -1 with dlbridge.Error set, the capsule untouched. */
int dlbpy_import_capsule(PyObject* capsule, dlb_buffer** out);

/* A DLPack 1.x managed tensor (major version 1) in as a buffer: CUDA memory
 * (kDLCUDA, kDLCUDAHost, kDLCUDAManaged) through dlb_cuda_import_versioned
 * with `stream`, the stream its producer ordered the data before, so the
 * buffer is stream-ordered and copies to the host; other memory, and CUDA
 * memory the CUDA backend does not take (DLB_ERR_UNSUPPORTED_DEVICE: no
 * driver or device, built without CUDA, memory the driver does not know as
 * that kind), through dlb_import_versioned. DLB_OK with *out a new
 * buffer owning `tensor`; otherwise the status, dlbridge.Error set, and
 * `tensor` still the caller's. */
dlb_status dlbpy_import_managed(DLManagedTensorVersioned* tensor, int64_t stream, dlb_buffer** out);

#endif /* DLBRIDGE_PYTHON_GLUE_H_ */
