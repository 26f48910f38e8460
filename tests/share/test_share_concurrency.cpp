// Concurrent opening, sharing, exporting and releasing of shared buffers
// from many threads (run under ThreadSanitizer by scripts/test.d/22-tsan.sh,
// which runs the reliability suite): the mapping table and the counts stay
// consistent and nothing is left open or mapped.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "share_testing.hpp"

namespace {

int iterations() {
  const char* env = std::getenv("DLB_TEST_ITERATIONS");
  const int n = env != nullptr ? std::atoi(env) : 2000;
  return n > 0 ? (n > 2000 ? 2000 : n) : 2000;
}

TEST(ShareConcurrency, OpenShareExportReleaseFromManyThreads) {
  const int fds_before = sharetest::open_fds();
  const std::int64_t maps_before = dlb_shared_mappings();
  const std::int64_t exports_before = dlb_live_exports();
  const std::int64_t shape[] = {64};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc_shared(DLDevice{kDLCPU, 0}, DLDataType{kDLInt, 32, 1}, 1, shape, &b), DLB_OK);
  dlb_share_descriptor d;
  ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK);
  const int n = iterations() / 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < n; ++i) {
        dlb_buffer* o = nullptr;
        if (dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &o) != DLB_OK) {
          failures.fetch_add(1);
          continue;
        }
        DLTensor t;
        dlb_buffer_dltensor(o, &t);
        __atomic_fetch_add(static_cast<std::int32_t*>(t.data) + k, 1, __ATOMIC_RELAXED);
        // Share the opened buffer on, and the original, concurrently.
        dlb_share_descriptor again;
        if (dlb_buffer_share((i & 1) != 0 ? o : b, (i & 2) != 0 ? DLB_SHARE_READ_ONLY : 0, &again) != DLB_OK)
          failures.fetch_add(1);
        dlb_share_descriptor_close(&again);
        DLManagedTensorVersioned* m = nullptr;
        if (dlb_export_versioned(o, nullptr, &m) != DLB_OK) failures.fetch_add(1);
        dlb_buffer_release(o);
        // The export's deleter on another thread releases the mapping.
        std::thread([m] { m->deleter(m); }).join();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  DLTensor t;
  dlb_buffer_dltensor(b, &t);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(static_cast<std::int32_t*>(t.data)[k], n);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
  EXPECT_EQ(dlb_shared_mappings(), maps_before);
  EXPECT_EQ(dlb_live_exports(), exports_before);
  EXPECT_EQ(sharetest::open_fds(), fds_before);
}

}  // namespace
