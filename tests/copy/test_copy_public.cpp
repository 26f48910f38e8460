// dlb_copy_to_contiguous: the public entry point of the copy engine.
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

DLTensor view_of(void* data, std::int32_t ndim, std::int64_t* shape, std::int64_t* strides,
                 DLDataType dtype, std::uint64_t byte_offset = 0) {
  DLTensor t;
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = byte_offset;
  return t;
}

constexpr DLDataType kF64{kDLFloat, 64, 1};
constexpr DLDataType kI32{kDLInt, 32, 1};

std::string last_message() { return dlb_last_error_message(); }

TEST(CopyPublic, TransposeValues) {
  // a is 3 x 4 row-major; the view is a.T (4 x 3).
  std::vector<double> a(12);
  std::iota(a.begin(), a.end(), 0.0);
  std::int64_t shape[2] = {4, 3};
  std::int64_t strides[2] = {1, 4};
  const DLTensor t = view_of(a.data(), 2, shape, strides, kF64);
  std::vector<double> out(12, -1.0);
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out.data(), out.size() * sizeof(double)), DLB_OK)
      << last_message();
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(out[i * 3 + j], a[j * 4 + i]) << i << "," << j;
  }
}

TEST(CopyPublic, ByteOffsetIsHonoured) {
  std::vector<std::int32_t> a(20);
  std::iota(a.begin(), a.end(), 100);
  // Elements 5, 7, 9 (stride 2) reached through byte_offset from a's start.
  std::int64_t shape[1] = {3};
  std::int64_t strides[1] = {2};
  const DLTensor t = view_of(a.data(), 1, shape, strides, kI32, 5 * sizeof(std::int32_t));
  std::int32_t out[3] = {};
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_OK) << last_message();
  EXPECT_EQ(out[0], 105);
  EXPECT_EQ(out[1], 107);
  EXPECT_EQ(out[2], 109);
}

TEST(CopyPublic, NullStridesMeanCompact) {
  std::vector<std::int32_t> a(6);
  std::iota(a.begin(), a.end(), 1);
  std::int64_t shape[2] = {2, 3};
  const DLTensor t = view_of(a.data(), 2, shape, nullptr, kI32, sizeof(std::int32_t) * 0);
  std::vector<std::int32_t> out(6, 0);
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out.data(), out.size() * 4), DLB_OK) << last_message();
  EXPECT_EQ(out, a);
}

TEST(CopyPublic, OddWidthLanes) {
  // uint8 x 3 lanes: 3-byte elements, reversed.
  unsigned char a[12];
  for (int i = 0; i < 12; ++i) a[i] = static_cast<unsigned char>(i);
  std::int64_t shape[1] = {4};
  std::int64_t strides[1] = {-1};
  const DLTensor t = view_of(a, 1, shape, strides, DLDataType{kDLUInt, 8, 3}, 9);
  unsigned char out[12] = {};
  const dlb_status st = dlb_copy_to_contiguous(&t, out, sizeof(out));
  ASSERT_EQ(st, DLB_OK) << last_message();
  const unsigned char want[12] = {9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2};
  EXPECT_EQ(std::memcmp(out, want, sizeof(want)), 0);
}

TEST(CopyPublic, NegativeStridesThroughByteOffset) {
  // x[::-1, ::-1] of a 3 x 4 float64 matrix, described as (start of the
  // allocation, byte_offset of element [0, 0]).
  std::vector<double> a(12);
  std::iota(a.begin(), a.end(), 0.0);
  std::int64_t shape[2] = {3, 4};
  std::int64_t strides[2] = {-4, -1};
  const DLTensor t = view_of(a.data(), 2, shape, strides, kF64, 11 * sizeof(double));
  std::vector<double> out(12, -1.0);
  const dlb_status st = dlb_copy_to_contiguous(&t, out.data(), out.size() * sizeof(double));
  ASSERT_EQ(st, DLB_OK) << last_message();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], 11.0 - i);
}

