#include "thread_cache.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "alloc.hpp"
#include "poison.hpp"

namespace dlb {
namespace {

// The cache stays on under every tool, so that the tools see the path
// production takes; a cached block is reported as freed memory would be
// (poison.hpp).
constexpr int kCacheLimit = 32;

// A cached block's link to the next: in the block's allocation, after its
// `size` bytes (cached_block_bytes), never poisoned.
inline void* read_link(void* block, std::size_t size) noexcept {
  void* next;
  std::memcpy(&next, static_cast<unsigned char*>(block) + size, sizeof next);
  return next;
}
inline void write_link(void* block, std::size_t size, void* next) noexcept {
  std::memcpy(static_cast<unsigned char*>(block) + size, &next, sizeof next);
}

// One per thread that ever exported or deleted; linked into a global list
// so that live_total() can sum them. Only its own thread writes `live`.
struct LiveSlot {
  std::atomic<std::int64_t> live{0};
  LiveSlot* prev = nullptr;
  LiveSlot* next = nullptr;
};

std::mutex g_slots_mutex;
LiveSlot* g_slots = nullptr;
// Counts of threads that have exited, and of deltas that arrived on a
// thread after its state was torn down.
std::atomic<std::int64_t> g_retired{0};

// Trivially destructible: valid for the whole life of the thread, also
// while other thread_local destructors run.
struct ThreadState {
  void* heads[kBlockClasses];
  int counts[kBlockClasses];
  std::uint32_t sizes[kBlockClasses];  // each class's block size, where its link is
  LiveSlot* slot;
  bool gone;
};
// Initial-exec TLS: one instruction to reach, and small enough (48 bytes)
// for the static TLS space glibc keeps for libraries loaded with dlopen.
thread_local ThreadState tl_state __attribute__((tls_model("initial-exec"))) = {
    {nullptr, nullptr}, {0, 0}, {0, 0}, nullptr, false};

void drain(ThreadState& s) noexcept {
  for (int c = 0; c < kBlockClasses; ++c) {
    while (s.heads[c] != nullptr) {
      void* next = read_link(s.heads[c], s.sizes[c]);
      mem_free(s.heads[c]);
      s.heads[c] = next;
    }
    s.counts[c] = 0;
  }
}

// Constructed on a thread's first use; its destructor returns the cached
// blocks and folds the thread's count into g_retired.
struct ThreadReaper {
  LiveSlot slot;
  ThreadReaper() {
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    slot.next = g_slots;
    if (g_slots != nullptr) g_slots->prev = &slot;
    g_slots = &slot;
  }
  ~ThreadReaper() {
    ThreadState& s = tl_state;
    drain(s);
    {
      std::lock_guard<std::mutex> lock(g_slots_mutex);
      g_retired.fetch_add(slot.live.load(std::memory_order_relaxed), std::memory_order_relaxed);
      if (slot.prev != nullptr) slot.prev->next = slot.next; else g_slots = slot.next;
      if (slot.next != nullptr) slot.next->prev = slot.prev;
    }
    s.slot = nullptr;
    s.gone = true;
  }
};

// Registers this thread on first use. Returns false once the thread is
// exiting (its reaper has run).
__attribute__((noinline)) bool register_thread(ThreadState& s) noexcept {
  if (s.gone) return false;
  try {
    thread_local ThreadReaper reaper;
    s.slot = &reaper.slot;
    return true;
  } catch (...) {  // GCOVR_EXCL_START: the reaper's constructor does not throw; the runtime's TLS setup could
    return false;  // could not register: callers fall back to the global paths
  }  // GCOVR_EXCL_STOP
}

inline bool thread_ready(ThreadState& s) noexcept { return s.slot != nullptr || register_thread(s); }

}  // namespace

void* cache_take(BlockClass cls, std::size_t size) noexcept {
  ThreadState& s = tl_state;
  const int c = static_cast<int>(cls);
  void* b = s.heads[c];
  if (b == nullptr) return nullptr;
  s.heads[c] = read_link(b, size);
  --s.counts[c];
  mark_taken(b, size);
  return b;
}

bool cache_give(BlockClass cls, void* block, std::size_t size) noexcept {
  ThreadState& s = tl_state;
  const int c = static_cast<int>(cls);
  if (s.counts[c] >= kCacheLimit || !thread_ready(s)) return false;
  write_link(block, size, s.heads[c]);
  s.heads[c] = block;
  s.sizes[c] = static_cast<std::uint32_t>(size);
  ++s.counts[c];
  mark_cached(block, size);
  return true;
}

void live_add(std::int64_t delta) noexcept {
  ThreadState& s = tl_state;
  if (thread_ready(s)) {
    // Only this thread writes its slot: a plain load and store suffice.
    std::atomic<std::int64_t>& v = s.slot->live;
    v.store(v.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  } else {
    g_retired.fetch_add(delta, std::memory_order_relaxed);
  }
}

std::int64_t live_total() noexcept {
  try {
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    std::int64_t total = g_retired.load(std::memory_order_relaxed);
    for (LiveSlot* p = g_slots; p != nullptr; p = p->next) total += p->live.load(std::memory_order_relaxed);
    return total;
  } catch (...) {  // GCOVR_EXCL_START: std::mutex::lock throws only on a deadlock it detects, which no caller makes
    return -1;  // the mutex could not be taken; never seen in practice
  }  // GCOVR_EXCL_STOP
}

namespace testing {
void drop_thread_caches() noexcept {
  drain(tl_state);
}
}  // namespace testing

}  // namespace dlb
