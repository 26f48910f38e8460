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
