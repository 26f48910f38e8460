#include "alloc.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "poison.hpp"

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
// mode, the Debian default, then fault 2 MiB at a time: far fewer faults
// than 4 KiB pages; bench/copy_diagnose --no-huge compares, figures in
// bench/README.md, "Steadiness"). mem_free must tell them from malloc's
// blocks without reading outside either, so they are listed (address ->
// length) in a registry kept beside them; only page-aligned addresses are
// looked up there (malloc's blocks rarely are).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

struct Mapping {
  Mapping* next;
  void* addr;
  std::size_t length;
};

std::atomic<bool> g_huge_advice{true};

// The last large mapping freed, kept for the next large allocation of
// about its size (guarded by g_registry_mu; nullptr: none). A fresh
// mapping costs a page fault per huge page, each zeroing 2 MiB, before the
// copy can write it: on the development machine faulting in a 128 MiB
// destination took about as long as copying into it (bench/copy_diagnose
// --touch; bench/README.md, "Steadiness"). A kept mapping's pages are
// still in, so the next copy of that size writes them straight away. Its
// pages are given to the kernel with MADV_FREE: under memory pressure it
// reclaims them instead of swapping (they then fault in again as zero
// pages), otherwise they stay. Only one, of at most kKeptBytes.
Mapping* g_kept = nullptr;
std::atomic<bool> g_keep_enabled{true};
constexpr std::size_t kKeptBytes = std::size_t{512} << 20;

pthread_mutex_t g_registry_mu = PTHREAD_MUTEX_INITIALIZER;
Mapping* g_registry = nullptr;
std::atomic<std::int64_t> g_large_live{0};

// A fork while another thread holds the registry lock would leave the
// child's copy locked forever: take it around fork.
void registry_prepare() noexcept { pthread_mutex_lock(&g_registry_mu); }
void registry_release() noexcept { pthread_mutex_unlock(&g_registry_mu); }
[[maybe_unused]] const int g_atfork = pthread_atfork(registry_prepare, registry_release, registry_release);

// Registers a mapping as live.
void register_large(Mapping* node) noexcept {
  pthread_mutex_lock(&g_registry_mu);
  node->next = g_registry;
  g_registry = node;
  pthread_mutex_unlock(&g_registry_mu);
  g_large_live.fetch_add(1, std::memory_order_relaxed);
}

// The kept mapping when it fits `length` bytes (not more than a quarter
// larger), taken; else nullptr.
Mapping* take_kept(std::size_t length) noexcept {
  pthread_mutex_lock(&g_registry_mu);
  Mapping* k = g_kept;
  if (k != nullptr && k->length >= length && k->length - length <= length / 4) {
    g_kept = nullptr;
  } else {
    k = nullptr;
  }
  pthread_mutex_unlock(&g_registry_mu);
  if (k != nullptr) mark_taken(k->addr, k->length);
  return k;
}

// `reuse`: the kept mapping may serve it (not for zeroed memory).
void* map_large(std::size_t size, bool reuse) noexcept {
  if (size > SIZE_MAX - 2 * kHugePage) return nullptr;
  const std::size_t length = (size + kHugePage - 1) & ~(kHugePage - 1);
  if (reuse) {
    if (Mapping* k = take_kept(length)) {
      register_large(k);
      return k->addr;
    }
  }
  auto* node = static_cast<Mapping*>(std::malloc(sizeof(Mapping)));
  if (node == nullptr) return nullptr;  // GCOVR_EXCL_LINE: the heap refusing 24 bytes, which no test arranges
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
  if (g_huge_advice.load(std::memory_order_relaxed)) (void)madvise(p, length, MADV_HUGEPAGE);
  node->addr = p;
  node->length = length;
  register_large(node);
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
  g_large_live.fetch_sub(1, std::memory_order_relaxed);
  Mapping* dropped = found;
  if (found->length <= kKeptBytes && g_keep_enabled.load(std::memory_order_relaxed)) {
#if defined(MADV_FREE)
    (void)madvise(found->addr, found->length, MADV_FREE);
#endif
    mark_cached(found->addr, found->length);
    pthread_mutex_lock(&g_registry_mu);
    dropped = g_kept;  // the older one goes
    g_kept = found;
    pthread_mutex_unlock(&g_registry_mu);
  }
  if (dropped != nullptr) {
    mark_taken(dropped->addr, dropped->length);
    munmap(dropped->addr, dropped->length);
    std::free(dropped);
  }
  return true;
}

