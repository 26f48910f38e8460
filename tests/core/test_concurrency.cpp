// Reference counts and last errors under threads.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

class Concurrency : public DlbTest {};

TEST_F(Concurrency, EightThreadsRetainAndReleaseOneBufferAMillionTimesEach) {
  static float data[4];
  int64_t shape[1] = {4};
  DLTensor view{data, cpu(), 1, f32(), shape, nullptr, 0};
  ReleaseCounter rc;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, ReleaseCounter::release, &rc, &b), DLB_OK);
  const long n = iterations(1000000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([b, n] {
      for (long i = 0; i < n; ++i) {
        dlb_buffer_retain(b);
        dlb_buffer_release(b);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  EXPECT_EQ(rc.calls.load(), 0);
  dlb_buffer_release(b);
  EXPECT_EQ(rc.calls.load(), 1);
}

TEST_F(Concurrency, LastReleaseOnAnyThreadRunsReleaseOnce) {
  const long rounds = iterations(2000) / 10 + 1;
  for (long r = 0; r < rounds; ++r) {
    static float data[2];
    int64_t shape[1] = {2};
    DLTensor view{data, cpu(), 1, f32(), shape, nullptr, 0};
    ReleaseCounter rc;
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_buffer_wrap(&view, 0, ReleaseCounter::release, &rc, &b), DLB_OK);
    for (int t = 0; t < 3; ++t) dlb_buffer_retain(b);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([b] { dlb_buffer_release(b); });
    for (auto& t : threads) t.join();
    ASSERT_EQ(rc.calls.load(), 1);
  }
}

TEST_F(Concurrency, AFailureOnOneThreadLeavesAnotherThreadsMessageAlone) {
  std::atomic<int> stage{0};
  std::string seen_by_a;
  std::thread a([&] {
    int64_t shape[1] = {-7};
    dlb_buffer* out = nullptr;
    EXPECT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &out), DLB_ERR_MALFORMED);
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    seen_by_a = dlb_last_error_message();
  });
  std::thread b([&] {
    while (stage.load() != 1) std::this_thread::yield();
    dlb_buffer* out = nullptr;
    EXPECT_EQ(dlb_buffer_alloc(cpu(), DLDataType{99, 8, 1}, 0, nullptr, &out), DLB_ERR_UNSUPPORTED_DTYPE);
    EXPECT_TRUE(MessageContains("code 99"));
    stage = 2;
  });
  a.join();
  b.join();
  EXPECT_NE(seen_by_a.find("shape[0] is -7"), std::string::npos) << seen_by_a;
}

// A buffer's first default exports decide and keep the planner's answer;
// threads making them at once must all get that answer, whichever stores it
// first, and later exports the same.
TEST_F(Concurrency, FirstDefaultExportsOnManyThreadsAllGetThePlannersDecision) {
  static float data[8];
  const long rounds = iterations(2000) / 20 + 1;
  for (long r = 0; r < rounds; ++r) {
    const bool read_only = (r % 2) == 0;
    int64_t shape[1] = {6};
    DLTensor view{data, DLDevice{kDLCUDAHost, 3}, 1, f32(), shape, nullptr, 2 * sizeof(float)};
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_buffer_wrap(&view, read_only ? DLB_BUFFER_READ_ONLY : 0, nullptr, nullptr, &b), DLB_OK);
    std::atomic<int> go{0};
    std::atomic<int> wrong{0};
    auto check_versioned = [&] {
      DLManagedTensorVersioned* m = nullptr;
      if (dlb_export_versioned(b, nullptr, &m) != DLB_OK) return ++wrong, void();
      const DLTensor& t = m->dl_tensor;
      if (t.data != data + 2 || t.byte_offset != 0 || t.device.device_type != kDLCUDAHost ||
          t.device.device_id != 3 || m->flags != (read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0u))
        ++wrong;
      m->deleter(m);
    };
    auto check_legacy = [&] {
      DLManagedTensor* m = nullptr;
      const dlb_status s = dlb_export_legacy(b, nullptr, &m);
      if (s != (read_only ? DLB_ERR_READ_ONLY : DLB_OK)) return ++wrong, void();
      if (s == DLB_ERR_READ_ONLY) return;
      if (m->dl_tensor.data != data + 2 || m->dl_tensor.device.device_id != 3) ++wrong;
      m->deleter(m);
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        while (go.load() == 0) std::this_thread::yield();
        if (t % 2 == 0) check_versioned(); else check_legacy();
      });
    go = 1;
    for (auto& t : threads) t.join();
    check_legacy();
    check_versioned();
    ASSERT_EQ(wrong.load(), 0) << "round " << r;
    dlb_buffer_release(b);
  }
  EXPECT_EQ(dlb_live_exports(), 0);
}
