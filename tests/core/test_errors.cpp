// Status names, the thread-local last error, versions and the dtype model.
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "support.hpp"

using namespace dlbtest;

class Errors : public DlbTest {};

TEST_F(Errors, EveryStatusHasItsFixedNumberAndName) {
  struct Row {
    dlb_status code;
    int number;
    const char* name;
  };
  const Row rows[] = {
      {DLB_OK, 0, "DLB_OK"},
      {DLB_ERR_INVALID_ARGUMENT, 1, "DLB_ERR_INVALID_ARGUMENT"},
      {DLB_ERR_OUT_OF_MEMORY, 2, "DLB_ERR_OUT_OF_MEMORY"},
      {DLB_ERR_DELETED, 3, "DLB_ERR_DELETED"},
      {DLB_ERR_NOT_ZERO_COPY, 4, "DLB_ERR_NOT_ZERO_COPY"},
      {DLB_ERR_UNSUPPORTED_DTYPE, 5, "DLB_ERR_UNSUPPORTED_DTYPE"},
      {DLB_ERR_UNSUPPORTED_DEVICE, 6, "DLB_ERR_UNSUPPORTED_DEVICE"},
      {DLB_ERR_UNSUPPORTED_LAYOUT, 7, "DLB_ERR_UNSUPPORTED_LAYOUT"},
      {DLB_ERR_READ_ONLY, 8, "DLB_ERR_READ_ONLY"},
      {DLB_ERR_VERSION, 9, "DLB_ERR_VERSION"},
      {DLB_ERR_OVERFLOW, 10, "DLB_ERR_OVERFLOW"},
      {DLB_ERR_MALFORMED, 11, "DLB_ERR_MALFORMED"},
      {DLB_ERR_ALIGNMENT, 12, "DLB_ERR_ALIGNMENT"},
      {DLB_ERR_BACKEND, 13, "DLB_ERR_BACKEND"},
      {DLB_ERR_INTERNAL, 14, "DLB_ERR_INTERNAL"},
  };
  EXPECT_EQ(sizeof rows / sizeof rows[0], static_cast<std::size_t>(DLB_STATUS_COUNT));
  for (const Row& r : rows) {
    EXPECT_EQ(r.code, r.number);
    EXPECT_STREQ(dlb_status_name(r.code), r.name);
  }
}

TEST_F(Errors, UnknownStatusesHaveAName) {
  for (dlb_status s : {-1, 15, 99, INT32_MIN, INT32_MAX}) {
    ASSERT_NE(dlb_status_name(s), nullptr);
    EXPECT_STREQ(dlb_status_name(s), "DLB_UNKNOWN_STATUS");
  }
}

TEST_F(Errors, LastErrorIsSetByAFailureAndClearedOnRequest) {
  EXPECT_STREQ(dlb_last_error_message(), "");
  EXPECT_EQ(dlb_last_error_code(), DLB_OK);
  EXPECT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_last_error_code(), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("out is NULL"));
  dlb_clear_last_error();
  EXPECT_STREQ(dlb_last_error_message(), "");
  EXPECT_EQ(dlb_last_error_code(), DLB_OK);
}

TEST_F(Errors, LastErrorIsPerThread) {
  EXPECT_EQ(dlb_buffer_delete(nullptr), DLB_ERR_INVALID_ARGUMENT);
  std::string other;
  dlb_status other_code = -1;
  std::thread t([&] {
    other = dlb_last_error_message();
    other_code = dlb_last_error_code();
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(other_code, DLB_OK);
  EXPECT_TRUE(MessageContains("buffer is NULL"));
}

TEST_F(Errors, Versions) {
  EXPECT_STREQ(dlb_version_string(), "0.1.0");
  EXPECT_EQ(dlb_version_number(), static_cast<uint32_t>(DLB_VERSION_NUMBER));
  const DLPackVersion v = dlb_dlpack_version();
  EXPECT_EQ(v.major, 1u);
  EXPECT_EQ(v.minor, 3u);
}

TEST_F(Errors, DtypeNamesRoundTripForEveryLegalDtype) {
  struct Row {
    DLDataType t;
    const char* name;
  };
  const Row rows[] = {
      {{kDLInt, 8, 1}, "int8"},        {{kDLInt, 64, 1}, "int64"},       {{kDLUInt, 16, 1}, "uint16"},
      {{kDLFloat, 16, 1}, "float16"},  {{kDLFloat, 32, 1}, "float32"},   {{kDLFloat, 64, 1}, "float64"},
      {{kDLBfloat, 16, 1}, "bfloat16"}, {{kDLComplex, 64, 1}, "complex64"}, {{kDLComplex, 128, 1}, "complex128"},
      {{kDLBool, 8, 1}, "bool"},       {{7, 8, 1}, "float8_e3m4"},       {{10, 8, 1}, "float8_e4m3fn"},
      {{14, 8, 1}, "float8_e8m0fnu"},  {{15, 6, 1}, "float6_e2m3fn"},    {{16, 6, 1}, "float6_e3m2fn"},
      {{17, 4, 1}, "float4_e2m1fn"},   {{17, 4, 2}, "float4_e2m1fnx2"},  {{kDLFloat, 32, 4}, "float32x4"},
      {{kDLOpaqueHandle, 64, 1}, "handle64"},
  };
  for (const Row& r : rows) {
    char buf[64];
    ASSERT_EQ(dlb_dtype_name(r.t, buf, sizeof buf), DLB_OK) << r.name;
    EXPECT_STREQ(buf, r.name);
    DLDataType back{0, 0, 0};
    ASSERT_EQ(dlb_dtype_from_name(r.name, &back), DLB_OK) << r.name;
    EXPECT_EQ(back.code, r.t.code);
    EXPECT_EQ(back.bits, r.t.bits);
    EXPECT_EQ(back.lanes, r.t.lanes);
  }
  DLDataType alias{0, 0, 0};
  ASSERT_EQ(dlb_dtype_from_name("double", &alias), DLB_OK);
  EXPECT_EQ(alias.code, kDLFloat);
  EXPECT_EQ(alias.bits, 64);
}

TEST_F(Errors, IllegalDtypesAreRefusedByName) {
  EXPECT_EQ(dlb_dtype_check(DLDataType{kDLBool, 1, 1}), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(MessageContains("bits 1"));
  EXPECT_EQ(dlb_dtype_check(DLDataType{kDLFloat, 8, 1}), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_EQ(dlb_dtype_check(DLDataType{18, 8, 1}), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(MessageContains("code 18"));
  EXPECT_EQ(dlb_dtype_check(DLDataType{kDLFloat, 32, 0}), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(MessageContains("lanes is 0"));
  EXPECT_EQ(dlb_dtype_check(DLDataType{15, 8, 1}), DLB_ERR_UNSUPPORTED_DTYPE);
  DLDataType out{1, 2, 3};
  EXPECT_EQ(dlb_dtype_from_name("float31", &out), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_TRUE(MessageContains("'float31'"));
  EXPECT_EQ(out.code, 1);  // untouched
  char small[4];
  EXPECT_EQ(dlb_dtype_name(f32(), small, sizeof small), DLB_ERR_INVALID_ARGUMENT);
}
