// The buffer object behind dlb_buffer, the storage interface every buffer
// reaches its memory through, and the backend behind dlb_backend.
#ifndef DLBRIDGE_SRC_BUFFER_HPP_
#define DLBRIDGE_SRC_BUFFER_HPP_

#include <dlbridge/dlbridge.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "dtype.hpp"

namespace dlb {

struct StorageOps;

// A memory system buffers' storages live in: a user's callback table
// (dlb_backend_create: `ops` is the table adapted, kBackendStorage) or a
// built-in device backend (device_backend.hpp: `ops` is its own table, `vt`
// unused but for `destroy`).
struct Backend {
  std::atomic<std::int64_t> refs{1};
  const StorageOps* ops = nullptr;  // the storage table of its buffers
  dlb_backend_vtable vt{};          // zero-filled beyond the caller's struct_size
  void* ctx = nullptr;
  char name[64] = {0};
};

void backend_release(Backend* backend) noexcept;

// What one kind of storage keeps about its memory. Only that kind's
// StorageOps read it.
union StorageState {
  struct {
    dlb_release_fn release;
    void* ctx;
  } wrap;                                // dlb_buffer_wrap
  DLManagedTensorVersioned* versioned;   // dlb_import_versioned
  DLManagedTensor* legacy;               // dlb_import_legacy
  struct {
    Backend* backend;
    void* storage;
  } store;                               // dlb_buffer_from_backend
  struct {
    dlb_buffer* parent;                  // holds a reference
    void* ref;                           // the parent's zero-copy access, if its storage takes one
  } relabelled;                          // dlb_buffer_resolve: host-readable memory on {kDLCPU, 0}
};

// The kinds of storage. Only where a kind must be known is it asked: a
// built-in device backend's entry points, which tell their own buffers by
// their table, and dlb_buffer_from_backend, which makes storages of user
// backends only. `device`: a built-in device backend's storage.
enum class StorageKind : std::uint8_t { owned, wrapped, imported, backend, device, relabelled };

// The storage interface: one table of verbs per kind, the same verbs as the
// public dlb_backend_vtable (acquire_access, release_access, copy_to_host,
// wait_ready, free_storage), which kBackendStorage adapts onto it. Every
// buffer reaches its memory through its table; the exporter, the planner
// and the copy functions call the verbs and never ask which kind they hold.
// A NULL verb means "nothing to do" as said below.
struct StorageOps {
  StorageKind kind;
  const char* name;   // for messages ("owned", "wrapped", "backend", ...)
  bool inline_data;   // buffer_create allocates the data after the header
  // Can the elements be handed to a consumer as they are? DLB_OK, or the
  // status an export that may not copy refuses with (DLB_ERR_NOT_ZERO_COPY,
  // DLB_ERR_UNSUPPORTED_LAYOUT) and `why` filled unless it is NULL (the
  // planner asks without words first). *stable says the answer never
  // changes for this buffer, so the planner may cache its decision. NULL:
  // always, and stable. (A user backend answers it from acquire_access
  // being set and query_layout.)
  dlb_status (*shareable)(const dlb_buffer* b, char* why, std::size_t why_size, bool* stable) noexcept;
  // Waits until the data may be used on the consumer's stream. NULL: the
  // data is always ready.
  dlb_status (*wait_ready)(dlb_buffer* b, std::int64_t stream) noexcept;
  // Zero-copy access: *data receives the address (or handle) to hand out
  // and *ref what release_access() needs. NULL: the view's own data is
  // valid for the buffer's whole life, nothing to take or give back.
  dlb_status (*acquire_access)(dlb_buffer* b, void** data, void** ref) noexcept;
  void (*release_access)(dlb_buffer* b, void* ref) noexcept;
  // Copies the elements, compact row-major, into host memory `dst` of at
  // least nbytes bytes, waiting for the storage first.
  dlb_status (*copy_to_host)(dlb_buffer* b, void* dst, std::int64_t stream) noexcept;
  // The last reference went: gives the memory back to its owner.
  void (*free_storage)(dlb_buffer* b) noexcept;
};

// buffer_create flag (never stored): owned data is left uninitialised
// because the caller writes every byte (copies).
constexpr std::uint64_t kCreateUninitialised = UINT64_C(1) << 63;

extern const StorageOps kOwnedStorage;              // dlb_buffer_alloc, copies: data follows the header
extern const StorageOps kWrappedStorage;            // dlb_buffer_wrap: release(ctx) at the end
extern const StorageOps kImportedVersionedStorage;  // the producer's deleter at the end
extern const StorageOps kImportedLegacyStorage;
extern const StorageOps kBackendStorage;            // a storage on a dlb_backend
extern const StorageOps kRelabelledStorage;         // another buffer's host-readable memory, on the CPU

// What an export with given options does, decided before anything is
// allocated (the export planner's result; see export.cpp). One word, so
// that a buffer can keep its default-options plan in one atomic.
struct Plan {
  static constexpr std::uint64_t kCopy = 1;        // hand out a fresh host copy
  static constexpr std::uint64_t kWait = 2;        // call the storage's wait_ready first
  static constexpr std::uint64_t kAccess = 4;      // take zero-copy access through acquire/release
  static constexpr std::uint64_t kFoldOffset = 8;  // byte_offset goes into data (data is an address)
  static constexpr std::uint64_t kToCpu = 16;      // the export says {kDLCPU, 0}, else the buffer's device
  static constexpr int kFlagsShift = 8;            // above: the DLPACK_FLAG_BITMASK_* bits of the export
  // Bits 5-7 are never set by the planner (free for the buffer's cache).
  std::uint64_t bits = 0;