TEST(CopyPublic, DestinationTooSmall) {
  std::vector<double> a(12, 1.0);
  std::int64_t shape[2] = {3, 4};
  std::int64_t strides[2] = {1, 3};
  const DLTensor t = view_of(a.data(), 2, shape, strides, kF64);
  std::vector<double> out(12, -1.0);
  dlb_clear_last_error();
  EXPECT_EQ(dlb_copy_to_contiguous(&t, out.data(), 12 * sizeof(double) - 1),
            DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("dst_size"), std::string::npos) << last_message();
  for (double v : out) EXPECT_EQ(v, -1.0);  // nothing written
}

TEST(CopyPublic, NullDestinationOnlyForEmpty) {
  std::vector<double> a(4, 1.0);
  std::int64_t shape[2] = {2, 2};
  std::int64_t strides[2] = {2, 1};
  const DLTensor t = view_of(a.data(), 2, shape, strides, kF64);
  EXPECT_EQ(dlb_copy_to_contiguous(&t, nullptr, 1000), DLB_ERR_INVALID_ARGUMENT);

  std::int64_t empty_shape[2] = {0, 5};
  std::int64_t empty_strides[2] = {-3, 77};
  const DLTensor e = view_of(nullptr, 2, empty_shape, empty_strides, kF64);
  EXPECT_EQ(dlb_copy_to_contiguous(&e, nullptr, 0), DLB_OK) << last_message();
}

TEST(CopyPublic, ZeroDimensional) {
  double x = 4.25;
  double out[2] = {0.0, 0.0};
  const DLTensor t = view_of(&x, 0, nullptr, nullptr, kF64);
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_OK) << last_message();
  EXPECT_EQ(out[0], 4.25);
  EXPECT_EQ(out[1], 0.0);
}

TEST(CopyPublic, Broadcast) {
  std::int32_t row[3] = {7, 8, 9};
  std::int64_t shape[2] = {4, 3};
  std::int64_t strides[2] = {0, 1};
  const DLTensor t = view_of(row, 2, shape, strides, kI32);
  std::int32_t out[12] = {};
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_OK) << last_message();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], 7 + i % 3);
}

TEST(CopyPublic, SubByteStridedIsRefused) {
  // float4 e2m1, one element per 4 bits: a strided view has elements that
  // start inside bytes.
  unsigned char packed[8] = {0x21, 0x43, 0x65, 0x87, 0xA9, 0xCB, 0xED, 0x0F};
  std::int64_t shape[1] = {4};
  std::int64_t strides[1] = {2};
  const DLTensor t = view_of(packed, 1, shape, strides, DLDataType{17, 4, 1});
  unsigned char out[8] = {};
  EXPECT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_ERR_UNSUPPORTED_LAYOUT);
  EXPECT_FALSE(last_message().empty());
}

TEST(CopyPublic, SubByteCompactIsCopied) {
  unsigned char packed[4] = {0x21, 0x43, 0x65, 0x87};
  std::int64_t shape[2] = {2, 4};
  std::int64_t strides[2] = {4, 1};
  const DLTensor t = view_of(packed, 2, shape, strides, DLDataType{17, 4, 1});
  unsigned char out[4] = {};
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_OK) << last_message();
  EXPECT_EQ(std::memcmp(out, packed, sizeof(out)), 0);
}

TEST(CopyPublic, SubBytePairsAreByteAddressable) {
  // float4 with 2 lanes: each element is one whole byte, so strides work.
  unsigned char packed[6] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA};
  std::int64_t shape[1] = {3};
  std::int64_t strides[1] = {2};
  const DLTensor t = view_of(packed, 1, shape, strides, DLDataType{17, 4, 2});
  unsigned char out[3] = {};
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_OK) << last_message();
  EXPECT_EQ(out[0], 0x10);
  EXPECT_EQ(out[1], 0x54);
  EXPECT_EQ(out[2], 0x98);
}

TEST(CopyPublic, DeviceMemoryIsRefused) {
  double a[4] = {};
  std::int64_t shape[1] = {4};
  std::int64_t strides[1] = {1};
  DLTensor t = view_of(a, 1, shape, strides, kF64);
  t.device = DLDevice{kDLCUDA, 0};
  double out[4] = {};
  EXPECT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_ERR_UNSUPPORTED_DEVICE);
}

