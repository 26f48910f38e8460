// Where OpenCL cannot be used: no ICD loader (the loader hook points dlopen
// at a file that is not there, or at a library that is no loader), a
// loader that lists no platform (OCL_ICD_VENDORS names nothing), and a
// library built with -Dopencl=disabled. Every OpenCL call says why with
// DLB_ERR_UNSUPPORTED_DEVICE, nothing else in the library changes, and an
// OpenCL tensor still comes in through the plain import.
#include "opencl_fixture.hpp"
#include "opencl/opencl_internal.hpp"

namespace ocltest {
namespace {

// A routed import of a kDLOpenCL tensor (its handle is never followed when
// there is no loader): the plain import, its deleter called once.
void expect_plain_import() {
  static double storage[4];
  int64_t shape[1] = {4};
  int deleter_calls = 0;
  DLManagedTensorVersioned m{};
  m.version = DLPackVersion{1, 1};
  m.manager_ctx = &deleter_calls;
  m.deleter = [](DLManagedTensorVersioned* self) { ++*static_cast<int*>(self->manager_ctx); };
  m.dl_tensor = DLTensor{storage, {kDLOpenCL, 0}, 1, f64(), shape, nullptr, 0};
  dlb_import_options io;
  dlb_import_options_init(&io);
  io.flags = DLB_IMPORT_DEVICE_BACKEND;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(&m, &io, &b), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_BACKEND, 0u);
  dlb_buffer_release(b);
  EXPECT_EQ(deleter_calls, 1);
}

// Every entry point refuses with `words` in its message.
void expect_refusals(const char* words) {
  int32_t n = -1;
  EXPECT_EQ(dlb_opencl_device_count(&n), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains(words));
  EXPECT_EQ(n, -1);
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_opencl_backend_create(0, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains(words));
  EXPECT_EQ(be, nullptr);
  const int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 0}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("dlb_buffer_alloc cannot allocate opencl:0 memory"));
  EXPECT_TRUE(MessageContains(words));
  EXPECT_EQ(b, nullptr);
  std::vector<unsigned char> junk(64, 0);
  EXPECT_EQ(dlb_opencl_backend_from_queue(junk.data(), junk.data(), &be), DLB_ERR_UNSUPPORTED_DEVICE);
  // Host memory and the rest of the library are unaffected.
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &b), DLB_OK);
  dlb_buffer_release(b);
}

using NoLoader = DlbTest;

TEST_F(NoLoader, EveryCallSaysTheLoaderWasNotFoundThenALaterCallFindsIt) {
  dlb::opencl::set_loader_path_for_tests("/nonexistent/libOpenCL.so.1");
  expect_refusals("the OpenCL ICD loader was not found (dlopen(\"/nonexistent/libOpenCL.so.1\") failed");
  expect_plain_import();
  // A library that is no loader.
  dlb::opencl::set_loader_path_for_tests("libm.so.6");
  expect_refusals("lacks clGetPlatformIDs");
  // Failures are not kept: with the real loader back, the next call works.
  dlb::opencl::set_loader_path_for_tests(nullptr);
  int32_t n = 0;
  ASSERT_EQ(dlb_opencl_device_count(&n), DLB_OK) << dlb_last_error_message();
  EXPECT_GE(n, 1);
}

using NoPlatform = DlbTest;

// Run with OCL_ICD_VENDORS naming nothing: the loader loads and lists no
// platform.
TEST_F(NoPlatform, EveryCallSaysThereIsNoPlatform) {
  expect_refusals("no OpenCL platform");
  expect_plain_import();
}

}  // namespace
}  // namespace ocltest
