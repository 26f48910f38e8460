/**
 * @file devices.h
 * dlbridge: the DLPack rules as calls (validation, the strided copy), the
 * device table and the protocol decisions bindings ask for, and the
 * threads of large copies.
 */
#ifndef DLBRIDGE_DEVICES_H_
#define DLBRIDGE_DEVICES_H_

#include "dlbridge/buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Validation and copy                                                      */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_validation Validation and copy
 * @brief The DLPack rules as a call, and the strided copy engine.
 * @{
 */

/** Validate flag: refuse a tensor that is not compact row-major. */
#define DLB_VALIDATE_CONTIGUOUS (1u << 0)
/** Validate flag: refuse NULL strides when ndim > 0 (the DLPack 1.2 rule). */
#define DLB_VALIDATE_STRIDES_REQUIRED (1u << 1)

/**
 * Checks a tensor against the DLPack rules. Accepted: NULL strides (compact
 * row-major), negative strides, any strides on size-1 and zero-size
 * dimensions, NULL data and any byte_offset for zero-size tensors, NULL
 * shape, and any shape or strides pointer (never read), when ndim is 0.
 * Refused as impossible: a non-empty view whose bytes (from the lowest to
 * the highest its strides reach) or whose byte_offset exceed 2^57, the
 * largest virtual address space of any 64-bit machine (five-level paging).
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL tensor, ndim < 0 or >
 *         DLB_MAX_NDIM, unknown flag bits); DLB_ERR_MALFORMED (NULL shape
 *         with ndim > 0, negative extent, NULL data with a non-zero size,
 *         NULL strides under DLB_VALIDATE_STRIDES_REQUIRED);
 *         DLB_ERR_UNSUPPORTED_DTYPE; DLB_ERR_UNSUPPORTED_DEVICE;
 *         DLB_ERR_OVERFLOW (element count, byte size or byte extent past
 *         64 bits; span or byte_offset past 2^57; data + byte_offset and
 *         the extent leaving the 64-bit address space);
 *         DLB_ERR_UNSUPPORTED_LAYOUT (not contiguous under
 *         DLB_VALIDATE_CONTIGUOUS). Reads `t` only; owns nothing.
 */
DLB_API dlb_status dlb_validate(const DLTensor* t, uint32_t flags);

/**
 * Copies the elements of a strided host view into `dst` as a compact
 * row-major array. Handles negative, zero (broadcast) and arbitrary strides,
 * size-1 and zero-size dimensions, byte_offset, and any element width;
 * sub-byte types only when the view is compact.
 * @param src a valid tensor on a host device (CPU, CUDAHost, ROCMHost,
 *        CUDAManaged); read only.
 * @param dst caller-owned, `dst_size` bytes, at least the tensor's compact
 *        byte size; may be NULL only when that size is 0.
 * @param dst_size size of `dst` in bytes.
 * @return DLB_OK; the dlb_validate() statuses; DLB_ERR_INVALID_ARGUMENT
 *         (dst too small); DLB_ERR_UNSUPPORTED_DEVICE;
 *         DLB_ERR_UNSUPPORTED_LAYOUT (strided sub-byte view).
 */
DLB_API dlb_status dlb_copy_to_contiguous(const DLTensor* src, void* dst, uint64_t dst_size);

/**
 * Copy flag of dlb_copy_to_contiguous_flags(): the source holds its scalars
 * in the byte order opposite to the machine's (a big-endian array on a
 * little-endian machine). The destination receives them in the machine's
 * order: each lane's bytes, and each half of a complex number, reversed on
 * the way. One-byte and sub-byte scalars have no byte order and are copied
 * as they are.
 */
#define DLB_COPY_FLAG_SWAP_BYTES (1u << 0)
/**
 * Copy flag of dlb_copy_to_contiguous_flags(): the source's elements of
 * fewer than 8 bits are padded to a byte each (DLB_BUFFER_SUBBYTE_PADDED,
 * DLPack's IS_SUBBYTE_TYPE_PADDED), so the view may be strided and `dst`
 * receives one byte per element. Ignored for dtypes of 8 bits or more.
 */
#define DLB_COPY_FLAG_SUBBYTE_PADDED (1u << 1)
/**
 * Copy flag of dlb_copy_to_contiguous_flags(): the source's `strides` are
 * byte distances, not element counts, and need not be multiples of the
 * element size: a field of a structured array (4-byte integers 5 bytes
 * apart), which DLPack cannot describe, read for a host copy. Elements of
 * whole bytes only (DLB_ERR_UNSUPPORTED_LAYOUT otherwise), ndim up to
 * DLB_MAX_NDIM - 1, `strides` not NULL when ndim > 0. The destination is
 * compact as always. Nothing the library exports or imports has byte
 * strides: DLPack strides stay in elements.
 */
#define DLB_COPY_FLAG_BYTE_STRIDES (1u << 2)

/**
 * dlb_copy_to_contiguous() with flags saying how the source's bytes are to
 * be read: DLB_COPY_FLAG_SWAP_BYTES, DLB_COPY_FLAG_SUBBYTE_PADDED,
 * DLB_COPY_FLAG_BYTE_STRIDES. A
 * byte-swapping copy costs about as much as a plain one (the copy kernels
 * swap the bytes as they move them).
 * @param src a valid tensor on a host device; read only.
 * @param dst caller-owned, `dst_size` bytes, at least the tensor's compact
 *        byte size (one byte per element when padded); may be NULL only
 *        when that size is 0. Written on success only in full; on failure
 *        its contents are unspecified.
 * @param dst_size size of `dst` in bytes.
 * @param flags 0 or DLB_COPY_FLAG_* bits.
 * @return the statuses of dlb_copy_to_contiguous(), and
 *         DLB_ERR_INVALID_ARGUMENT for unknown flag bits. Owns nothing.
 *         Thread-safe.
 */
DLB_API dlb_status dlb_copy_to_contiguous_flags(const DLTensor* src, void* dst, uint64_t dst_size, uint32_t flags);
/** @} */

/* ------------------------------------------------------------------------ */
/* Devices and protocol rules                                               */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_devices Devices and protocol rules
 * @brief The facts and decisions bindings ask for instead of keeping their
 * own copies: the device table, compact strides, and the export planner
 * applied without exporting.
 * @{
 */

/** Device bit: a device type DLPack defines (1.3 and main: 1..20 minus 5, 6). */
#define DLB_DEVICE_KNOWN (1u << 0)
/** Device bit: the CPU reads `data` directly (CPU, CUDAHost, CUDAManaged, ROCMHost). */
#define DLB_DEVICE_HOST_READABLE (1u << 1)
/**
 * Device bit: `data` is an address, so byte_offset can be folded into it.
 * Unset: `data` is an opaque handle (OpenCL, Vulkan, Metal, WebGPU).
 */
#define DLB_DEVICE_ADDRESS (1u << 2)
/** Device bit: the Python protocol's `stream` applies (CUDA, ROCm and their host/managed kin). */
#define DLB_DEVICE_HAS_STREAMS (1u << 3)

/** What the library knows about one device type. */
typedef struct dlb_device_info {
  /** Set by the caller: sizeof(dlb_device_info) as the caller compiled it. */
  size_t struct_size;
  /** The device type asked about. */
  int32_t device_type;
  /** DLB_DEVICE_* bits. */
  uint32_t flags;
  /** Static lowercase name ("cpu", "cuda", "cuda_host", ...), owned by the library. */
  const char* name;
} dlb_device_info;

/**
 * Describes a device type from the library's device table, the one the
 * library itself decides by.
 * @param device_type any int32 value.
 * @param out caller storage with `struct_size` set; on success its fields
 *        are filled (`name` points at static storage the caller never
 *        frees); untouched on failure.
 * @return DLB_OK for a type DLPack defines; DLB_ERR_UNSUPPORTED_DEVICE (the
 *         message names the value) for any other; DLB_ERR_INVALID_ARGUMENT
 *         when `out` is NULL or its struct_size is too small. Thread-safe.
 */
DLB_API dlb_status dlb_device_type_info(int32_t device_type, dlb_device_info* out);

/**
 * Compact row-major strides, in elements, of `shape`: what the library
 * writes for a tensor without strides. Extents of 0 and 1 do not advance
 * the step; for an empty tensor (some extent 0) a step past INT64_MAX
 * saturates at INT64_MAX.
 * @param ndim 0 to DLB_MAX_NDIM.
 * @param shape `ndim` extents, each >= 0, read only; may be NULL when ndim
 *        is 0.
 * @param strides_out caller storage for `ndim` strides, written on success
 *        only; may be NULL when ndim is 0.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (ndim out of range, NULL shape
 *         or strides_out with ndim > 0, a negative extent);
 *         DLB_ERR_OVERFLOW (a non-empty shape whose strides exceed
 *         INT64_MAX). Owns nothing. Thread-safe.
 */
DLB_API dlb_status dlb_compact_strides(int32_t ndim, const int64_t* shape, int64_t* strides_out);

/**
 * Export flag: `stream` holds a value the consumer passed explicitly, so 0
 * is a literal 0 (refused for devices with streams, as the array API
 * standard says) rather than "no stream". A non-zero stream counts as given
 * with or without this flag. A given stream is refused for an export of
 * host memory; -1 means "do not synchronise", 1 and 2 the legacy and
 * per-thread default streams, other positive values a stream handle.
 */
#define DLB_EXPORT_STREAM_GIVEN (UINT64_C(1) << 2)

/**
 * The export planner applied without exporting: for a consumer that
 * imported a tensor from a legacy producer (which cannot honour a target
 * device or a copy policy itself) and must now honour them.
 * @param buffer the buffer to resolve; never consumed, the caller's
 *        reference is unchanged.
 * @param options NULL means the defaults.
 * @param out on success a new reference owned by the caller (release it
 *        with dlb_buffer_release()): `buffer` itself (retained) when it
 *        already satisfies the request; a relabelled view when the CPU was
 *        asked for and the memory is host-readable on another device
 *        (pinned or managed memory), zero-copy: the same data and strides
 *        on {kDLCPU, 0}, DLB_BUFFER_READ_ONLY as the export would set it,
 *        holding a reference on `buffer` (and its zero-copy access, taken
 *        after the buffer's wait with the options' stream) until the view's
 *        last reference goes; or a fresh compact host copy flagged
 *        DLB_BUFFER_COPIED (and DLB_BUFFER_READ_ONLY when
 *        DLB_EXPORT_READ_ONLY was asked for). Untouched on failure, when
 *        nothing is left allocated.
 * @return DLB_OK, or the status dlb_export_versioned() gives for the same
 *         buffer and options. Thread-safe.
 */
DLB_API dlb_status dlb_buffer_resolve(dlb_buffer* buffer, const dlb_export_options* options,
                                      dlb_buffer** out);

/**
 * Device bit: the library's CUDA backend takes this memory in
 * (dlb_cuda_import_*, DLB_IMPORT_CUDA_BACKEND) and allocates it
 * (dlb_buffer_alloc): kDLCUDA, kDLCUDAHost, kDLCUDAManaged. A fact of the
 * device table, set also when the library was built without CUDA or no
 * driver is present (the CUDA calls then refuse with
 * DLB_ERR_UNSUPPORTED_DEVICE).
 */
#define DLB_DEVICE_CUDA_BACKEND (1u << 4)

/**
 * The Python protocol's rule for a stream the consumer passed explicitly
 * (from_dlpack(x, stream=S) with S an integer, not None), checked against
 * the device of the memory it is for (call it once for the producer's
 * device and once for a requested device). The same rule the export
 * planner applies to dlb_export_options.stream under
 * DLB_EXPORT_STREAM_GIVEN: legal only on a device with
 * DLB_DEVICE_HAS_STREAMS, and there -1 (no synchronisation), 1 (legacy
 * default stream), 2 (per-thread default stream) or a larger value (a
 * stream handle); 0 is ambiguous and refused, as is anything below -1.
 * @param device the device of the memory; its device_id is used in the
 *        message only.
 * @param stream the consumer's stream value.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (a device without streams, such
 *         as host memory; 0 or a value below -1 on a device with streams);
 *         DLB_ERR_UNSUPPORTED_DEVICE (a device type DLPack does not
 *         define). The message names the stream and the device. Owns
 *         nothing. Thread-safe.
 */
DLB_API dlb_status dlb_check_consumer_stream(DLDevice device, int64_t stream);

/** The arithmetic facts of a layout, as dlb_layout_describe() computes them. */
typedef struct dlb_layout_info {
  /** Set by the caller: sizeof(dlb_layout_info) as the caller compiled it. */
  size_t struct_size;
  /** Number of elements: the product of the extents (1 for ndim 0). */
  uint64_t numel;
  /** Bytes the elements occupy when compact (sub-byte types rounded up). */
  uint64_t nbytes;
  /** Bits of one element: dtype bits times lanes. */
  uint32_t element_bits;
  /** Non-zero when the layout is compact row-major (NULL strides count). */
  int32_t contiguous;
  /**
   * The lowest and highest element offsets the view reaches, relative to
   * the element at index [0, ...] (min_offset <= 0 <= max_offset), in
   * elements; both 0 for an empty view. Add byte_offset / element size to
   * place them in the memory.
   */
  int64_t min_offset;
  /** See min_offset. */
  int64_t max_offset;
} dlb_layout_info;

/**
 * Checks a layout (device, dtype, shape, strides; `data` and `byte_offset`
 * are not read) as dlb_buffer_from_backend() checks one, and computes its
 * element count, compact size, element width, contiguity and the range of
 * element offsets a strided view reaches: the arithmetic a binding needs
 * to check that a view fits its memory, done by the library that also
 * decides by it.
 * @param layout read during the call only.
 * @param out caller storage with `struct_size` set; filled on success
 *        only; owns nothing.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL argument, struct_size too
 *         small, ndim out of range, NULL shape with ndim > 0);
 *         DLB_ERR_MALFORMED (a negative extent); DLB_ERR_UNSUPPORTED_DTYPE;
 *         DLB_ERR_UNSUPPORTED_DEVICE; DLB_ERR_OVERFLOW. Thread-safe.
 */
DLB_API dlb_status dlb_layout_describe(const DLTensor* layout, dlb_layout_info* out);

/**
 * dlb_layout_describe() for a layout as a buffer with the given buffer
 * flags holds it: with DLB_BUFFER_SUBBYTE_PADDED, elements of fewer than 8
 * bits take a byte each, and every figure is that byte size rule's
 * (element_bits 8, nbytes the element count, byte-addressable strides): the
 * one rule by which the library allocates, copies, pickles and shares
 * padded tensors.
 * @param layout read during the call only.
 * @param flags 0 or DLB_BUFFER_SUBBYTE_PADDED.
 * @param out caller storage with `struct_size` set; filled on success
 *        only; owns nothing.
 * @return the statuses of dlb_layout_describe(); DLB_ERR_INVALID_ARGUMENT
 *         for other flag bits, or DLB_BUFFER_SUBBYTE_PADDED with a dtype
 *         of 8 bits or more. Thread-safe.
 */
DLB_API dlb_status dlb_layout_describe_flags(const DLTensor* layout, uint64_t flags, dlb_layout_info* out);
/** @} */

/* ------------------------------------------------------------------------ */
/* Copy threads                                                             */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_copy_threads Copy threads
 * @brief How many threads a large host copy may use.
 *
 * Every host copy the library makes (dlb_buffer_to_host, an export that
 * copies, dlb_copy_to_contiguous, an import asked for a compact copy) goes
 * through one engine. A copy of a few MiB and more is split among the
 * calling thread and a process-wide pool of worker threads; smaller copies
 * run on the caller alone. The workers start with the first copy that needs
 * them, are joined at process exit, and are not inherited by a child after
 * fork (the child starts its own). One copy uses the pool at a time: a copy
 * that finds it busy runs on its own thread, never waiting for another.
 * @{
 */

/**
 * Sets the number of threads a large copy uses, the caller included:
 * 0 is one per core the process may run on, 1 makes every copy serial.
 * Without a call the environment variable DLB_COPY_THREADS (read once, at
 * the first copy that asks) sets it, and 0 when it is unset or invalid.
 * Takes effect for copies that start after it returns; a pool of another
 * size is replaced at the next large copy. Owns nothing. Thread-safe.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT for n < 0 or n > 64 (the setting
 *         is then unchanged).
 */
DLB_API dlb_status dlb_set_copy_threads(int n);

/**
 * The number of threads a large copy would use now (>= 1): the setting,
 * with 0 resolved to the core count. Thread-safe.
 */
DLB_API int dlb_copy_threads(void);
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_DEVICES_H_ */
