// Sub-byte dtypes: int2/int4/uint2/uint4 in the dtype table, and DLPack
// 1.1's padded layout (DLB_BUFFER_SUBBYTE_PADDED,
// DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) through wrap, import, export
// and copies; packed and padded are never read as each other.
#include <cstring>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

namespace {

constexpr DLDataType kInt4{kDLInt, 4, 1};
constexpr DLDataType kUInt2{kDLUInt, 2, 1};

class SubByte : public DlbTest {};

}  // namespace

TEST_F(SubByte, TheDtypeTableKnowsTwoAndFourBitIntegers) {
  const struct {
    DLDataType dtype;
    const char* name;
  } cases[] = {{{kDLInt, 4, 1}, "int4"}, {{kDLUInt, 4, 1}, "uint4"}, {{kDLInt, 2, 1}, "int2"},
               {{kDLUInt, 2, 1}, "uint2"}, {{17, 4, 1}, "float4_e2m1fn"}, {{15, 6, 1}, "float6_e2m3fn"}};
  for (const auto& c : cases) {
    char name[32];
    ASSERT_EQ(dlb_dtype_check(c.dtype), DLB_OK) << c.name;
    ASSERT_EQ(dlb_dtype_name(c.dtype, name, sizeof name), DLB_OK);
    EXPECT_STREQ(name, c.name);
    DLDataType back{};
    ASSERT_EQ(dlb_dtype_from_name(c.name, &back), DLB_OK);
    EXPECT_EQ(back.code, c.dtype.code);
    EXPECT_EQ(back.bits, c.dtype.bits);
  }
  EXPECT_EQ(dlb_dtype_check(DLDataType{kDLInt, 3, 1}), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_EQ(dlb_dtype_check(DLDataType{kDLFloat, 4, 1}), DLB_ERR_UNSUPPORTED_DTYPE);
}

TEST_F(SubByte, PackedIsTheDefaultAndPaddedTakesOneBytePerElement) {
  unsigned char bytes[5] = {1, 14, 7, 8, 0};
  int64_t shape[1] = {5};
  DLTensor view{};
  view.data = bytes;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = 1;
  view.dtype = kInt4;
  view.shape = shape;
  dlb_buffer* packed = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &packed), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(packed), 3u);  // 5 x 4 bits, rounded up
  EXPECT_EQ(dlb_buffer_flags(packed) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  dlb_buffer* padded = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_SUBBYTE_PADDED, nullptr, nullptr, &padded), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(padded), 5u);
  EXPECT_NE(dlb_buffer_flags(padded) & DLB_BUFFER_SUBBYTE_PADDED, 0u);

  // The versioned export says so; a copy keeps the layout and the bytes.
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(padded, nullptr, &m), DLB_OK);
  EXPECT_NE(m->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 0u);
  m->deleter(m);
  ASSERT_EQ(dlb_export_versioned(packed, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 0u);
  m->deleter(m);
  dlb_buffer* host = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(padded, &host), DLB_OK);
  EXPECT_NE(dlb_buffer_flags(host) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(host, &t), DLB_OK);
  EXPECT_EQ(std::memcmp(t.data, bytes, 5), 0);
  dlb_buffer_release(host);

  // A legacy export cannot say it: refused, with or without a copy.
  DLManagedTensor* legacy = nullptr;
  EXPECT_EQ(dlb_export_legacy(padded, nullptr, &legacy), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(MessageContains("padded to a byte each"));
  const dlb_export_options always = opts(DLB_COPY_ALWAYS);
  EXPECT_EQ(dlb_export_legacy(padded, &always, &legacy), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_EQ(legacy, nullptr);
  ASSERT_EQ(dlb_export_legacy(packed, nullptr, &legacy), DLB_OK);  // packed: as DLPack 0.x meant
  legacy->deleter(legacy);
  dlb_buffer_release(packed);
  dlb_buffer_release(padded);
}

TEST_F(SubByte, StridedPaddedViewsCopyAsBytes) {
  unsigned char bytes[6] = {1, 2, 3, 0, 1, 2};  // uint2, 2 x 3
  int64_t shape[2] = {3, 2};
  int64_t strides[2] = {1, 3};  // the transpose
  DLTensor view{};
  view.data = bytes;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = 2;
  view.dtype = kUInt2;
  view.shape = shape;
  view.strides = strides;
  dlb_buffer* padded = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_SUBBYTE_PADDED, nullptr, nullptr, &padded), DLB_OK);
  dlb_buffer* host = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(padded, &host), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(host, &t), DLB_OK);
  const unsigned char want[6] = {1, 0, 2, 1, 3, 2};
  EXPECT_EQ(std::memcmp(t.data, want, 6), 0);
  dlb_buffer_release(host);
  // Packed elements with strides cannot be copied (they do not start on bytes).
  dlb_buffer* packed = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &packed), DLB_OK);
  EXPECT_EQ(dlb_buffer_to_host(packed, &host), DLB_ERR_UNSUPPORTED_LAYOUT);
  EXPECT_TRUE(MessageContains("packed sub-byte elements (2 bits each"));
  unsigned char out[6];
  EXPECT_EQ(dlb_copy_to_contiguous(&view, out, sizeof out), DLB_ERR_UNSUPPORTED_LAYOUT);
  EXPECT_TRUE(MessageContains("cannot be addressed one by one"));
  dlb_buffer_release(packed);
  dlb_buffer_release(padded);
}

