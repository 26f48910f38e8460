/**
 * @file dlbridge.h
 * dlbridge: DLPack export and import with correct lifetimes, behind a
 * stable C ABI.
 *
 * This header is valid C99 and C++ (C++11 or later). Every function in it is
 * a real exported symbol (no macro-only or inline entry points), so ctypes,
 * cffi's ABI mode and hand-written Rust declarations can reach all of it.
 *
 * Conventions that hold for every function below:
 *  - A function returning dlb_status returns DLB_OK (0) on success. On
 *    failure it returns one of the DLB_ERR_* codes and sets the calling
 *    thread's last-error message (dlb_last_error_message()), which names the
 *    offending value. A successful call does not clear an earlier message.
 *  - An `out` argument is written only on success; on failure it is left
 *    exactly as the caller passed it.
 *  - Functions that free or release accept NULL and then do nothing.
 *  - No C++ exception and no abort() leaves the library, whatever the input.
 *
 * The header is organised in sections, which are also the groups of the API
 * reference: version, status and errors, data types, buffers, export, import,
 * validation and copy, backends.
 */
#ifndef DLBRIDGE_DLBRIDGE_H_
#define DLBRIDGE_DLBRIDGE_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

/* ------------------------------------------------------------------------ */
/* DLPack 1.x declarations for older headers                                */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_dlpack DLPack compatibility
 * @brief What DLPack 1.x adds, declared here when the found dlpack.h is older.
 *
 * dlbridge speaks DLPack 1.x (DLManagedTensorVersioned) and the legacy
 * DLManagedTensor. Debian 12 ships dlpack.h 0.6, which has neither the
 * versioned struct nor the newer codes. When the included header predates a
 * release, the declarations that release introduced are supplied below with
 * the same names, values and layout; a header that already has them wins and
 * nothing here is declared twice.
 * @{
 */

#if !defined(DLPACK_MAJOR_VERSION)
/** Set when dlbridge declared the DLPack 1.x structs itself. */
#define DLB_DLPACK_DECLARED_BY_DLBRIDGE 1

/** Major version of the DLPack ABI dlbridge declares (the header had none). */
#define DLPACK_MAJOR_VERSION 1
/** Minor version of the DLPack ABI dlbridge declares. */
#define DLPACK_MINOR_VERSION 3

/** A DLPack ABI version: major changes break the ABI, minor ones do not. */
typedef struct DLPackVersion {
  /** ABI-breaking version; a consumer must refuse a major it does not know. */
  uint32_t major;
  /** Compatible additions within one major. */
  uint32_t minor;
} DLPackVersion;

/** The tensor must not be written through (DLPack 1.0). */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
/** The producer made a copy for this export; the consumer owns it alone. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
/** Sub-byte elements are each padded to a whole byte (DLPack 1.1). */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

/**
 * The DLPack 1.x managed tensor. Everything up to and including `flags` is
 * promised stable across future major versions.
 */
typedef struct DLManagedTensorVersioned {
  /** ABI version of this struct, written by the producer. */
  DLPackVersion version;
  /** Producer-private context. */
  void* manager_ctx;
  /** Frees the struct and what it manages; may be NULL; called once. */
  void (*deleter)(struct DLManagedTensorVersioned* self);
  /** DLPACK_FLAG_BITMASK_* bits. */
  uint64_t flags;
  /** The tensor itself. */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif /* !DLPACK_MAJOR_VERSION */

/*
 * Newer device and type codes, as enumerators with DLPack's own names, added
 * only when the found header is older than the release that introduced them.
 * 0.6 headers define DLPACK_VERSION (60); 1.x headers define the major and
 * minor macros instead (the block above defines them for 0.x headers, after
 * which DLB_DLPACK_DECLARED_BY_DLBRIDGE tells the two cases apart).
 */
#if defined(DLB_DLPACK_DECLARED_BY_DLBRIDGE) && defined(DLPACK_VERSION) && DLPACK_VERSION < 70
enum {
  kDLOneAPI = 14, /**< Intel oneAPI device (DLPack 0.7). */
  kDLWebGPU = 15, /**< WebGPU device (DLPack 0.7). */
  kDLHexagon = 16 /**< Qualcomm Hexagon DSP (DLPack 0.7). */
};
#endif
#if defined(DLB_DLPACK_DECLARED_BY_DLBRIDGE) && defined(DLPACK_VERSION) && DLPACK_VERSION < 80
enum {
  kDLBool = 6 /**< Boolean type code, 8 bits per element (DLPack 0.8). */
};
#endif
#if defined(DLB_DLPACK_DECLARED_BY_DLBRIDGE)
enum {
  kDLMAIA = 17 /**< Microsoft MAIA device (DLPack 1.0). */
};
#endif
#if defined(DLB_DLPACK_DECLARED_BY_DLBRIDGE) || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1)
enum {
  kDLFloat8_e3m4 = 7, /**< float8, 3 exponent and 4 mantissa bits (DLPack 1.1). */
  kDLFloat8_e4m3 = 8, /**< float8, 4 exponent and 3 mantissa bits, IEEE-like (DLPack 1.1). */
  kDLFloat8_e4m3b11fnuz = 9, /**< float8 e4m3 with exponent bias 11, finite, no negative zero (DLPack 1.1). */
  kDLFloat8_e4m3fn = 10, /**< float8 e4m3, finite only, NaN but no infinities (DLPack 1.1). */
  kDLFloat8_e4m3fnuz = 11, /**< float8 e4m3, finite, no negative zero (DLPack 1.1). */
  kDLFloat8_e5m2 = 12, /**< float8, 5 exponent and 2 mantissa bits, IEEE-like (DLPack 1.1). */
  kDLFloat8_e5m2fnuz = 13, /**< float8 e5m2, finite, no negative zero (DLPack 1.1). */
  kDLFloat8_e8m0fnu = 14, /**< float8 scale type: 8 exponent bits, no mantissa, unsigned (DLPack 1.1). */
  kDLFloat6_e2m3fn = 15, /**< float6, 2 exponent and 3 mantissa bits, finite (DLPack 1.1). */
  kDLFloat6_e3m2fn = 16, /**< float6, 3 exponent and 2 mantissa bits, finite (DLPack 1.1). */
  kDLFloat4_e2m1fn = 17 /**< float4, 2 exponent bits and 1 mantissa bit, finite (DLPack 1.1). */
};
#ifndef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)
#endif
#endif
#if defined(DLB_DLPACK_DECLARED_BY_DLBRIDGE) || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 2)
enum {
  kDLTrn = 18 /**< AWS Trainium device (DLPack 1.2). */
};
#endif
/** @} */

/* ------------------------------------------------------------------------ */
/* Export macro                                                             */
/* ------------------------------------------------------------------------ */

/**
 * @def DLB_API
 * Marks a function as part of the exported C ABI: default visibility with
 * GCC and Clang (the library is built with hidden visibility), dllexport /
 * dllimport on Windows.
 */
#if defined(_WIN32)
#if defined(DLB_BUILDING_LIBRARY)
#define DLB_API __declspec(dllexport)
#else
#define DLB_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define DLB_API __attribute__((visibility("default")))
#else
#define DLB_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_version Version
 * @brief Compile-time and run-time versions of the library and of DLPack.
 * @{
 */

/** Major version of the dlbridge headers; the SONAME changes with it. */
#define DLB_VERSION_MAJOR 0
/** Minor version of the dlbridge headers. */
#define DLB_VERSION_MINOR 1
/** Patch version of the dlbridge headers. */
#define DLB_VERSION_PATCH 0
/** The header version as one number: major * 10000 + minor * 100 + patch. */
#define DLB_VERSION_NUMBER (DLB_VERSION_MAJOR * 10000 + DLB_VERSION_MINOR * 100 + DLB_VERSION_PATCH)

/** Major DLPack version the library writes into versioned exports. */
#define DLB_DLPACK_MAJOR 1
/** Minor DLPack version the library writes into versioned exports. */
#define DLB_DLPACK_MINOR 3

/**
 * The library's version as "MAJOR.MINOR.PATCH".
 * @return a static string; never NULL; never freed by the caller.
 * Thread-safe.
 */
DLB_API const char* dlb_version_string(void);

/**
 * The library's version as major * 10000 + minor * 100 + patch; compare with
 * DLB_VERSION_NUMBER to detect a header/library mismatch. Thread-safe.
 */
DLB_API uint32_t dlb_version_number(void);

/**
 * The DLPack version the library writes into the `version` field of every
 * DLManagedTensorVersioned it exports ({DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR}).
 * Thread-safe.
 */
DLB_API DLPackVersion dlb_dlpack_version(void);
/** @} */

/* ------------------------------------------------------------------------ */
/* Status and errors                                                        */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_errors Status and errors
 * @brief Status codes with fixed numbers, and the thread-local last error.
 *
 * The numbers below are part of the ABI and never change; new codes get new
 * numbers. dlb_status_name() returns the constant's name for each of them.
 * @{
 */

/** Result of a call: DLB_OK or one of the DLB_ERR_* codes. */
typedef int32_t dlb_status;

/** Success. */
#define DLB_OK 0
/** An argument is NULL where it may not be, or out of its documented range. */
#define DLB_ERR_INVALID_ARGUMENT 1
/** An allocation inside the library failed. */
#define DLB_ERR_OUT_OF_MEMORY 2
/** The buffer was deleted (donated) with dlb_buffer_delete(). */
#define DLB_ERR_DELETED 3
/** Zero-copy access is impossible and the caller did not allow a copy. */
#define DLB_ERR_NOT_ZERO_COPY 4
/** Unknown type code, or bits/lanes not legal for the code. */
#define DLB_ERR_UNSUPPORTED_DTYPE 5
/** Unknown device type, or a device the buffer cannot be moved to. */
#define DLB_ERR_UNSUPPORTED_DEVICE 6
/** A layout DLPack cannot express (tiled, multi-part, extents unknown). */
#define DLB_ERR_UNSUPPORTED_LAYOUT 7
/** Writable access was required of read-only memory. */
#define DLB_ERR_READ_ONLY 8
/** A DLPack major version other than 1. */
#define DLB_ERR_VERSION 9
/** An element count, byte size or byte extent does not fit in 64 bits. */
#define DLB_ERR_OVERFLOW 10
/** An incoming tensor breaks the DLPack rules (negative extent, NULL data...). */
#define DLB_ERR_MALFORMED 11
/** The data pointer is not aligned as the caller required. */
#define DLB_ERR_ALIGNMENT 12
/** A backend callback reported a failure; the message carries its text. */
#define DLB_ERR_BACKEND 13
/** A bug in dlbridge: an invariant did not hold. Please report it. */
#define DLB_ERR_INTERNAL 14
/** Not a status: the number of status codes, for iteration in tests. */
#define DLB_STATUS_COUNT 15

/**
 * The name of a status constant, e.g. "DLB_ERR_DELETED".
 * @return a static string for any value; "DLB_UNKNOWN_STATUS" for a number
 *         that is not a known code. Never NULL. Thread-safe.
 */
DLB_API const char* dlb_status_name(dlb_status code);

/**
 * The message of the calling thread's last failed call.
 * @return never NULL; "" when no call failed since the last
 *         dlb_clear_last_error(). The string is owned by the library and
 *         stays valid until the next dlbridge call on this thread.
 */
DLB_API const char* dlb_last_error_message(void);

/** The status of the calling thread's last failed call, or DLB_OK. Owns nothing. */
DLB_API dlb_status dlb_last_error_code(void);

/** Clears the calling thread's last error (code DLB_OK, message ""). Owns nothing. */
DLB_API void dlb_clear_last_error(void);
/** @} */

/* ------------------------------------------------------------------------ */
/* Data types                                                               */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_dtypes Data types and limits
 * @brief The dtype model shared by every part of the library.
 *
 * Legal (code, bits): Int and UInt 8/16/32/64; Float 16/32/64; OpaqueHandle
 * 8/16/32/64; Bfloat 16; Complex 32/64/128; Bool 8; the float8 codes (7..14)
 * 8; float6 (15, 16) 6; float4 (17) 4. lanes is at least 1. An element of a
 * type whose bits * lanes is not a multiple of 8 is "sub-byte": such tensors
 * are packed (little bit-endian) and their byte size is the bit count rounded
 * up to whole bytes.
 * @{
 */

/** Largest ndim the library accepts anywhere (numpy's own limit is 64). */
#define DLB_MAX_NDIM 64

/**
 * Checks that a dtype is one DLPack defines.
 * @return DLB_OK, or DLB_ERR_UNSUPPORTED_DTYPE with a message naming the
 *         code, bits or lanes at fault. Thread-safe.
 */
DLB_API dlb_status dlb_dtype_check(DLDataType dtype);

/**
 * Writes the numpy-style name of a dtype ("float32", "bfloat16", "bool",
 * "complex64", "float8_e4m3fn"; "float32x4" for 4 lanes) into `out`.
 * @param dtype the dtype to name.
 * @param out caller-owned, at least `out_size` bytes; written only on
 *        success, always NUL-terminated then.
 * @param out_size size of `out` in bytes, NUL included.
 * @return DLB_OK; DLB_ERR_UNSUPPORTED_DTYPE for an illegal dtype;
 *         DLB_ERR_INVALID_ARGUMENT when `out` is NULL or too small.
 */
DLB_API dlb_status dlb_dtype_name(DLDataType dtype, char* out, size_t out_size);

/**
 * Parses a name as written by dlb_dtype_name() (also "float", "int",
 * "double", "half", "complex" as numpy's aliases for 64-bit/16-bit types).
 * @param name NUL-terminated dtype name.
 * @param out written only on success.
 * @return DLB_OK; DLB_ERR_UNSUPPORTED_DTYPE naming the string;
 *         DLB_ERR_INVALID_ARGUMENT for NULL pointers.
 */
DLB_API dlb_status dlb_dtype_from_name(const char* name, DLDataType* out);
/** @} */

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
/** Reported by dlb_buffer_flags(): the buffer was deleted (donated). */
#define DLB_BUFFER_DELETED (UINT64_C(1) << 8)
/** Reported: the data was imported and its producer marked it IS_COPIED, or the buffer is a copy dlb_buffer_resolve() made. */
#define DLB_BUFFER_COPIED (UINT64_C(1) << 9)
/** Reported: the buffer holds a tensor imported from another producer. */
#define DLB_BUFFER_IMPORTED (UINT64_C(1) << 10)
/** Reported: the buffer is a storage on a backend other than the host. */
#define DLB_BUFFER_BACKEND (UINT64_C(1) << 11)

/**
 * Allocates zero-filled host memory for a compact row-major tensor.
 *
 * The data is aligned to at least 64 bytes. Zero-size tensors (some extent 0)
 * and 0-d tensors (ndim 0, shape may be NULL) are allowed.
 * @param device {kDLCPU, 0}; or kDLCUDA, kDLCUDAHost, kDLCUDAManaged with a
 *        device ordinal: dlb_cuda_buffer_alloc() on a backend of that device
 *        that the library keeps for the life of the process (statuses as
 *        there).
 * @param dtype element type; must pass dlb_dtype_check().
 * @param ndim number of dimensions, 0 to DLB_MAX_NDIM.
 * @param shape `ndim` extents, copied; may be NULL only when ndim is 0.
 * @param out on success receives a new buffer with one reference, owned by
 *        the caller (release with dlb_buffer_release). Untouched on failure,
 *        when nothing is allocated.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL out, NULL shape with ndim
 *         > 0, ndim < 0 or > DLB_MAX_NDIM); DLB_ERR_MALFORMED (negative
 *         extent); DLB_ERR_UNSUPPORTED_DTYPE; DLB_ERR_UNSUPPORTED_DEVICE
 *         (neither CPU nor CUDA, or no CUDA); DLB_ERR_OVERFLOW;
 *         DLB_ERR_OUT_OF_MEMORY; DLB_ERR_BACKEND (CUDA).
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
 * @param flags 0 or DLB_BUFFER_READ_ONLY.
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
 * DLB_BUFFER_DELETED, DLB_BUFFER_COPIED, DLB_BUFFER_IMPORTED,
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
  /** Zero-copy when possible, else a host copy (the default). */
  DLB_COPY_IF_NEEDED = 0,
  /** Never copy: fail with DLB_ERR_NOT_ZERO_COPY when it would be needed. */
  DLB_COPY_NEVER = 1,
  /** Always hand out a fresh compact row-major copy with IS_COPIED set. */
  DLB_COPY_ALWAYS = 2
} dlb_copy_policy;

/** Export flag: set READ_ONLY on the export even for a writable buffer. */
#define DLB_EXPORT_READ_ONLY (UINT64_C(1) << 0)
/**
 * Export flag: allow the legacy export of a read-only buffer (the legacy
 * struct cannot carry the fact; the caller promises the consumer won't
 * write).
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
 *         reach); DLB_ERR_READ_ONLY (legacy only, see dlb_export_legacy);
 *         DLB_ERR_BACKEND; DLB_ERR_OUT_OF_MEMORY. Thread-safe.
 */
DLB_API dlb_status dlb_export_versioned(dlb_buffer* buffer, const dlb_export_options* options,
                                        DLManagedTensorVersioned** out);

/**
 * Exports a buffer as a legacy (pre-1.0) managed tensor. Same rules as
 * dlb_export_versioned(), except that a read-only buffer (or
 * DLB_EXPORT_READ_ONLY) is refused with DLB_ERR_READ_ONLY unless
 * DLB_EXPORT_ALLOW_READ_ONLY_LEGACY is passed, since the legacy struct has
 * no flag to carry it.
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
 * caller's on failure.
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
 * Import flag: memory of a device type with DLB_DEVICE_CUDA_BACKEND
 * (kDLCUDA, kDLCUDAHost, kDLCUDAManaged) is taken in by the library's CUDA
 * backend of the tensor's device, as dlb_cuda_import_versioned(NULL,
 * tensor, stream) does: the buffer then carries the producer's stream
 * (dlb_import_versioned_on_stream(); DLB_STREAM_NONE, the legacy default
 * stream, through dlb_import_versioned()), exports stream-ordered and
 * copies to the host through the driver. When the backend does not take it
 * (no driver, built without CUDA, no such device, memory the driver does
 * not know as the kind the tensor says: the CUDA import's
 * DLB_ERR_UNSUPPORTED_DEVICE) the tensor comes in as any other memory
 * does. The options' requirements (alignment, contiguity, writability) are
 * checked first in both cases. Other device types ignore the flag.
 */
#define DLB_IMPORT_CUDA_BACKEND (UINT64_C(1) << 1)

/**
 * dlb_import_versioned() with the stream its producer ordered the tensor's
 * data before: the consumer's side of the Python protocol in one call.
 * Under DLB_IMPORT_CUDA_BACKEND CUDA memory goes to the CUDA backend with
 * `stream` as its writer's stream; the stream is not used otherwise.
 * (dlb_import_options keeps its size: a struct grown at the end would be
 * overrun by dlb_import_options_init() in programs built against an
 * earlier header, so the stream is an argument.)
 * @param tensor the managed tensor to take over; must not be NULL.
 * @param options NULL means the defaults (no routing).
 * @param stream a stream value (see the CUDA section): in Python, the
 *        stream passed to the producer's __dlpack__, 1 when none was.
 * @param out on success a new buffer owned by the caller, which now owns
 *        `tensor` (its deleter runs exactly once, after the last handle
 *        and export are gone); on failure untouched, and the caller still
 *        owns `tensor`.
 * @return the dlb_import_versioned() statuses; under
 *         DLB_IMPORT_CUDA_BACKEND also DLB_ERR_INVALID_ARGUMENT (a stream
 *         value below -1), DLB_ERR_BACKEND and DLB_ERR_OUT_OF_MEMORY from
 *         the CUDA backend. Thread-safe.
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
 * dimensions, NULL data for zero-size tensors, any byte_offset, NULL shape
 * when ndim is 0.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL tensor, ndim < 0 or >
 *         DLB_MAX_NDIM, unknown flag bits); DLB_ERR_MALFORMED (NULL shape
 *         with ndim > 0, negative extent, NULL data with a non-zero size,
 *         NULL strides under DLB_VALIDATE_STRIDES_REQUIRED);
 *         DLB_ERR_UNSUPPORTED_DTYPE; DLB_ERR_UNSUPPORTED_DEVICE;
 *         DLB_ERR_OVERFLOW (element count, byte size or byte extent);
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
/** @} */

/* ------------------------------------------------------------------------ */
/* Backends                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_backends Backends
 * @brief Storages that live in another memory system.
 *
 * A backend is a table of callbacks describing a memory system: a device
 * runtime, a remote store, a proxy. Every callback may be NULL; a backend
 * with only `copy_to_host` is legal and its buffers export by copying.
 *
 * Callbacks returning int32_t return 0 on success and non-zero on failure;
 * a failing callback may call dlb_backend_set_error() first, and dlbridge
 * then returns DLB_ERR_BACKEND with a message naming the backend, the
 * callback and that text. Callbacks may be called from any thread that uses
 * the backend's buffers, concurrently; they must not call back into
 * dlbridge except dlb_backend_set_error(). `ctx` is the pointer given to
 * dlb_backend_create(); `storage` is the pointer given to
 * dlb_buffer_from_backend().
 * @{
 */

/** Opaque reference-counted backend handle. */
typedef struct dlb_backend dlb_backend;

/** A storage whose layout DLPack strides describe (the default). */
#define DLB_LAYOUT_STRIDED 0
/** A storage kept in tiles: no stride pattern reaches its elements. */
#define DLB_LAYOUT_TILED 1
/** A storage in several parts (a tuple of buffers). */
#define DLB_LAYOUT_MULTI_PART 2
/** A storage whose extents are not known yet (dynamic shape). */
#define DLB_LAYOUT_DYNAMIC 3

/** The callbacks of a backend. Zero-fill it, set struct_size, then fill in. */
typedef struct dlb_backend_vtable {
  /** sizeof(dlb_backend_vtable) as the caller compiled it. */
  size_t struct_size;
  /** The backend's name, used in messages ("backend 'remote' ..."); copied. */
  const char* name;
  /**
   * Zero-copy access: on success write the address the layout's byte_offset
   * and strides apply to into `*data`, and into `*access_ref` a reference
   * that keeps that memory valid until release_access() is called with it.
   * NULL: the backend has no zero-copy access.
   */
  int32_t (*acquire_access)(void* ctx, void* storage, void** data, void** access_ref);
  /** Ends one acquire_access(); called exactly once per successful acquire. */
  void (*release_access)(void* ctx, void* storage, void* access_ref);
  /**
   * Copies the whole storage into `dst` (`dst_size` bytes, 64-byte aligned,
   * owned by dlbridge) as a compact row-major array of the layout's shape
   * and dtype. NULL: the backend cannot copy to host.
   */
  int32_t (*copy_to_host)(void* ctx, void* storage, void* dst, uint64_t dst_size);
  /**
   * Waits until pending writes to the storage are finished, or orders them
   * before the consumer's `stream` (DLB_STREAM_NONE: wait on the host).
   * Called before every zero-copy export and before every copy, once per
   * export (once per buffer if the buffer is DLB_BUFFER_IMMUTABLE). NULL:
   * storages are always ready.
   */
  int32_t (*wait_ready)(void* ctx, void* storage, int64_t stream);
  /** Frees the storage when its buffer is gone. NULL: nothing to free. */
  void (*free_storage)(void* ctx, void* storage);
  /**
   * Returns a DLB_LAYOUT_* value for the storage; anything but
   * DLB_LAYOUT_STRIDED rules zero-copy out. NULL: always strided.
   */
  int32_t (*query_layout)(void* ctx, void* storage);
  /** Called once with ctx when the backend's last reference goes. May be NULL. */
  void (*destroy)(void* ctx);
} dlb_backend_vtable;

/**
 * Creates a backend from a callback table (copied; `name` copied too).
 * @param vtable the callbacks; struct_size must be set; read during the call.
 * @param ctx passed to every callback and to `destroy`; owned by the backend
 *        once this call succeeds.
 * @param out on success a backend with one reference owned by the caller.
 *        Buffers made on it hold references of their own. On failure
 *        untouched, and `destroy` is not called.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT (NULL vtable or out,
 *         struct_size too small, NULL or empty name, release_access missing
 *         while acquire_access is set); DLB_ERR_OUT_OF_MEMORY.
 */
DLB_API dlb_status dlb_backend_create(const dlb_backend_vtable* vtable, void* ctx,
                                      dlb_backend** out);

/** Adds a reference to a backend. NULL-safe. @return `backend`. */
DLB_API dlb_backend* dlb_backend_retain(dlb_backend* backend);

/**
 * Drops a reference; the last one (buffers count) calls `destroy(ctx)`.
 * NULL-safe.
 */
DLB_API void dlb_backend_release(dlb_backend* backend);

/**
 * Makes a buffer over a backend storage.
 * @param backend the backend; the buffer takes a reference of its own.
 * @param storage the backend's handle for the storage, passed to its callbacks.
 * @param layout device, dtype, shape, strides (NULL: compact row-major) and
 *        byte_offset of the storage; `layout->data` is ignored. Copied.
 * @param flags 0, DLB_BUFFER_READ_ONLY, DLB_BUFFER_IMMUTABLE.
 * @param out on success a new buffer owned by the caller; the buffer owns
 *        `storage` and calls free_storage when its last reference goes. On
 *        failure untouched, and the caller still owns `storage`.
 * @return DLB_OK; DLB_ERR_INVALID_ARGUMENT; the dlb_validate() statuses for
 *         the layout (data excepted); DLB_ERR_OUT_OF_MEMORY.
 */
DLB_API dlb_status dlb_buffer_from_backend(dlb_backend* backend, void* storage,
                                           const DLTensor* layout, uint64_t flags,
                                           dlb_buffer** out);

/**
 * Records the calling thread's backend error text, for a callback about to
 * return non-zero. `message` is copied (truncated to 255 bytes), so the
 * caller keeps ownership of it; NULL clears. Thread-local.
 */
DLB_API void dlb_backend_set_error(const char* message);
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
/** @} */

/* ------------------------------------------------------------------------ */
/* CUDA                                                                     */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_cuda CUDA
 * @brief CUDA device, pinned host and managed memory as a built-in backend.
 *
 * The library has no link-time dependency on CUDA: the driver library
 * (libcuda.so.1) is loaded with dlopen on the first call below that needs
 * it, and stays loaded. Every function here returns
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

/* ------------------------------------------------------------------------ */
/* DLPack C exchange API                                                    */
/* ------------------------------------------------------------------------ */

/**
 * @defgroup dlb_exchange DLPack C exchange API
 * @brief The DLPack 1.3 table through which C code of one Python framework
 * takes tensors of another without a capsule, and dlbridge's allocator.
 *
 * A Python tensor type publishes a DLPackExchangeAPI as the class attribute
 * `__dlpack_c_exchange_api__`: a PyCapsule named "dlpack_exchange_api"
 * (DLB_EXCHANGE_API_CAPSULE_NAME) holding a `DLPackExchangeAPI*` that lives
 * as long as the process. A consumer looks it up on `type(obj)` (not on the
 * object), checks the capsule name and `header.version.major` (walking
 * `header.prev_api` for an older table it speaks), and calls the functions
 * with the GIL held. Every function but the allocator returns 0 on success
 * and -1 with a Python exception set; none lets a C++ exception out.
 *
 * The types below are DLPack 1.3's, with its names and layout. They are
 * declared here only when the found dlpack.h predates 1.3; a 1.3 header's
 * own declarations win. `void*` stands for `PyObject*`, so that no Python
 * header is needed to declare the table.
 * @{
 */

/** Name of the PyCapsule that holds a DLPackExchangeAPI*. */
#define DLB_EXCHANGE_API_CAPSULE_NAME "dlpack_exchange_api"

#if defined(DLB_DLPACK_DECLARED_BY_DLBRIDGE) || DLPACK_MAJOR_VERSION < 1 || \
    (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 3)
/** Set when dlbridge declared the DLPack 1.3 exchange API types itself. */
#define DLB_EXCHANGE_API_DECLARED_BY_DLBRIDGE 1

/**
 * Allocates a new tensor in the producer's library. Only `dtype`, `ndim`,
 * `shape` and `device` of `prototype` count. On success `*out` is a managed
 * tensor the caller owns (call its deleter once) and the result is 0; on
 * failure `set_error(error_ctx, kind, message)` is called (`kind` a Python
 * exception name such as "ValueError") and the result is -1.
 */
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
    void (*SetError)(void* error_ctx, const char* kind, const char* message));

/**
 * What `py_object.__dlpack__()` gives, without a capsule and without stream
 * synchronisation: `*out` is a managed tensor the caller owns.
 */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void* py_object,
                                                     DLManagedTensorVersioned** out);

/**
 * The reverse: a new Python object (a new reference in `*out_py_object`) of
 * the producer's tensor type over `tensor`. Takes ownership of `tensor`
 * whatever the outcome.
 */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned* tensor,
                                                   void** out_py_object);

/**
 * A borrowed view of `py_object` filled into caller storage (shape and
 * strides point into the object), valid until control returns to the
 * object's owner. No allocation, no reference taken. May be NULL in a table.
 */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out);

