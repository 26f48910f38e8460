#include "alloc.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

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

// Large allocations: each is its own anonymous mapping, aligned to a huge
// page and advised to use huge pages (transparent huge pages in `madvise`
// mode, the Debian default, then fault 2 MiB at a time: a fresh 128 MiB
// destination faults in at about half the cost of 4 KiB pages). mem_free must tell them from malloc's blocks without reading
// outside either, so they are listed (address -> length) in a registry
// kept beside them; only page-aligned addresses are looked up there
// (malloc's blocks rarely are).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

struct Mapping {
  Mapping* next;
  void* addr;
  std::size_t length;
};

pthread_mutex_t g_registry_mu = PTHREAD_MUTEX_INITIALIZER;
Mapping* g_registry = nullptr;
std::atomic<std::int64_t> g_large_live{0};

// A fork while another thread holds the registry lock would leave the
// child's copy locked forever: take it around fork.
void registry_prepare() noexcept { pthread_mutex_lock(&g_registry_mu); }
void registry_release() noexcept { pthread_mutex_unlock(&g_registry_mu); }
[[maybe_unused]] const int g_atfork = pthread_atfork(registry_prepare, registry_release, registry_release);

void* map_large(std::size_t size) noexcept {
  if (size > SIZE_MAX - 2 * kHugePage) return nullptr;
  const std::size_t length = (size + kHugePage - 1) & ~(kHugePage - 1);
  auto* node = static_cast<Mapping*>(std::malloc(sizeof(Mapping)));
  if (node == nullptr) return nullptr;
  // Over-map by one huge page, then trim to a huge-page-aligned range.
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    std::free(node);
    return nullptr;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (base + kHugePage - 1) & ~static_cast<std::uintptr_t>(kHugePage - 1);
  if (aligned > base) munmap(raw, aligned - base);
  const std::size_t tail = (base + length + kHugePage) - (aligned + length);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  void* p = reinterpret_cast<void*>(aligned);
  (void)madvise(p, length, MADV_HUGEPAGE);
  node->addr = p;
  node->length = length;
  pthread_mutex_lock(&g_registry_mu);
  node->next = g_registry;
  g_registry = node;
  pthread_mutex_unlock(&g_registry_mu);
  g_large_live.fetch_add(1, std::memory_order_relaxed);
  return p;
}

// Unmaps p when it is a large allocation; false when it is not one.
bool unmap_large(void* p) noexcept {
  // Every mapping starts on a huge-page boundary; anything else is a heap
  // block, found without taking the registry lock.
  if ((reinterpret_cast<std::uintptr_t>(p) & (kHugePage - 1)) != 0) return false;
  Mapping* found = nullptr;
  pthread_mutex_lock(&g_registry_mu);
  for (Mapping** link = &g_registry; *link != nullptr; link = &(*link)->next) {
    if ((*link)->addr == p) {
      found = *link;
      *link = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&g_registry_mu);
  if (found == nullptr) return false;
  munmap(found->addr, found->length);
  std::free(found);
  g_large_live.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

// Below the large size, an aligned block is carved out of a plain malloc
// block, whose address is kept in the word before the aligned one. glibc's
// own memalign asks its heap for more than the block and, with other
// allocations in between, keeps growing the heap into fresh pages instead
// of reusing a freed block of the same size: every copy destination then
// faults its pages in again. malloc blocks are reused.
void* aligned_small(std::size_t alignment, std::size_t size) noexcept {
  if (size == 0) size = alignment;
  if (size > SIZE_MAX - alignment - sizeof(void*)) return nullptr;
  void* raw = std::malloc(size + alignment + sizeof(void*));
  if (raw == nullptr) return nullptr;
  const auto first = reinterpret_cast<std::uintptr_t>(raw) + sizeof(void*);
  const std::uintptr_t aligned = (first + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1);
  reinterpret_cast<void**>(aligned)[-1] = raw;
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

void* mem_alloc(std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  return std::malloc(size == 0 ? 1 : size);
}

void* mem_alloc_aligned(std::size_t alignment, std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  if (size >= kLargeAllocation && alignment <= kHugePage) return map_large(size);
  return aligned_small(alignment, size);
}

void* mem_alloc_zeroed(std::size_t alignment, std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  // Fresh anonymous pages read as zero: nothing to write.
  if (size >= kLargeAllocation && alignment <= kHugePage) return map_large(size);
  void* p = aligned_small(alignment, size);
  if (p != nullptr) std::memset(p, 0, size);
  return p;
}

void mem_free(void* p) noexcept { std::free(p); }

void mem_free_aligned(void* p) noexcept {
  if (p == nullptr || unmap_large(p)) return;
  std::free(static_cast<void**>(p)[-1]);
}

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

std::int64_t large_allocations_live() noexcept { return g_large_live.load(std::memory_order_relaxed); }

}  // namespace testing
}  // namespace dlb
