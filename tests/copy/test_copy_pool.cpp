// The copy threads and the allocations of copy destinations: the setting's
// checks, copies split among threads (also from many threads at once, and
// while the setting changes), a forked child that copies with its own
// workers and exits, zeroed large allocations and the kept large mapping;
// the split of large copies into parts and the pool's claiming of them.
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/alloc.hpp"
#include "copy/copy_engine.hpp"
#include "copy/copy_pool.hpp"

namespace {

// A k x k float64 matrix of distinct values and its transpose, copied by
// the public entry point; true when every element is right.
bool transpose_is_right(std::int64_t k, std::uint64_t seed) {
  std::vector<double> src(static_cast<std::size_t>(k * k));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i) + static_cast<double>(seed);
  std::vector<double> dst(src.size(), -1.0);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {1, k};
  DLTensor t{};
  t.data = src.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 2;
  t.dtype = DLDataType{kDLFloat, 64, 1};
  t.shape = shape;
  t.strides = strides;
  if (dlb_copy_to_contiguous(&t, dst.data(), dst.size() * sizeof(double)) != DLB_OK) return false;
  for (std::int64_t i = 0; i < k; ++i) {
    for (std::int64_t j = 0; j < k; ++j) {
      if (dst[static_cast<std::size_t>(i * k + j)] != src[static_cast<std::size_t>(j * k + i)]) return false;
    }
  }
  return true;
}

struct Thresholds {
  // Every copy of 4 KiB and more goes to the pool.
  Thresholds() { dlb::testing::set_copy_thresholds(4096, 0); }
  ~Thresholds() {
    dlb::testing::set_copy_thresholds(0, 0);
    dlb_set_copy_threads(0);
  }
};

TEST(CopyThreads, SettingIsChecked) {
  EXPECT_EQ(dlb_set_copy_threads(-1), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(dlb_last_error_message(), "-1"), nullptr) << dlb_last_error_message();
  EXPECT_EQ(dlb_set_copy_threads(65), DLB_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(dlb_set_copy_threads(3), DLB_OK);
  EXPECT_EQ(dlb_copy_threads(), 3);
  ASSERT_EQ(dlb_set_copy_threads(1), DLB_OK);
  EXPECT_EQ(dlb_copy_threads(), 1);
  ASSERT_EQ(dlb_set_copy_threads(0), DLB_OK);
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(dlb_copy_threads(), CPU_COUNT(&set));
}

TEST(CopyThreads, SplitCopiesAreRight) {
  Thresholds th;
  for (const int n : {2, 3, 4, 1, 2}) {  // the pool restarts on every change
    ASSERT_EQ(dlb_set_copy_threads(n), DLB_OK);
    for (const std::int64_t k : {33, 64, 100, 257}) EXPECT_TRUE(transpose_is_right(k, static_cast<std::uint64_t>(n)));
  }
}

// Copies from several threads at once (one gets the pool, the others run
// serially), while another thread changes the setting.
TEST(CopyThreads, ConcurrentCopiesWhileTheSettingChanges) {
  Thresholds th;
  ASSERT_EQ(dlb_set_copy_threads(2), DLB_OK);
  const int iterations = 60;
  std::atomic<int> wrong{0};
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    int n = 0;
    while (!stop.load()) {
      dlb_set_copy_threads(1 + (n++ % 3));
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> copiers;
  for (int t = 0; t < 4; ++t) {
    copiers.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        if (!transpose_is_right(40 + (i % 5) * 13, static_cast<std::uint64_t>(t * 1000 + i))) ++wrong;
      }
    });
  }
  for (auto& c : copiers) c.join();
  stop.store(true);
  changer.join();
  EXPECT_EQ(wrong.load(), 0);
}

#if defined(__SANITIZE_THREAD__)
#define DLB_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DLB_UNDER_TSAN 1
#endif
#endif

