// Backends: callback tables describing memory systems, and buffers over
// their storages.
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>

#include "alloc.hpp"
#include "backend.hpp"
#include "buffer.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "layout.hpp"

namespace dlb {
namespace {

const Backend& backend_of(const dlb_buffer* b) noexcept { return *b->owner.store.backend; }

const char* layout_kind_name(std::int32_t kind) noexcept {
  switch (kind) {
    case DLB_LAYOUT_STRIDED: return "strided";
    case DLB_LAYOUT_TILED: return "tiled";
    case DLB_LAYOUT_MULTI_PART: return "multi-part (a tuple of buffers)";
    case DLB_LAYOUT_DYNAMIC: return "of extents not yet known (dynamic shape)";
    default: return "of an unknown layout kind";
  }
}

std::int32_t layout_kind(const dlb_buffer* b) noexcept {
  const Backend& be = backend_of(b);
  if (be.vt.query_layout == nullptr) return DLB_LAYOUT_STRIDED;
  return be.vt.query_layout(be.ctx, b->owner.store.storage);
}

dlb_status failure(const dlb_buffer* b, const char* callback, std::int32_t rc) noexcept {
  const char* text = take_backend_text();
  return set_error(DLB_ERR_BACKEND, "backend '%s': %s failed (returned %d)%s%s", backend_of(b).name, callback,
                   static_cast<int>(rc), text[0] != '\0' ? ": " : "", text);
}

// The storage table over a user's backend: each verb is the callback of
// the same name in its vtable (shareable: acquire_access set, and
// query_layout).
dlb_status backend_shareable(const dlb_buffer* b, char* why, std::size_t why_size, bool* stable) noexcept {
  const Backend& be = backend_of(b);
  *stable = be.vt.query_layout == nullptr;
  if (be.vt.acquire_access == nullptr) {
    if (why != nullptr) std::snprintf(why, why_size, "backend '%s' has no zero-copy access", be.name);
    return DLB_ERR_NOT_ZERO_COPY;
  }
  const std::int32_t kind = layout_kind(b);
  if (kind != DLB_LAYOUT_STRIDED) {
    if (why != nullptr)
      std::snprintf(why, why_size, "backend '%s' keeps this storage %s, which DLPack strides cannot express",
                    be.name, layout_kind_name(kind));
    return DLB_ERR_UNSUPPORTED_LAYOUT;
  }
  return DLB_OK;
}

dlb_status backend_wait(dlb_buffer* b, std::int64_t stream) noexcept {
  const Backend& be = backend_of(b);
  if (be.vt.wait_ready == nullptr) return DLB_OK;
  const bool cacheable = (b->flags & DLB_BUFFER_IMMUTABLE) != 0;
  if (cacheable && b->ready.load(std::memory_order_acquire)) return DLB_OK;
  const std::int32_t rc = be.vt.wait_ready(be.ctx, b->owner.store.storage, stream);
  if (rc != 0) return failure(b, "wait_ready", rc);
  if (cacheable) b->ready.store(true, std::memory_order_release);
  return DLB_OK;
}

dlb_status backend_acquire(dlb_buffer* b, void** data, void** ref) noexcept {
  const Backend& be = backend_of(b);
  const std::int32_t rc = be.vt.acquire_access(be.ctx, b->owner.store.storage, data, ref);
  if (rc != 0) return failure(b, "acquire_access", rc);
  return DLB_OK;
}

void backend_release_access(dlb_buffer* b, void* ref) noexcept {
  const Backend& be = backend_of(b);
  be.vt.release_access(be.ctx, b->owner.store.storage, ref);
}

dlb_status backend_copy_to_host(dlb_buffer* b, void* dst, std::int64_t stream) noexcept {
  const Backend& be = backend_of(b);
  void* storage = b->owner.store.storage;
  DLB_TRY(backend_wait(b, stream));
  if (be.vt.copy_to_host != nullptr) {
    const std::int32_t rc = be.vt.copy_to_host(be.ctx, storage, dst, b->nbytes);
    if (rc != 0) return failure(b, "copy_to_host", rc);
    return DLB_OK;
  }
  if (b->nbytes == 0) return DLB_OK;
  if (be.vt.acquire_access != nullptr && device_is_host_readable(device_type_of(b->tensor.device)) &&
      layout_kind(b) == DLB_LAYOUT_STRIDED) {
    void* data = nullptr;
    void* ref = nullptr;
    DLB_TRY(backend_acquire(b, &data, &ref));
    const dlb_status s = copy_host_view(storage_view(b), b->contiguous, b->nbytes,
                                        static_cast<unsigned char*>(data) + b->tensor.byte_offset, dst);
    be.vt.release_access(be.ctx, storage, ref);
    return s;
  }
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                   "backend '%s' has no copy_to_host callback and no host-readable zero-copy access, so its "
                   "storage cannot be copied to host memory",
                   be.name);
}

void backend_free_storage(dlb_buffer* b) noexcept {
  Backend* be = b->owner.store.backend;
  if (be->vt.free_storage != nullptr) be->vt.free_storage(be->ctx, b->owner.store.storage);
  backend_release(be);
}

}  // namespace

