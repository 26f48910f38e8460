// The strided copy engine against an index-by-index reference copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <dlbridge/dlbridge.h>

#include "copy/copy_engine.hpp"

namespace {

using Bytes = std::vector<unsigned char>;

// The reference: walks every index in row-major order with an odometer and
// copies one element at a time.
Bytes reference_copy(const unsigned char* src, const std::vector<std::int64_t>& shape,
                     const std::vector<std::int64_t>& strides, std::size_t e) {
  std::int64_t total = 1;
  for (auto n : shape) total *= n;
  Bytes out(static_cast<std::size_t>(total) * e);
  if (total == 0) return out;
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t lin = 0; lin < total; ++lin) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    std::memcpy(out.data() + lin * static_cast<std::int64_t>(e),
                src + off * static_cast<std::int64_t>(e), e);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// A source allocation large enough for the view, filled with distinct-ish
// bytes, and the address of element [0, ...] inside it.
struct Source {
  Bytes storage;
  const unsigned char* origin = nullptr;
};

Source make_source(const std::vector<std::int64_t>& shape,
                   const std::vector<std::int64_t>& strides, std::size_t e,
                   std::mt19937_64& rng) {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  bool empty = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) empty = true;
    const std::int64_t span = (shape[d] > 0 ? shape[d] - 1 : 0) * strides[d];
    if (span < 0) lo += span; else hi += span;
  }
  Source s;
  const std::int64_t count = empty ? 1 : hi - lo + 1;
  // One spare element on each side, to catch reads that stray.
  s.storage.resize(static_cast<std::size_t>(count + 2) * e);
  for (auto& b : s.storage) b = static_cast<unsigned char>(rng());
  s.origin = s.storage.data() + (1 - lo) * static_cast<std::int64_t>(e);
  return s;
}

// Runs the engine into a buffer with guard bytes after the end and
// compares with the reference.
// unit > 1: the engine is asked to swap the bytes of every unit-byte word,
// and the reference reverses them after its copy.
::testing::AssertionResult engine_matches(const std::vector<std::int64_t>& shape,
                                          const std::vector<std::int64_t>& strides,
                                          std::size_t e, std::mt19937_64& rng, std::size_t unit = 0) {
  Source src = make_source(shape, strides, e, rng);
  Bytes want = reference_copy(src.origin, shape, strides, e);
  if (unit > 1) {
    for (std::size_t i = 0; i + unit <= want.size(); i += unit) std::reverse(want.begin() + i, want.begin() + i + unit);
  }
  constexpr std::size_t kGuard = 64;
  Bytes got(want.size() + kGuard, 0xA5);
  dlb::copy_strided_to_contiguous(src.origin, static_cast<std::int32_t>(shape.size()),
                                  shape.data(), strides.data(), e, got.data(), unit);
  auto describe = [&] {
    std::ostringstream os;
    os << "elem_size " << e << " swap unit " << unit << " shape [";
    for (auto n : shape) os << n << ' ';
    os << "] strides [";
    for (auto n : strides) os << n << ' ';
    os << ']';
    return os.str();
  };
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << describe() << ": byte " << i << " (element " << i / e << ") is "
             << int(got[i]) << ", want " << int(want[i]);
    }
  }
  for (std::size_t i = want.size(); i < got.size(); ++i) {
    if (got[i] != 0xA5) {
      return ::testing::AssertionFailure() << describe() << ": wrote past the end at byte " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

// A random strided layout over a shape: compact strides over a random
// permutation of the axes, with random gaps, signs, broadcasts and
// arbitrary strides on size-1 dimensions.
std::vector<std::int64_t> random_strides(const std::vector<std::int64_t>& shape,
                                         std::mt19937_64& rng) {
  const std::size_t n = shape.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::int64_t> strides(n, 0);
  std::int64_t pitch = 1 + static_cast<std::int64_t>(rng() % 2);  // gap of 1 sometimes
  for (std::size_t k = n; k-- > 0;) {
    const std::size_t d = order[k];
    strides[d] = pitch;
    pitch *= std::max<std::int64_t>(shape[d], 1);
    if (rng() % 4 == 0) pitch += static_cast<std::int64_t>(rng() % 3);  // row gap
  }
  for (std::size_t d = 0; d < n; ++d) {
    const auto r = rng() % 10;
    if (r == 0) strides[d] = 0;                   // broadcast
    else if (r <= 2) strides[d] = -strides[d];    // reversed
    if (shape[d] == 1 && rng() % 2 == 0) {
      strides[d] = static_cast<std::int64_t>(rng() % 1000) - 500;  // meaningless
    }
  }
  return strides;
}

const std::size_t kElemSizes[] = {1, 2, 3, 4, 6, 8, 12, 16};

TEST(CopyEngine, RandomSmallViews) {
  std::mt19937_64 rng(20240611);
  int cases = 0;
  for (int iter = 0; iter < 6000; ++iter) {
    const std::size_t ndim = rng() % 7;
    std::vector<std::int64_t> shape(ndim);
    for (auto& n : shape) n = static_cast<std::int64_t>(rng() % 10);
    // Fewer empty views than a uniform 0..9 draw would give.
    for (auto& n : shape) {
      if (n == 0 && rng() % 4 != 0) n = 1 + static_cast<std::int64_t>(rng() % 9);
    }
    const auto strides = random_strides(shape, rng);
    const std::size_t e = kElemSizes[rng() % std::size(kElemSizes)];
    ASSERT_TRUE(engine_matches(shape, strides, e, rng));
    ++cases;
  }
  EXPECT_EQ(cases, 6000);
}

TEST(CopyEngine, RandomLargerViewsReachTiling) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const std::size_t ndim = 2 + rng() % 2;
    std::vector<std::int64_t> shape(ndim);
    for (auto& n : shape) n = 1 + static_cast<std::int64_t>(rng() % (ndim == 2 ? 160 : 40));
    const auto strides = random_strides(shape, rng);
    const std::size_t e = kElemSizes[rng() % std::size(kElemSizes)];
    ASSERT_TRUE(engine_matches(shape, strides, e, rng));
  }
}