TEST(CopyPublic, NullSourceIsRefused) {
  double out[1] = {};
  EXPECT_EQ(dlb_copy_to_contiguous(nullptr, out, sizeof(out)), DLB_ERR_INVALID_ARGUMENT);
}

// dlb_copy_to_contiguous_flags: a source in the other byte order comes out
// in the machine's, each scalar (lane, complex part) on its own.
TEST(CopyPublic, SwapBytesGivesNativeValues) {
  // int32 big-endian 0x01020304, 0x05060708, ... reversed (stride -1).
  std::uint32_t native[5] = {0x01020304u, 0x05060708u, 0x0A0B0C0Du, 0x7F000001u, 0x80000000u};
  std::uint32_t swapped[5];
  for (int i = 0; i < 5; ++i) swapped[i] = __builtin_bswap32(native[i]);
  std::int64_t shape[1] = {5};
  std::int64_t strides[1] = {-1};
  const DLTensor t = view_of(swapped, 1, shape, strides, DLDataType{kDLUInt, 32, 1}, 4 * sizeof(std::uint32_t));
  std::uint32_t out[5] = {};
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), DLB_COPY_FLAG_SWAP_BYTES), DLB_OK) << last_message();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], native[4 - i]) << i;
  // Without the flag the bytes are copied as they are.
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), 0), DLB_OK) << last_message();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], swapped[4 - i]) << i;
}

TEST(CopyPublic, SwapBytesOfComplexPartsAndLanes) {
  // complex64 (two float32 parts) and float32 x 2 lanes: 4-byte units.
  float parts[4] = {1.5f, -2.25f, 3.0f, 1e-3f};
  std::uint32_t swapped[4];
  for (int i = 0; i < 4; ++i) {
    std::uint32_t w;
    std::memcpy(&w, &parts[i], 4);
    swapped[i] = __builtin_bswap32(w);
  }
  std::int64_t shape[1] = {2};
  std::int64_t strides[1] = {1};
  for (const DLDataType dt : {DLDataType{kDLComplex, 64, 1}, DLDataType{kDLFloat, 32, 2}}) {
    const DLTensor t = view_of(swapped, 1, shape, strides, dt);
    float out[4] = {};
    ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), DLB_COPY_FLAG_SWAP_BYTES), DLB_OK)
        << last_message();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], parts[i]) << i;
  }
  // One-byte scalars have no byte order: copied as they are, NULL strides too.
  unsigned char bytes[3] = {1, 2, 3};
  std::int64_t three[1] = {3};
  const DLTensor b = view_of(bytes, 1, three, nullptr, DLDataType{kDLInt, 8, 1});
  unsigned char out[3] = {};
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&b, out, sizeof(out), DLB_COPY_FLAG_SWAP_BYTES), DLB_OK);
  EXPECT_EQ(std::memcmp(out, bytes, 3), 0);
  // NULL strides (compact) swap too.
  std::int64_t two[1] = {2};
  const DLTensor c = view_of(swapped, 1, two, nullptr, DLDataType{kDLFloat, 32, 1});
  float f[2] = {};
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&c, f, sizeof(f), DLB_COPY_FLAG_SWAP_BYTES), DLB_OK);
  EXPECT_EQ(f[0], parts[0]);
  EXPECT_EQ(f[1], parts[1]);
}

// DLB_COPY_FLAG_SUBBYTE_PADDED: int4 elements one per byte, strided, copied
// one byte per element; without the flag the strided view is refused.
TEST(CopyPublic, PaddedSubByteStridedIsCopied) {
  unsigned char padded[8] = {1, 0xF, 2, 0xE, 3, 0xD, 4, 0xC};
  std::int64_t shape[1] = {4};
  std::int64_t strides[1] = {-2};
  const DLTensor t = view_of(padded, 1, shape, strides, DLDataType{kDLInt, 4, 1}, 6);
  unsigned char out[4] = {};
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), DLB_COPY_FLAG_SUBBYTE_PADDED), DLB_OK)
      << last_message();
  const unsigned char want[4] = {4, 3, 2, 1};
  EXPECT_EQ(std::memcmp(out, want, 4), 0);
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, 3, DLB_COPY_FLAG_SUBBYTE_PADDED), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), 0), DLB_ERR_UNSUPPORTED_LAYOUT);
  // An unknown sub-byte dtype is refused as such, not as its carrier.
  DLTensor bad = t;
  bad.dtype = DLDataType{kDLFloat, 4, 1};
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&bad, out, sizeof(out), DLB_COPY_FLAG_SUBBYTE_PADDED),
            DLB_ERR_UNSUPPORTED_DTYPE);
}

