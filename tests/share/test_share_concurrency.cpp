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
#include <cstring>
#include <deque>
#include <mutex>
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

// The small-tensor pool from many threads: pooled copies, tickets issued
// on one thread and opened on another (or on the same one), slots shared
// with dlb_buffer_share now and then, dlb_buffer_is_shared and trims, all
// at once. Every ticket opens once, every write lands, and the references,
// slabs and descriptors come back.
TEST(ShareConcurrency, PoolIssueOpenReleaseFromManyThreads) {
  dlb_share_pool_trim();
  const int fds_before = sharetest::open_fds();
  const std::int64_t maps_before = dlb_shared_mappings();
  const std::int64_t exports_before = dlb_live_exports();
  dlb_share_pool_state start{};
  ASSERT_EQ(dlb_share_pool_stats(&start), DLB_OK);
  const int n = iterations() / 4;
  std::atomic<int> failures{0};
  std::atomic<int> opened{0};
  std::mutex queue_mutex;
  std::deque<dlb_share_pool_ticket> queue;
  auto open_one = [&](const dlb_share_pool_ticket& t) {
    dlb_buffer* o = nullptr;
    if (dlb_share_pool_open(&t, -1, 0, &o) != DLB_OK || o == nullptr) {
      failures.fetch_add(1);
      return;
    }
    DLTensor v;
    dlb_buffer_dltensor(o, &v);
    auto* p = reinterpret_cast<std::int32_t*>(static_cast<unsigned char*>(v.data) + v.byte_offset);
    if (p[1] != p[0] + 1) failures.fetch_add(1);
    __atomic_fetch_add(p + 2, 1, __ATOMIC_RELAXED);
    // A second open of the same ticket is refused.
    dlb_buffer* again = nullptr;
    if (dlb_share_pool_open(&t, -1, 0, &again) != DLB_ERR_DELETED || again != nullptr) failures.fetch_add(1);
    dlb_buffer_release(o);
    opened.fetch_add(1);
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      const std::int64_t shape[] = {16 + 256 * k};  // slots of 4 and 16 KiB
      dlb_buffer* src = nullptr;
      if (dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLInt, 32, 1}, 1, shape, &src) != DLB_OK) {
        failures.fetch_add(1);
        return;
      }
      DLTensor s;
      dlb_buffer_dltensor(src, &s);
      auto* sp = static_cast<std::int32_t*>(s.data);
      for (int i = 0; i < n; ++i) {
        sp[0] = i;
        sp[1] = i + 1;
        sp[2] = 0;
        dlb_buffer* b = nullptr;
        if (dlb_buffer_copy_shared(src, DLB_SHARE_POOLED, &b) != DLB_OK) {
          failures.fetch_add(1);
          continue;
        }
        dlb_share_pool_ticket t;
        if (dlb_share_pool_issue(b, &t) != DLB_OK) {
          failures.fetch_add(1);
        } else if ((i & 1) != 0) {
          open_one(t);
        } else {
          std::lock_guard<std::mutex> lock(queue_mutex);
          queue.push_back(t);
        }
        std::int32_t shared = 0;
        if (dlb_buffer_is_shared(b, &shared) != DLB_OK || shared != 1) failures.fetch_add(1);
        if (i % 97 == 0) {
          dlb_share_descriptor d;
          if (dlb_buffer_share(b, 0, &d) != DLB_OK) failures.fetch_add(1);
          dlb_share_descriptor_close(&d);
        }
        if (k == 0 && i % 16 == 0) dlb_share_pool_trim();
        dlb_buffer_release(b);
        // Open someone's ticket.
        dlb_share_pool_ticket other;
        bool have = false;
        {
          std::lock_guard<std::mutex> lock(queue_mutex);
          if (!queue.empty()) {
            other = queue.front();
            queue.pop_front();
            have = true;
          }
        }
        if (have) open_one(other);
      }
      dlb_buffer_release(src);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& t : queue) open_one(t);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(opened.load(), 4 * n);
  dlb_share_pool_state now{};
  ASSERT_EQ(dlb_share_pool_stats(&now), DLB_OK);
  EXPECT_EQ(now.references, start.references);
  dlb_share_pool_trim();
  ASSERT_EQ(dlb_share_pool_stats(&now), DLB_OK);
  EXPECT_EQ(now.slabs, start.slabs);
  EXPECT_EQ(dlb_shared_mappings(), maps_before);
  EXPECT_EQ(dlb_live_exports(), exports_before);
  EXPECT_EQ(sharetest::open_fds(), fds_before);
}

}  // namespace