// After fork the child copies with workers of its own (the parent's do not
// exist there) and exits through exit(), which joins them; a hang is
// caught by the alarm.
TEST(CopyThreads, ForkedChildCopiesAndExits) {
#if defined(DLB_UNDER_TSAN)
  GTEST_SKIP() << "ThreadSanitizer does not support threads started after a multi-threaded fork";
#else
  Thresholds th;
  ASSERT_EQ(dlb_set_copy_threads(2), DLB_OK);
  ASSERT_TRUE(transpose_is_right(128, 1));  // the parent's pool is running
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);
    bool ok = true;
    for (int i = 0; i < 20; ++i) ok = ok && transpose_is_right(96 + i, static_cast<std::uint64_t>(i));
    std::exit(ok ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(transpose_is_right(128, 2));  // and the parent's pool still works
#endif
}

// A large dlb_buffer_alloc reads as zeros without being written (its own
// mapping), and so does the next one after the first was dirtied and freed.
TEST(CopyAlloc, LargeAllocationsAreZeroAndUnmapped) {
  const std::int64_t live = dlb::testing::large_allocations_live();
  std::int64_t shape[1] = {std::int64_t{5} << 20};  // 40 MiB of float64
  for (int round = 0; round < 2; ++round) {
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 64, 1}, 1, shape, &b), DLB_OK);
    EXPECT_EQ(dlb::testing::large_allocations_live(), live + 1);
    DLTensor t;
    ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 64, 0u);
    auto* p = static_cast<unsigned char*>(t.data);
    const std::size_t n = static_cast<std::size_t>(shape[0]) * 8;
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < n; i += 4093) nonzero += p[i] != 0;
    nonzero += p[n - 1] != 0;
    EXPECT_EQ(nonzero, 0u);
    std::memset(p, 0xEE, n);
    dlb_buffer_release(b);
    EXPECT_EQ(dlb::testing::large_allocations_live(), live);
  }
  // Small ones are zeroed too.
  std::int64_t small[2] = {3, 5};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLInt, 32, 1}, 2, small, &b), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  const auto* q = static_cast<const std::int32_t*>(t.data);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(q[i], 0);
  dlb_buffer_release(b);
}

// A freed mid-size block is kept for the next aligned allocation that fits
// it, even when malloc is asked for blocks of the same size in between
// (which would otherwise take it and leave ours to fresh pages).
TEST(CopyAlloc, MidSizeBlocksAreReused) {
  dlb::testing::drop_recycled_blocks();
  const std::size_t n = std::size_t{256} << 10;
  void* a = dlb::mem_alloc_aligned(64, n);
  ASSERT_NE(a, nullptr);
  std::memset(a, 0x5A, n);
  dlb::mem_free_aligned(a);
  EXPECT_GE(dlb::testing::recycled_bytes(), n);
  void* peer = std::malloc(n);  // another user of the heap, same size
  ASSERT_NE(peer, nullptr);
  void* b = dlb::mem_alloc_aligned(64, n - 100);
  EXPECT_EQ(b, a);
  EXPECT_EQ(dlb::testing::recycled_bytes(), 0u);
  dlb::mem_free_aligned(b);
  // A zeroed allocation from a dirty kept block reads as zeros, and a
  // stricter alignment is honoured.
  auto* z = static_cast<unsigned char*>(dlb::mem_alloc_zeroed(4096, n - 8192));
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(z) % 4096, 0u);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < n - 8192; ++i) nonzero += z[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  dlb::mem_free_aligned(z);
  std::free(peer);
  // A much smaller request does not take a large kept block.
  void* small = dlb::mem_alloc_aligned(64, n / 4);
  ASSERT_NE(small, nullptr);
  EXPECT_GE(dlb::testing::recycled_bytes(), n);
  dlb::mem_free_aligned(small);
  dlb::testing::drop_recycled_blocks();
  EXPECT_EQ(dlb::testing::recycled_bytes(), 0u);
}