// Below the large size, an aligned block is carved out of a plain malloc
// block. glibc's own memalign asks its heap for more than the block and,
// with other allocations in between, keeps growing the heap into fresh
// pages instead of reusing a freed block of the same size: every copy
// destination then faults its pages in again. malloc blocks are reused.
//
// Layout: [raw ... | capacity | raw | aligned ...]: the two words before
// the aligned address hold the malloc block's address and its size.
constexpr std::size_t kHeader = 2 * sizeof(void*);

// Freed blocks of mid sizes are kept for reuse by the next aligned
// allocation that fits them (best fit, wasting at most a quarter). glibc
// would reuse them too, but only while nothing else takes them first: a
// caller that allocates arrays of the same size in between (numpy's copy
// of a 256 KiB matrix asks for exactly 256 KiB, ours for a little more,
// the header and the alignment) gets the freed block, splits it, and ours
// comes from fresh pages at the top of the heap again, 64 page faults for
// 256 KiB (bench/README.md, "Against numpy and torch", has the times) for
// as long as the heap takes to settle. Kept blocks are ours alone: at most kRecycleSlots of them and
// kRecycleBytes together, the oldest given back to malloc first.
constexpr std::size_t kRecycleMin = std::size_t{64} << 10;
constexpr std::size_t kRecycleBytes = std::size_t{32} << 20;
constexpr int kRecycleSlots = 8;
constexpr std::size_t kPage = 4096;

struct Recycled {
  void* raw;
  std::size_t capacity;  // 0: empty slot
  std::uint64_t age;     // when it was given: lower is older
};

pthread_mutex_t g_recycle_mu = PTHREAD_MUTEX_INITIALIZER;
Recycled g_recycled[kRecycleSlots] = {};
std::size_t g_recycled_bytes = 0;
std::uint64_t g_recycle_clock = 0;

void recycle_prepare() noexcept { pthread_mutex_lock(&g_recycle_mu); }
void recycle_release() noexcept { pthread_mutex_unlock(&g_recycle_mu); }
[[maybe_unused]] const int g_recycle_atfork = pthread_atfork(recycle_prepare, recycle_release, recycle_release);

// A kept block of at least `need` bytes (and not much more), or nullptr.
void* recycle_take(std::size_t need, std::size_t* capacity) noexcept {
  if (need < kRecycleMin) return nullptr;
  pthread_mutex_lock(&g_recycle_mu);
  int best = -1;
  for (int i = 0; i < kRecycleSlots; ++i) {
    const std::size_t c = g_recycled[i].capacity;
    if (c >= need && c - need <= need / 4 && (best < 0 || c < g_recycled[best].capacity)) best = i;
  }
  void* raw = nullptr;
  if (best >= 0) {
    raw = g_recycled[best].raw;
    *capacity = g_recycled[best].capacity;
    g_recycled_bytes -= *capacity;
    g_recycled[best] = Recycled{nullptr, 0, 0};
  }
  pthread_mutex_unlock(&g_recycle_mu);
  if (raw != nullptr) mark_taken(raw, *capacity);
  return raw;
}

// Keeps a freed block when its size qualifies; returns false when it was
// not kept (the caller frees it). Older blocks may be given back to malloc
// to make room.
bool recycle_give(void* raw, std::size_t capacity) noexcept {
  if (capacity < kRecycleMin || capacity >= kLargeAllocation || capacity > kRecycleBytes) return false;
  void* evicted[kRecycleSlots];
  int n_evicted = 0;
  mark_cached(raw, capacity);
  pthread_mutex_lock(&g_recycle_mu);
  int slot = -1;
  for (;;) {
    int oldest = -1;
    slot = -1;
    for (int i = 0; i < kRecycleSlots; ++i) {
      if (g_recycled[i].capacity == 0) {
        slot = i;
      } else if (oldest < 0 || g_recycled[i].age < g_recycled[oldest].age) {
        oldest = i;
      }
    }
    if (slot >= 0 && g_recycled_bytes + capacity <= kRecycleBytes) break;
    // Full, or too many bytes kept: the oldest goes back to malloc. (With
    // every slot empty the block fits: capacity <= kRecycleBytes.)
    if (oldest < 0) break;
    evicted[n_evicted++] = g_recycled[oldest].raw;
    g_recycled_bytes -= g_recycled[oldest].capacity;
    g_recycled[oldest] = Recycled{nullptr, 0, 0};
  }
  const bool kept = slot >= 0 && g_recycled_bytes + capacity <= kRecycleBytes;
  if (kept) {
    g_recycled[slot] = Recycled{raw, capacity, ++g_recycle_clock};
    g_recycled_bytes += capacity;
  }
  pthread_mutex_unlock(&g_recycle_mu);
  for (int i = 0; i < n_evicted; ++i) std::free(evicted[i]);
  if (!kept) mark_taken(raw, capacity);
  return kept;
}

