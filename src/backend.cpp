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
#include "errors.hpp"
#include "layout.hpp"

namespace dlb {

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
  void* mem = mem_alloc(sizeof(Backend));
  if (mem == nullptr) return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory creating backend '%s'", vtable->name);
  Backend* be = new (mem) Backend;
  be->vt = vt;
  be->vt.name = be->name;
  be->ctx = ctx;
  std::snprintf(be->name, sizeof be->name, "%s", vtable->name);
  *out = reinterpret_cast<dlb_backend*>(be);
  return DLB_OK;
}

dlb_status buffer_from_backend(dlb_backend* backend, void* storage, const DLTensor* layout, std::uint64_t flags,
                               dlb_buffer** out) noexcept {
  if (backend == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "backend is NULL");
  if (layout == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "layout is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  constexpr std::uint64_t known = DLB_BUFFER_READ_ONLY | DLB_BUFFER_IMMUTABLE;
  if ((flags & ~known) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "flags has bits 0x%" PRIx64 " that a backend buffer cannot take",
                     flags & ~known);
  LayoutInfo info;
  DLB_TRY(check_layout(layout, Origin::argument, false, &info));
  Backend* be = reinterpret_cast<Backend*>(backend);
  dlb_buffer* b = buffer_create(*layout, info, BufferKind::backend, flags | DLB_BUFFER_BACKEND);
  if (b == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  be->refs.fetch_add(1, std::memory_order_relaxed);
  b->owner.store.backend = be;
  b->owner.store.storage = storage;
  *out = b;
  return DLB_OK;
}

}  // namespace dlb
