// The strided copy of elements whose width no kernel is specialised for
// (3, 5, 7, 10, 24 and 32 bytes: int8 x 3, complex128 x 2, ...), through
// the public dlb_copy_to_contiguous: compact, gapped rows, transposed (the
// tiled path), reversed, broadcast and three-dimensional views, each
// compared byte for byte with an index-by-index reference copy, at every
// instruction-set level.
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "copy/copy_engine.hpp"

namespace {

struct Case {
  const char* name;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements
  std::int64_t origin;                // element offset of element 0 in the source
};

std::vector<unsigned char> reference(const unsigned char* base, const Case& c, std::size_t e) {
  std::int64_t n = 1;
  for (std::int64_t s : c.shape) n *= s;
  std::vector<unsigned char> out(static_cast<std::size_t>(n) * e);
  std::vector<std::int64_t> idx(c.shape.size(), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < c.shape.size(); ++d) off += idx[d] * c.strides[d];
    std::memcpy(out.data() + k * static_cast<std::int64_t>(e), base + off * static_cast<std::int64_t>(e), e);
    for (std::size_t d = c.shape.size(); d-- > 0;) {
      if (++idx[d] < c.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

TEST(CopyWidths, UnspecialisedElementWidthsCopyLikeTheReference) {
  const struct {
    DLDataType dtype;
    std::size_t bytes;
  } widths[] = {
      {{kDLInt, 8, 3}, 3},  {{kDLUInt, 8, 5}, 5},     {{kDLInt, 8, 7}, 7},
      {{kDLUInt, 16, 5}, 10}, {{kDLFloat, 64, 3}, 24}, {{kDLComplex, 128, 2}, 32},
  };
  const std::vector<Case> cases = {
      {"compact", {5, 7}, {7, 1}, 0},
      {"gapped rows", {6, 9}, {11, 1}, 0},
      {"every other element", {4, 6}, {12, 2}, 0},
      {"transposed", {37, 41}, {1, 37}, 0},
      {"transposed, gapped", {33, 40}, {1, 35}, 0},
      {"reversed", {3, 8}, {-8, -1}, 23},
      {"broadcast", {4, 5}, {0, 1}, 0},
      {"three dimensions, mixed signs", {3, 4, 5}, {-20, 1, 4}, 40},
  };
  for (int isa = 0; isa <= 2; ++isa) {
    dlb::testing::set_copy_isa(isa);
    for (const auto& w : widths) {
      for (const Case& c : cases) {
        SCOPED_TRACE(::testing::Message() << c.name << ", " << w.bytes << "-byte elements, isa " << isa);
        // Source large enough for every offset the view reaches.
        std::int64_t hi = c.origin, lo = c.origin;
        for (std::size_t d = 0; d < c.shape.size(); ++d) {
          const std::int64_t reach = (c.shape[d] - 1) * c.strides[d];
          (reach > 0 ? hi : lo) += reach;
        }
        ASSERT_GE(lo, 0);
        std::vector<unsigned char> src(static_cast<std::size_t>(hi + 1) * w.bytes);
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
        DLTensor t{};
        t.data = src.data();
        t.device = DLDevice{kDLCPU, 0};
        t.ndim = static_cast<std::int32_t>(c.shape.size());
        t.dtype = w.dtype;
        t.shape = const_cast<std::int64_t*>(c.shape.data());
        t.strides = const_cast<std::int64_t*>(c.strides.data());
        t.byte_offset = static_cast<std::uint64_t>(c.origin) * w.bytes;
        const std::vector<unsigned char> want = reference(src.data() + t.byte_offset, c, w.bytes);
        std::vector<unsigned char> got(want.size() + 1, 0xEE);
        ASSERT_EQ(dlb_copy_to_contiguous(&t, got.data(), want.size()), DLB_OK) << dlb_last_error_message();
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
        EXPECT_EQ(got[want.size()], 0xEE) << "written past the end";
      }
    }
  }
  dlb::testing::set_copy_isa(-1);
}

}  // namespace