/** The producer's current work stream on a device; NULL for host devices. */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void** out_current_stream);

/**
 * The stable head of every exchange table: its version, and a chain to the
 * tables of older majors the producer still offers (NULL: none).
 */
typedef struct DLPackExchangeAPIHeader {
  /** DLPack version of the table; a consumer refuses a major it does not speak. */
  DLPackVersion version;
  /** An older table (its header), or NULL. */
  struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;

/** The DLPack 1.x exchange table, functions in this order. */
typedef struct DLPackExchangeAPI {
  /** Version and chain. */
  DLPackExchangeAPIHeader header;
  /** See DLPackManagedTensorAllocator. */
  DLPackManagedTensorAllocator managed_tensor_allocator;
  /** See DLPackManagedTensorFromPyObjectNoSync. */
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  /** See DLPackManagedTensorToPyObjectNoSync. */
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  /** See DLPackDLTensorFromPyObjectNoSync; may be NULL. */
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  /** See DLPackCurrentWorkStream. */
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;
#endif

/**
 * dlbridge's DLPackManagedTensorAllocator: a fresh, zero-filled, compact
 * row-major host tensor of the prototype's dtype, ndim and shape (its data,
 * strides and byte_offset are ignored), exported as dlb_export_versioned()
 * exports: version {DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR}, writable, strides
 * written, data 64-byte aligned and never NULL, counted in
 * dlb_live_exports() until its deleter runs.
 *
 * Needs no Python and no GIL; thread-safe.
 * @param prototype read during the call only; its device must be
 *        {kDLCPU, 0}.
 * @param out on success receives a managed tensor owned by the caller, who
 *        calls its deleter exactly once (from any thread) or hands it on.
 *        Untouched on failure.
 * @param error_ctx passed to `set_error` unchanged.
 * @param set_error called exactly once when the call fails, never on
 *        success, with a Python exception name as `kind` and a message
 *        naming the offending value (both valid during the call only):
 *        "ValueError" for a NULL prototype or out, ndim out of 0 to
 *        DLB_MAX_NDIM, a NULL shape with ndim > 0, a negative extent, a
 *        device other than {kDLCPU, 0}, or a size that overflows 64 bits
 *        (numpy's words for these); "TypeError" for a dtype DLPack does not
 *        define; "MemoryError" when memory runs out. May be NULL, when the
 *        failure is reported by the result and the thread's last error only.
 * @return 0 on success; -1 on failure, when nothing is left allocated. The
 *         thread's last error (dlb_last_error_message()) holds the same
 *         message.
 */
DLB_API int dlb_managed_tensor_alloc(DLTensor* prototype, DLManagedTensorVersioned** out,
                                     void* error_ctx,
                                     void (*set_error)(void* error_ctx, const char* kind,
                                                       const char* message));
/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#include "dlbridge/share.h"

#endif /* DLBRIDGE_DLBRIDGE_H_ */