TEST(CopyEngine, TransposeLargerThanTile) {
  std::mt19937_64 rng(1);
  for (std::size_t e : kElemSizes) {
    for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{70, 130}, {130, 70}, {64, 64},
                        {513, 257}, {1, 300}, {300, 2}}) {
      // A row-major (c, r) array viewed as (r, c): strides (1, r).
      EXPECT_TRUE(engine_matches({r, c}, {1, r}, e, rng));
      // Transposed and reversed on both axes.
      EXPECT_TRUE(engine_matches({r, c}, {-1, -r}, e, rng));
      // Transposed with a row gap in the source.
      EXPECT_TRUE(engine_matches({r, c}, {1, r + 3}, e, rng));
    }
  }
}

TEST(CopyEngine, PermutedThreeDimensional) {
  std::mt19937_64 rng(2);
  const std::vector<std::int64_t> shape = {33, 70, 41};
  // Every permutation of a compact (33, 70, 41) source.
  std::vector<int> perm = {0, 1, 2};
  do {
    std::vector<std::int64_t> pshape(3), compact(3), strides(3);
    for (int d = 0; d < 3; ++d) pshape[d] = shape[perm[d]];
    compact[2] = 1;
    compact[1] = pshape[2];
    compact[0] = pshape[1] * pshape[2];
    // The view is the compact array with its axes put back in `shape` order.
    std::vector<std::int64_t> vshape(3);
    for (int d = 0; d < 3; ++d) {
      vshape[perm[d]] = pshape[d];
      strides[perm[d]] = compact[d];
    }
    for (std::size_t e : {std::size_t{1}, std::size_t{4}, std::size_t{8}, std::size_t{12}}) {
      EXPECT_TRUE(engine_matches(vshape, strides, e, rng));
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(CopyEngine, ReversedOneDimensional) {
  std::mt19937_64 rng(3);
  for (std::size_t e : kElemSizes) {
    for (std::int64_t n : {1, 2, 7, 64, 1000}) {
      EXPECT_TRUE(engine_matches({n}, {-1}, e, rng));
      EXPECT_TRUE(engine_matches({n}, {-3}, e, rng));
    }
  }
  // Exact values for one case.
  const std::int32_t data[5] = {10, 20, 30, 40, 50};
  std::int32_t out[5] = {};
  const std::int64_t shape[1] = {5};
  const std::int64_t strides[1] = {-1};
  dlb::copy_strided_to_contiguous(reinterpret_cast<const unsigned char*>(data + 4), 1, shape,
                                  strides, sizeof(std::int32_t),
                                  reinterpret_cast<unsigned char*>(out));
  EXPECT_EQ(out[0], 50);
  EXPECT_EQ(out[2], 30);
  EXPECT_EQ(out[4], 10);
}

TEST(CopyEngine, Broadcast) {
  std::mt19937_64 rng(4);
  for (std::size_t e : kElemSizes) {
    EXPECT_TRUE(engine_matches({100}, {0}, e, rng));
    EXPECT_TRUE(engine_matches({5, 100}, {1, 0}, e, rng));
    EXPECT_TRUE(engine_matches({100, 5}, {0, 1}, e, rng));
    EXPECT_TRUE(engine_matches({3, 4, 5}, {0, 0, 0}, e, rng));
    EXPECT_TRUE(engine_matches({70, 130}, {0, -1}, e, rng));
  }
  const double x = 2.5;
  double out[4] = {};
  const std::int64_t shape[2] = {2, 2};
  const std::int64_t strides[2] = {0, 0};
  dlb::copy_strided_to_contiguous(reinterpret_cast<const unsigned char*>(&x), 2, shape, strides,
                                  sizeof(double), reinterpret_cast<unsigned char*>(out));
  for (double v : out) EXPECT_EQ(v, 2.5);
}

TEST(CopyEngine, ZeroDimensional) {
  const std::uint64_t x = 0x0123456789ABCDEFull;
  std::uint64_t out[2] = {0, 0};
  dlb::copy_strided_to_contiguous(reinterpret_cast<const unsigned char*>(&x), 0, nullptr, nullptr,
                                  sizeof(x), reinterpret_cast<unsigned char*>(out));
  EXPECT_EQ(out[0], x);
  EXPECT_EQ(out[1], 0u);  // exactly one element written
}

TEST(CopyEngine, ZeroSizeWritesNothing) {
  const std::int64_t shape[3] = {4, 0, 5};
  const std::int64_t strides[3] = {-7, 1000, 3};
  unsigned char guard[8];
  std::memset(guard, 0x5A, sizeof(guard));
  // Neither pointer may be touched: pass ones that would fault.
  dlb::copy_strided_to_contiguous(nullptr, 3, shape, strides, 8, nullptr);
  dlb::copy_strided_to_contiguous(nullptr, 3, shape, strides, 8, guard);
  for (unsigned char b : guard) EXPECT_EQ(b, 0x5A);
}

TEST(CopyEngine, SizeOneDimensionsWithArbitraryStrides) {
  std::mt19937_64 rng(5);
  for (std::size_t e : kElemSizes) {
    EXPECT_TRUE(engine_matches({1, 1, 1}, {99, -4, 0}, e, rng));
    EXPECT_TRUE(engine_matches({1, 6, 1, 7, 1}, {-50, 7, 12345, 1, -3}, e, rng));
    EXPECT_TRUE(engine_matches({6, 1, 7}, {1, 3, 6}, e, rng));  // transposed around a size-1 dim
  }
}

TEST(CopyEngine, ContiguousIsOneBlock) {
  // Compact views (also split over many dimensions) copy exactly.
  std::mt19937_64 rng(6);
  std::vector<std::int64_t> shape = {3, 4, 5, 6};
  std::vector<std::int64_t> strides = {120, 30, 6, 1};
  for (std::size_t e : kElemSizes) EXPECT_TRUE(engine_matches(shape, strides, e, rng));
  // Fully reversed compact view merges into a single reversed run.
  std::vector<std::int64_t> rstrides = {-120, -30, -6, -1};
  for (std::size_t e : kElemSizes) EXPECT_TRUE(engine_matches(shape, rstrides, e, rng));
}

TEST(CopyEngine, UnalignedSourceAndDestination) {
  std::mt19937_64 rng(8);
  Bytes src(8 * 40 * 40 + 16);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  const std::vector<std::int64_t> shape = {40, 40};
  const std::vector<std::int64_t> strides = {1, 40};
  const Bytes want = reference_copy(src.data() + 3, shape, strides, 8);
  Bytes got(want.size() + 5, 0);
  dlb::copy_strided_to_contiguous(src.data() + 3, 2, shape.data(), strides.data(), 8,
                                  got.data() + 5);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + 5));
}

}  // namespace

