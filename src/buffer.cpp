#include "buffer.hpp"

#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <new>

#include "alloc.hpp"
#include "copy_engine.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "layout.hpp"
#include "thread_cache.hpp"

namespace dlb {
namespace {

constexpr std::size_t kDataAlignment = 64;
// Headers of buffers without inline data and with at most this many
// dimensions have one size and are recycled through the thread cache.
constexpr std::int32_t kPooledNdim = 8;

std::size_t header_size(std::int32_t ndim) noexcept {
  const std::size_t dims = 2 * static_cast<std::size_t>(ndim > 0 ? ndim : 0);
  const std::size_t size = offsetof(dlb_buffer, dims) + dims * sizeof(std::int64_t);
  return size < sizeof(dlb_buffer) ? sizeof(dlb_buffer) : size;
}

void finalize(dlb_buffer* b) noexcept {
  switch (b->kind) {
    case BufferKind::owned:
      break;
    case BufferKind::wrapped:
      if (b->owner.wrap.release != nullptr) b->owner.wrap.release(b->owner.wrap.ctx);
      break;
    case BufferKind::imported_versioned:
      if (b->owner.versioned->deleter != nullptr) b->owner.versioned->deleter(b->owner.versioned);
      break;
    case BufferKind::imported_legacy:
      if (b->owner.legacy->deleter != nullptr) b->owner.legacy->deleter(b->owner.legacy);
      break;
    case BufferKind::backend: {
      Backend* be = b->owner.store.backend;
      if (be->vt.free_storage != nullptr) be->vt.free_storage(be->ctx, b->owner.store.storage);
      backend_release(be);
      break;
    }
  }
  const bool pooled = b->pooled;
  b->~dlb_buffer();
  if (!pooled || !cache_give(BlockClass::buffer, b)) mem_free(b);
}

}  // namespace

dlb_buffer* buffer_create(const DLTensor& view, const LayoutInfo& info, BufferKind kind, std::uint64_t flags) noexcept {
  const std::int32_t ndim = view.ndim;
  std::size_t size = header_size(ndim);
  std::size_t data_at = 0;
  void* mem = nullptr;
  const bool pooled = kind != BufferKind::owned && ndim <= kPooledNdim;
  if (kind == BufferKind::owned) {
    data_at = (size + kDataAlignment - 1) & ~(kDataAlignment - 1);
    if (info.nbytes > SIZE_MAX - data_at) {
      set_error(DLB_ERR_OUT_OF_MEMORY, "cannot allocate %" PRIu64 " bytes", info.nbytes);
      return nullptr;
    }
    size = data_at + static_cast<std::size_t>(info.nbytes);
    mem = mem_alloc_aligned(kDataAlignment, size);
  } else if (pooled) {
    size = header_size(kPooledNdim);
    mem = cache_take(BlockClass::buffer);
    if (mem == nullptr) mem = mem_alloc(size);
  } else {
    mem = mem_alloc(size);
  }
  if (mem == nullptr) {
    set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory allocating a buffer of %zu bytes", size);
    return nullptr;
  }
  dlb_buffer* b = new (mem) dlb_buffer;
  b->refs.store(1, std::memory_order_relaxed);
  b->deleted.store(false, std::memory_order_relaxed);
  b->ready.store(false, std::memory_order_relaxed);
  b->kind = kind;
  b->flags = flags;
  b->tensor = view;
  b->tensor.shape = b->dims;
  b->tensor.strides = b->dims + (ndim > 0 ? ndim : 0);
  b->nbytes = info.nbytes;
  b->contiguous = info.contiguous;
  b->pooled = pooled;
  std::memset(&b->owner, 0, sizeof b->owner);
  for (std::int32_t i = 0; i < ndim; ++i) b->tensor.shape[i] = view.shape[i];
  if (ndim > 0) {
    if (view.strides != nullptr) {
      for (std::int32_t i = 0; i < ndim; ++i) b->tensor.strides[i] = view.strides[i];
    } else {
      compact_strides(ndim, view.shape, b->tensor.strides);
    }
  }
  if (kind == BufferKind::owned) {
    b->tensor.data = static_cast<unsigned char*>(mem) + data_at;
    b->tensor.byte_offset = 0;
    std::memset(b->tensor.data, 0, static_cast<std::size_t>(info.nbytes));
  } else if (kind == BufferKind::backend) {
    b->tensor.data = nullptr;
  }
  return b;
}

void buffer_release(dlb_buffer* b) noexcept {
  if (b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) finalize(b);
}

std::int32_t backend_layout_kind(const dlb_buffer* b) noexcept {
  const Backend* be = b->owner.store.backend;
  if (be->vt.query_layout == nullptr) return DLB_LAYOUT_STRIDED;
  return be->vt.query_layout(be->ctx, b->owner.store.storage);
}

const char* layout_kind_name(std::int32_t kind) noexcept {
  switch (kind) {
    case DLB_LAYOUT_STRIDED: return "strided";
    case DLB_LAYOUT_TILED: return "tiled";
    case DLB_LAYOUT_MULTI_PART: return "multi-part (a tuple of buffers)";
    case DLB_LAYOUT_DYNAMIC: return "of extents not yet known (dynamic shape)";
    default: return "of an unknown layout kind";
  }
}

dlb_status backend_failure(const dlb_buffer* b, const char* callback, std::int32_t rc) noexcept {
  const char* text = take_backend_text();
  return set_error(DLB_ERR_BACKEND, "backend '%s': %s failed (returned %d)%s%s", b->owner.store.backend->name,
                   callback, static_cast<int>(rc), text[0] != '\0' ? ": " : "", text);
}

dlb_status backend_wait(dlb_buffer* b, std::int64_t stream) noexcept {
  const Backend* be = b->owner.store.backend;
  if (be->vt.wait_ready == nullptr) return DLB_OK;
  const bool cacheable = (b->flags & DLB_BUFFER_IMMUTABLE) != 0;
  if (cacheable && b->ready.load(std::memory_order_acquire)) return DLB_OK;
  const std::int32_t rc = be->vt.wait_ready(be->ctx, b->owner.store.storage, stream);
  if (rc != 0) return backend_failure(b, "wait_ready", rc);
  if (cacheable) b->ready.store(true, std::memory_order_release);
  return DLB_OK;
}

namespace {

dlb_status copy_host_view(const DLTensor& t, bool contiguous, std::uint64_t nbytes, const unsigned char* origin,
                          void* dst) noexcept {
  if (nbytes == 0) return DLB_OK;
  if (!byte_addressable(t.dtype)) {
    if (!contiguous)
      return set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                       "a strided view of a sub-byte dtype (%u bits) cannot be copied: its elements do not start on "
                       "byte boundaries",
                       static_cast<unsigned>(element_bits(t.dtype)));
    std::memcpy(dst, origin, static_cast<std::size_t>(nbytes));
    return DLB_OK;
  }
  copy_strided_to_contiguous(origin, t.ndim, t.shape, t.strides, static_cast<std::size_t>(element_bits(t.dtype) / 8),
                             static_cast<unsigned char*>(dst));
  return DLB_OK;
}

}  // namespace