const StorageOps kBackendStorage = {StorageKind::backend,  "backend",
                                    false,                 backend_shareable,
                                    backend_wait,          backend_acquire,
                                    backend_release_access, backend_copy_to_host,
                                    backend_free_storage};

void backend_release(Backend* be) noexcept {
  if (be->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (be->vt.destroy != nullptr) be->vt.destroy(be->ctx);
    be->~Backend();
    mem_free(be);
  }
}

namespace {

dlb_status make_backend(const StorageOps& ops, const dlb_backend_vtable& vt, const char* name, void* ctx,
                        dlb_backend** out) noexcept {
  void* mem = mem_alloc(sizeof(Backend));
  if (mem == nullptr) return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory creating backend '%s'", name);
  Backend* be = new (mem) Backend;
  be->ops = &ops;
  be->vt = vt;
  be->vt.name = be->name;
  be->ctx = ctx;
  std::snprintf(be->name, sizeof be->name, "%s", name);
  *out = reinterpret_cast<dlb_backend*>(be);
  return DLB_OK;
}

}  // namespace

dlb_status backend_create(const dlb_backend_vtable* vtable, void* ctx, dlb_backend** out) noexcept {
  if (vtable == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "vtable is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  constexpr std::size_t minimum = offsetof(dlb_backend_vtable, name) + sizeof(vtable->name);
  if (vtable->struct_size < minimum)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "vtable->struct_size is %zu (at least %zu)", vtable->struct_size,
                     minimum);
  if (vtable->name == nullptr || vtable->name[0] == '\0')
    return set_error(DLB_ERR_INVALID_ARGUMENT, "vtable->name is NULL or empty");
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  std::memcpy(&vt, vtable, vtable->struct_size < sizeof vt ? vtable->struct_size : sizeof vt);
  if (vt.acquire_access != nullptr && vt.release_access == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "backend '%s' has acquire_access but no release_access", vtable->name);
  return make_backend(kBackendStorage, vt, vtable->name, ctx, out);
}

dlb_status backend_create_builtin(const StorageOps& ops, const char* name, void* ctx, void (*destroy)(void*),
                                  dlb_backend** out) noexcept {
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.destroy = destroy;
  return make_backend(ops, vt, name, ctx, out);
}

dlb_status buffer_from_backend(dlb_backend* backend, void* storage, const DLTensor* layout, std::uint64_t flags,
                               StorageKind kind, dlb_buffer** out) noexcept {
  if (backend == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "backend is NULL");
  if (layout == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "layout is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  constexpr std::uint64_t known = DLB_BUFFER_READ_ONLY | DLB_BUFFER_IMMUTABLE | DLB_BUFFER_SUBBYTE_PADDED;
  if ((flags & ~known) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "flags has bits 0x%" PRIx64 " that a backend buffer cannot take",
                     flags & ~known);
  DLB_TRY(check_padded_flag(layout->dtype, flags));
  LayoutInfo info;
  DLB_TRY(check_layout(layout, Origin::argument, false, &info, (flags & DLB_BUFFER_SUBBYTE_PADDED) != 0));
  Backend* be = reinterpret_cast<Backend*>(backend);
  if (be->ops->kind != kind)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "backend '%s' is a built-in device backend: its buffers are made by that backend's own "
                     "alloc and wrap functions, not by dlb_buffer_from_backend",
                     be->name);
  DLTensor view = *layout;
  view.data = nullptr;  // the storage is reached through the backend only
  StorageState state{};
  state.store.backend = be;
  state.store.storage = storage;
  be->refs.fetch_add(1, std::memory_order_relaxed);
  dlb_buffer* b = buffer_create(view, info, *be->ops, flags | DLB_BUFFER_BACKEND, state);
  if (b == nullptr) {
    backend_release(be);
    return DLB_ERR_OUT_OF_MEMORY;
  }
  *out = b;
  return DLB_OK;
}

}  // namespace dlb
