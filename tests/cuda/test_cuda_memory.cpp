// The CUDA backend against a driver: backends, allocation, and wrapping
// memory someone else owns. The test groups are described in
// cuda_fixture.hpp and tests/cuda/meson.build.
#include "cuda_fixture.hpp"

using namespace cudatest;

namespace {

// ---- backend ---------------------------------------------------------------

TEST_F(CudaTest, BackendCreateRefusals) {
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_cuda_backend_create(0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_backend_create(-1, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("CUDA device -1 does not exist"));
  EXPECT_EQ(dlb_cuda_backend_create(4096, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("CUDA device 4096 does not exist"));
  EXPECT_EQ(be, nullptr);
}

TEST_F(CudaTest, BackendOutlivesItsHandleWhileBuffersLive) {
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_cuda_backend_create(0, &be), DLB_OK);
  int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_cuda_buffer_alloc(be, DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b), DLB_OK);
  dlb_backend_release(be);  // the buffer holds its own reference
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK) << last_message();
  EXPECT_EQ(read_on(reinterpret_cast<CUstream>(1), m->dl_tensor.data, 4), std::vector<float>(4, 0.0f));
  m->deleter(m);
  dlb_buffer_release(b);
}

// ---- allocation --------------------------------------------------------------

TEST_F(CudaTest, AllocDeviceIsZeroedAndExportsItsAddress) {
  dlb_buffer* b = alloc(kDLCUDA, {3, 4});
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_BACKEND, DLB_BUFFER_BACKEND);
  EXPECT_EQ(dlb_buffer_nbytes(b), 48u);
  int64_t stream = 0;
  ASSERT_EQ(dlb_cuda_buffer_stream(b, &stream), DLB_OK);
  EXPECT_EQ(stream, 1);  // the legacy default stream
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK) << last_message();
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 0);
  EXPECT_EQ(m->flags, 0u);
  ASSERT_NE(m->dl_tensor.data, nullptr);
  EXPECT_EQ(m->dl_tensor.strides[0], 4);
  EXPECT_EQ(dlb_buffer_refcount(b), 2);
  // The fake fills fresh memory with 0xCD: zeros mean the backend cleared it.
  EXPECT_EQ(read_on(reinterpret_cast<CUstream>(1), m->dl_tensor.data, 12), std::vector<float>(12, 0.0f));
  m->deleter(m);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_buffer_release(b);
}

TEST_F(CudaTest, AllocPinnedAndManagedAreHostReadable) {
  for (int32_t type : {static_cast<int32_t>(kDLCUDAHost), static_cast<int32_t>(kDLCUDAManaged)}) {
    dlb_buffer* b = alloc(type, {5});
    ASSERT_NE(b, nullptr);
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK) << last_message();
    EXPECT_EQ(static_cast<int32_t>(m->dl_tensor.device.device_type), type);
    const float* p = static_cast<const float*>(m->dl_tensor.data);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(p[i], 0.0f) << "type " << type;
    m->deleter(m);
    dlb_buffer_release(b);
  }
}

// dlb_buffer_alloc with a CUDA device goes to a backend the library keeps.
TEST_F(CudaTest, BufferAllocOfCudaMemory) {
  int64_t shape[2] = {2, 8};
  for (int32_t type : {static_cast<int32_t>(kDLCUDA), static_cast<int32_t>(kDLCUDAHost),
                       static_cast<int32_t>(kDLCUDAManaged)}) {
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_buffer_alloc(DLDevice{static_cast<DLDeviceType>(type), 0}, f32(), 2, shape, &b), DLB_OK)
        << last_message();
    EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_BACKEND, DLB_BUFFER_BACKEND);
    int64_t stream = 0;
    EXPECT_EQ(dlb_cuda_buffer_stream(b, &stream), DLB_OK);
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK) << last_message();
    EXPECT_EQ(static_cast<int32_t>(m->dl_tensor.device.device_type), type);
    EXPECT_EQ(read_on(reinterpret_cast<CUstream>(1), m->dl_tensor.data, 16), std::vector<float>(16, 0.0f));
    m->deleter(m);
    dlb_buffer_release(b);
  }
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCUDA, 4095}, f32(), 2, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("CUDA device 4095 does not exist"));
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCUDA, 70}, f32(), 2, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  int64_t bad[1] = {-3};
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCUDA, 0}, f32(), 1, bad, &b), DLB_ERR_MALFORMED);
  EXPECT_EQ(b, nullptr);
}

TEST_F(CudaTest, AllocZeroSizeHasAnAddress) {
  dlb_buffer* b = alloc(kDLCUDA, {0, 3});
  ASSERT_NE(b, nullptr);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_NE(m->dl_tensor.data, nullptr);
  m->deleter(m);
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.has_target_device = 1;
  o.target_device = cpu();
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
  EXPECT_EQ(m->dl_tensor.shape[0], 0);
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(CudaTest, AllocRefusals) {
  int64_t shape[2] = {2, 2};
  int64_t bad[1] = {-1};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDA, 1}, f32(), 2, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("not the backend's device 0"));
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, cpu(), f32(), 2, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("is not CUDA memory"));
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDA, 0}, f32(), 1, bad, &b), DLB_ERR_MALFORMED);
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDA, 0}, DLDataType{kDLFloat, 7, 1}, 2, shape, &b),
            DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_EQ(dlb_cuda_buffer_alloc(nullptr, DLDevice{kDLCUDA, 0}, f32(), 2, shape, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDA, 0}, f32(), 2, shape, nullptr),
            DLB_ERR_INVALID_ARGUMENT);
  // A backend that is not the CUDA one.
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "other";
  dlb_backend* other = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &other), DLB_OK);
  EXPECT_EQ(dlb_cuda_buffer_alloc(other, DLDevice{kDLCUDA, 0}, f32(), 2, shape, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("not a CUDA backend"));
  dlb_backend_release(other);
  EXPECT_EQ(b, nullptr);
}

