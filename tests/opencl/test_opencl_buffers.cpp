// OpenCL buffers on a real driver: allocation (the backend's and
// dlb_buffer_alloc's), zero-copy exports of the cl_mem handle, host copies,
// copies from the host, caller-owned contexts and cl_mem with an offset, and
// every reference given back.
#include "opencl_fixture.hpp"

namespace ocltest {
namespace {

using OpenclBuffers = OpenclTest;

TEST_F(OpenclBuffers, DeviceCountAndBackendHandles) {
  int32_t n = 0;
  ASSERT_EQ(dlb_opencl_device_count(&n), DLB_OK);
  EXPECT_GE(n, 1);
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_opencl_backend_create(0, &be), DLB_OK);
  void* context = nullptr;
  void* queue = nullptr;
  ASSERT_EQ(dlb_opencl_backend_queue(be, &context, &queue), DLB_OK);
  ASSERT_NE(context, nullptr);
  cl_device_id device = nullptr;
  CL_OK(clGetCommandQueueInfo(static_cast<cl_command_queue>(queue), CL_QUEUE_DEVICE, sizeof device, &device, nullptr));
  EXPECT_EQ(device, cl().device);
  cl_context qctx = nullptr;
  CL_OK(clGetCommandQueueInfo(static_cast<cl_command_queue>(queue), CL_QUEUE_CONTEXT, sizeof qctx, &qctx, nullptr));
  EXPECT_EQ(qctx, context);
  dlb_backend_release(be);
}

// The caller's own OpenCL handles name dlbridge's device index: its
// cl_device_id, and the device of its command queue.
TEST_F(OpenclBuffers, TheCallersDeviceAndQueueMapToTheDeviceIndex) {
  int32_t index = -1;
  ASSERT_EQ(dlb_opencl_device_index(cl().device, &index), DLB_OK);
  EXPECT_EQ(index, 0);  // the fixture's device is device 0 of the library's numbering
  index = -1;
  ASSERT_EQ(dlb_opencl_queue_device_index(cl().queue, &index), DLB_OK);
  EXPECT_EQ(index, 0);
  index = -1;
  ASSERT_EQ(dlb_opencl_queue_device_index(cl().other_queue, &index), DLB_OK);
  EXPECT_EQ(index, 0);
  // Every device the loader lists maps back to its own position.
  int32_t n = 0;
  ASSERT_EQ(dlb_opencl_device_count(&n), DLB_OK);
  cl_uint platforms_found = 0;
  CL_OK(clGetPlatformIDs(0, nullptr, &platforms_found));
  std::vector<cl_platform_id> platforms(platforms_found);
  CL_OK(clGetPlatformIDs(platforms_found, platforms.data(), nullptr));
  int32_t position = 0;
  for (cl_platform_id p : platforms) {
    cl_uint count = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(count);
    CL_OK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, count, devices.data(), nullptr));
    for (cl_device_id d : devices) {
      ASSERT_EQ(dlb_opencl_device_index(d, &index), DLB_OK);
      EXPECT_EQ(index, position++);
    }
  }
  EXPECT_EQ(position, n);
  // Bad input: refused by name, `out` untouched.
  index = 77;
  EXPECT_EQ(dlb_opencl_device_index(nullptr, &index), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("device is NULL"));
  EXPECT_EQ(dlb_opencl_device_index(cl().device, nullptr), DLB_ERR_INVALID_ARGUMENT);
  int not_a_device = 0;
  EXPECT_EQ(dlb_opencl_device_index(&not_a_device, &index), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("is not one of the"));
  EXPECT_EQ(dlb_opencl_queue_device_index(nullptr, &index), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_opencl_queue_device_index(&not_a_device, &index), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("is not a live cl_command_queue"));
  EXPECT_EQ(dlb_opencl_queue_device_index(cl().queue, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(index, 77);
}

TEST_F(OpenclBuffers, AllocIsZeroFilledAndExportsTheClMemZeroCopy) {
  const int64_t shape[2] = {3, 5};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 0}, f64(), 2, shape, &b), DLB_OK);
  EXPECT_NE(dlb_buffer_flags(b) & DLB_BUFFER_BACKEND, 0u);
  DLManagedTensorVersioned* t = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &t), DLB_OK);
  EXPECT_EQ(t->dl_tensor.device.device_type, kDLOpenCL);
  EXPECT_EQ(t->dl_tensor.device.device_id, 0);
  EXPECT_EQ(t->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(t->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  // data is a cl_mem the driver knows, of the buffer's size, zero-filled.
  auto mem = static_cast<cl_mem>(t->dl_tensor.data);
  std::size_t size = 0;
  CL_OK(clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, nullptr));
  EXPECT_EQ(size, 15 * sizeof(double));
  cl_context context = nullptr;
  CL_OK(clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, nullptr));
  cl_int rc = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueue(context, cl().device, 0, &rc);
  CL_OK(rc);
  const std::vector<unsigned char> bytes = read_all(mem, q);
  EXPECT_EQ(bytes, std::vector<unsigned char>(15 * sizeof(double), 0));
  clReleaseCommandQueue(q);
  // The export holds the memory: the buffer's handle may go first.
  dlb_buffer_release(b);
  EXPECT_GE(refcount(mem), 1u);
  t->deleter(t);
}

