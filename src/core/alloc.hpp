// Every allocation the library makes goes through these functions, so that
// tests can make the n-th one fail (allocation-failure injection).
#ifndef DLBRIDGE_SRC_ALLOC_HPP_
#define DLBRIDGE_SRC_ALLOC_HPP_

#include <cstddef>
#include <cstdint>

namespace dlb {

// malloc-like; nullptr on failure (real or injected). Never throws.
void* mem_alloc(std::size_t size) noexcept;
// Aligned allocation (alignment a power of two, at least 16, at most 2 MiB);
// freed with mem_free_aligned. nullptr on failure.
// Contents are indeterminate. Large sizes (kLargeAllocation and up) get
// fresh anonymous pages marked for transparent huge pages, so that the
// first write, which every copy destination gets anyway, faults them in
// with few faults.
void* mem_alloc_aligned(std::size_t alignment, std::size_t size) noexcept;
// The same, zero-filled. Large sizes are fresh anonymous pages, which the
// kernel zeroes lazily on first touch (as calloc does), so that nothing is
// written here; small ones are cleared with memset.
void* mem_alloc_zeroed(std::size_t alignment, std::size_t size) noexcept;
// Frees what mem_alloc returned. NULL-safe.
void mem_free(void* p) noexcept;
// Frees what mem_alloc_aligned or mem_alloc_zeroed returned. NULL-safe.
// Blocks of mid sizes (64 KiB up to the large size) may be kept for the
// next aligned allocation that fits them, their pages still faulted in; at
// most 32 MiB of them at a time. Of large ones, the last one freed (up to
// 512 MiB) is kept for the next mem_alloc_aligned of about its size, its
// pages offered back to the kernel (MADV_FREE) meanwhile; mem_alloc_zeroed
// always maps fresh pages.
void mem_free_aligned(void* p) noexcept;

// Allocations of this many bytes and more are served by their own mapping.
// Below it glibc's heap serves them, reusing freed blocks whose pages are
// already faulted in (its own mapping threshold grows up to 32 MiB), which
// a fresh mapping cannot beat.
constexpr std::size_t kLargeAllocation = std::size_t{32} << 20;

namespace testing {
// Arms the injector: the n-th allocation (1-based) from now on fails, and
// so does every later one until disarmed. n == 0 disarms; n < 0 counts
// allocations (allocations_attempted) without failing any. Not thread-safe
// with respect to concurrent calls of itself; the check in mem_alloc is.
void fail_allocation_after(std::int64_t n) noexcept;
// Allocations attempted since the last fail_allocation_after() call, while
// armed or counting (a disarmed injector counts nothing).
std::int64_t allocations_attempted() noexcept;
// Live allocations served by their own mapping (large ones).
std::int64_t large_allocations_live() noexcept;
// Bytes of freed mid-size blocks kept for reuse (see alloc.cpp), and
// giving them all back to malloc.
std::size_t recycled_bytes() noexcept;
void drop_recycled_blocks() noexcept;
// Whether large allocations are advised to use transparent huge pages
// (on by default); diagnostics compare both.
void set_huge_page_advice(bool on) noexcept;
// The freed large mapping kept for reuse (see alloc.cpp): whether one is
// kept (on by default; off also drops it), its length (0: none), and
// unmapping it now.
void set_keep_large_mapping(bool on) noexcept;
std::size_t kept_mapping_bytes() noexcept;
void drop_kept_mapping() noexcept;
// Drops the per-thread cache of export blocks, so that the next export
// allocates (tests that count allocations call this first).
void drop_thread_caches() noexcept;
}  // namespace testing

}  // namespace dlb

#endif