// What is kept stays bounded: at most 32 MiB, the oldest given back first.
TEST(CopyAlloc, KeptBlocksAreBounded) {
  dlb::testing::drop_recycled_blocks();
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) {
    void* p = dlb::mem_alloc_aligned(64, (std::size_t{3} << 20) + static_cast<std::size_t>(i) * 65536);
    ASSERT_NE(p, nullptr);
    std::memset(p, i, 4096);
    blocks.push_back(p);
  }
  for (void* p : blocks) dlb::mem_free_aligned(p);
  EXPECT_GT(dlb::testing::recycled_bytes(), 0u);
  EXPECT_LE(dlb::testing::recycled_bytes(), std::size_t{32} << 20);
  // Too small or too large to keep: handed back at once.
  dlb::testing::drop_recycled_blocks();
  dlb::mem_free_aligned(dlb::mem_alloc_aligned(64, 1000));
  dlb::mem_free_aligned(dlb::mem_alloc_aligned(64, dlb::kLargeAllocation - 4096));
  EXPECT_EQ(dlb::testing::recycled_bytes(), 0u);
  // Blocks freed from many threads at once.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        const std::size_t n = (std::size_t{64} << 10) * static_cast<std::size_t>(1 + (i + t) % 5);
        auto* p = static_cast<unsigned char*>(dlb::mem_alloc_aligned(64, n));
        if (p == nullptr) continue;
        p[0] = 1;
        p[n - 1] = 2;
        dlb::mem_free_aligned(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(dlb::testing::recycled_bytes(), std::size_t{32} << 20);
  dlb::testing::drop_recycled_blocks();
}

TEST(CopyAlloc, InjectedFailuresReachEveryAllocator) {
  for (const std::size_t n : {std::size_t{100}, dlb::kLargeAllocation, dlb::kLargeAllocation * 3 + 5}) {
    dlb::testing::fail_allocation_after(1);
    EXPECT_EQ(dlb::mem_alloc_aligned(64, n), nullptr);
    EXPECT_EQ(dlb::mem_alloc_zeroed(64, n), nullptr);
    EXPECT_EQ(dlb::testing::allocations_attempted(), 2);
    dlb::testing::fail_allocation_after(0);
    void* a = dlb::mem_alloc_aligned(64, n);
    void* z = dlb::mem_alloc_zeroed(64, n);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
    EXPECT_EQ(static_cast<unsigned char*>(z)[n - 1], 0);
    std::memset(a, 1, n);
    dlb::mem_free_aligned(a);
    dlb::mem_free_aligned(z);
  }
  EXPECT_EQ(dlb::testing::large_allocations_live(), 0);
  // A large buffer's allocation failing is reported, nothing leaks.
  std::int64_t shape[1] = {std::int64_t{1} << 21};
  dlb::testing::fail_allocation_after(1);
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 64, 1}, 1, shape, &b), DLB_ERR_OUT_OF_MEMORY);
  dlb::testing::fail_allocation_after(0);
  EXPECT_EQ(b, nullptr);
}

}  // namespace

// The split of a large copy: every row in exactly one part, parts of
// about one huge page of destination (whole 64-row tiles from 64 rows
// up), and a few parts per thread for small copies.
TEST(CopySplit, EveryRowInExactlyOnePart) {
  for (const std::int64_t rows : {std::int64_t{1}, std::int64_t{2}, std::int64_t{7}, std::int64_t{63}, std::int64_t{64},
                                  std::int64_t{65}, std::int64_t{1000}, std::int64_t{4096}, std::int64_t{16} << 20,
                                  std::int64_t{1} << 40}) {
    for (const std::size_t row_bytes : {std::size_t{1}, std::size_t{8}, std::size_t{24}, std::size_t{4096},
                                        std::size_t{32768}, std::size_t{3} << 20}) {
      for (const int threads : {1, 2, 3, 8, 64}) {
        const dlb::RowSplit s = dlb::split_rows(rows, row_bytes, threads);
        SCOPED_TRACE(testing::Message() << rows << " rows of " << row_bytes << " bytes, " << threads << " threads");
        ASSERT_GE(s.rows_per_part, 1);
        ASSERT_GE(s.parts, 1);
        // Parts [0, parts) cover [0, rows) and none is empty.
        EXPECT_GE(static_cast<std::int64_t>(s.parts) * s.rows_per_part, rows);
        EXPECT_LT(static_cast<std::int64_t>(s.parts - 1) * s.rows_per_part, rows);
        if (s.rows_per_part >= 64) {
          EXPECT_EQ(s.rows_per_part % 64, 0);
        }
        const auto part_bytes = static_cast<double>(s.rows_per_part) * static_cast<double>(row_bytes);
        // No part much over a huge page unless one row is larger, or the
        // part count would not fit an int.
        if (row_bytes <= dlb::kPartBytes && rows < (std::int64_t{1} << 30)) {
          EXPECT_LE(part_bytes, 1.5 * static_cast<double>(dlb::kPartBytes) + 64.0 * static_cast<double>(row_bytes));
        }
        // Enough parts for every thread, rows allowing.
        const std::int64_t want = std::min<std::int64_t>(rows, std::int64_t{threads} * dlb::kMinPartsPerThread);
        if (s.rows_per_part < 64) {
          EXPECT_GE(s.parts, want / 2);
        }
      }
    }
  }
}

