#include "buffer.hpp"

#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <new>

#include "alloc.hpp"
#include "copy/copy_engine.hpp"
#include "device.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "export.hpp"
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
  b->ops->free_storage(b);
  const bool pooled = b->pooled;
  const bool inline_data = b->ops->inline_data;  // the header came from mem_alloc_aligned/zeroed
  const std::size_t size = header_size(kPooledNdim);
  b->~dlb_buffer();
  if (inline_data) {
    mem_free_aligned(b);
  } else if (!pooled || !cache_give(BlockClass::buffer, b, size)) {
    mem_free(b);
  }
}

// The host-side storages: their memory is the view's own data.
dlb_status host_copy_to_host(dlb_buffer* b, void* dst, std::int64_t) noexcept {
  if (!device_is_host_readable(device_type_of(b->tensor.device)))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                     "the buffer's memory is on %s:%d and was %s without a backend, so dlbridge cannot read it; "
                     "create it with dlb_buffer_from_backend and a copy_to_host callback",
                     device_type_name(device_type_of(b->tensor.device)), static_cast<int>(b->tensor.device.device_id),
                     b->ops->name);
  return copy_host_view(storage_view(b), b->contiguous, b->nbytes, buffer_origin(b), dst);
}

void free_owned(dlb_buffer*) noexcept {}

void free_wrapped(dlb_buffer* b) noexcept {
  if (b->owner.wrap.release != nullptr) b->owner.wrap.release(b->owner.wrap.ctx);
}

void free_versioned(dlb_buffer* b) noexcept {
  if (b->owner.versioned->deleter != nullptr) b->owner.versioned->deleter(b->owner.versioned);
}

void free_legacy(dlb_buffer* b) noexcept {
  if (b->owner.legacy->deleter != nullptr) b->owner.legacy->deleter(b->owner.legacy);
}

// The parent's zero-copy access (taken when its storage has one) and its
// reference go with the relabelled view's last reference.
void free_relabelled(dlb_buffer* b) noexcept {
  dlb_buffer* parent = b->owner.relabelled.parent;
  if (parent->ops->release_access != nullptr) parent->ops->release_access(parent, b->owner.relabelled.ref);
  buffer_release(parent);
}

}  // namespace

const StorageOps kOwnedStorage = {StorageKind::owned, "owned", true, nullptr, nullptr, nullptr, nullptr, host_copy_to_host, free_owned};
const StorageOps kWrappedStorage = {StorageKind::wrapped, "wrapped", false, nullptr, nullptr, nullptr, nullptr, host_copy_to_host,
                                    free_wrapped};
const StorageOps kImportedVersionedStorage = {StorageKind::imported, "imported", false, nullptr, nullptr, nullptr, nullptr,
                                              host_copy_to_host, free_versioned};
const StorageOps kImportedLegacyStorage = {StorageKind::imported, "imported", false, nullptr, nullptr, nullptr, nullptr, host_copy_to_host,
                                           free_legacy};

const StorageOps kRelabelledStorage = {StorageKind::relabelled, "relabelled", false, nullptr, nullptr, nullptr, nullptr, host_copy_to_host,
                                       free_relabelled};

