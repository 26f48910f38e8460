/**
 * @file backend.h
 * dlbridge: backends, the callback tables through which buffers reach
 * storages in other memory systems.
 */
#ifndef DLBRIDGE_BACKEND_H_
#define DLBRIDGE_BACKEND_H_

#include "dlbridge/buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_BACKEND_H_ */