// copy_pool_run runs every part of every job exactly once, with many parts
// claimed from the shared counter, jobs back to back (a worker that wakes
// late must not run a finished job's function on the next job's parts)
// and from several callers at once (one gets the pool, the others run
// alone). Run under ThreadSanitizer by scripts/test.d/22-tsan.sh.
struct CountingJob {
  std::vector<std::atomic<int>> runs;
  explicit CountingJob(int parts) : runs(static_cast<std::size_t>(parts)) {}
  static void part(void* ctx, int p) {
    static_cast<CountingJob*>(ctx)->runs[static_cast<std::size_t>(p)].fetch_add(1, std::memory_order_relaxed);
  }
  bool each_once() const {
    for (const auto& r : runs) {
      if (r.load(std::memory_order_relaxed) != 1) return false;
    }
    return true;
  }
};

TEST(CopySplit, PoolRunsEveryPartExactlyOnce) {
  for (const int threads : {2, 3}) {
    ASSERT_EQ(dlb_set_copy_threads(threads), DLB_OK);
    std::vector<std::unique_ptr<CountingJob>> done;
    for (int job = 0; job < 200; ++job) {
      const int parts = 1 + (job * 37) % 300;
      auto j = std::make_unique<CountingJob>(parts);
      dlb::copy_pool_run(parts, &CountingJob::part, j.get());
      ASSERT_TRUE(j->each_once()) << "job " << job << ", " << parts << " parts";
      done.push_back(std::move(j));
    }
    // No earlier job ran again later.
    for (const auto& j : done) EXPECT_TRUE(j->each_once());
  }
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&wrong, c] {
      for (int job = 0; job < 100; ++job) {
        const int parts = 1 + (job * 13 + c) % 200;
        CountingJob j(parts);
        dlb::copy_pool_run(parts, &CountingJob::part, &j);
        if (!j.each_once()) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  ASSERT_EQ(dlb_set_copy_threads(0), DLB_OK);
}

// A split copy, traced: its parts are exactly [0, parts), each run once,
// and the result is right.
TEST(CopySplit, TracedCopyRunsEachPartOnce) {
  Thresholds th;
  ASSERT_EQ(dlb_set_copy_threads(2), DLB_OK);
  std::vector<dlb::testing::PartRecord> rec(4096);
  dlb::testing::trace_parts(rec.data(), static_cast<int>(rec.size()));
  EXPECT_TRUE(transpose_is_right(700, 3));
  const int n = dlb::testing::parts_traced();
  dlb::testing::trace_parts(nullptr, 0);
  const dlb::RowSplit s = dlb::split_rows(700, 700 * 8, 2);
  ASSERT_EQ(n, s.parts);
  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const auto& r = rec[static_cast<std::size_t>(i)];
    ASSERT_GE(r.part, 0);
    ASSERT_LT(r.part, n);
    ++seen[static_cast<std::size_t>(r.part)];
    EXPECT_GE(r.thread, 0);
    EXPECT_LE(r.thread, 1);
    EXPECT_LE(r.start_ns, r.end_ns);
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], 1) << "part " << i;
}