// Every kernel level the CPU has (scalar, SSE2, AVX2 where present), each
// against the reference on random views, full-tile transposes of every
// width at power-of-two and odd pitches, and through the streaming path.
TEST(CopyEngine, EveryKernelLevel) {
  const int best = dlb::testing::set_copy_isa(-1);
  for (int level = dlb::kCopyIsaScalar; level <= best; ++level) {
    ASSERT_EQ(dlb::testing::set_copy_isa(level), level);
    std::mt19937_64 rng(static_cast<std::uint64_t>(500 + level));
    for (const std::size_t streaming : {std::size_t{0}, std::size_t{1}}) {
      dlb::testing::set_copy_thresholds(0, streaming);
      for (int iter = 0; iter < 300; ++iter) {
        const std::size_t ndim = 1 + rng() % 3;
        std::vector<std::int64_t> shape(ndim);
        for (auto& n : shape) n = 1 + static_cast<std::int64_t>(rng() % (ndim == 1 ? 300 : ndim == 2 ? 140 : 24));
        const auto strides = random_strides(shape, rng);
        const std::size_t e = kElemSizes[rng() % std::size(kElemSizes)];
        const ::testing::AssertionResult r = engine_matches(shape, strides, e, rng);
        if (!r) {
          dlb::testing::set_copy_thresholds(0, 0);
          dlb::testing::set_copy_isa(-1);
          FAIL() << "level " << level << ", streaming " << streaming << ": " << r.message();
        }
      }
      for (std::size_t e : kElemSizes) {
        for (auto [r, c] : {std::pair<std::int64_t, std::int64_t>{128, 128}, {192, 64}, {64, 130}, {131, 200}}) {
          EXPECT_TRUE(engine_matches({r, c}, {1, r}, e, rng)) << "level " << level;
          EXPECT_TRUE(engine_matches({r, c}, {-1, -r}, e, rng)) << "level " << level;
          EXPECT_TRUE(engine_matches({c, r}, {-c, -1}, e, rng)) << "level " << level;
        }
      }
    }
  }
  dlb::testing::set_copy_thresholds(0, 0);
  EXPECT_EQ(dlb::testing::set_copy_isa(-1), best);
}