  bool copy() const noexcept { return (bits & kCopy) != 0; }
  bool wait() const noexcept { return (bits & kWait) != 0; }
  bool access() const noexcept { return (bits & kAccess) != 0; }
  bool fold_offset() const noexcept { return (bits & kFoldOffset) != 0; }
  bool to_cpu() const noexcept { return (bits & kToCpu) != 0; }
  std::uint64_t flags() const noexcept { return bits >> kFlagsShift; }
};

}  // namespace dlb

// One allocation: this struct, then shape[ndim] and strides[ndim], then (for
// owned buffers) padding to 64 bytes and the data.
struct dlb_buffer {
  std::atomic<std::int64_t> refs;
  std::atomic<bool> deleted;
  std::atomic<bool> ready;  // backend readiness already awaited (immutable storages)
  bool contiguous;          // compact row-major
  bool pooled;              // a fixed-size header block from the thread cache
  const dlb::StorageOps* ops;
  std::uint64_t flags;      // DLB_BUFFER_* bits except DELETED, which is `deleted`
  DLTensor tensor;          // shape/strides point at dims; strides never NULL if ndim > 0
  std::uint64_t nbytes;     // compact size
  dlb::StorageState owner;
  // The export planner's decision for the default options (Plan bits),
  // stored by the first default export; 0 until then, and for as long as
  // the storage says the decision may change. See export.cpp.
  std::atomic<std::uint64_t> default_plan;
  std::int64_t dims[1];     // 2 * ndim entries (at least one slot)
};

namespace dlb {

struct LayoutInfo;

// Creates a buffer over `ops` with room for the metadata of `view` (shape/
// strides copied; NULL strides made compact) and, for inline-data storage,
// 64-byte aligned zeroed memory for the data; the storage state is
// `state`. Returns nullptr on OOM
// with the error set; on success refs = 1.
dlb_buffer* buffer_create(const DLTensor& view, const LayoutInfo& info, const StorageOps& ops, std::uint64_t flags,
                          const StorageState& state) noexcept;

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
// nbytes) through its storage's copy_to_host. `stream` goes to the
// storage's wait.
dlb_status buffer_copy_out(dlb_buffer* b, void* dst, std::uint64_t dst_size, std::int64_t stream) noexcept;

// A fresh owned host buffer (compact, row-major) holding a copy of `src`'s
// elements, with `flags` (DLB_BUFFER_* bits); `stream` goes to the
// storage's wait. On failure nothing is left allocated.
// The buffer's tensor as its bytes are laid out: for a padded sub-byte
// buffer (DLB_BUFFER_SUBBYTE_PADDED) with the uint8 carrier dtype, which
// the copies use; otherwise the tensor itself.
inline DLTensor storage_view(const dlb_buffer* b) noexcept {
  DLTensor t = b->tensor;
  t.dtype = carrier_dtype(t.dtype, (b->flags & DLB_BUFFER_SUBBYTE_PADDED) != 0);
  return t;
}

// DLB_OK, or DLB_ERR_INVALID_ARGUMENT when `flags` has
// DLB_BUFFER_SUBBYTE_PADDED for a dtype of 8 bits or more.
dlb_status check_padded_flag(DLDataType dtype, std::uint64_t flags) noexcept;

dlb_status buffer_to_host(dlb_buffer* src, std::int64_t stream, std::uint64_t flags, dlb_buffer** out) noexcept;

// Copies a validated host view (any strides, NULL = compact) into dst.
// swap_unit > 1: the view's scalars are in the other byte order, and each
// swap_unit-byte word is reversed on the way (dtype.hpp's swap_unit).
dlb_status copy_view_to_contiguous(const DLTensor& t, const LayoutInfo& info, void* dst,
                                   std::size_t swap_unit = 0) noexcept;

// Copies host-readable elements at `origin`, laid out as `t` says, into dst
// (compact). Shared by the storages whose memory the host can read.
dlb_status copy_host_view(const DLTensor& t, bool contiguous, std::uint64_t nbytes, const unsigned char* origin,
                          void* dst, std::size_t swap_unit = 0) noexcept;

}  // namespace dlb

#endif