void* aligned_small(std::size_t alignment, std::size_t size) noexcept {
  if (size == 0) size = alignment;
  if (size > SIZE_MAX - alignment - kHeader - kPage) return nullptr;
  std::size_t capacity = size + alignment + kHeader;
  // Mid sizes in whole pages, so that blocks of nearby sizes can stand in
  // for each other when kept for reuse.
  if (capacity >= kRecycleMin) capacity = (capacity + kPage - 1) & ~(kPage - 1);
  void* raw = recycle_take(capacity, &capacity);
  if (raw == nullptr) raw = std::malloc(capacity);
  if (raw == nullptr) return nullptr;
  const auto first = reinterpret_cast<std::uintptr_t>(raw) + kHeader;
  const std::uintptr_t aligned = (first + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1);
  reinterpret_cast<void**>(aligned)[-1] = raw;
  reinterpret_cast<std::size_t*>(aligned)[-2] = capacity;
  return reinterpret_cast<void*>(aligned);
}

void free_small(void* p) noexcept {
  void* raw = static_cast<void**>(p)[-1];
  const std::size_t capacity = static_cast<std::size_t*>(p)[-2];
  if (!recycle_give(raw, capacity)) std::free(raw);
}

}  // namespace

void* mem_alloc(std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  return std::malloc(size == 0 ? 1 : size);
}

void* mem_alloc_aligned(std::size_t alignment, std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  if (size >= kLargeAllocation && alignment <= kHugePage) return map_large(size, true);
  return aligned_small(alignment, size);
}

void* mem_alloc_zeroed(std::size_t alignment, std::size_t size) noexcept {
  if (injected_failure()) return nullptr;
  // Fresh anonymous pages read as zero: nothing to write.
  if (size >= kLargeAllocation && alignment <= kHugePage) return map_large(size, false);
  void* p = aligned_small(alignment, size);
  if (p != nullptr) std::memset(p, 0, size);
  return p;
}

void mem_free(void* p) noexcept { std::free(p); }

void mem_free_aligned(void* p) noexcept {
  if (p == nullptr || unmap_large(p)) return;
  free_small(p);
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

void set_huge_page_advice(bool on) noexcept { g_huge_advice.store(on, std::memory_order_relaxed); }

void set_keep_large_mapping(bool on) noexcept {
  g_keep_enabled.store(on, std::memory_order_relaxed);
  if (!on) drop_kept_mapping();
}

std::size_t kept_mapping_bytes() noexcept {
  pthread_mutex_lock(&g_registry_mu);
  const std::size_t n = g_kept != nullptr ? g_kept->length : 0;
  pthread_mutex_unlock(&g_registry_mu);
  return n;
}

void drop_kept_mapping() noexcept {
  pthread_mutex_lock(&g_registry_mu);
  Mapping* k = g_kept;
  g_kept = nullptr;
  pthread_mutex_unlock(&g_registry_mu);
  if (k != nullptr) {
    mark_taken(k->addr, k->length);
    munmap(k->addr, k->length);
    std::free(k);
  }
}

std::int64_t large_allocations_live() noexcept { return g_large_live.load(std::memory_order_relaxed); }

std::size_t recycled_bytes() noexcept {
  pthread_mutex_lock(&g_recycle_mu);
  const std::size_t n = g_recycled_bytes;
  pthread_mutex_unlock(&g_recycle_mu);
  return n;
}

void drop_recycled_blocks() noexcept {
  void* raws[kRecycleSlots];
  int n = 0;
  pthread_mutex_lock(&g_recycle_mu);
  for (Recycled& r : g_recycled) {
    if (r.capacity != 0) raws[n++] = r.raw;
    r = Recycled{nullptr, 0, 0};
  }
  g_recycled_bytes = 0;
  pthread_mutex_unlock(&g_recycle_mu);
  for (int i = 0; i < n; ++i) std::free(raws[i]);
}

}  // namespace testing
}  // namespace dlb