TEST_F(CudaTest, UserStoragesAreNotMadeOnTheCudaBackend) {
  // Its storages are the backend's own objects: dlb_buffer_from_backend
  // refuses to put a caller's pointer among them.
  int64_t shape[1] = {4};
  DLTensor layout{nullptr, DLDevice{kDLCUDA, 0}, 1, f32(), shape, nullptr, 0};
  int storage = 0;
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_from_backend(backend_, &storage, &layout, 0, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("backend 'cuda:0' is a built-in device backend"));
  EXPECT_EQ(b, nullptr);
}

TEST_F(CudaTest, SetStreamRefusals) {
  dlb_buffer* host = nullptr;
  int64_t shape[1] = {2};
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &host), DLB_OK);
  EXPECT_EQ(dlb_cuda_buffer_set_stream(host, 1), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("not CUDA memory of the built-in backend"));
  EXPECT_EQ(dlb_cuda_buffer_set_stream(nullptr, 1), DLB_ERR_INVALID_ARGUMENT);
  dlb_buffer_release(host);
  dlb_buffer* b = alloc(kDLCUDA, {2});
  EXPECT_EQ(dlb_cuda_buffer_set_stream(b, -2), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream -2 is not a CUDA stream value"));
  int64_t s = 0;
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, -1), DLB_OK);
  ASSERT_EQ(dlb_cuda_buffer_stream(b, &s), DLB_OK);
  EXPECT_EQ(s, -1);
  EXPECT_EQ(dlb_cuda_buffer_stream(b, nullptr), DLB_ERR_INVALID_ARGUMENT);
  dlb_buffer_release(b);
}


// ---- wrapping memory someone else owns ---------------------------------

TEST_F(CudaTest, WrapDevicePointerReleasesOnceAfterLastExport) {
  CUdeviceptr dev = 0;
  DRV_OK(drv().cuMemAlloc_v2(&dev, 64));
  int64_t shape[1] = {16};
  DLTensor view{reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0}, 1, f32(), shape, nullptr, 0};
  Release rel;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_cuda_buffer_wrap(backend_, &view, 0, 1, count_release, &rel, &b), DLB_OK) << last_message();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, reinterpret_cast<void*>(dev));
  dlb_buffer_release(b);
  EXPECT_EQ(rel.calls.load(), 0);
  m->deleter(m);
  EXPECT_EQ(rel.calls.load(), 1);
  DRV_OK(drv().cuMemFree_v2(dev));
}

TEST_F(CudaTest, WrapChecksThePointerWithTheDriver) {
  CUdeviceptr dev = 0;
  DRV_OK(drv().cuMemAlloc_v2(&dev, 64));
  float* host = pinned<float>(16);
  std::vector<float> pageable(16);
  int64_t shape[1] = {16};
  Release rel;
  dlb_buffer* b = nullptr;
  struct Case {
    void* data;
    DLDevice device;
    const char* says;
  };
  const Case refused[] = {
      {pageable.data(), DLDevice{kDLCUDA, 0}, "is not memory the CUDA driver knows"},
      {reinterpret_cast<void*>(dev), DLDevice{kDLCUDAHost, 0}, "is device memory, but the view says cuda_host:0"},
      {reinterpret_cast<void*>(dev), DLDevice{kDLCUDAManaged, 0}, "is device memory, but the view says cuda_managed:0"},
      {host, DLDevice{kDLCUDA, 0}, "is pinned host memory, but the view says cuda:0"},
      {reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 1}, "not the backend's device 0"},
      {reinterpret_cast<void*>(dev), cpu(), "is not CUDA memory"},
  };
  for (const Case& c : refused) {
    DLTensor view{c.data, c.device, 1, f32(), shape, nullptr, 0};
    EXPECT_EQ(dlb_cuda_buffer_wrap(backend_, &view, 0, 1, count_release, &rel, &b), DLB_ERR_UNSUPPORTED_DEVICE)
        << c.says;
    EXPECT_TRUE(MessageContains(c.says));
  }
  DLTensor ok{host, DLDevice{kDLCUDAHost, 0}, 1, f32(), shape, nullptr, 0};
  EXPECT_EQ(dlb_cuda_buffer_wrap(backend_, &ok, 4, 1, count_release, &rel, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_wrap(backend_, &ok, 0, -3, count_release, &rel, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_wrap(backend_, nullptr, 0, 1, count_release, &rel, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(rel.calls.load(), 0) << "a refused wrap must not release";
  ASSERT_EQ(dlb_cuda_buffer_wrap(backend_, &ok, 0, 1, count_release, &rel, &b), DLB_OK) << last_message();
  dlb_buffer_release(b);
  EXPECT_EQ(rel.calls.load(), 1);
  DRV_OK(drv().cuMemFree_v2(dev));
}

}  // namespace
