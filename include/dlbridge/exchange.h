/**
 * @file exchange.h
 * dlbridge: the DLPack 1.3 C exchange API and dlbridge's allocator for it.
 */
#ifndef DLBRIDGE_EXCHANGE_H_
#define DLBRIDGE_EXCHANGE_H_

#include "dlbridge/common.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * The table's types are DLPack 1.3's, with its names and layout, declared
 * by dlbridge/dlpack_compat.h when the found dlpack.h predates 1.3 (a 1.3
 * header's own declarations win). `void*` stands for `PyObject*` there, so
 * that no Python header is needed to declare the table.
 * @{
 */

/** Name of the PyCapsule that holds a DLPackExchangeAPI*. */
#define DLB_EXCHANGE_API_CAPSULE_NAME "dlpack_exchange_api"

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

#endif /* DLBRIDGE_EXCHANGE_H_ */
