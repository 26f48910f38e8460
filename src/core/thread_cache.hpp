// Per-thread state of the hot paths: small free lists of fixed-size blocks
// (export blocks, buffer headers), so that an export or an import allocates
// nothing once warm, and the live-export counter, kept per thread so that
// counting costs no atomic read-modify-write.
#ifndef DLBRIDGE_SRC_THREAD_CACHE_HPP_
#define DLBRIDGE_SRC_THREAD_CACHE_HPP_

#include <cstddef>
#include <cstdint>

namespace dlb {

enum class BlockClass : int { export_block = 0, buffer = 1 };
constexpr int kBlockClasses = 2;

// The bytes to allocate for a block of a cached class whose own bytes are
// `size`: after them, the free-list link while the block is cached. The
// link stays outside the bytes poisoned for AddressSanitizer, since
// LeakSanitizer reads no pointer kept in poisoned memory and would report
// every block behind the first as leaked (libFuzzer's check after each
// input, a user's __lsan_do_recoverable_leak_check).
constexpr std::size_t cached_block_bytes(std::size_t size) noexcept { return size + sizeof(void*); }

// A cached block of `cls`, or nullptr when this thread has none (the caller
// then allocates one with mem_alloc(cached_block_bytes(size))). `size` is
// the class's block size: the block's bytes are made addressable again for
// AddressSanitizer and valgrind, which see cached blocks as freed.
void* cache_take(BlockClass cls, std::size_t size) noexcept;
// Keeps a block of `cls` (of `size` bytes, allocated with
// cached_block_bytes(size)) for reuse on this thread,
// whichever thread took it. Returns false when the block was not kept
// (cache full, or the thread is exiting): the caller frees it. A kept
// block is poisoned for AddressSanitizer and marked inaccessible for
// valgrind until it is taken again, so a use after the deleter ran is
// reported as it would be for freed memory.
bool cache_give(BlockClass cls, void* block, std::size_t size) noexcept;

// Live exports: +1 when one is handed out, -1 when its deleter runs, on
// whatever thread that happens. live_total() sums all threads.
void live_add(std::int64_t delta) noexcept;
std::int64_t live_total() noexcept;

}  // namespace dlb

#endif