// Reversed and every-other runs of every width, of lengths around the
// vector kernels' word boundaries, at every destination misalignment the
// streaming path must refuse or handle: the last element's word must not
// read past the view.
TEST(CopyEngine, ReversedAndEveryOtherRunsEveryLength) {
  std::mt19937_64 rng(11);
  for (std::size_t e : kElemSizes) {
    for (std::int64_t n = 1; n <= 40; ++n) {
      EXPECT_TRUE(engine_matches({n}, {-1}, e, rng));
      EXPECT_TRUE(engine_matches({n}, {2}, e, rng));
      EXPECT_TRUE(engine_matches({n}, {-2}, e, rng));
      EXPECT_TRUE(engine_matches({3, n}, {-n, -1}, e, rng));
      EXPECT_TRUE(engine_matches({3, n}, {4 * n, 2}, e, rng));
    }
  }
}

// The same views through the paths large copies take: split among
// threads and written with streaming stores (thresholds lowered to one
// byte), serial and with 2, 3 and 8 threads.
TEST(CopyEngine, RandomViewsThroughThreadsAndStreamingStores) {
  std::mt19937_64 rng(99);
  for (const int threads : {1, 2, 3, 8}) {
    ASSERT_EQ(dlb_set_copy_threads(threads), DLB_OK);
    dlb::testing::set_copy_thresholds(1, 1);
    for (int iter = 0; iter < 400; ++iter) {
      const std::size_t ndim = 1 + rng() % 3;
      std::vector<std::int64_t> shape(ndim);
      for (auto& n : shape) n = 1 + static_cast<std::int64_t>(rng() % (ndim == 1 ? 3000 : ndim == 2 ? 150 : 30));
      const auto strides = random_strides(shape, rng);
      const std::size_t e = kElemSizes[rng() % std::size(kElemSizes)];
      const ::testing::AssertionResult r = engine_matches(shape, strides, e, rng);
      if (!r) {
        dlb::testing::set_copy_thresholds(0, 0);
        FAIL() << "threads " << threads << ": " << r.message();
      }
    }
    // Transposes whose rows split into whole tiles and a remainder.
    for (std::size_t e : kElemSizes) {
      EXPECT_TRUE(engine_matches({300, 200}, {1, 300}, e, rng));
      EXPECT_TRUE(engine_matches({200, 300}, {-1, -200}, e, rng));
    }
    dlb::testing::set_copy_thresholds(0, 0);
  }
  ASSERT_EQ(dlb_set_copy_threads(0), DLB_OK);
}

