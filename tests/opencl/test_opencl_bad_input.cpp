// Bad input to the OpenCL backend: a cl_mem of another context, a released
// cl_mem, an offset past the buffer's size, a device that is not there,
// handles of the wrong kind. Each is a named status and message, with no
// crash, every cl_mem's reference count back where it started, no export
// alive, and a foreign tensor still its producer's.
#include "opencl_fixture.hpp"

namespace ocltest {
namespace {

using OpenclBadInput = OpenclTest;

dlb_backend* own_backend() {
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().queue, &be), DLB_OK);
  return be;
}

TEST_F(OpenclBadInput, AClMemOfAnotherContext) {
  cl_mem mem = make_mem(cl().other_context, 256);
  const cl_uint refs = refcount(mem);
  dlb_backend* be = own_backend();
  int64_t shape[1] = {32};
  DLTensor view{mem, {kDLOpenCL, 0}, 1, f64(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  ReleaseCounter released;
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, ReleaseCounter::release, &released, &b),
            DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_TRUE(MessageContains("another context than the backend's"));
  EXPECT_EQ(released.calls.load(), 0);
  {
    // The backend's own import with a backend of another context: the same.
    ClProducer p(mem, {32}, {}, 0);
    EXPECT_EQ(dlb_opencl_import_versioned(be, &p.versioned, 0, &b), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(p.deleter_calls, 0);
  }
  EXPECT_EQ(refcount(mem), refs);
  dlb_backend_release(be);
  clReleaseMemObject(mem);
}

TEST_F(OpenclBadInput, AReleasedClMem) {
  // Released while nothing else holds it: its memory goes back to the
  // allocator, and the handle must not be followed.
  dlb_backend* be = own_backend();
  cl_mem keep = make_mem(cl().context, 64);  // a live neighbour, left alone
  cl_mem mem = make_mem(cl().context, 256);
  ASSERT_EQ(clReleaseMemObject(mem), CL_SUCCESS);
  int64_t shape[1] = {32};
  DLTensor view{mem, {kDLOpenCL, 0}, 1, f64(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_TRUE(MessageContains("is not a live cl_mem"));
  // The same handle in a foreign tensor, through the routed import: the
  // tensor is malformed, and its deleter is not called.
  int deleter_calls = 0;
  DLManagedTensorVersioned m{};
  m.version = DLPackVersion{1, 1};
  m.manager_ctx = &deleter_calls;
  m.deleter = [](DLManagedTensorVersioned* self) { ++*static_cast<int*>(self->manager_ctx); };
  m.dl_tensor = view;
  dlb_import_options io;
  dlb_import_options_init(&io);
  io.flags = DLB_IMPORT_DEVICE_BACKEND;
  EXPECT_EQ(dlb_import_versioned(&m, &io, &b), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("the tensor's data"));
  EXPECT_EQ(deleter_calls, 0);
  // Host memory passed as a handle, and an address that is not mapped.
  std::vector<unsigned char> junk(256, 0x11);
  view.data = junk.data();
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  view.data = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(refcount(keep), 1u);
  dlb_backend_release(be);
  clReleaseMemObject(keep);
}

TEST_F(OpenclBadInput, AnOffsetPastTheBuffersSize) {
  cl_mem mem = make_mem(cl().context, 100 * sizeof(double));
  const cl_uint refs = refcount(mem);
  dlb_backend* be = own_backend();
  int64_t shape[1] = {10};
  dlb_buffer* b = nullptr;
  // 91 + 10 elements reach 101 > 100.
  DLTensor view{mem, {kDLOpenCL, 0}, 1, f64(), shape, nullptr, 91 * sizeof(double)};
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("reaches past the cl_mem's 800 bytes"));
  // An offset far past the end (past any address space: the layout rule's
  // overflow), one past this buffer, and one whose view reaches before the start.
  view.byte_offset = UINT64_C(1) << 62;
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_OVERFLOW);
  view.byte_offset = UINT64_C(1) << 40;
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  int64_t back[1] = {-1};
  view.strides = back;
  view.byte_offset = 5 * sizeof(double);  // element 0 at 5, 9 more before it
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  view.byte_offset = 9 * sizeof(double);  // exactly fits
  ASSERT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_OK);
  dlb_buffer_release(b);
  {
    // The same through an import: malformed, the producer keeps its tensor.
    ClProducer p(mem, {10}, {}, 95 * sizeof(double));
    dlb_import_options io;
    dlb_import_options_init(&io);
    io.flags = DLB_IMPORT_DEVICE_BACKEND;
    EXPECT_EQ(dlb_import_versioned(&p.versioned, &io, &b), DLB_ERR_MALFORMED);
    EXPECT_EQ(p.deleter_calls, 0);
  }
  EXPECT_EQ(refcount(mem), refs);
  dlb_backend_release(be);
  clReleaseMemObject(mem);
}

TEST_F(OpenclBadInput, ADeviceThatIsNotThere) {
  int32_t n = 0;
  ASSERT_EQ(dlb_opencl_device_count(&n), DLB_OK);
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_opencl_backend_create(n, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("does not exist; the ICD loader lists"));
  EXPECT_EQ(dlb_opencl_backend_create(-1, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(be, nullptr);
  const int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 99}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("OpenCL device 99 does not exist"));
  EXPECT_EQ(b, nullptr);
  // A view on another device than the backend's.
  cl_mem mem = make_mem(cl().context, 64);
  be = own_backend();
  int64_t eight[1] = {8};
  DLTensor view{mem, {kDLOpenCL, 1}, 1, f64(), eight, nullptr, 0};
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  view.device = DLDevice{kDLCUDA, 0};
  EXPECT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, nullptr, nullptr, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("is not OpenCL memory"));
  EXPECT_EQ(refcount(mem), 1u);
  dlb_backend_release(be);
  clReleaseMemObject(mem);
}

