// The table of shared-memory mappings this library made (share.cpp), for
// the small-tensor pool (share_pool.cpp), whose slabs are recorded in it
// too, so that a buffer in a slot is found, and shared, like any other.
#ifndef DLBRIDGE_SRC_SHARE_MAPPING_HPP_
#define DLBRIDGE_SRC_SHARE_MAPPING_HPP_

#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include <sys/stat.h>

namespace dlb::share {

struct Slab;

struct Mapping {
  unsigned char* base;
  std::size_t size;
  int fd;                // the memory file, kept for sharing the buffer on
  bool read_only;        // mapped PROT_READ
  Slab* pool = nullptr;  // a slab of the small-tensor pool (not counted by dlb_shared_mappings)
};

// Guards the table; taken after the pool's own mutex, never before it.
extern std::mutex table_mutex;

// The mapping holding bytes [lo, hi), or nullptr. Called under table_mutex.
Mapping* find_locked(std::uintptr_t lo, std::uintptr_t hi);

// Maps `size` bytes of `fd` (owned by the mapping from now on, also on
// failure) and records it; a file of at most `populate` bytes is mapped
// with its pages in. `counted`: by dlb_shared_mappings(). nullptr with the
// error set on failure.
Mapping* map_file(int fd, std::size_t size, bool read_only, std::size_t populate, bool counted) noexcept;

// Forgets, unmaps and closes a mapping map_file() made (`counted` as then).
void unmap(Mapping* m, bool counted = true) noexcept;

// A new sealed memory file of `size` bytes (a multiple of the page size),
// or -1 with the error set.
int new_sealed_file(std::size_t size) noexcept;

// Bytes [lo, hi) of host memory the view reaches (lo == hi for an empty
// view, at its data address).
void view_span(const DLTensor& t, std::uintptr_t* lo, std::uintptr_t* hi) noexcept;

// A file descriptor given with DLB_SHARE_TAKE_FD (else -1), closed on
// every return unless released to its new owner.
struct TakenFd {
  int fd;
  explicit TakenFd(int taken) noexcept : fd(taken) {}
  TakenFd(const TakenFd&) = delete;
  TakenFd& operator=(const TakenFd&) = delete;
  ~TakenFd();
  void release() noexcept { fd = -1; }
};

// DLB_ERR_INVALID_ARGUMENT naming the bits of `flags` outside `known`
// that `who` does not take; DLB_OK when there are none.
dlb_status check_flags(std::uint64_t flags, std::uint64_t known, const char* who) noexcept;

// Checks that `fd` is a memory file sealed against shrinking (so that its
// pages cannot vanish under a mapping); `st` receives its fstat. Sets the
// error on failure.
dlb_status check_memory_file(int fd, struct stat* st) noexcept;

// The small-tensor pool (share_pool.cpp).
// A pooled copy of `buffer` (writable, at most DLB_SHARE_POOL_MAX_BYTES),
// or DLB_ERR_NOT_ZERO_COPY without a message when it does not fit the pool.
dlb_status pool_copy(dlb_buffer* buffer, const DLTensor& compact_view, std::uint64_t nbytes, dlb_buffer** out) noexcept;
// Marks the slots of `slab` that bytes [lo, hi) of its file reach as never
// to be reused (shared by a descriptor whose receiver holds no reference).
void pool_escape(Slab* slab, std::uint64_t lo, std::uint64_t hi) noexcept;

}  // namespace dlb::share

#endif