// The last freed large mapping is kept for the next large allocation of
// about its size (same address, pages still in); zeroed allocations never
// take it; turning keeping off drops it.
TEST(CopyAlloc, FreedLargeMappingIsReusedButNeverForZeroedMemory) {
  dlb::testing::set_keep_large_mapping(true);
  dlb::testing::drop_kept_mapping();
  const std::size_t n = std::size_t{40} << 20;
  auto* a = static_cast<unsigned char*>(dlb::mem_alloc_aligned(64, n));
  ASSERT_NE(a, nullptr);
  std::memset(a, 0xAB, n);
  dlb::mem_free_aligned(a);
  EXPECT_GE(dlb::testing::kept_mapping_bytes(), n);
  // A zeroed one maps afresh and reads as zeros.
  auto* z = static_cast<unsigned char*>(dlb::mem_alloc_zeroed(64, n));
  ASSERT_NE(z, nullptr);
  EXPECT_NE(z, a);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < n; i += 4093) nonzero += z[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  EXPECT_GE(dlb::testing::kept_mapping_bytes(), n);  // still kept
  // Of about the same size: the kept one, which is then no longer kept.
  auto* b = static_cast<unsigned char*>(dlb::mem_alloc_aligned(64, n - 4096));
  EXPECT_EQ(b, a);
  EXPECT_EQ(dlb::testing::kept_mapping_bytes(), 0u);
  b[0] = 1;
  b[n - 4097] = 2;
  // Much smaller: not the kept one (which the zeroed one replaced when freed).
  dlb::mem_free_aligned(z);
  auto* c = static_cast<unsigned char*>(dlb::mem_alloc_aligned(64, n / 2));
  EXPECT_NE(c, z);
  dlb::mem_free_aligned(c);
  dlb::mem_free_aligned(b);
  EXPECT_EQ(dlb::testing::large_allocations_live(), 0);
  dlb::testing::set_keep_large_mapping(false);
  EXPECT_EQ(dlb::testing::kept_mapping_bytes(), 0u);
  auto* d = static_cast<unsigned char*>(dlb::mem_alloc_aligned(64, n));
  ASSERT_NE(d, nullptr);
  dlb::mem_free_aligned(d);
  EXPECT_EQ(dlb::testing::kept_mapping_bytes(), 0u);
  dlb::testing::set_keep_large_mapping(true);
}

namespace {

// view[a][r][c] = src[a * pa + r * pr + c * pc] (elements) of e-byte
// elements, each element's bytes distinct; copied by the engine and
// compared with an index-by-index reference. Returns the number of wrong
// bytes (0 when right).
std::size_t wrong_bytes_of_copy(std::int64_t a_n, std::int64_t r_n, std::int64_t c_n, std::int64_t pa, std::int64_t pr,
                                std::int64_t pc, std::size_t e) {
  const std::int64_t span = (a_n - 1) * pa + (r_n - 1) * pr + (c_n - 1) * pc + 1;
  std::vector<unsigned char> src(static_cast<std::size_t>(span) * e);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + i / 251);
  const std::size_t n = static_cast<std::size_t>(a_n * r_n * c_n);
  std::vector<unsigned char> dst(n * e, 0xEE);
  std::int64_t shape[3] = {a_n, r_n, c_n};
  std::int64_t strides[3] = {pa, pr, pc};
  dlb::copy_strided_to_contiguous(src.data(), 3, shape, strides, e, dst.data());
  std::size_t wrong = 0;
  std::size_t o = 0;
  for (std::int64_t a = 0; a < a_n; ++a) {
    for (std::int64_t r = 0; r < r_n; ++r) {
      for (std::int64_t c = 0; c < c_n; ++c, o += e) {
        const std::size_t s = static_cast<std::size_t>(a * pa + r * pr + c * pc) * e;
        wrong += std::memcmp(dst.data() + o, src.data() + s, e) != 0;
      }
    }
  }
  return wrong;
}

// Streamed (from 4 KiB) and split (from 4 KiB) in the scope.
struct StreamedThresholds {
  StreamedThresholds() { dlb::testing::set_copy_thresholds(4096, 4096); }
  ~StreamedThresholds() {
    dlb::testing::set_copy_thresholds(0, 0);
    dlb::testing::set_transpose_source_order(true);
    dlb_set_copy_threads(0);
  }
};

}  // namespace

