// The per-thread block cache on the path production takes: no allocation
// per warm export, blocks freed on other threads than the ones that took
// them, and (under AddressSanitizer) cached blocks poisoned like freed
// memory. The cache is on under every sanitizer and under valgrind.
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "core/alloc.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define DLB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DLB_TEST_ASAN 1
#endif
#endif
#if defined(DLB_TEST_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace {

namespace inj = dlb::testing;

long iterations(long fallback) {
  const char* env = std::getenv("DLB_TEST_ITERATIONS");
  return env != nullptr ? std::atol(env) : fallback;
}

dlb_buffer* make_buffer() {
  const int64_t shape[4] = {2, 3, 4, 5};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 32, 1}, 4, shape, &b), DLB_OK);
  return b;
}

TEST(BlockCache, AWarmExportAllocatesNothing) {
  dlb_buffer* b = make_buffer();
  dlb_export_options o;
  dlb_export_options_init(&o);
  for (int warm = 0; warm < 2; ++warm) {
    inj::fail_allocation_after(-1);  // count, fail nothing
    DLManagedTensorVersioned* v = nullptr;
    DLManagedTensor* l = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &v), DLB_OK);
    v->deleter(v);
    ASSERT_EQ(dlb_export_legacy(b, nullptr, &l), DLB_OK);
    l->deleter(l);
    ASSERT_EQ(dlb_export_versioned(b, &o, &v), DLB_OK);
    v->deleter(v);
    const std::int64_t count = inj::allocations_attempted();
    inj::fail_allocation_after(0);
    if (warm == 1) {
      EXPECT_EQ(count, 0) << "allocations in three warm exports";
    }
  }
  // An import and its re-export reuse cached buffer headers as well (the
  // first round warms the cache with two export blocks and a header).
  for (int warm = 0; warm < 2; ++warm) {
    inj::fail_allocation_after(-1);
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    dlb_buffer* imported = nullptr;
    ASSERT_EQ(dlb_import_versioned(m, nullptr, &imported), DLB_OK);
    DLManagedTensorVersioned* re = nullptr;
    ASSERT_EQ(dlb_export_versioned(imported, nullptr, &re), DLB_OK);
    dlb_buffer_release(imported);
    re->deleter(re);
    const std::int64_t count = inj::allocations_attempted();
    inj::fail_allocation_after(0);
    if (warm == 1) {
      EXPECT_EQ(count, 0) << "allocations in a warm import and re-export";
    }
  }
  dlb_buffer_release(b);
  EXPECT_EQ(dlb_live_exports(), 0);
}

TEST(BlockCache, BlocksFreedOnOtherThreadsThanTheOnesThatTookThem) {
  // Producers export on their threads; a consumer thread runs every
  // deleter (its cache fills with their blocks) and exports itself from
  // those blocks, whose deleters run back on the producers.
  dlb_buffer* b = make_buffer();
  const long rounds = iterations(20000) / 10 + 10;
  std::mutex mu;
  std::vector<DLManagedTensorVersioned*> to_consumer, to_producers;
  std::atomic<int> producers_left{2};
  std::atomic<long> checked{0};
  auto check = [&](const DLManagedTensorVersioned* m) {
    if (m->dl_tensor.ndim == 4 && m->dl_tensor.shape[3] == 5 && m->dl_tensor.strides[0] == 60)
      checked.fetch_add(1, std::memory_order_relaxed);
  };
  auto producer = [&] {
    for (long i = 0; i < rounds; ++i) {
      DLManagedTensorVersioned* m = nullptr;
      if (dlb_export_versioned(b, nullptr, &m) != DLB_OK) std::abort();
      std::vector<DLManagedTensorVersioned*> mine;
      {
        std::lock_guard<std::mutex> lock(mu);
        to_consumer.push_back(m);
        mine.swap(to_producers);
      }
      for (DLManagedTensorVersioned* x : mine) {
        check(x);
        x->deleter(x);
      }
    }
    producers_left.fetch_sub(1);
  };
  auto consumer = [&] {
    for (;;) {
      std::vector<DLManagedTensorVersioned*> got;
      const bool last = producers_left.load() == 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        got.swap(to_consumer);
      }
      for (DLManagedTensorVersioned* x : got) {
        check(x);
        x->deleter(x);
        DLManagedTensorVersioned* m = nullptr;  // from a block another thread took
        if (dlb_export_versioned(b, nullptr, &m) != DLB_OK) std::abort();
        std::lock_guard<std::mutex> lock(mu);
        to_producers.push_back(m);
      }
      if (last && got.empty()) break;
      std::this_thread::yield();
    }
  };
  std::thread p1(producer), p2(producer), c(consumer);
  p1.join();
  p2.join();
  c.join();
  for (DLManagedTensorVersioned* x : to_producers) {
    check(x);
    x->deleter(x);
  }
  EXPECT_EQ(checked.load(), 4 * rounds);
  EXPECT_EQ(dlb_live_exports(), 0);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_buffer_release(b);
}

#if defined(DLB_TEST_ASAN)
TEST(BlockCache, CachedBlocksArePoisonedForAddressSanitizer) {
  dlb_buffer* b = make_buffer();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_FALSE(__asan_address_is_poisoned(&m->dl_tensor.ndim));
  DLManagedTensorVersioned* kept = m;
  m->deleter(m);
  // The block went to this thread's cache, not to free(): ASan still
  // reports any touch of it.
  EXPECT_TRUE(__asan_address_is_poisoned(&kept->dl_tensor.ndim));
  EXPECT_TRUE(__asan_address_is_poisoned(&kept->flags));
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m, kept);  // the cached block, taken again and usable
  EXPECT_FALSE(__asan_address_is_poisoned(&m->dl_tensor.ndim));
  m->deleter(m);
  dlb_buffer_release(b);
}

// Several blocks of each class in this thread's cache, all poisoned: a
// leak check in the middle of the run (libFuzzer's after each input, a
// user's) finds every one reachable, since the links between them are kept
// outside the poisoned bytes.
TEST(BlockCache, CachedBlocksAreNotLeaksForLeakSanitizer) {
  dlb_buffer* b = make_buffer();
  std::vector<DLManagedTensorVersioned*> exports(5);
  std::vector<dlb_buffer*> buffers(5);  // wrapped: their headers are cached blocks
  static float data[6];
  std::int64_t shape[2] = {2, 3};
  DLTensor view{};
  view.data = data;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = 2;
  view.dtype = DLDataType{kDLFloat, 32, 1};
  view.shape = shape;
  for (auto& m : exports) ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  for (auto& x : buffers) ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &x), DLB_OK);
  for (DLManagedTensorVersioned* m : exports) m->deleter(m);
  for (dlb_buffer* x : buffers) dlb_buffer_release(x);
  EXPECT_TRUE(__asan_address_is_poisoned(&exports[4]->dl_tensor.ndim));
  EXPECT_TRUE(__asan_address_is_poisoned(exports[4]));  // the first bytes too
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0);
  dlb_buffer_release(b);
}
#endif

}  // namespace