dlb_status copy_view_to_contiguous(const DLTensor& t, const LayoutInfo& info, void* dst) noexcept {
  if (info.nbytes == 0) return DLB_OK;  // data may be NULL: no pointer arithmetic on it
  if (t.ndim > 0 && t.strides == nullptr) {
    std::memcpy(dst, static_cast<const unsigned char*>(t.data) + t.byte_offset, info.nbytes);
    return DLB_OK;
  }
  return copy_host_view(t, info.contiguous, info.nbytes,
                        static_cast<const unsigned char*>(t.data) + t.byte_offset, dst);
}

dlb_status buffer_copy_out(dlb_buffer* b, void* dst, std::uint64_t dst_size, std::int64_t stream) noexcept {
  if (dst_size < b->nbytes)
    return set_error(DLB_ERR_INTERNAL, "copy destination of %" PRIu64 " bytes is smaller than %" PRIu64, dst_size,
                     b->nbytes);
  if (b->kind != BufferKind::backend) {
    if (!device_is_host_readable(device_type_of(b->tensor.device)))
      return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                       "the buffer's memory is on %s:%d and was wrapped without a backend, so dlbridge cannot read "
                       "it; create it with dlb_buffer_from_backend and a copy_to_host callback",
                       device_type_name(device_type_of(b->tensor.device)),
                       static_cast<int>(b->tensor.device.device_id));
    return copy_host_view(b->tensor, b->contiguous, b->nbytes, buffer_origin(b), dst);
  }
  Backend* be = b->owner.store.backend;
  void* storage = b->owner.store.storage;
  DLB_TRY(backend_wait(b, stream));
  if (be->vt.copy_to_host != nullptr) {
    const std::int32_t rc = be->vt.copy_to_host(be->ctx, storage, dst, b->nbytes);
    if (rc != 0) return backend_failure(b, "copy_to_host", rc);
    return DLB_OK;
  }
  const bool readable = device_is_host_readable(device_type_of(b->tensor.device));
  if (b->nbytes == 0) return DLB_OK;
  if (be->vt.acquire_access != nullptr && readable && backend_layout_kind(b) == DLB_LAYOUT_STRIDED) {
    void* data = nullptr;
    void* ref = nullptr;
    const std::int32_t rc = be->vt.acquire_access(be->ctx, storage, &data, &ref);
    if (rc != 0) return backend_failure(b, "acquire_access", rc);
    const dlb_status s = copy_host_view(b->tensor, b->contiguous, b->nbytes,
                                        static_cast<unsigned char*>(data) + b->tensor.byte_offset, dst);
    be->vt.release_access(be->ctx, storage, ref);
    return s;
  }
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                   "backend '%s' has no copy_to_host callback and no host-readable zero-copy access, so its "
                   "storage cannot be copied to host memory",
                   be->name);
}

dlb_status buffer_to_host(dlb_buffer* src, std::int64_t stream, std::uint64_t flags, dlb_buffer** out) noexcept {
  if (src->deleted.load(std::memory_order_acquire))
    return set_error(DLB_ERR_DELETED, "buffer was deleted (donated) and cannot be copied");
  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.device = DLDevice{kDLCPU, 0};
  view.dtype = src->tensor.dtype;
  view.ndim = src->tensor.ndim;
  view.shape = src->tensor.shape;
  LayoutInfo info;
  info.nbytes = src->nbytes;
  info.contiguous = true;
  dlb_buffer* b = buffer_create(view, info, BufferKind::owned, flags);
  if (b == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  const dlb_status s = buffer_copy_out(src, b->tensor.data, b->nbytes, stream);
  if (s != DLB_OK) {
    buffer_release(b);
    return s;
  }
  *out = b;
  return DLB_OK;
}

void backend_release(Backend* be) noexcept {
  if (be->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (be->vt.destroy != nullptr) be->vt.destroy(be->ctx);
    be->~Backend();
    mem_free(be);
  }
}

}  // namespace dlb