// A streamed transpose of 4-, 8- or 16-byte elements is split by source
// rows (the view's innermost dimension): the parts are exactly those of
// split_rows over that dimension, each run once, every element right, with
// extents that leave partial tiles and a partial last part, and with an
// outer dimension walked inside every part. Other widths, copies that do
// not stream, gathers and the destination-order setting split by
// destination rows.
TEST(CopySplit, StreamedTransposeIsSplitBySourceRows) {
  StreamedThresholds th;
  struct Case {
    std::int64_t a, r, c, pa, pr, pc;
  };
  const Case cases[] = {
      {1, 64, 1024, 1, 1, 64},            // a plain transpose, 8 parts of 128 columns
      {1, 61, 1000, 1, 1, 61},            // partial tiles, partial last part
      {1, 37, 4100, 1, 1, 40},            // source rows padded
      {3, 20, 1100, 20 * 1100 + 5, 1, 20},  // an outer dimension in every part
  };
  for (const int threads : {2, 3}) {
    ASSERT_EQ(dlb_set_copy_threads(threads), DLB_OK);
    for (const Case& k : cases) {
      for (const std::size_t e : {std::size_t{4}, std::size_t{8}, std::size_t{16}}) {
        SCOPED_TRACE(testing::Message() << k.a << "x" << k.r << "x" << k.c << ", " << e << "-byte elements, "
                                        << threads << " threads");
        std::vector<dlb::testing::PartRecord> rec(4096);
        dlb::testing::trace_parts(rec.data(), static_cast<int>(rec.size()));
        EXPECT_EQ(wrong_bytes_of_copy(k.a, k.r, k.c, k.pa, k.pr, k.pc, e), 0u);
        const int n = dlb::testing::parts_traced();
        dlb::testing::trace_parts(nullptr, 0);
        // The normalised view keeps all three dimensions (two when a == 1).
        EXPECT_EQ(dlb::testing::last_split_axis(), k.a == 1 ? 1 : 2);
        const dlb::RowSplit s = dlb::split_rows(k.c, static_cast<std::size_t>(k.a * k.r) * e, threads);
        ASSERT_EQ(n, s.parts);
        EXPECT_EQ(s.rows_per_part % 64, 0);
        std::vector<int> seen(static_cast<std::size_t>(n), 0);
        for (int i = 0; i < n; ++i) {
          const int p = rec[static_cast<std::size_t>(i)].part;
          ASSERT_GE(p, 0);
          ASSERT_LT(p, n);
          ++seen[static_cast<std::size_t>(p)];
        }
        for (int i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], 1) << "part " << i;
      }
      // 1- and 2-byte tiles keep the destination-order walk: split by rows.
      for (const std::size_t e : {std::size_t{1}, std::size_t{2}}) {
        EXPECT_EQ(wrong_bytes_of_copy(k.a, k.r, k.c, k.pa, k.pr, k.pc, e), 0u) << e;
        EXPECT_EQ(dlb::testing::last_split_axis(), 0) << e;
      }
      // As in earlier versions: split by destination rows, same result.
      dlb::testing::set_transpose_source_order(false);
      EXPECT_EQ(wrong_bytes_of_copy(k.a, k.r, k.c, k.pa, k.pr, k.pc, 8), 0u);
      EXPECT_EQ(dlb::testing::last_split_axis(), 0);
      dlb::testing::set_transpose_source_order(true);
    }
    // A gather (every other element) streams but is no transpose: rows.
    EXPECT_EQ(wrong_bytes_of_copy(1, 64, 1024, 1, 2048, 2, 8), 0u);
    EXPECT_EQ(dlb::testing::last_split_axis(), 0);
  }
  // Not streamed (below the streaming size): rows, in the
  // destination's order.
  dlb::testing::set_copy_thresholds(4096, 0);
  ASSERT_EQ(dlb_set_copy_threads(2), DLB_OK);
  EXPECT_EQ(wrong_bytes_of_copy(1, 64, 1024, 1, 1, 64, 8), 0u);
  EXPECT_EQ(dlb::testing::last_split_axis(), 0);
}