dlb_buffer* buffer_create(const DLTensor& view, const LayoutInfo& info, const StorageOps& ops, std::uint64_t flags,
                          const StorageState& state) noexcept {
  const std::int32_t ndim = view.ndim;
  const bool zeroed = (flags & kCreateUninitialised) == 0;
  flags &= ~kCreateUninitialised;
  std::size_t size = header_size(ndim);
  std::size_t data_at = 0;
  void* mem = nullptr;
  const bool pooled = !ops.inline_data && ndim <= kPooledNdim;
  if (ops.inline_data) {
    data_at = (size + kDataAlignment - 1) & ~(kDataAlignment - 1);
    // Cannot wrap: every layout's nbytes is at most kMaxAddressSpan (check_layout).
    size = data_at + static_cast<std::size_t>(info.nbytes);
    mem = zeroed ? mem_alloc_zeroed(kDataAlignment, size) : mem_alloc_aligned(kDataAlignment, size);
  } else if (pooled) {
    size = header_size(kPooledNdim);
    mem = cache_take(BlockClass::buffer, size);
    if (mem == nullptr) mem = mem_alloc(cached_block_bytes(size));
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
  b->default_plan.store(0, std::memory_order_relaxed);
  b->ops = &ops;
  b->flags = flags;
  b->tensor = view;
  b->tensor.shape = b->dims;
  b->tensor.strides = b->dims + (ndim > 0 ? ndim : 0);
  b->nbytes = info.nbytes;
  b->contiguous = info.contiguous;
  b->pooled = pooled;
  b->owner = state;
  for (std::int32_t i = 0; i < ndim; ++i) b->tensor.shape[i] = view.shape[i];
  if (ndim > 0) {
    if (view.strides != nullptr) {
      for (std::int32_t i = 0; i < ndim; ++i) b->tensor.strides[i] = view.strides[i];
    } else {
      compact_strides(ndim, view.shape, b->tensor.strides);
    }
  }
  if (ops.inline_data) {
    b->tensor.data = static_cast<unsigned char*>(mem) + data_at;
    b->tensor.byte_offset = 0;
  }
  return b;
}

void buffer_release(dlb_buffer* b) noexcept {
  if (b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) finalize(b);
}

dlb_status copy_host_view(const DLTensor& t, bool contiguous, std::uint64_t nbytes, const unsigned char* origin,
                          void* dst, std::size_t swap_unit) noexcept {
  if (nbytes == 0) return DLB_OK;
  if (!byte_addressable(t.dtype)) {
    if (!contiguous)
      return set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                       "a strided view of packed sub-byte elements (%u bits each: %u bits x %u lanes) cannot be "
                       "copied: its elements do not start on byte boundaries, so they cannot be addressed one by "
                       "one; only a compact row-major view of them can be",
                       static_cast<unsigned>(element_bits(t.dtype)), static_cast<unsigned>(t.dtype.bits),
                       static_cast<unsigned>(t.dtype.lanes));
    std::memcpy(dst, origin, static_cast<std::size_t>(nbytes));
    return DLB_OK;
  }
  copy_strided_to_contiguous(origin, t.ndim, t.shape, t.strides, static_cast<std::size_t>(element_bits(t.dtype) / 8),
                             static_cast<unsigned char*>(dst), swap_unit);
  return DLB_OK;
}

dlb_status copy_view_to_contiguous(const DLTensor& t, const LayoutInfo& info, void* dst,
                                   std::size_t swap_unit) noexcept {
  if (info.nbytes == 0) return DLB_OK;  // data may be NULL: no pointer arithmetic on it
  if (t.ndim > 0 && t.strides == nullptr) {
    if (swap_unit > 1) {  // compact: the engine with compact strides, which swaps as it copies
      std::int64_t strides[DLB_MAX_NDIM];
      compact_strides(t.ndim, t.shape, strides);
      DLTensor compact = t;
      compact.strides = strides;
      return copy_host_view(compact, true, info.nbytes,
                            static_cast<const unsigned char*>(t.data) + t.byte_offset, dst, swap_unit);
    }
    std::memcpy(dst, static_cast<const unsigned char*>(t.data) + t.byte_offset, info.nbytes);
    return DLB_OK;
  }
  return copy_host_view(t, info.contiguous, info.nbytes,
                        static_cast<const unsigned char*>(t.data) + t.byte_offset, dst, swap_unit);
}

dlb_status buffer_copy_out(dlb_buffer* b, void* dst, std::uint64_t dst_size, std::int64_t stream) noexcept {
  if (dst_size < b->nbytes)  // GCOVR_EXCL_START: every caller passes a destination of nbytes; a guard against a bug
    return set_error(DLB_ERR_INTERNAL, "copy destination of %" PRIu64 " bytes is smaller than %" PRIu64, dst_size,
                     b->nbytes);  // GCOVR_EXCL_STOP
  return b->ops->copy_to_host(b, dst, stream);
}

dlb_status check_padded_flag(DLDataType dtype, std::uint64_t flags) noexcept {
  if ((flags & DLB_BUFFER_SUBBYTE_PADDED) == 0 || paddable(dtype)) return DLB_OK;
  return set_error(DLB_ERR_INVALID_ARGUMENT,
                   "DLB_BUFFER_SUBBYTE_PADDED is for dtypes of fewer than 8 bits; this one has %u bits per element",
                   static_cast<unsigned>(element_bits(dtype)));
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
  const StorageState none{};
  // A padded sub-byte source gives a padded copy: the layout is the data's.
  flags |= src->flags & DLB_BUFFER_SUBBYTE_PADDED;
  dlb_buffer* b = buffer_create(view, info, kOwnedStorage, flags | kCreateUninitialised, none);
  if (b == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  const dlb_status s = buffer_copy_out(src, b->tensor.data, b->nbytes, stream);
  if (s != DLB_OK) {
    buffer_release(b);
    return s;
  }
  *out = b;
  return DLB_OK;
}

}  // namespace dlb
