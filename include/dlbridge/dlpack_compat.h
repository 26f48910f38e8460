/**
 * @file dlpack_compat.h
 * dlbridge: DLPack's own declarations, supplied when the found dlpack.h is
 * older than what dlbridge speaks (1.x managed tensors, flag bits, newer
 * device and type codes, the 1.3 exchange API types). A header that has
 * them wins; nothing is declared twice. Included by every dlbridge header.
 */
#ifndef DLBRIDGE_DLPACK_COMPAT_H_
#define DLBRIDGE_DLPACK_COMPAT_H_

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

/** @addtogroup dlb_exchange
 * @{
 */

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
/** @} */

#endif /* DLBRIDGE_DLPACK_COMPAT_H_ */
