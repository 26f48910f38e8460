/**
 * @file buffer.h
 * dlbridge: buffers (reference-counted handles over memory), their export
 * as DLPack managed tensors, and the import of managed tensors from any
 * producer.
 */
#ifndef DLBRIDGE_BUFFER_H_
#define DLBRIDGE_BUFFER_H_

#include "dlbridge/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Buffers                                                                  */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_buffers Buffers
 * @brief Opaque, reference-counted handles over memory.
 *
 * A buffer is host memory owned by the library (dlb_buffer_alloc), memory
 * someone else owns (dlb_buffer_wrap), a tensor imported from another
 * producer (dlb_import_versioned / dlb_import_legacy), or a storage on a
 * backend (dlb_buffer_from_backend). Each handle is one reference; exports
 * hold references of their own. Reference counts are atomic: handles may be
 * retained and released from any thread. The memory behind a buffer lives
 * until the last handle is released and the last export's deleter has run.
 * @{
 */

/** Opaque reference-counted buffer handle. */
typedef struct dlb_buffer dlb_buffer;

/** Buffer flag: the memory must not be written through any export. */
#define DLB_BUFFER_READ_ONLY (UINT64_C(1) << 0)
/**
 * Buffer flag (dlb_buffer_from_backend): the storage never changes once
 * created, so readiness is awaited once and then cached.
 */
#define DLB_BUFFER_IMMUTABLE (UINT64_C(1) << 1)
/**
 * Buffer flag (dlb_buffer_wrap, dlb_buffer_from_backend; reported by
 * dlb_buffer_flags()): DLPack 1.1's padded sub-byte layout
 * (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED). Each element of a dtype of
 * fewer than 8 bits (int4, uint2, float4_e2m1fn, ...) sits in a byte of
 * its own, in the byte's low bits; sizes, strides and copies are those of a
 * uint8 tensor of the same shape. Without it such elements are packed.
 * Taken only for dtypes of fewer than 8 bits (DLB_ERR_INVALID_ARGUMENT
 * otherwise; "fewer than 8 bits" counts bits times lanes). A versioned
 * import sets it when the producer set the DLPack flag on such a dtype,
 * ignores the DLPack flag on dtypes of whole bytes, and refuses it
 * (DLB_ERR_UNSUPPORTED_DTYPE) on a sub-byte type whose elements are 8 bits
 * or more (int4 x 2, float6 x 4), where DLPack defines no padding.
 * Versioned exports and copies carry it; a legacy export, which has no
 * flag to say it, is refused with
 * DLB_ERR_UNSUPPORTED_DTYPE (a legacy consumer would read the bytes as
 * packed).
 */
#define DLB_BUFFER_SUBBYTE_PADDED (UINT64_C(1) << 2)
/** Reported by dlb_buffer_flags(): the buffer was deleted (donated). */
#define DLB_BUFFER_DELETED (UINT64_C(1) << 8)
/** Reported: the data was imported and its producer marked it IS_COPIED, or the buffer is a copy dlb_buffer_resolve() made. */
#define DLB_BUFFER_COPIED (UINT64_C(1) << 9)
/** Reported: the buffer holds a tensor imported from another producer. */
#define DLB_BUFFER_IMPORTED (UINT64_C(1) << 10)
/** Reported: the buffer is a storage on a backend other than the host. */
#define DLB_BUFFER_BACKEND (UINT64_C(1) << 11)

/**
 * Allocates zero-filled memory for a compact row-major tensor: host memory
 * owned by the library for {kDLCPU, 0}, or memory of any device a built-in
 * device backend serves (dlb_device_type_info(): DLB_DEVICE_CUDA_BACKEND
 * for CUDA), on that backend.
 *
 * Host data is aligned to at least 64 bytes. Zero-size tensors (some extent
 * 0) and 0-d tensors (ndim 0, shape may be NULL) are allowed.
 * @param device {kDLCPU, 0}; kDLCUDA, kDLCUDAHost, kDLCUDAManaged with a
 *        device ordinal: dlb_cuda_buffer_alloc() on a backend of that device
 *        that the library keeps for the life of the process (statuses as
 *        there); kDLOpenCL with an OpenCL device index:
 *        dlb_opencl_buffer_alloc() on the library's backend of that device,
 *        kept likewise (statuses as there).
 * @param dtype element type; must pass dlb_dtype_check().
 * @param ndim number of dimensions, 0 to DLB_MAX_NDIM.
 * @param shape `ndim` extents, copied; may be NULL only when ndim is 0.
 * @param out on success receives a new buffer with one reference, owned by
 *        the caller (release with dlb_buffer_release). Untouched on failure,
 *        when nothing is allocated.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out, NULL shape with ndim
 *         > 0, ndim < 0 or > DLB_MAX_NDIM); DLB_ERR_MALFORMED (negative
 *         extent); DLB_ERR_UNSUPPORTED_DTYPE; DLB_ERR_UNSUPPORTED_DEVICE
 *         (a device no built-in backend serves, or its backend cannot be
 *         used here: no driver, built without it, no such device; the
 *         message says which); DLB_ERR_OVERFLOW; DLB_ERR_OUT_OF_MEMORY;
 *         DLB_ERR_BACKEND (a driver call failed).
 * Thread-safe.
 */
DLB_API dlb_status dlb_buffer_alloc(DLDevice device, DLDataType dtype, int32_t ndim,
                                    const int64_t* shape, dlb_buffer** out);

/** Release callback for dlb_buffer_wrap(); runs exactly once, on any thread. */
typedef void (*dlb_release_fn)(void* ctx);

/**
 * Wraps memory someone else owns.
 *
 * `view` describes the memory (data, device, dtype, shape, strides, with
 * NULL strides meaning compact row-major, byte_offset). Its shape and strides
 * are copied; the data is not. `view->device` may be any known device type;
 * the library only reads host memory itself.
 * @param view the memory's description; read during the call only.
 * @param flags 0, DLB_BUFFER_READ_ONLY, DLB_BUFFER_SUBBYTE_PADDED.
 * @param release called as release(ctx) exactly once, on whichever thread
 *        drops the last reference (handle or export), when nothing uses the
 *        memory any more. May be NULL. Never called when this function fails:
 *        the caller then still owns the memory.
 * @param ctx passed to `release` unchanged; dlbridge never reads it.
 * @param out on success receives a new buffer with one reference owned by
 *        the caller. Untouched on failure.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL view or out, NULL shape with
 *         ndim > 0, ndim out of range, unknown flag bits); DLB_ERR_MALFORMED
 *         (negative extent, NULL data with a non-zero size);
 *         DLB_ERR_UNSUPPORTED_DTYPE; DLB_ERR_UNSUPPORTED_DEVICE;
 *         DLB_ERR_OVERFLOW; DLB_ERR_OUT_OF_MEMORY.
 * Thread-safe.
 */
DLB_API dlb_status dlb_buffer_wrap(const DLTensor* view, uint64_t flags, dlb_release_fn release,
                                   void* ctx, dlb_buffer** out);

/**
 * Adds a reference. NULL-safe. Thread-safe.
 * @return `buffer`, for chaining. The caller owns the new reference.
 */
DLB_API dlb_buffer* dlb_buffer_retain(dlb_buffer* buffer);

/**
 * Drops a reference. The last reference (counting exports) frees the memory
 * or runs the release callback / import deleter / backend free_storage.
 * NULL-safe. Thread-safe.
 */
DLB_API void dlb_buffer_release(dlb_buffer* buffer);

/**
 * Marks the buffer deleted (donated): later exports, copies and views fail
 * with DLB_ERR_DELETED. Exports made before stay valid until their deleters
 * run. Does not drop the caller's reference: release the handle as usual.
 * Deleting twice is harmless.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT for NULL. Thread-safe.
 */
DLB_API dlb_status dlb_buffer_delete(dlb_buffer* buffer);

/**
 * A non-owning view of the buffer's metadata.
 *
 * `out->shape` and `out->strides` point into the buffer and stay valid while
 * the caller holds a reference; strides are always present when ndim > 0
 * (also for imports that had NULL strides). `out->data` and
 * `out->byte_offset` are as the buffer's memory was given (for an imported
 * tensor, exactly as the producer wrote them); for a backend buffer `data`
 * is NULL, since its memory is only reached through an export.
 * @param buffer the buffer to describe; not modified.
 * @param out written only on success; owns nothing.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL argument);
 *         DLB_ERR_DELETED.
 */
DLB_API dlb_status dlb_buffer_dltensor(const dlb_buffer* buffer, DLTensor* out);

/**
 * The buffer's flags: DLB_BUFFER_READ_ONLY, DLB_BUFFER_IMMUTABLE,
 * DLB_BUFFER_SUBBYTE_PADDED, DLB_BUFFER_DELETED, DLB_BUFFER_COPIED, DLB_BUFFER_IMPORTED,
 * DLB_BUFFER_BACKEND. 0 for NULL. Thread-safe.
 */
DLB_API uint64_t dlb_buffer_flags(const dlb_buffer* buffer);

/**
 * Bytes the tensor's elements occupy when compact: element count times
 * element size, sub-byte types rounded up to whole bytes. 0 for NULL.
 * Reads the buffer only; the caller keeps its reference. Thread-safe.
 */
DLB_API uint64_t dlb_buffer_nbytes(const dlb_buffer* buffer);

/**
 * Current reference count (handles plus zero-copy exports); 0 for NULL.
 * A snapshot for tests and diagnostics; reads only. Thread-safe.
 */
DLB_API int64_t dlb_buffer_refcount(const dlb_buffer* buffer);

/**
 * Copies the buffer's elements into a new, compact, row-major, 64-byte
 * aligned host buffer (a backend buffer is copied through its backend). The
 * same as JAX's `device_put(x, cpu)` followed by a fresh copy. The new
 * buffer is writable and independent of the source.
 * @param buffer the source; not modified, keeps its references.
 * @param out on success a new buffer with one reference owned by the caller;
 *        untouched on failure, when nothing is left allocated.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT; DLB_ERR_DELETED;
 *         DLB_ERR_UNSUPPORTED_DEVICE (device memory without a backend copy);
 *         DLB_ERR_UNSUPPORTED_LAYOUT (strided sub-byte data);
 *         DLB_ERR_BACKEND; DLB_ERR_OUT_OF_MEMORY.
 */
DLB_API dlb_status dlb_buffer_to_host(dlb_buffer* buffer, dlb_buffer** out);

/** dlb_buffer_host_view() access: the caller only reads the elements. */
#define DLB_HOST_VIEW_READ 0u
/** dlb_buffer_host_view() access: the caller also writes the elements. */
#define DLB_HOST_VIEW_WRITE 1u

/** What dlb_buffer_host_view() says of a buffer's elements. */
typedef struct dlb_host_view {
  /** Set by the caller: sizeof(dlb_host_view) as the caller compiled it. */
  size_t struct_size;
  /**
   * The first element (the tensor's data plus its byte_offset); NULL only
   * when nbytes is 0.
   */
  void* data;
  /** Bytes of the compact elements (sub-byte types as the buffer packs them). */
  uint64_t nbytes;
  /** Number of elements (1 for a 0-d tensor, 0 for an empty one). */
  uint64_t numel;
  /** The element type. */
  DLDataType dtype;
  /** 1 when the caller may write the elements, 0 when they are read-only. */
  int32_t writable;
} dlb_host_view;

/**
 * The one rule of the library for reaching a buffer's elements from the
 * CPU without a copy, asked by every binding (the C++ data<T>(), Go's
 * Slice, Java's and Node's views, Python, Rust) so that all of them decide
 * alike, with the library's message.
 *
 * A view is given for a compact row-major buffer whose memory the CPU can
 * read (dlb_device_type_info(): DLB_DEVICE_HOST_READABLE) and that is not
 * a backend's storage. Refused, with the thread's error message saying
 * why and what to call instead: a deleted buffer (DLB_ERR_DELETED); a
 * backend's storage, reached only by an export or dlb_buffer_to_host()
 * (DLB_ERR_NOT_ZERO_COPY); memory of a device the CPU cannot read
 * (DLB_ERR_UNSUPPORTED_DEVICE); a strided layout (DLB_ERR_UNSUPPORTED_LAYOUT:
 * dlb_copy_to_contiguous() reads any); DLB_HOST_VIEW_WRITE of a read-only
 * buffer (DLB_ERR_READ_ONLY); NULL data with elements to show
 * (DLB_ERR_MALFORMED).
 * @param buffer the buffer; the caller keeps its reference. The view is
 *        valid while the caller holds a reference (and the buffer is not
 *        deleted): it lends the buffer's memory and owns nothing.
 * @param access DLB_HOST_VIEW_READ or DLB_HOST_VIEW_WRITE.
 * @param out caller storage with `struct_size` set; written only on
 *        success.
 * @return DLB_OK or a status above; DLB_ERR_INVALID_ARGUMENT (NULL
 *         argument, unknown access bits, a struct_size smaller than the
 *         first release's). Thread-safe.
 */
DLB_API dlb_status dlb_buffer_host_view(const dlb_buffer* buffer, uint32_t access, dlb_host_view* out);
/** @} */

/* ------------------------------------------------------------------------ */
/* Export                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_export Export
 * @brief Buffers out as DLManagedTensorVersioned or legacy DLManagedTensor.
 *
 * Every zero-copy export holds a reference on its buffer until its deleter
 * runs; a copy owns its memory and holds none. The deleter frees the managed
 * struct (and a copy's memory), runs exactly once, may be called from any
 * thread, and never calls back into a language runtime. Strides are always
 * written for ndim > 0; strides of size-1 and zero-size dimensions are kept
 * as the buffer has them. `data` is never NULL, even for a zero-size tensor
 * (some consumers skip the deleter of a tensor whose data is NULL).
 * @{
 */

/** Copy policy of an export (the `copy` argument of the Python protocol). */
typedef enum dlb_copy_policy {
  /**
   * Zero-copy when possible, else a host copy (the default). A legacy
   * export of read-only memory needs one (see dlb_export_legacy()).
   */
  DLB_COPY_IF_NEEDED = 0,
  /**
   * Never copy: fail with DLB_ERR_NOT_ZERO_COPY when it would be needed
   * (DLB_ERR_READ_ONLY for a legacy export of read-only memory).
   */
  DLB_COPY_NEVER = 1,
  /** Always hand out a fresh compact row-major copy with IS_COPIED set. */
  DLB_COPY_ALWAYS = 2
} dlb_copy_policy;

/** Export flag: set READ_ONLY on the export even for a writable buffer. */
#define DLB_EXPORT_READ_ONLY (UINT64_C(1) << 0)
/**
 * Export flag: share a read-only buffer's memory in a legacy export, which
 * otherwise gets a copy (the legacy struct cannot carry the fact; the caller
 * promises the consumer won't write). Also allows DLB_EXPORT_READ_ONLY on a
 * legacy export, which then marks nothing.
 */
#define DLB_EXPORT_ALLOW_READ_ONLY_LEGACY (UINT64_C(1) << 1)

/** No stream given (the Python protocol's stream=None). */
#define DLB_STREAM_NONE 0

/** Options of dlb_export_versioned() / dlb_export_legacy(). */
typedef struct dlb_export_options {
  /** sizeof(dlb_export_options) as the caller compiled it. */
  size_t struct_size;
  /** A dlb_copy_policy value. */
  int32_t copy;
  /** Non-zero: `target_device` is the device the consumer asks for. */
  int32_t has_target_device;
  /** The consumer's device (the Python protocol's dl_device). */
  DLDevice target_device;
  /**
   * The consumer's stream, as the Python protocol passes it (an integer);
   * DLB_STREAM_NONE for none. Passed to the backend's wait callback.
   */
  int64_t stream;
  /** DLB_EXPORT_* bits. */
  uint64_t flags;
} dlb_export_options;

/**
 * Fills `options` with the defaults: struct_size set, copy
 * DLB_COPY_IF_NEEDED, no target device, DLB_STREAM_NONE, no flags.
 * NULL-safe.
 */
DLB_API void dlb_export_options_init(dlb_export_options* options);

/**
 * Exports a buffer as a DLPack 1.x managed tensor.
 *
 * The result carries version {DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR}; flags
 * READ_ONLY when the buffer is read-only or DLB_EXPORT_READ_ONLY was asked
 * for; IS_COPIED only when this export made a copy itself, since the flag
 * tells the consumer it solely owns the memory (a zero-copy export of a
 * buffer imported with IS_COPIED shares that memory and carries none). A
 * copy is the consumer's own, compact, row-major and 64-byte aligned, and
 * it is writable (READ_ONLY unset) unless DLB_EXPORT_READ_ONLY is passed,
 * even when the buffer is read-only. A zero-copy export of a device whose
 * `data` is an address (DLB_DEVICE_ADDRESS) has the buffer's byte_offset
 * folded into `data` and byte_offset 0, since some consumers ignore the
 * offset; for an opaque handle (OpenCL, Vulkan, Metal, WebGPU) both are
 * kept as the buffer has them.
 * @param buffer the buffer to export; a zero-copy export takes a reference
 *        of its own, the caller's is unchanged.
 * @param options NULL means the defaults.
 * @param out on success receives a managed tensor owned by the caller, who
 *        must call its deleter exactly once (from any thread), or hand it to
 *        a consumer who will. Untouched on failure, when nothing is left
 *        allocated and no reference is taken.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL buffer or out, bad
 *         options, a stream given for an export of host memory);
 *         DLB_ERR_DELETED;
 *         DLB_ERR_NOT_ZERO_COPY (copy forbidden, none possible without);
 *         DLB_ERR_UNSUPPORTED_LAYOUT (copy forbidden, and the backend keeps
 *         the storage in a layout strides cannot express);
 *         DLB_ERR_UNSUPPORTED_DEVICE (a target device the buffer cannot
 *         reach); DLB_ERR_READ_ONLY (legacy only, see dlb_export_legacy());
 *         DLB_ERR_BACKEND; DLB_ERR_OUT_OF_MEMORY. Thread-safe.
 */
DLB_API dlb_status dlb_export_versioned(dlb_buffer* buffer, const dlb_export_options* options,
                                        DLManagedTensorVersioned** out);

/**
 * Exports a buffer as a legacy (pre-1.0) managed tensor. Same rules as
 * dlb_export_versioned(), except for read-only memory, since the legacy
 * struct has no flag to carry READ_ONLY (the array API's rule for
 * copy=None / copy=False):
 * - a read-only buffer is never shared zero-copy: with DLB_COPY_IF_NEEDED
 *   (or DLB_COPY_ALWAYS) the export is a writable host copy, the consumer's
 *   own, exactly as dlb_export_versioned() copies (IS_COPIED cannot be
 *   said, but dlb_import_legacy() of this export knows it); with
 *   DLB_COPY_NEVER it is refused with DLB_ERR_READ_ONLY. A buffer not on
 *   the CPU is refused with DLB_ERR_READ_ONLY unless the CPU device is the
 *   target (the copy would move it).
 * - DLB_EXPORT_READ_ONLY is refused with DLB_ERR_READ_ONLY.
 * - DLB_EXPORT_ALLOW_READ_ONLY_LEGACY lifts both: the memory is shared as
 *   for a writable buffer (the caller promises the consumer won't write).
 * @param buffer the buffer to export, as for dlb_export_versioned().
 * @param options NULL means the defaults.
 * @param out on success owned by the caller (call its deleter once);
 *        untouched on failure.
 */
DLB_API dlb_status dlb_export_legacy(dlb_buffer* buffer, const dlb_export_options* options,
                                     DLManagedTensor** out);

/**
 * Managed tensors exported by this library whose deleter has not run, over
 * all threads. Exact when no other thread is exporting or deleting at the
 * same moment (tests call it at quiet points). Owns nothing. Thread-safe.
 */
DLB_API int64_t dlb_live_exports(void);
/** @} */

/* ------------------------------------------------------------------------ */
/* Import                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_import Import
 * @brief Managed tensors from any producer in, as buffers.
 *
 * A legacy managed tensor has no flags. dlbridge treats it as writable, as
 * DLPack did before 1.0 (numpy 1.x and torch do the same); pass
 * DLB_IMPORT_LEGACY_READ_ONLY to treat it as read-only instead.
 * @{
 */

/** Import flag: treat a legacy tensor as read-only. */
#define DLB_IMPORT_LEGACY_READ_ONLY (UINT64_C(1) << 0)

/** Options of dlb_import_versioned() / dlb_import_legacy(). */
typedef struct dlb_import_options {
  /** sizeof(dlb_import_options) as the caller compiled it. */
  size_t struct_size;
  /** Required alignment in bytes of data + byte_offset (a power of two); 0: none. */
  uint64_t require_alignment;
  /** Non-zero: refuse a tensor that is not compact row-major. */
  int32_t require_contiguous;
  /** Non-zero: refuse a tensor flagged READ_ONLY. */
  int32_t require_writable;
  /** DLB_IMPORT_* bits. */
  uint64_t flags;
} dlb_import_options;

/** Fills `options` with the defaults (no requirements). NULL-safe. */
DLB_API void dlb_import_options_init(dlb_import_options* options);

/**
 * Takes a DLPack 1.x managed tensor in.
 *
 * Validates it first (see dlb_validate()); a major version other than 1 is
 * DLB_ERR_VERSION, and then nothing but the stable prefix is read.
 * @param tensor the managed tensor to take over; must not be NULL.
 * @param options NULL means the defaults.
 * @param out on success a new buffer with one reference owned by the caller;
 *        the buffer now owns `tensor` and calls its deleter exactly once,
 *        after the last handle and the last re-export are gone. On failure
 *        `out` is untouched and the caller still owns `tensor` (call
 *        dlb_managed_free_versioned() to give it back).
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT; DLB_ERR_VERSION; the
 *         validation statuses; DLB_ERR_ALIGNMENT; DLB_ERR_UNSUPPORTED_LAYOUT
 *         (not contiguous when required); DLB_ERR_READ_ONLY;
 *         DLB_ERR_OUT_OF_MEMORY. Thread-safe.
 */
DLB_API dlb_status dlb_import_versioned(DLManagedTensorVersioned* tensor,
                                        const dlb_import_options* options, dlb_buffer** out);

/**
 * Takes a legacy managed tensor in. Same ownership rules as
 * dlb_import_versioned(): owned by the new buffer on success, still the
 * caller's on failure. A legacy export of this library itself comes in with
 * what its struct could not say: DLB_BUFFER_COPIED for a copy (the legacy
 * export of read-only memory, DLB_COPY_ALWAYS), DLB_BUFFER_READ_ONLY for
 * read-only memory shared under DLB_EXPORT_ALLOW_READ_ONLY_LEGACY.
 */
DLB_API dlb_status dlb_import_legacy(DLManagedTensor* tensor, const dlb_import_options* options,
                                     dlb_buffer** out);

/**
 * Calls a versioned managed tensor's deleter if it has one. Reads only the
 * stable prefix, so it is right for any major version. NULL-safe. After the
 * call the caller owns nothing.
 */
DLB_API void dlb_managed_free_versioned(DLManagedTensorVersioned* tensor);

/** Calls a legacy managed tensor's deleter if it has one. NULL-safe. */
DLB_API void dlb_managed_free_legacy(DLManagedTensor* tensor);

/**
 * Import flag: memory of a device type a built-in device backend serves is
 * taken in by that backend: kDLCUDA, kDLCUDAHost and kDLCUDAManaged by the
 * CUDA backend of the tensor's device, as dlb_cuda_import_versioned(NULL,
 * tensor, stream) does; kDLOpenCL by the OpenCL backend, as
 * dlb_opencl_import_versioned(NULL, tensor, stream) does. The buffer then
 * carries the producer's stream (dlb_import_versioned_on_stream();
 * DLB_STREAM_NONE through dlb_import_versioned(): for CUDA the legacy
 * default stream, for OpenCL no pending work), exports stream-ordered and
 * copies to the host through the driver. When the backend does not take it
 * (no driver or ICD loader, built without the backend, no such device,
 * memory the driver does not know as the kind the tensor says: the
 * backend import's DLB_ERR_UNSUPPORTED_DEVICE) the tensor comes in as any
 * other memory does; other failures of the backend (a malformed handle, an
 * offset past the memory) are returned. The options' requirements
 * (alignment, contiguity, writability) are checked first in both cases.
 * Other device types ignore the flag.
 */
#define DLB_IMPORT_DEVICE_BACKEND (UINT64_C(1) << 1)
/** The earlier name of DLB_IMPORT_DEVICE_BACKEND (the same bit). */
#define DLB_IMPORT_CUDA_BACKEND DLB_IMPORT_DEVICE_BACKEND

/**
 * dlb_import_versioned() with the stream its producer ordered the tensor's
 * data before: the consumer's side of the Python protocol in one call.
 * Under DLB_IMPORT_DEVICE_BACKEND device memory goes to its built-in
 * backend with `stream` as its writer's stream; the stream is not used
 * otherwise.
 * (dlb_import_options keeps its size: a struct grown at the end would be
 * overrun by dlb_import_options_init() in programs built against an
 * earlier header, so the stream is an argument.)
 * @param tensor the managed tensor to take over; must not be NULL.
 * @param options NULL means the defaults (no routing).
 * @param stream a stream value (see the CUDA and OpenCL sections): in
 *        Python, the stream passed to the producer's __dlpack__, 1 when none
 *        was.
 * @param out on success a new buffer owned by the caller, which now owns
 *        `tensor` (its deleter runs exactly once, after the last handle
 *        and export are gone); on failure untouched, and the caller still
 *        owns `tensor`.
 * @return the dlb_import_versioned() statuses; under
 *         DLB_IMPORT_DEVICE_BACKEND also DLB_ERR_INVALID_ARGUMENT (a stream
 *         value below -1), DLB_ERR_BACKEND and DLB_ERR_OUT_OF_MEMORY from
 *         the backend. Thread-safe.
 */
DLB_API dlb_status dlb_import_versioned_on_stream(DLManagedTensorVersioned* tensor,
                                                  const dlb_import_options* options, int64_t stream,
                                                  dlb_buffer** out);

/**
 * dlb_import_legacy() with the producer's stream, as
 * dlb_import_versioned_on_stream(). Same ownership rules: the buffer owns
 * `tensor` on success, the caller keeps it on failure.
 */
DLB_API dlb_status dlb_import_legacy_on_stream(DLManagedTensor* tensor, const dlb_import_options* options,
                                               int64_t stream, dlb_buffer** out);
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_BUFFER_H_ */