TEST(CopyPublic, UnknownCopyFlagsAreRefused) {
  double a[1] = {1.0};
  const DLTensor t = view_of(a, 0, nullptr, nullptr, kF64);
  double out[1] = {};
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), 1u << 7), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("0x80"), std::string::npos) << last_message();
}

// dlb_layout_describe_flags: the byte size rule of padded sub-byte elements.
TEST(CopyPublic, LayoutOfPaddedSubByteElements) {
  std::int64_t shape[2] = {3, 5};
  std::int64_t strides[2] = {10, 2};
  DLTensor t = view_of(nullptr, 2, shape, nullptr, DLDataType{kDLInt, 4, 1});
  dlb_layout_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(dlb_layout_describe_flags(&t, 0, &info), DLB_OK) << last_message();
  EXPECT_EQ(info.nbytes, 8u);  // packed: 15 x 4 bits, rounded up
  EXPECT_EQ(info.element_bits, 4u);
  ASSERT_EQ(dlb_layout_describe_flags(&t, DLB_BUFFER_SUBBYTE_PADDED, &info), DLB_OK) << last_message();
  EXPECT_EQ(info.nbytes, 15u);  // one byte each
  EXPECT_EQ(info.element_bits, 8u);
  EXPECT_EQ(info.numel, 15u);
  t.strides = strides;
  ASSERT_EQ(dlb_layout_describe_flags(&t, DLB_BUFFER_SUBBYTE_PADDED, &info), DLB_OK) << last_message();
  EXPECT_EQ(info.contiguous, 0);
  EXPECT_EQ(info.max_offset, 2 * 10 + 4 * 2);
  t.dtype = kF64;  // padding is for elements of fewer than 8 bits
  EXPECT_EQ(dlb_layout_describe_flags(&t, DLB_BUFFER_SUBBYTE_PADDED, &info), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_layout_describe_flags(&t, DLB_BUFFER_READ_ONLY, &info), DLB_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(dlb_layout_describe_flags(&t, 0, &info), DLB_OK);
  EXPECT_EQ(info.element_bits, 64u);
}

// DLB_COPY_FLAG_BYTE_STRIDES: strides in bytes that need not be multiples
// of the element size, as a field of packed records has them.
struct Records {  // n records of 5 bytes: an int32 field, then an int8 one
  std::vector<unsigned char> bytes;
  explicit Records(std::size_t n, bool swapped = false) : bytes(5 * n) {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t v = static_cast<std::uint32_t>(1000 + 3 * i);
      if (swapped) v = __builtin_bswap32(v);
      std::memcpy(&bytes[5 * i], &v, 4);
      bytes[5 * i + 4] = static_cast<unsigned char>(i);
    }
  }
  static std::int32_t value(std::size_t i) { return static_cast<std::int32_t>(1000 + 3 * i); }
};

constexpr std::uint32_t kBytes = DLB_COPY_FLAG_BYTE_STRIDES;

TEST(CopyPublic, ByteStridesCopyAFieldOfRecords) {
  Records r(12);
  std::int64_t shape[1] = {12};
  std::int64_t strides[1] = {5};
  DLTensor t = view_of(r.bytes.data(), 1, shape, strides, kI32);
  std::int32_t out[12] = {};
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_OK) << last_message();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], Records::value(i)) << i;
  // As 3 x 4 records, transposed (strides 5 and 20 bytes), from the last
  // record backwards (a negative byte stride and a byte offset).
  std::int64_t shape2[2] = {4, 3};
  std::int64_t strides2[2] = {5, 20};
  t = view_of(r.bytes.data(), 2, shape2, strides2, kI32);
  std::int32_t out2[12] = {};
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out2, sizeof(out2), kBytes), DLB_OK) << last_message();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(out2[i * 3 + j], Records::value(j * 4 + i)) << i << "," << j;
  std::int64_t back[1] = {-5};
  t = view_of(r.bytes.data(), 1, shape, back, kI32, 5 * 11);
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_OK) << last_message();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], Records::value(11 - i)) << i;
  // The int8 field (offset 4), and a 0-d view of one record's int32.
  t = view_of(r.bytes.data(), 1, shape, strides, DLDataType{kDLInt, 8, 1}, 4);
  std::int8_t small[12] = {};
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, small, sizeof(small), kBytes), DLB_OK) << last_message();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(small[i], i);
  t = view_of(r.bytes.data(), 0, nullptr, nullptr, kI32, 5 * 7);
  std::int32_t one = 0;
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, &one, sizeof(one), kBytes), DLB_OK) << last_message();
  EXPECT_EQ(one, Records::value(7));
}

