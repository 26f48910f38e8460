/**
 * @file opencl.h
 * dlbridge: the built-in OpenCL backend (buffers in cl_mem, command queues
 * as streams). Needs no OpenCL header: handles are passed as void*, and the
 * ICD loader is loaded at run time.
 */
#ifndef DLBRIDGE_OPENCL_H_
#define DLBRIDGE_OPENCL_H_

#include "dlbridge/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* OpenCL                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_opencl OpenCL
 * @brief OpenCL buffers (kDLOpenCL) as a built-in backend.
 *
 * The library has no link-time dependency on OpenCL: the ICD loader
 * (libOpenCL.so.1) is loaded with dlopen on the first call below that needs
 * it, and stays loaded once it lists a device; when none can be loaded, or
 * it lists no platform or device, nothing is remembered and the next call
 * tries again. Every function here returns DLB_ERR_UNSUPPORTED_DEVICE when
 * no usable loader is found (the message says which: not found, no
 * platform, no device) or when the library was built without OpenCL
 * support (-Dopencl=disabled; the message says so).
 *
 * Handles: `context`, `queue`, `event` and the `data` of an OpenCL view
 * are cl_context, cl_command_queue, cl_event and cl_mem handles passed as
 * void*. The library checks every handle a caller passes before it calls
 * the driver through it (a released or foreign handle is refused by name,
 * not followed), and keeps its own reference (clRetain*) on each one it
 * stores, released when it is done with it.
 *
 * Devices: the device_id of kDLOpenCL memory is an index into every OpenCL
 * device the loader lists, platform by platform in the order
 * clGetPlatformIDs gives them, each platform's devices in the order
 * clGetDeviceIDs(CL_DEVICE_TYPE_ALL) gives; dlb_opencl_device_count() says
 * how many there are.
 *
 * Buffers made here are backend buffers (DLB_BUFFER_BACKEND) and export
 * through the ordinary export functions: zero-copy as kDLOpenCL with `data`
 * the cl_mem handle and `byte_offset` the view's offset into it (never
 * folded into the handle), or, to the CPU, as a host copy made with
 * clEnqueueReadBuffer (compact views) or clEnqueueReadBufferRect (strided
 * views: one rectangular read per compact block of rows and slices, then
 * the strided copy engine for an order the reads cannot give), IS_COPIED.
 * dlb_buffer_alloc() of {kDLOpenCL, id} allocates on the library's backend
 * of that device, and dlb_buffer_resolve() with target_device {kDLOpenCL,
 * id} copies host-readable memory there.
 *
 * Streams: a buffer remembers the event of its last writer. Stream values of
 * an export's consumer (dlb_export_options.stream): no stream
 * (DLB_STREAM_NONE) makes the host wait for that event; a cl_command_queue
 * handle gets a barrier on it (clEnqueueBarrierWithWaitList), so the
 * queue's later commands run after the writer without the host waiting; -1
 * waits for nothing; 1, 2 and values below -1 are refused
 * (DLB_ERR_INVALID_ARGUMENT). A producer's stream (the imports below,
 * dlb_import_versioned_on_stream()) that is a cl_command_queue handle (a
 * value above 2) gets a marker whose event becomes the writer's; 0, 1, 2 and
 * -1 mean no pending work.
 * @{
 */

/**
 * The number of OpenCL devices the ICD loader lists (device ids 0 to N - 1).
 * @param out receives the count on success; untouched on failure. Owns
 *        nothing.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out);
 *         DLB_ERR_UNSUPPORTED_DEVICE (no loader, no platform, no device,
 *         built without OpenCL). Thread-safe.
 */
DLB_API dlb_status dlb_opencl_device_count(int32_t* out);

/**
 * The device index (the device_id of kDLOpenCL memory, and of
 * {kDLOpenCL, id} in target_device and Python's dl_device) of the caller's
 * own cl_device_id, so that a program holding OpenCL handles need not
 * guess the library's numbering.
 * @param device a cl_device_id, borrowed; it is only compared with the
 *        devices the loader lists, never called through.
 * @param out receives the index on success; untouched on failure. Owns
 *        nothing.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL device or out);
 *         DLB_ERR_UNSUPPORTED_DEVICE (no usable loader, built without
 *         OpenCL, a device the loader does not list: a sub-device made
 *         with clCreateSubDevices, or another loader's handle).
 *         Thread-safe.
 */
DLB_API dlb_status dlb_opencl_device_index(void* device, int32_t* out);

/**
 * The device index (as dlb_opencl_device_index()) of the device a
 * cl_command_queue of the caller's runs on (CL_QUEUE_DEVICE).
 * @param queue a cl_command_queue, borrowed; checked to be a live object of
 *        a listed platform before it is asked.
 * @param out receives the index on success; untouched on failure. Owns
 *        nothing.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL argument, a handle that is
 *         not a live queue of a listed platform); DLB_ERR_UNSUPPORTED_DEVICE
 *         (no usable loader, built without OpenCL, a queue on a device the
 *         loader does not list). Thread-safe.
 */
DLB_API dlb_status dlb_opencl_queue_device_index(void* queue, int32_t* out);

/**
 * Creates the OpenCL backend of one device over a context and an in-order
 * command queue the library makes (released when the backend's last
 * reference goes).
 * @param device_id the device index, 0 to dlb_opencl_device_count() - 1.
 * @param out on success a backend with one reference owned by the caller
 *        (release with dlb_backend_release); untouched on failure, when
 *        nothing is left allocated.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out);
 *         DLB_ERR_UNSUPPORTED_DEVICE (no usable loader, built without
 *         OpenCL, no such device); DLB_ERR_BACKEND (a call failed; the
 *         message names it and the OpenCL error); DLB_ERR_OUT_OF_MEMORY.
 *         Thread-safe.
 */
DLB_API dlb_status dlb_opencl_backend_create(int32_t device_id, dlb_backend** out);

/**
 * Creates an OpenCL backend over a context and command queue the caller
 * owns: its buffers are allocated in `context`, its copies and waits run on
 * `queue` (in order or not).
 * @param context a cl_context; the backend retains it (clRetainContext)
 *        and releases it when its last reference goes. The caller keeps its
 *        own reference.
 * @param queue a cl_command_queue of `context`; retained likewise.
 * @param out on success a backend with one reference owned by the caller
 *        (release with dlb_backend_release); untouched on failure, when
 *        neither handle is retained.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL argument, a handle that is
 *         not a live object of a listed platform, a queue of another
 *         context); DLB_ERR_UNSUPPORTED_DEVICE (no usable loader, built
 *         without OpenCL, a queue on a device the loader does not list);
 *         DLB_ERR_BACKEND; DLB_ERR_OUT_OF_MEMORY. Thread-safe.
 */
DLB_API dlb_status dlb_opencl_backend_from_queue(void* context, void* queue, dlb_backend** out);

/**
 * The context and command queue of an OpenCL backend, for the caller's own
 * commands on its buffers.
 * @param backend an OpenCL backend; not modified.
 * @param context receives the cl_context unless NULL.
 * @param queue receives the cl_command_queue unless NULL.
 * @return DLB_OK with the handles borrowed: they stay valid while the
 *         backend (or any of its buffers) lives; retain them to keep them
 *         longer. DLB_ERR_INVALID_ARGUMENT (NULL backend, both outputs
 *         NULL, not an OpenCL backend), when nothing is written;
 *         DLB_ERR_UNSUPPORTED_DEVICE (built without OpenCL). Thread-safe.
 */
DLB_API dlb_status dlb_opencl_backend_queue(const dlb_backend* backend, void** context, void** queue);

/**
 * Allocates a zero-filled cl_mem (CL_MEM_READ_WRITE) for a compact
 * row-major tensor on {kDLOpenCL, the backend's device}. The zero fill is
 * enqueued on the backend's queue and is the buffer's first writer: exports
 * and copies are ordered after it.
 * @param backend an OpenCL backend; the buffer takes a reference of its own.
 * @param dtype element type; must pass dlb_dtype_check().
 * @param ndim number of dimensions, 0 to DLB_MAX_NDIM.
 * @param shape `ndim` extents, copied; may be NULL only when ndim is 0.
 * @param out on success a new buffer owned by the caller; the cl_mem is
 *        released when its last reference (handle or export) goes.
 *        Untouched on failure, when nothing is left allocated.
 * @return DLB_OK; the dlb_buffer_alloc() statuses; DLB_ERR_INVALID_ARGUMENT
 *         (NULL or non-OpenCL backend); DLB_ERR_OUT_OF_MEMORY (also when the
 *         driver cannot allocate); DLB_ERR_BACKEND. Thread-safe.
 */
DLB_API dlb_status dlb_opencl_buffer_alloc(dlb_backend* backend, DLDataType dtype, int32_t ndim,
                                           const int64_t* shape, dlb_buffer** out);

/**
 * Wraps a cl_mem buffer someone else owns: `view->data` is the cl_mem
 * handle and `view->byte_offset` the offset of element [0, ...] into it,
 * as DLPack has them for kDLOpenCL.
 * @param backend an OpenCL backend whose context the cl_mem belongs to; the
 *        buffer takes a reference of its own.
 * @param view data (the cl_mem), device {kDLOpenCL, the backend's device},
 *        dtype, shape, strides (NULL: compact) and byte_offset; read during
 *        the call only. Every byte the view reaches must lie in the cl_mem.
 * @param flags 0 or DLB_BUFFER_READ_ONLY.
 * @param event the cl_event of the memory's last writer, or NULL when
 *        nothing is pending; retained by the buffer on success.
 * @param release called as release(ctx) exactly once when the last
 *        reference goes; may be NULL. Never called when this call fails.
 * @param ctx passed to `release`; never read.
 * @param out on success a new buffer owned by the caller, holding its own
 *        reference on the cl_mem (clRetainMemObject) until its last
 *        reference goes: the caller may release its own at once. Untouched
 *        on failure, when the cl_mem's reference count is as it was.
 * @return DLB_OK; the dlb_buffer_wrap() statuses; DLB_ERR_INVALID_ARGUMENT
 *         (NULL or non-OpenCL backend, NULL data, a handle that is not a
 *         live cl_mem buffer of a listed platform, a cl_mem or event of
 *         another context, a view reaching past the cl_mem's size);
 *         DLB_ERR_UNSUPPORTED_DEVICE (not kDLOpenCL, another device);
 *         DLB_ERR_BACKEND. Thread-safe.
 */
DLB_API dlb_status dlb_opencl_buffer_wrap(dlb_backend* backend, const DLTensor* view, uint64_t flags,
                                          void* event, dlb_release_fn release, void* ctx,
                                          dlb_buffer** out);

/**
 * Takes a DLPack 1.x managed tensor of OpenCL memory in as an OpenCL
 * buffer, so that its exports are ordered after its producer's work and it
 * can be copied to the host. The memory is checked as by
 * dlb_opencl_buffer_wrap(); READ_ONLY carries over.
 * @param backend an OpenCL backend of the cl_mem's context, or NULL: the
 *        library's backend of the tensor's device when the cl_mem is of its
 *        context, else a backend of the cl_mem's own context with a queue
 *        of the library's on that device.
 * @param tensor the managed tensor; major version 1.
 * @param stream the producer's stream: a cl_command_queue handle its work
 *        on the memory was enqueued on, or 0 or -1 for none (see above).
 * @param out on success a new buffer owned by the caller, which now owns
 *        `tensor` and calls its deleter exactly once, after the last handle
 *        and export are gone. On failure untouched, and the caller still
 *        owns `tensor`.
 * @return DLB_OK; DLB_ERR_VERSION; the dlb_opencl_buffer_wrap() statuses,
 *         with DLB_ERR_MALFORMED for a tensor whose handle, device or
 *         extent is wrong. Thread-safe.
 */
DLB_API dlb_status dlb_opencl_import_versioned(dlb_backend* backend, DLManagedTensorVersioned* tensor,
                                               int64_t stream, dlb_buffer** out);

/**
 * dlb_opencl_import_versioned() for a legacy managed tensor (writable, as
 * legacy tensors are). Same ownership rules: the buffer owns `tensor` on
 * success, the caller keeps it on failure.
 */
DLB_API dlb_status dlb_opencl_import_legacy(dlb_backend* backend, DLManagedTensor* tensor, int64_t stream,
                                            dlb_buffer** out);

/**
 * Records the event of the buffer's latest writer: call it after enqueueing
 * work that writes the buffer, so that later exports and copies are ordered
 * after that work. Reads and writes no memory.
 * @param buffer a buffer of the OpenCL backend (allocated, wrapped or
 *        imported by it).
 * @param event a cl_event of the buffer's context; on success the buffer
 *        holds its own reference on it (clRetainEvent) and releases the
 *        previous writer's; the caller keeps its own reference either way.
 *        NULL: nothing is pending.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL buffer, a buffer of
 *         another kind, an event that is not live or of another context;
 *         nothing changes then); DLB_ERR_UNSUPPORTED_DEVICE (built without
 *         OpenCL). Thread-safe.
 */
DLB_API dlb_status dlb_opencl_buffer_set_event(dlb_buffer* buffer, void* event);
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_OPENCL_H_ */
