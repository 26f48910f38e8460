// Inputs the fuzzers (fuzz/) found, as plain tests. Each has its
// reproducer in fuzz/corpus/<target>/regress-*, which scripts/fuzz
// --regress replays under ASan + UBSan (scripts/test.d/20-fuzz-brief.sh).
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

DLTensor host_view(void* data, int32_t ndim, int64_t* shape, int64_t* strides, DLDataType dt) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  t.strides = strides;
  return t;
}

// fuzz/corpus/{copy,export,import_*}/regress-negative-stride: a view with
// a negative stride over an extent > 1 was refused as DLB_ERR_OVERFLOW
// (the span max - min was computed in unsigned arithmetic with a checked
// subtraction, which always "overflows" when min < 0).
TEST(FuzzRegressions, NegativeStrideIsNotAnOverflow) {
  int32_t a[4] = {10, 20, 30, 40};
  int64_t shape[1] = {4};
  int64_t strides[1] = {-1};
  DLTensor t = host_view(a + 3, 1, shape, strides, DLDataType{kDLInt, 32, 1});
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << dlb_last_error_message();
  int32_t out[4] = {0, 0, 0, 0};
  ASSERT_EQ(dlb_copy_to_contiguous(&t, out, sizeof(out)), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(out[0], 40);
  EXPECT_EQ(out[3], 10);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_OK) << dlb_last_error_message();
  dlb_buffer_release(b);
}

// fuzz/corpus/export/regress-zero-size-huge-extents: a zero-size tensor
// whose other extents multiply past 2^63 (legal: it has no elements) made
// the compact-strides computation overflow a signed 64-bit product.
TEST(FuzzRegressions, ZeroSizeTensorWithHugeExtents) {
  int64_t shape[4] = {4, 0, int64_t{1} << 62, 4};
  DLTensor t = host_view(nullptr, 4, shape, nullptr, DLDataType{kDLInt, 8, 1});
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << dlb_last_error_message();
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(dlb_buffer_nbytes(b), 0u);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(m->dl_tensor.shape[2], int64_t{1} << 62);
  m->deleter(m);
  dlb_buffer_release(b);
}

// fuzz/corpus/validate/regress-device-beyond-enum: device types the 0.6
// DLDeviceType enum does not list (MAIA 17, Trn 18, or any int32 a
// producer writes) were read through the enum type (undefined behaviour,
// reported by UBSan's enum check).
TEST(FuzzRegressions, DeviceTypesBeyondTheOldEnum) {
  float a[2] = {1, 2};
  int64_t shape[1] = {2};
  DLTensor t = host_view(a, 1, shape, nullptr, DLDataType{kDLFloat, 32, 1});
  int32_t maia = 17;
  std::memcpy(&t.device.device_type, &maia, sizeof(maia));
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << dlb_last_error_message();
  int32_t bogus = 65538;
  std::memcpy(&t.device.device_type, &bogus, sizeof(bogus));
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_UNSUPPORTED_DEVICE);
}

// fuzz/corpus/import_versioned/regress-null-data-offset: a zero-size tensor
// with NULL data and a non-zero byte_offset (legal) made the library form
// NULL + byte_offset (undefined behaviour, UBSan pointer-overflow).
TEST(FuzzRegressions, ZeroSizeNullDataWithByteOffset) {
  int64_t shape[2] = {0, 3};
  DLTensor t = host_view(nullptr, 2, shape, nullptr, DLDataType{kDLFloat, 32, 1});
  t.byte_offset = 56;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_OK) << dlb_last_error_message();
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.copy = DLB_COPY_ALWAYS;
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << dlb_last_error_message();
  m->deleter(m);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << dlb_last_error_message();
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  EXPECT_EQ(dlb_live_exports(), 0);
}

}  // namespace