TEST(CopyPublic, ByteStridesWithSwappedBytesAndAcrossThreads) {
  // A million records: a copy large enough for the copy threads, its
  // field stored in the other byte order.
  const std::size_t n = std::size_t{1} << 20;
  Records r(n, true);
  std::int64_t shape[1] = {static_cast<std::int64_t>(n)};
  std::int64_t strides[1] = {5};
  const DLTensor t = view_of(r.bytes.data(), 1, shape, strides, kI32);
  std::vector<std::int32_t> out(n, -1);
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t, out.data(), 4 * n, kBytes | DLB_COPY_FLAG_SWAP_BYTES), DLB_OK)
      << last_message();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += out[i] != Records::value(i);
  EXPECT_EQ(wrong, 0u);
  // The same as a 1024 x 1024 view, rows 5 KiB apart.
  std::int64_t shape2[2] = {1024, 1024};
  std::int64_t strides2[2] = {5 * 1024, 5};
  const DLTensor t2 = view_of(r.bytes.data(), 2, shape2, strides2, kI32);
  std::fill(out.begin(), out.end(), -1);
  wrong = 0;
  ASSERT_EQ(dlb_copy_to_contiguous_flags(&t2, out.data(), 4 * n, kBytes | DLB_COPY_FLAG_SWAP_BYTES), DLB_OK)
      << last_message();
  for (std::size_t i = 0; i < n; ++i) wrong += out[i] != Records::value(i);
  EXPECT_EQ(wrong, 0u);
}

TEST(CopyPublic, ByteStridesRefuseWhatTheyCannotCopy) {
  Records r(4);
  std::int64_t shape[1] = {4};
  std::int64_t strides[1] = {5};
  std::int32_t out[4] = {};
  DLTensor t = view_of(r.bytes.data(), 1, shape, strides, DLDataType{kDLInt, 4, 1});
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_UNSUPPORTED_LAYOUT);
  EXPECT_NE(last_message().find("whole bytes"), std::string::npos) << last_message();
  t.dtype = DLDataType{kDLFloat, 24, 1};  // no such float
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_UNSUPPORTED_DTYPE);
  t.dtype = kI32;
  t.ndim = DLB_MAX_NDIM;
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_INVALID_ARGUMENT);
  t.ndim = -1;
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_INVALID_ARGUMENT);
  t.ndim = 1;
  t.shape = nullptr;
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("shape is NULL"), std::string::npos) << last_message();
  t.shape = shape;
  t.strides = nullptr;
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("strides is NULL"), std::string::npos) << last_message();
  t.strides = strides;
  t.device = DLDevice{kDLCUDA, 0};
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_UNSUPPORTED_DEVICE);
  t.device = DLDevice{kDLCPU, 0};
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out) - 1, kBytes), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, nullptr, sizeof(out), kBytes), DLB_ERR_INVALID_ARGUMENT);
  std::int64_t huge[1] = {INT64_MAX / 2};
  t.shape = huge;  // x 4 bytes each: more than 64 bits can count
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, out, sizeof(out), kBytes), DLB_ERR_OVERFLOW);
  // No elements: nothing to copy, and a NULL dst is fine.
  std::int64_t none[1] = {0};
  t.shape = none;
  EXPECT_EQ(dlb_copy_to_contiguous_flags(&t, nullptr, 0, kBytes), DLB_OK) << last_message();
}

}  // namespace