TEST_F(OpenclBadInput, HandlesOfTheWrongKindOrContext) {
  dlb_backend* be = nullptr;
  // A queue of another context than the one given.
  EXPECT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().other_queue, &be), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("belongs to context"));
  EXPECT_EQ(dlb_opencl_backend_from_queue(nullptr, cl().queue, &be), DLB_ERR_INVALID_ARGUMENT);
  std::vector<unsigned char> junk(64, 0);
  EXPECT_EQ(dlb_opencl_backend_from_queue(junk.data(), cl().queue, &be), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("is not a live cl_context"));
  EXPECT_EQ(be, nullptr);
  // An event of another context as the writer.
  be = own_backend();
  cl_int rc = CL_SUCCESS;
  cl_event foreign = clCreateUserEvent(cl().other_context, &rc);
  CL_OK(rc);
  const int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_opencl_buffer_alloc(be, f32(), 1, shape, &b), DLB_OK);
  EXPECT_EQ(dlb_opencl_buffer_set_event(b, foreign), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("belongs to context"));
  EXPECT_EQ(dlb_opencl_buffer_set_event(b, junk.data()), DLB_ERR_INVALID_ARGUMENT);
  // set_event on a host buffer; the backend calls on a user backend.
  dlb_buffer* host = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &host), DLB_OK);
  EXPECT_EQ(dlb_opencl_buffer_set_event(host, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("not OpenCL memory of the built-in backend"));
  dlb_backend_vtable vt{};
  vt.struct_size = sizeof vt;
  vt.name = "user";
  dlb_backend* user = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &user), DLB_OK);
  dlb_buffer* none = nullptr;
  EXPECT_EQ(dlb_opencl_buffer_alloc(user, f32(), 1, shape, &none), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("not an OpenCL backend"));
  void* ctx = nullptr;
  EXPECT_EQ(dlb_opencl_backend_queue(user, &ctx, nullptr), DLB_ERR_INVALID_ARGUMENT);
  // dlb_buffer_from_backend on the built-in backend is refused.
  int64_t four[1] = {4};
  DLTensor layout{nullptr, {kDLOpenCL, 0}, 1, f32(), four, nullptr, 0};
  EXPECT_EQ(dlb_buffer_from_backend(be, nullptr, &layout, 0, &none), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("is a built-in device backend"));
  dlb_backend_release(user);
  dlb_buffer_release(host);
  dlb_buffer_release(b);
  dlb_backend_release(be);
  clReleaseEvent(foreign);
}

}  // namespace
}  // namespace ocltest
