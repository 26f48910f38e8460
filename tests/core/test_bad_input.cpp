// Bad input to alloc and wrap, as a table: each row is a call that must fail
// with one exact status and a message naming the value, leave *out as it
// was, and never run the release callback.
#include <climits>
#include <functional>
#include <string>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

namespace {

struct Row {
  const char* name;
  std::function<dlb_status(dlb_buffer**, ReleaseCounter*)> call;
  dlb_status expected;
  const char* message;
};

float g_storage[64];

dlb_status wrap_view(DLTensor view, dlb_buffer** out, ReleaseCounter* rc, uint64_t flags = 0) {
  return dlb_buffer_wrap(&view, flags, ReleaseCounter::release, rc, out);
}

std::vector<Row> table() {
  static int64_t neg[3] = {2, -3, 4};
  static int64_t neg1[2] = {4, -3};
  static int64_t ok2[2] = {2, 3};
  static int64_t huge[3] = {INT64_MAX / 2, 4, 1};
  static int64_t big_bytes[1] = {INT64_MAX / 4};
  static int64_t s_over[2] = {2, INT64_MAX};
  static int64_t many[DLB_MAX_NDIM + 1];
  for (auto& v : many) v = 1;
  return {
      {"alloc: NULL out", [](dlb_buffer**, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), f32(), 2, ok2, nullptr); },
       DLB_ERR_INVALID_ARGUMENT, "out is NULL"},
      {"alloc: NULL shape with ndim 2",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), f32(), 2, nullptr, o); },
       DLB_ERR_INVALID_ARGUMENT, "shape is NULL with ndim 2"},
      {"alloc: ndim -1", [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), f32(), -1, ok2, o); },
       DLB_ERR_INVALID_ARGUMENT, "ndim is -1"},
      {"alloc: ndim above the cap",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), f32(), DLB_MAX_NDIM + 1, many, o); },
       DLB_ERR_INVALID_ARGUMENT, "ndim is 65"},
      {"alloc: negative extent", [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), f32(), 3, neg, o); },
       DLB_ERR_MALFORMED, "shape[1] is -3"},
      {"alloc: element count overflow",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), f32(), 3, huge, o); }, DLB_ERR_OVERFLOW,
       "element count"},
      {"alloc: byte size overflow",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), f64(), 1, big_bytes, o); },
       DLB_ERR_OVERFLOW, "byte size"},
      {"alloc: unknown type code",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), DLDataType{42, 32, 1}, 2, ok2, o); },
       DLB_ERR_UNSUPPORTED_DTYPE, "code 42"},
      {"alloc: illegal bits",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), DLDataType{kDLInt, 7, 1}, 2, ok2, o); },
       DLB_ERR_UNSUPPORTED_DTYPE, "bits 7"},
      {"alloc: zero lanes",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), DLDataType{kDLInt, 8, 0}, 2, ok2, o); },
       DLB_ERR_UNSUPPORTED_DTYPE, "lanes is 0"},
      {"alloc: bool of 1 bit",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(cpu(), DLDataType{kDLBool, 1, 1}, 2, ok2, o); },
       DLB_ERR_UNSUPPORTED_DTYPE, "bits 1"},
      {"alloc: device memory without an allocator",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(DLDevice{kDLVulkan, 0}, f32(), 2, ok2, o); },
       DLB_ERR_UNSUPPORTED_DEVICE, "vulkan:0"},
      {"alloc: unknown device type",
       [](dlb_buffer** o, ReleaseCounter*) { return dlb_buffer_alloc(DLDevice{static_cast<DLDeviceType>(5), 0}, f32(), 2, ok2, o); },
       DLB_ERR_UNSUPPORTED_DEVICE, "device type 5"},
      {"wrap: NULL view",
       [](dlb_buffer** o, ReleaseCounter* rc) { return dlb_buffer_wrap(nullptr, 0, ReleaseCounter::release, rc, o); },
       DLB_ERR_INVALID_ARGUMENT, "view is NULL"},
      {"wrap: NULL out",
       [](dlb_buffer**, ReleaseCounter* rc) {
         DLTensor v{g_storage, cpu(), 2, f32(), ok2, nullptr, 0};
         return dlb_buffer_wrap(&v, 0, ReleaseCounter::release, rc, nullptr);
       },
       DLB_ERR_INVALID_ARGUMENT, "out is NULL"},
      {"wrap: NULL data with 6 elements",
       [](dlb_buffer** o, ReleaseCounter* rc) { return wrap_view(DLTensor{nullptr, cpu(), 2, f32(), ok2, nullptr, 0}, o, rc); },
       DLB_ERR_MALFORMED, "data is NULL"},
      {"wrap: NULL shape",
       [](dlb_buffer** o, ReleaseCounter* rc) { return wrap_view(DLTensor{g_storage, cpu(), 2, f32(), nullptr, nullptr, 0}, o, rc); },
       DLB_ERR_INVALID_ARGUMENT, "shape is NULL"},
      {"wrap: negative extent",
       [](dlb_buffer** o, ReleaseCounter* rc) { return wrap_view(DLTensor{g_storage, cpu(), 2, f32(), neg1, nullptr, 0}, o, rc); },
       DLB_ERR_MALFORMED, "shape[1] is -3"},
      {"wrap: stride times extent overflows",
       [](dlb_buffer** o, ReleaseCounter* rc) { return wrap_view(DLTensor{g_storage, cpu(), 2, f32(), ok2, s_over, 0}, o, rc); },
       DLB_ERR_OVERFLOW, "overflows"},
      {"wrap: byte_offset overflows",
       [](dlb_buffer** o, ReleaseCounter* rc) {
         return wrap_view(DLTensor{g_storage, cpu(), 2, f32(), ok2, nullptr, UINT64_MAX - 4}, o, rc);
       },
       DLB_ERR_OVERFLOW, "byte_offset"},
      {"wrap: unknown flag",
       [](dlb_buffer** o, ReleaseCounter* rc) { return wrap_view(DLTensor{g_storage, cpu(), 2, f32(), ok2, nullptr, 0}, o, rc, 1u << 5); },
       DLB_ERR_INVALID_ARGUMENT, "flags"},
      {"wrap: illegal float bits",
       [](dlb_buffer** o, ReleaseCounter* rc) {
         return wrap_view(DLTensor{g_storage, cpu(), 2, DLDataType{kDLFloat, 8, 1}, ok2, nullptr, 0}, o, rc);
       },
       DLB_ERR_UNSUPPORTED_DTYPE, "bits 8"},
  };
}

}  // namespace

class BadInput : public DlbTest {};

TEST_F(BadInput, EveryRowFailsPreciselyAndTouchesNothing) {
  for (const Row& row : table()) {
    SCOPED_TRACE(row.name);
    dlb_clear_last_error();
    ReleaseCounter rc;
    dlb_buffer* const sentinel = reinterpret_cast<dlb_buffer*>(0x5eed);
    dlb_buffer* out = sentinel;
    const dlb_status s = row.call(&out, &rc);
    EXPECT_EQ(s, row.expected) << dlb_status_name(s) << ": " << dlb_last_error_message();
    EXPECT_EQ(dlb_last_error_code(), row.expected);
    EXPECT_TRUE(MessageContains(row.message));
    EXPECT_EQ(out, sentinel);
    EXPECT_EQ(rc.calls.load(), 0);
  }
}
