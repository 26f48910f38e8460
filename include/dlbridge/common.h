/**
 * @file common.h
 * dlbridge: the export macro, versions, status codes and the thread's last
 * error, and the data types every other part of the API uses.
 */
#ifndef DLBRIDGE_COMMON_H_
#define DLBRIDGE_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#include "dlbridge/dlpack_compat.h"

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
 * Legal (code, bits): Int and UInt 2/4/8/16/32/64; Float 16/32/64; OpaqueHandle
 * 8/16/32/64; Bfloat 16; Complex 32/64/128; Bool 8; the float8 codes (7..14)
 * 8; float6 (15, 16) 6; float4 (17) 4. lanes is at least 1. An element of a
 * type whose bits * lanes is not a multiple of 8 is "sub-byte": such tensors
 * are packed (little bit-endian) and their byte size is the bit count rounded
 * up to whole bytes, unless a buffer is flagged DLB_BUFFER_SUBBYTE_PADDED
 * (one byte per element, DLPack 1.1's IS_SUBBYTE_TYPE_PADDED).
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_COMMON_H_ */
