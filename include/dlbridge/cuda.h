/**
 * @file cuda.h
 * dlbridge: the built-in CUDA backend (device, pinned host and managed
 * memory, stream-ordered exports). Needs no CUDA header: the driver is
 * loaded at run time.
 */
#ifndef DLBRIDGE_CUDA_H_
#define DLBRIDGE_CUDA_H_

#include "dlbridge/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* CUDA                                                                     */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_cuda CUDA
 * @brief CUDA device, pinned host and managed memory as a built-in backend.
 *
 * The library has no link-time dependency on CUDA: the driver library
 * (libcuda.so.1) is loaded with dlopen on the first call below that needs
 * it, and stays loaded; when none can be loaded, nothing is remembered and
 * the next call tries again. Every function here returns
 * DLB_ERR_UNSUPPORTED_DEVICE when no CUDA driver can be loaded (the message
 * says the driver was not found) or when the library was built without CUDA
 * support (-Dcuda=disabled; the message says so).
 *
 * Buffers made here are backend buffers (DLB_BUFFER_BACKEND) on the backend
 * of dlb_cuda_backend_create() and export through the ordinary export
 * functions. Each remembers the stream of its last writer (a stream value,
 * below). A zero-copy export to a consumer stream (dlb_export_options.stream)
 * records an event on the buffer's stream and makes the consumer's stream
 * wait for it, without a host synchronisation. A copy to the host (an export
 * to {kDLCPU, 0}, DLB_COPY_ALWAYS, dlb_buffer_to_host) is ordered after the
 * buffer's stream; a strided device view is copied whole into host staging
 * memory and then made compact by the strided copy engine.
 *
 * Stream values, as the Python protocol's `stream` argument means them:
 * 1 the legacy default stream, 2 the per-thread default stream (of the
 * calling thread), -1 no synchronisation, any other positive value a CUstream
 * handle. As the consumer's stream of an export, DLB_STREAM_NONE (no stream
 * given) makes the host wait for the buffer's stream, which orders the data
 * before every stream. As the stream of a buffer's writer, 0 and 1 both mean
 * the legacy default stream and -1 means no pending work.
 * @{
 */

/**
 * Creates the CUDA backend of one device (its primary context, retained
 * until the backend's last reference goes). Backends of the same device are
 * independent handles over the same primary context.
 * @param device_id the CUDA device ordinal, 0 to the device count - 1.
 * @param out on success a backend with one reference owned by the caller
 *        (release with dlb_backend_release); untouched on failure.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out);
 *         DLB_ERR_UNSUPPORTED_DEVICE (no driver, built without CUDA, the
 *         driver's initialisation failed, no such device);
 *         DLB_ERR_BACKEND (a driver call failed; the message names the call
 *         and the driver's error name); DLB_ERR_OUT_OF_MEMORY. Thread-safe.
 */
DLB_API dlb_status dlb_cuda_backend_create(int32_t device_id, dlb_backend** out);

/**
 * Allocates zero-filled CUDA memory for a compact row-major tensor:
 * device memory (kDLCUDA), pinned host memory (kDLCUDAHost) or managed
 * memory (kDLCUDAManaged). The memory is zeroed and ready when the call
 * returns; the buffer's stream is the legacy default stream.
 * @param backend a backend from dlb_cuda_backend_create(); the buffer takes
 *        a reference of its own.
 * @param device type kDLCUDA, kDLCUDAHost or kDLCUDAManaged; device_id the
 *        backend's device.
 * @param dtype element type; must pass dlb_dtype_check().
 * @param ndim number of dimensions, 0 to DLB_MAX_NDIM.
 * @param shape `ndim` extents, copied; may be NULL only when ndim is 0.
 * @param out on success a new buffer owned by the caller; the memory is
 *        freed when its last reference (handle or export) goes. Untouched on
 *        failure, when nothing is left allocated.
 * @return DLB_OK; the dlb_buffer_alloc() statuses; DLB_ERR_INVALID_ARGUMENT
 *         (NULL or non-CUDA backend); DLB_ERR_UNSUPPORTED_DEVICE (another
 *         device type or id); DLB_ERR_OUT_OF_MEMORY (also when the driver
 *         is out of memory); DLB_ERR_BACKEND. Thread-safe.
 */
DLB_API dlb_status dlb_cuda_buffer_alloc(dlb_backend* backend, DLDevice device, DLDataType dtype,
                                         int32_t ndim, const int64_t* shape, dlb_buffer** out);

/**
 * Wraps CUDA memory someone else owns. The driver is asked what `view->data`
 * is (cuPointerGetAttribute): device memory of the backend's device for
 * kDLCUDA, managed memory for kDLCUDAManaged, pinned or registered host
 * memory for kDLCUDAHost.
 * @param backend a backend from dlb_cuda_backend_create(); the buffer takes
 *        a reference of its own.
 * @param view data, device (device_id the backend's device), dtype, shape,
 *        strides (NULL: compact) and byte_offset; read during the call only.
 * @param flags 0 or DLB_BUFFER_READ_ONLY.
 * @param stream the stream of the memory's last writer (a stream value).
 * @param release called as release(ctx) exactly once when the last
 *        reference goes; may be NULL. Never called when this call fails:
 *        the caller then still owns the memory.
 * @param ctx passed to `release`; never read.
 * @param out on success a new buffer owned by the caller; untouched on
 *        failure.
 * @return DLB_OK; the dlb_buffer_wrap() statuses; DLB_ERR_INVALID_ARGUMENT
 *         (NULL or non-CUDA backend, a stream value below -1);
 *         DLB_ERR_UNSUPPORTED_DEVICE (not a CUDA device type, another
 *         device, or memory the driver does not know as that kind);
 *         DLB_ERR_BACKEND. Thread-safe.
 */
DLB_API dlb_status dlb_cuda_buffer_wrap(dlb_backend* backend, const DLTensor* view, uint64_t flags,
                                        int64_t stream, dlb_release_fn release, void* ctx,
                                        dlb_buffer** out);

/**
 * Takes a DLPack 1.x managed tensor of CUDA memory in as a CUDA buffer, so
 * that its exports are stream-ordered and it can be copied to the host. The
 * memory is checked as by dlb_cuda_buffer_wrap(); READ_ONLY carries over.
 * @param backend a backend from dlb_cuda_backend_create(), or NULL for the
 *        library's backend of the tensor's device (as dlb_buffer_alloc()).
 * @param tensor the managed tensor; major version 1.
 * @param stream the stream its producer ordered its work before (a stream
 *        value; in Python, the stream passed to the producer's __dlpack__).
 * @param out on success a new buffer owned by the caller, which now owns
 *        `tensor` and calls its deleter exactly once, after the last handle
 *        and export are gone. On failure untouched, and the caller still owns
 *        `tensor`.
 * @return DLB_OK; DLB_ERR_VERSION; the dlb_cuda_buffer_wrap() statuses,
 *         with DLB_ERR_MALFORMED for a broken tensor. Thread-safe.
 */
DLB_API dlb_status dlb_cuda_import_versioned(dlb_backend* backend, DLManagedTensorVersioned* tensor,
                                             int64_t stream, dlb_buffer** out);

/**
 * dlb_cuda_import_versioned() for a legacy managed tensor (writable, as
 * legacy tensors are). Same ownership rules: the buffer owns `tensor` on
 * success, the caller keeps it on failure.
 */
DLB_API dlb_status dlb_cuda_import_legacy(dlb_backend* backend, DLManagedTensor* tensor, int64_t stream,
                                          dlb_buffer** out);

/**
 * Records the stream of the buffer's latest writer (a stream value): call
 * it after enqueueing work that writes the buffer, so that later exports
 * and copies are ordered after that work. Reads and writes no memory.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL buffer, a buffer not made
 *         by dlb_cuda_buffer_alloc() or dlb_cuda_buffer_wrap(), a stream
 *         value below -1); DLB_ERR_UNSUPPORTED_DEVICE (built without CUDA).
 *         Thread-safe.
 */
DLB_API dlb_status dlb_cuda_buffer_set_stream(dlb_buffer* buffer, int64_t stream);

/**
 * The stream value of the buffer's latest writer, into `*out`.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL argument, not a CUDA
 *         buffer); DLB_ERR_UNSUPPORTED_DEVICE (built without CUDA). Owns
 *         nothing. Thread-safe.
 */
DLB_API dlb_status dlb_cuda_buffer_stream(const dlb_buffer* buffer, int64_t* out);
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_CUDA_H_ */