TEST_F(SubByte, ThePaddedFlagIsForSubByteDtypesOnly) {
  float f[2] = {0, 0};
  int64_t shape[1] = {2};
  DLTensor view{};
  view.data = f;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = 1;
  view.dtype = DLDataType{kDLFloat, 32, 1};
  view.shape = shape;
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_SUBBYTE_PADDED, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("fewer than 8 bits"));
  EXPECT_EQ(b, nullptr);
}

TEST_F(SubByte, ImportsHonourTheFlag) {
  // 5 int4 elements padded: 5 bytes; the flag makes the import read 5.
  ForeignTensor padded(kInt4, {5}, {1}, 5, 0, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(padded.as_versioned(), nullptr, &b), DLB_OK);
  EXPECT_NE(dlb_buffer_flags(b) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  EXPECT_EQ(dlb_buffer_nbytes(b), 5u);
  DLManagedTensorVersioned* re = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &re), DLB_OK);  // the flag goes on
  EXPECT_NE(re->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 0u);
  re->deleter(re);
  dlb_buffer_release(b);
  EXPECT_EQ(padded.deleter_calls.load(), 1);

  // The same bytes without the flag are packed: 3 bytes, no flag.
  ForeignTensor packed(kInt4, {5}, {1}, 5);
  ASSERT_EQ(dlb_import_versioned(packed.as_versioned(), nullptr, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  EXPECT_EQ(dlb_buffer_nbytes(b), 3u);
  dlb_buffer_release(b);

  // The flag means nothing for whole bytes: dropped.
  ForeignTensor bytes(DLDataType{kDLUInt, 8, 1}, {4}, {1}, 4, 0, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  ASSERT_EQ(dlb_import_versioned(bytes.as_versioned(), nullptr, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  dlb_buffer_release(b);

  // Sub-byte elements of 8 or more bits (float6 x 3 lanes) have no padded layout: refused.
  ForeignTensor wide(DLDataType{15, 6, 3}, {2}, {1}, 8, 0, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  EXPECT_EQ(dlb_import_versioned(wide.as_versioned(), nullptr, &b), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(MessageContains("IS_SUBBYTE_TYPE_PADDED"));
  EXPECT_EQ(wide.deleter_calls.load(), 0);  // a refused import leaves the tensor to its owner
  wide.versioned.deleter(&wide.versioned);
}

TEST_F(SubByte, ThePaddedFlagOnMultiLaneSubByteElementsOfAByteOrMoreIsRefused) {
  // A sub-byte type whose elements are a byte or wider has no padded layout
  // DLPack defines (each lane padded to a byte, or the element packed?):
  // refused even where the element is whole bytes (int4 x 2, float4 x 2, the
  // packed pair, float6 x 4), where the flag used to be dropped and the
  // bytes read as packed. Found by fuzz_import_versioned
  // (fuzz/corpus/import_versioned/regress-padded-float4x2).
  const DLDataType wide[] = {{kDLInt, 4, 2}, {kDLUInt, 2, 4}, {17, 4, 2}, {16, 6, 4}, {kDLInt, 4, 3}};
  for (const DLDataType& dt : wide) {
    ForeignTensor t(dt, {4}, {1}, 16, 0, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    dlb_buffer* b = nullptr;
    EXPECT_EQ(dlb_import_versioned(t.as_versioned(), nullptr, &b), DLB_ERR_UNSUPPORTED_DTYPE)
        << int(dt.code) << "/" << int(dt.bits) << "/" << dt.lanes;
    EXPECT_TRUE(MessageContains("IS_SUBBYTE_TYPE_PADDED"));
    EXPECT_TRUE(MessageContains("lanes"));
    EXPECT_EQ(b, nullptr);
    EXPECT_EQ(t.deleter_calls.load(), 0);
    t.versioned.deleter(&t.versioned);
    // Without the flag the same tensor is packed, and taken in.
    ForeignTensor packed(dt, {4}, {1}, 16);
    ASSERT_EQ(dlb_import_versioned(packed.as_versioned(), nullptr, &b), DLB_OK) << dlb_last_error_message();
    EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
    EXPECT_EQ(dlb_buffer_nbytes(b), (4u * dt.bits * dt.lanes + 7) / 8);
    dlb_buffer_release(b);
  }
  // wrap refuses the same dtypes with DLB_BUFFER_SUBBYTE_PADDED (an argument).
  unsigned char bytes[16] = {};
  int64_t shape[1] = {4};
  DLTensor view{};
  view.data = bytes;
  view.device = DLDevice{kDLCPU, 0};
  view.ndim = 1;
  view.dtype = DLDataType{kDLInt, 4, 2};
  view.shape = shape;
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_SUBBYTE_PADDED, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
}

TEST_F(SubByte, PaddedMultiLaneElementsNarrowerThanAByteTakeOneByteEach) {
  // uint2 x 3 lanes: 6-bit elements, one per byte when padded (buffer.h).
  ForeignTensor t(DLDataType{kDLUInt, 2, 3}, {2, 3}, {3, 1}, 6, 0, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(t.as_versioned(), nullptr, &b), DLB_OK) << dlb_last_error_message();
  EXPECT_NE(dlb_buffer_flags(b) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  EXPECT_EQ(dlb_buffer_nbytes(b), 6u);
  dlb_buffer_release(b);
  EXPECT_EQ(t.deleter_calls.load(), 1);
}