TEST_F(OpenclBuffers, HostCopyOfACompactBufferEqualsWhatTheDriverHolds) {
  const std::vector<unsigned char> values = iota_doubles(24, 1.5);
  cl_mem mem = make_mem(cl().context, values.size(), values.data());
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().queue, &be), DLB_OK);
  const cl_uint refs = refcount(mem);
  int64_t shape[2] = {4, 6};
  DLTensor view{mem, {kDLOpenCL, 0}, 2, f64(), shape, nullptr, 0};
  ReleaseCounter released;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_opencl_buffer_wrap(be, &view, 0, nullptr, ReleaseCounter::release, &released, &b), DLB_OK);
  dlb_backend_release(be);
  EXPECT_EQ(refcount(mem), refs + 1);  // the buffer's own reference

  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = cpu();
  DLManagedTensorVersioned* t = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &t), DLB_OK);
  EXPECT_EQ(t->dl_tensor.device.device_type, kDLCPU);
  EXPECT_NE(t->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  EXPECT_EQ(std::memcmp(t->dl_tensor.data, read_all(mem, cl().queue).data(), values.size()), 0);
  t->deleter(t);

  // dlb_buffer_to_host gives the same.
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  EXPECT_EQ(std::memcmp(ht.data, values.data(), values.size()), 0);
  dlb_buffer_release(h);

  dlb_buffer_release(b);
  EXPECT_EQ(released.calls.load(), 1);
  EXPECT_EQ(refcount(mem), refs);
  clReleaseMemObject(mem);
}

TEST_F(OpenclBuffers, ACopyNeverExportToTheCpuIsRefusedNamingTheBackend) {
  const int64_t shape[1] = {8};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 0}, f32(), 1, shape, &b), DLB_OK);
  dlb_export_options o = opts(DLB_COPY_NEVER);
  o.has_target_device = 1;
  o.target_device = cpu();
  DLManagedTensorVersioned* t = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, &o, &t), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_EQ(t, nullptr);
  EXPECT_TRUE(MessageContains("opencl:0 memory of backend 'opencl:0', which the host cannot read"));
  EXPECT_TRUE(MessageContains("copy was forbidden (DLB_COPY_NEVER)"));
  // The remedy offers what would work: a copy, or the memory on its own
  // device; not the CPU device, which was what was asked for.
  EXPECT_TRUE(MessageContains("or take the memory on its own device opencl:0 (no target device, or target_device "
                              "{4, 0}; dl_device=(4, 0) in Python)"));
  EXPECT_FALSE(MessageContains("ask for the CPU device"));
  // Another device than its own is refused too.
  o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = DLDevice{kDLCUDA, 0};
  EXPECT_EQ(dlb_export_versioned(b, &o, &t), DLB_ERR_UNSUPPORTED_DEVICE);
  dlb_buffer_release(b);
}

