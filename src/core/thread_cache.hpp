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

// A cached block of `cls`, or nullptr when this thread has none (the caller
// then allocates one of the class's size with mem_alloc). `size` is the
// class's block size: the block's bytes are made addressable again for
// AddressSanitizer and valgrind, which see cached blocks as freed.
void* cache_take(BlockClass cls, std::size_t size) noexcept;
// Keeps a block of `cls` (of `size` bytes) for reuse on this thread,
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
