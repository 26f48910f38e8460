#include "alloc.hpp"

#include <atomic>
#include <cstdlib>

namespace dlb {
namespace {

// 0: disarmed. Otherwise the number of allocations left before the
// injected failure (the one that brings it to zero fails, and so do all
// later ones while armed).
std::atomic<bool> g_armed{false};
std::atomic<std::int64_t> g_countdown{0};
std::atomic<std::int64_t> g_attempted{0};

bool injected_failure() noexcept {
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  g_attempted.fetch_add(1, std::memory_order_relaxed);
  return g_countdown.fetch_sub(1, std::memory_order_relaxed) <= 1;
}

}  // namespace

void* mem_alloc(std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  return std::malloc(size == 0 ? 1 : size);
}

void* mem_alloc_aligned(std::size_t alignment, std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  if (size == 0) size = alignment;
  const std::size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  if (rounded < size) return nullptr;
  return std::aligned_alloc(alignment, rounded);
}

void mem_free(void* p) noexcept { std::free(p); }

namespace testing {

void fail_allocation_after(std::int64_t n) noexcept {
  g_attempted.store(0, std::memory_order_relaxed);
  if (n <= 0) {
    // Counting mode: allocations are counted but none fails.
    g_countdown.store(INT64_MAX, std::memory_order_relaxed);
    g_armed.store(n < 0, std::memory_order_relaxed);
    return;
  }
  g_countdown.store(n, std::memory_order_relaxed);
  g_armed.store(true, std::memory_order_relaxed);
}

std::int64_t allocations_attempted() noexcept { return g_attempted.load(std::memory_order_relaxed); }

}  // namespace testing
}  // namespace dlb