TEST_F(OpenclBuffers, ResolveCopiesHostMemoryToTheDeviceAndBack) {
  // A strided host view (transposed) to opencl:0, then back to the host.
  std::vector<double> host(12);
  for (int i = 0; i < 12; ++i) host[i] = i * 0.25 - 1.0;
  int64_t shape[2] = {4, 3};
  int64_t strides[2] = {1, 4};  // the transpose of a 3x4 row-major array
  DLTensor v{host.data(), cpu(), 2, f64(), shape, strides, 0};
  dlb_buffer* hb = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&v, 0, nullptr, nullptr, &hb), DLB_OK);
  dlb_export_options o = opts(DLB_COPY_IF_NEEDED);
  o.has_target_device = 1;
  o.target_device = DLDevice{kDLOpenCL, 0};
  dlb_buffer* dev = nullptr;
  ASSERT_EQ(dlb_buffer_resolve(hb, &o, &dev), DLB_OK);
  EXPECT_NE(dlb_buffer_flags(dev) & DLB_BUFFER_COPIED, 0u);
  DLTensor dt;
  ASSERT_EQ(dlb_buffer_dltensor(dev, &dt), DLB_OK);
  EXPECT_EQ(dt.device.device_type, kDLOpenCL);
  // The truth, read by the driver from the device's cl_mem.
  DLManagedTensorVersioned* t = nullptr;
  ASSERT_EQ(dlb_export_versioned(dev, nullptr, &t), DLB_OK);
  auto mem = static_cast<cl_mem>(t->dl_tensor.data);
  cl_context context = nullptr;
  CL_OK(clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, nullptr));
  cl_int rc = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueue(context, cl().device, 0, &rc);
  CL_OK(rc);
  const std::vector<unsigned char> bytes = read_all(mem, q);
  const std::vector<unsigned char> expect =
      gather(std::vector<unsigned char>(reinterpret_cast<unsigned char*>(host.data()),
                                        reinterpret_cast<unsigned char*>(host.data() + 12)),
             8, {4, 3}, {1, 4}, 0);
  EXPECT_EQ(bytes, expect);
  clReleaseCommandQueue(q);
  t->deleter(t);
  // copy=NEVER cannot move it.
  o.copy = DLB_COPY_NEVER;
  dlb_buffer* none = nullptr;
  EXPECT_EQ(dlb_buffer_resolve(hb, &o, &none), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_EQ(none, nullptr);
  dlb_buffer_release(dev);
  dlb_buffer_release(hb);
}

TEST_F(OpenclBuffers, WrapWithAnOffsetExportsItAsByteOffset) {
  const std::vector<unsigned char> values = iota_doubles(32);
  cl_mem mem = make_mem(cl().context, values.size(), values.data());
  const cl_uint refs = refcount(mem);
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_opencl_backend_from_queue(cl().context, cl().queue, &be), DLB_OK);
  int64_t shape[1] = {10};
  DLTensor view{mem, {kDLOpenCL, 0}, 1, f64(), shape, nullptr, 5 * sizeof(double)};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_opencl_buffer_wrap(be, &view, DLB_BUFFER_READ_ONLY, nullptr, nullptr, nullptr, &b), DLB_OK);
  DLManagedTensorVersioned* t = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &t), DLB_OK);
  EXPECT_EQ(t->dl_tensor.data, mem);
  EXPECT_EQ(t->dl_tensor.byte_offset, 5 * sizeof(double));  // never folded into the handle
  EXPECT_NE(t->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  t->deleter(t);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  EXPECT_EQ(std::memcmp(ht.data, values.data() + 5 * sizeof(double), 10 * sizeof(double)), 0);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  dlb_backend_release(be);
  EXPECT_EQ(refcount(mem), refs);
  clReleaseMemObject(mem);
}

TEST_F(OpenclBuffers, ZeroSizeAndScalarBuffers) {
  const int64_t empty[2] = {0, 4};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 0}, f32(), 2, empty, &b), DLB_OK);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(h), 0u);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLOpenCL, 0}, f64(), 0, nullptr, &b), DLB_OK);
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  EXPECT_EQ(*static_cast<double*>(ht.data), 0.0);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
}

TEST_F(OpenclBuffers, TheDeviceTableAndTheRegistryAgree) {
  dlb_device_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ASSERT_EQ(dlb_device_type_info(kDLOpenCL, &info), DLB_OK);
  EXPECT_STREQ(info.name, "opencl");
  EXPECT_EQ(info.flags & (DLB_DEVICE_HOST_READABLE | DLB_DEVICE_ADDRESS | DLB_DEVICE_CUDA_BACKEND), 0u);
  ASSERT_EQ(dlb_device_type_info(kDLCUDA, &info), DLB_OK);
  EXPECT_NE(info.flags & DLB_DEVICE_CUDA_BACKEND, 0u);
}

}  // namespace
}  // namespace ocltest
