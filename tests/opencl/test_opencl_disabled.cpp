// A library built with -Dopencl=disabled: every OpenCL entry point, and
// dlb_buffer_alloc of OpenCL memory, refuses and says so; an OpenCL tensor
// still comes in through the plain import.
#include <dlbridge/dlbridge.h>

#include "support.hpp"

namespace {

using namespace dlbtest;
using Disabled = DlbTest;

TEST_F(Disabled, EveryEntryPointRefusesAndSaysWhy) {
  int32_t n = -1;
  EXPECT_EQ(dlb_opencl_device_count(&n), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("built without OpenCL support (meson option -Dopencl=disabled)"));
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_opencl_device_index(&n, &n), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_queue_device_index(&n, &n), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_backend_create(0, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_backend_from_queue(nullptr, nullptr, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_backend_queue(nullptr, nullptr, nullptr), DLB_ERR_UNSUPPORTED_DEVICE);
  const int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_opencl_buffer_alloc(nullptr, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_buffer_wrap(nullptr, nullptr, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_import_versioned(nullptr, nullptr, 0, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_import_legacy(nullptr, nullptr, 0, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_opencl_buffer_set_event(nullptr, nullptr), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 0}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("cannot allocate opencl:0 memory: this dlbridge was built without OpenCL support"));
  EXPECT_EQ(b, nullptr);
}

TEST_F(Disabled, AnOpenclTensorComesInPlain) {
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
  ASSERT_EQ(dlb_import_versioned(&m, &io, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_BACKEND, 0u);
  dlb_buffer_release(b);
  EXPECT_EQ(deleter_calls, 1);
}

}  // namespace
