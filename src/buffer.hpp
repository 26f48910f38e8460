// The buffer object behind dlb_buffer, and the backend behind dlb_backend.
#ifndef DLBRIDGE_SRC_BUFFER_HPP_
#define DLBRIDGE_SRC_BUFFER_HPP_

#include <dlbridge/dlbridge.h>

#include <atomic>

#include "dtype.hpp"
#include <cstdint>

namespace dlb {

struct Backend {
  std::atomic<std::int64_t> refs{1};
  dlb_backend_vtable vt{};  // zero-filled beyond the caller's struct_size
  void* ctx = nullptr;
  char name[64] = {0};
};

void backend_release(Backend* backend) noexcept;

enum class BufferKind : std::uint8_t {
  owned,             // dlb_buffer_alloc / to_host: data follows the struct
  wrapped,           // dlb_buffer_wrap: release(ctx) at the end
  imported_versioned,
  imported_legacy,
  backend,           // a storage on a backend
};

}  // namespace dlb

// One allocation: this struct, then shape[ndim] and strides[ndim], then (for
// owned buffers) padding to 64 bytes and the data.
struct dlb_buffer {
  std::atomic<std::int64_t> refs;
  std::atomic<bool> deleted;
  std::atomic<bool> ready;  // backend readiness already awaited (immutable storages)
  dlb::BufferKind kind;
  std::uint64_t flags;      // DLB_BUFFER_* bits except DELETED, which is `deleted`
  DLTensor tensor;          // shape/strides point at dims; strides never NULL if ndim > 0
  std::uint64_t nbytes;     // compact size
  bool contiguous;          // compact row-major
  bool pooled;              // a fixed-size header block from the thread cache
  union Owner {
    struct {
      dlb_release_fn release;
      void* ctx;
    } wrap;
    DLManagedTensorVersioned* versioned;
    DLManagedTensor* legacy;
    struct {
      dlb::Backend* backend;
      void* storage;
    } store;
  } owner;
  std::int64_t dims[1];     // 2 * ndim entries (at least one slot)
};

namespace dlb {

struct LayoutInfo;

// Creates a buffer with room for the metadata of `view` (shape/strides
// copied; NULL strides made compact) and, if data_bytes > 0 or kind is
// owned, 64-byte aligned storage for the data. Returns nullptr on OOM with
// the error set. The caller fills `owner` and refs = 1.
dlb_buffer* buffer_create(const DLTensor& view, const LayoutInfo& info, BufferKind kind, std::uint64_t flags) noexcept;

// Drops one reference; the last one finalises the buffer.
void buffer_release(dlb_buffer* b) noexcept;
inline void buffer_retain(dlb_buffer* b) noexcept { b->refs.fetch_add(1, std::memory_order_relaxed); }

// Address of element [0, ...] for host-readable memory.
// An empty buffer's data and byte_offset are unchecked (NULL data, any
// offset): no pointer arithmetic on them, its origin is never read.
inline unsigned char* buffer_origin(const dlb_buffer* b) noexcept {
  if (b->tensor.data == nullptr || b->nbytes == 0) return static_cast<unsigned char*>(b->tensor.data);
  return static_cast<unsigned char*>(b->tensor.data) + b->tensor.byte_offset;
}

// Copies the buffer's elements into `dst` (compact row-major, dst_size >=
// nbytes), through the backend for backend buffers. `stream` goes to the
// backend's wait callback.
dlb_status buffer_copy_out(dlb_buffer* b, void* dst, std::uint64_t dst_size, std::int64_t stream) noexcept;

// A fresh owned host buffer (compact, row-major) holding a copy of `src`'s
// elements, with `flags` (DLB_BUFFER_* bits); `stream` goes to a backend's
// wait callback. On failure nothing is left allocated.
dlb_status buffer_to_host(dlb_buffer* src, std::int64_t stream, std::uint64_t flags, dlb_buffer** out) noexcept;

// Copies a validated host view (any strides, NULL = compact) into dst.
dlb_status copy_view_to_contiguous(const DLTensor& t, const LayoutInfo& info, void* dst) noexcept;

// Backend helpers used by export.
dlb_status backend_wait(dlb_buffer* b, std::int64_t stream) noexcept;
dlb_status backend_failure(const dlb_buffer* b, const char* callback, std::int32_t rc) noexcept;
std::int32_t backend_layout_kind(const dlb_buffer* b) noexcept;
const char* layout_kind_name(std::int32_t kind) noexcept;

}  // namespace dlb

#endif