// Compact runs with streaming stores (threshold lowered to one byte): one
// run and rows of a view padded in its outer dimension, of lengths around
// the 64-byte lines the streamed loop writes, at every source and
// destination offset within a line; no byte before or after the
// destination is touched. With streaming turned off (the memcpy of
// earlier versions) the same bytes come out.
TEST(CopyEngine, StreamedCompactRunsEveryAlignment) {
  dlb::testing::set_copy_thresholds(0, 1);
  Bytes src(1024 + 64);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  std::size_t checked = 0;
  for (const bool on : {true, false}) {
    dlb::testing::set_compact_streaming(on);
    for (const std::int64_t n : {1, 63, 64, 65, 127, 128, 129, 200, 320}) {
      for (std::size_t so = 0; so < 64; so += 5) {
        for (std::size_t dof = 0; dof < 64; ++dof) {
          // One compact run of n bytes, and 3 rows of n bytes n + 9 apart.
          for (const std::int64_t rows : {1, 3}) {
            const std::int64_t shape[2] = {rows, n};
            const std::int64_t strides[2] = {n + 9, 1};
            const std::size_t len = static_cast<std::size_t>(rows * n);
            Bytes got(64 + len + 64, 0xA5);
            dlb::copy_strided_to_contiguous(src.data() + so, 2, shape, strides, 1, got.data() + dof);
            bool same = true;
            for (std::int64_t r = 0; r < rows; ++r) {
              same = same && std::equal(src.begin() + static_cast<std::ptrdiff_t>(so + r * (n + 9)),
                                        src.begin() + static_cast<std::ptrdiff_t>(so + r * (n + 9) + n),
                                        got.begin() + static_cast<std::ptrdiff_t>(dof + r * n));
            }
            ASSERT_TRUE(same) << "n " << n << " rows " << rows << " src +" << so << " dst +" << dof;
            for (std::size_t i = 0; i < dof; ++i) ASSERT_EQ(got[i], 0xA5) << "before, dst +" << dof;
            for (std::size_t i = dof + len; i < got.size(); ++i) ASSERT_EQ(got[i], 0xA5) << "after, n " << n;
            ++checked;
          }
        }
      }
    }
  }
  dlb::testing::set_compact_streaming(true);
  dlb::testing::set_copy_thresholds(0, 0);
  EXPECT_EQ(checked, 2u * 9u * 13u * 64u * 2u);
}

namespace {

// Byte-swapping copies (a source in the other byte order): every width
// with a unit that divides it (complex parts and lanes swap on their own),
// random views at every kernel level, serial and split among threads (the
// thresholds lowered to one byte, so that every copy is split into parts
// and each part swapped on its own), and a 0-d view.
TEST(CopyEngine, ByteSwappingCopies) {
  struct Width {
    std::size_t e;
    std::size_t unit;
  };
  const Width widths[] = {{2, 2}, {4, 4}, {8, 8}, {4, 2}, {8, 4}, {16, 8}, {6, 2}, {12, 4}, {24, 8}};
  std::mt19937_64 rng(4242);
  const int best = dlb::testing::set_copy_isa(-1);
  for (int level = dlb::kCopyIsaScalar; level <= best; ++level) {
    ASSERT_EQ(dlb::testing::set_copy_isa(level), level);
    for (const int threads : {1, 3}) {
      ASSERT_EQ(dlb_set_copy_threads(threads), DLB_OK);
      for (const std::size_t split : {std::size_t{0}, std::size_t{1}}) {
        dlb::testing::set_copy_thresholds(split, split);
        for (int iter = 0; iter < 150; ++iter) {
          const std::size_t ndim = 1 + rng() % 3;
          std::vector<std::int64_t> shape(ndim);
          for (auto& n : shape) n = 1 + static_cast<std::int64_t>(rng() % (ndim == 1 ? 700 : ndim == 2 ? 90 : 20));
          const auto strides = random_strides(shape, rng);
          const Width w = widths[rng() % std::size(widths)];
          const ::testing::AssertionResult r = engine_matches(shape, strides, w.e, rng, w.unit);
          if (!r) {
            dlb::testing::set_copy_thresholds(0, 0);
            dlb::testing::set_copy_isa(-1);
            ASSERT_EQ(dlb_set_copy_threads(0), DLB_OK);
            FAIL() << "level " << level << ", threads " << threads << ", split " << split << ": " << r.message();
          }
        }
        for (const Width w : widths) {
          EXPECT_TRUE(engine_matches({300, 200}, {1, 300}, w.e, rng, w.unit));  // a transpose
          EXPECT_TRUE(engine_matches({257}, {1}, w.e, rng, w.unit));            // one compact run
          EXPECT_TRUE(engine_matches({}, {}, w.e, rng, w.unit));                // 0-d
        }
      }
    }
  }
  dlb::testing::set_copy_thresholds(0, 0);
  ASSERT_EQ(dlb_set_copy_threads(0), DLB_OK);
  EXPECT_EQ(dlb::testing::set_copy_isa(-1), best);
}

}  // namespace
