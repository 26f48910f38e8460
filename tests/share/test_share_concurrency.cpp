// Concurrent opening, sharing, exporting and releasing of shared buffers
// from many threads (run under ThreadSanitizer by scripts/test.d/22-tsan.sh,
// which runs the reliability suite): the mapping table and the counts stay
// consistent and nothing is left open or mapped.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
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
  // Shared read-only, another buffer: a read-only share seals its memory
  // against new writable mappings, which b's writable shares need.
  dlb_buffer* r = nullptr;
  ASSERT_EQ(dlb_buffer_alloc_shared(DLDevice{kDLCPU, 0}, DLDataType{kDLInt, 32, 1}, 1, shape, &r), DLB_OK);
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
        const bool read_only = (i & 2) != 0;
        if (dlb_buffer_share(read_only ? r : (i & 1) != 0 ? o : b, read_only ? DLB_SHARE_READ_ONLY : 0, &again) !=
            DLB_OK)
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
  dlb_buffer_release(r);
  EXPECT_EQ(dlb_shared_mappings(), maps_before);
  EXPECT_EQ(dlb_live_exports(), exports_before);
  EXPECT_EQ(sharetest::open_fds(), fds_before);
}

// Tickets from many threads: each issued on one thread and opened on
// another (or the same one), while the server thread answers. Every ticket
// opens, every write lands, and the server's files, the mappings and the
// descriptors come back.
TEST(ShareConcurrency, TicketsIssuedAndOpenedFromManyThreads) {
  auto held = [] {
    std::int64_t h = -1, c = -1;
    dlb_share_ticket_server(&h, &c, nullptr);
    return std::make_pair(h, c);
  };
  auto settle = [&](std::pair<std::int64_t, std::int64_t> want) {
    for (int i = 0; i < 5000 && held() != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return held();
  };
  const std::int64_t shape[] = {64};
  {  // the server, which stays
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_buffer_alloc_shared(DLDevice{kDLCPU, 0}, DLDataType{kDLInt, 32, 1}, 1, shape, &b), DLB_OK);
    dlb_share_ticket t;
    ASSERT_EQ(dlb_share_ticket_issue(b, 0, &t), DLB_OK);
    dlb_buffer* o = nullptr;
    ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK);
    dlb_buffer_release(o);
    dlb_buffer_release(b);
    ASSERT_EQ(settle({0, 0}), std::make_pair(std::int64_t{0}, std::int64_t{0}));
  }
  const int fds_before = sharetest::open_fds();
  const std::int64_t maps_before = dlb_shared_mappings();
  const int n = iterations() / 8;
  std::atomic<int> failures{0};
  std::atomic<int> opened{0};
  std::mutex queue_mutex;
  std::deque<dlb_share_ticket> queue;
  auto open_one = [&](const dlb_share_ticket& t) {
    dlb_buffer* o = nullptr;
    if (dlb_share_ticket_open(t.bytes, t.size, 0, &o) != DLB_OK) {
      failures.fetch_add(1);
      return;
    }
    DLTensor v;
    dlb_buffer_dltensor(o, &v);
    auto* p = static_cast<std::int32_t*>(v.data);
    if (p[1] != p[0] + 1) failures.fetch_add(1);
    __atomic_fetch_add(p + 2, 1, __ATOMIC_RELAXED);
    dlb_buffer_release(o);
    opened.fetch_add(1);
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < n; ++i) {
        dlb_buffer* b = nullptr;
        if (dlb_buffer_alloc_shared(DLDevice{kDLCPU, 0}, DLDataType{kDLInt, 32, 1}, 1, shape, &b) != DLB_OK) {
          failures.fetch_add(1);
          continue;
        }
        DLTensor v;
        dlb_buffer_dltensor(b, &v);
        auto* p = static_cast<std::int32_t*>(v.data);
        p[0] = i;
        p[1] = i + 1;
        dlb_share_ticket t;
        if (dlb_share_ticket_issue(b, 0, &t) != DLB_OK) {
          failures.fetch_add(1);
        } else if ((i & 1) != 0) {
          open_one(t);
        } else {
          std::lock_guard<std::mutex> lock(queue_mutex);
          queue.push_back(t);
        }
        dlb_buffer_release(b);  // the ticket's file lives on in the server
        dlb_share_ticket other;
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
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& t : queue) open_one(t);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(opened.load(), 4 * n);
  EXPECT_EQ(settle({0, 0}), std::make_pair(std::int64_t{0}, std::int64_t{0}));
  EXPECT_EQ(dlb_shared_mappings(), maps_before);
  EXPECT_EQ(sharetest::open_fds(), fds_before);
}

}  // namespace
