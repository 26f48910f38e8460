// The CUDA backend against a driver: imports from a CUDA producer, driver
// errors, threads; and the processes without a usable driver (NoDriver,
// StubDriver) and builds without CUDA (Disabled).
#include "cuda_fixture.hpp"

using namespace cudatest;

namespace {

// ---- imports from a CUDA producer ----------------------------------------

TEST_F(CudaTest, ImportFromACudaProducerIsOrderedAndOwned) {
  const std::size_t n = 32;
  CUdeviceptr dev = 0;
  DRV_OK(drv().cuMemAlloc_v2(&dev, n * sizeof(float)));
  CUstream producer = new_stream();
  float* src = pinned<float>(n);
  const std::vector<float> values = iota(n, 5.0f);
  std::memcpy(src, values.data(), n * sizeof(float));
  Delay delay;
  delayed_write(producer, &delay, dev, src, n);

  CudaProducer p(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0}, DLPACK_FLAG_BITMASK_READ_ONLY);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_cuda_import_versioned(nullptr, &p.versioned, value_of(producer), &b), DLB_OK) << last_message();
  EXPECT_EQ(dlb_buffer_flags(b) & (DLB_BUFFER_READ_ONLY | DLB_BUFFER_BACKEND),
            DLB_BUFFER_READ_ONLY | DLB_BUFFER_BACKEND);
  int64_t stream = 0;
  ASSERT_EQ(dlb_cuda_buffer_stream(b, &stream), DLB_OK);
  EXPECT_EQ(stream, value_of(producer));
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << last_message();
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(h, &t), DLB_OK);
  EXPECT_EQ(std::vector<float>(static_cast<float*>(t.data), static_cast<float*>(t.data) + n), values);
  dlb_buffer_release(h);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, reinterpret_cast<void*>(dev));
  EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
  dlb_buffer_release(b);
  EXPECT_EQ(p.deleted.load(), 0);
  m->deleter(m);
  EXPECT_EQ(p.deleted.load(), 1);

  // Legacy, on an explicit backend.
  CudaProducer q(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0});
  ASSERT_EQ(dlb_cuda_import_legacy(backend_, &q.legacy, 1, &b), DLB_OK) << last_message();
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_READ_ONLY, 0u);
  dlb_buffer_release(b);
  EXPECT_EQ(q.deleted.load(), 1);
  DRV_OK(drv().cuMemFree_v2(dev));
}

TEST_F(CudaTest, ImportRefusalsLeaveTheTensorWithTheCaller) {
  CUdeviceptr dev = 0;
  DRV_OK(drv().cuMemAlloc_v2(&dev, 32 * sizeof(float)));
  std::vector<float> pageable(32);
  dlb_buffer* b = nullptr;
  CudaProducer cpu_tensor(pageable.data(), cpu());
  EXPECT_EQ(dlb_cuda_import_versioned(nullptr, &cpu_tensor.versioned, 1, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("the tensor is on cpu:0, not CUDA memory"));
  EXPECT_EQ(dlb_cuda_import_versioned(backend_, &cpu_tensor.versioned, 1, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  CudaProducer liar(pageable.data(), DLDevice{kDLCUDA, 0});
  EXPECT_EQ(dlb_cuda_import_legacy(nullptr, &liar.legacy, 1, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("is not memory the CUDA driver knows"));
  CudaProducer future(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0});
  future.versioned.version.major = 2;
  EXPECT_EQ(dlb_cuda_import_versioned(nullptr, &future.versioned, 1, &b), DLB_ERR_VERSION);
  CudaProducer broken(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0});
  broken.versioned.dl_tensor.shape = nullptr;
  EXPECT_EQ(dlb_cuda_import_versioned(nullptr, &broken.versioned, 1, &b), DLB_ERR_MALFORMED);
  CudaProducer ok(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0});
  EXPECT_EQ(dlb_cuda_import_versioned(nullptr, &ok.versioned, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_import_versioned(nullptr, &ok.versioned, -4, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_import_versioned(nullptr, nullptr, 1, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  for (CudaProducer* p : {&cpu_tensor, &liar, &future, &broken, &ok}) EXPECT_EQ(p->deleted.load(), 0);
  DRV_OK(drv().cuMemFree_v2(dev));
}

TEST_F(CudaTest, RoutedImportTakesCudaMemoryInWithTheProducersStream) {
  CUdeviceptr dev = 0;
  DRV_OK(drv().cuMemAlloc_v2(&dev, 32 * sizeof(float)));
  CUstream producer = new_stream();
  dlb_import_options io;
  dlb_import_options_init(&io);
  io.flags = DLB_IMPORT_CUDA_BACKEND;
  CudaProducer p(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0}, DLPACK_FLAG_BITMASK_READ_ONLY);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned_on_stream(&p.versioned, &io, value_of(producer), &b), DLB_OK) << last_message();
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_READ_ONLY | DLB_BUFFER_BACKEND);
  int64_t stream = 0;
  ASSERT_EQ(dlb_cuda_buffer_stream(b, &stream), DLB_OK);
  EXPECT_EQ(stream, value_of(producer));
  dlb_buffer_release(b);
  EXPECT_EQ(p.deleted.load(), 1);
  // Legacy, routed, through the plain entry point: the legacy default stream.
  CudaProducer q(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0});
  ASSERT_EQ(dlb_import_legacy(&q.legacy, &io, &b), DLB_OK) << last_message();
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_BACKEND);
  ASSERT_EQ(dlb_cuda_buffer_stream(b, &stream), DLB_OK);
  EXPECT_EQ(stream, DLB_STREAM_NONE);
  dlb_buffer_release(b);
  EXPECT_EQ(q.deleted.load(), 1);
  // A stream value the backend refuses is the import's failure, and the
  // tensor stays the caller's.
  CudaProducer r(reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0});
  b = nullptr;
  EXPECT_EQ(dlb_import_versioned_on_stream(&r.versioned, &io, -4, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(r.deleted.load(), 0);
  // Without the flag: plain imported memory.
  ASSERT_EQ(dlb_import_versioned_on_stream(&r.versioned, nullptr, value_of(producer), &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_IMPORTED);
  EXPECT_EQ(dlb_cuda_buffer_stream(b, &stream), DLB_ERR_INVALID_ARGUMENT);
  dlb_buffer_release(b);
  EXPECT_EQ(r.deleted.load(), 1);
  // Memory the driver does not know as CUDA memory: plain, as before.
  std::vector<float> pageable(32);
  CudaProducer liar(pageable.data(), DLDevice{kDLCUDA, 0});
  ASSERT_EQ(dlb_import_versioned_on_stream(&liar.versioned, &io, 1, &b), DLB_OK) << last_message();
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_IMPORTED);
  dlb_buffer_release(b);
  EXPECT_EQ(liar.deleted.load(), 1);
  DRV_OK(drv().cuMemFree_v2(dev));
}

TEST_F(CudaTest, ResolveRelabelsManagedMemoryForTheCpu) {
  dlb_buffer* b = alloc(kDLCUDAManaged, {2, 4});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  void* address = m->dl_tensor.data;
  m->deleter(m);
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.has_target_device = 1;
  o.target_device = cpu();
  o.copy = DLB_COPY_NEVER;
  const int64_t live = dlb_live_exports();
  dlb_buffer* r = nullptr;
  ASSERT_EQ(dlb_buffer_resolve(b, &o, &r), DLB_OK) << last_message();
  ASSERT_NE(r, b);
  EXPECT_EQ(dlb_live_exports(), live);
  EXPECT_EQ(dlb_buffer_refcount(b), 2);
  EXPECT_EQ(dlb_buffer_flags(r), 0u);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(r, &t), DLB_OK);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.data, address);
  static_cast<float*>(t.data)[5] = 42.0f;  // host-readable, and writable
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  EXPECT_EQ(static_cast<float*>(ht.data)[5], 42.0f);
  dlb_buffer_release(h);
  dlb_buffer_release(b);  // the view keeps the memory
  EXPECT_EQ(static_cast<float*>(t.data)[5], 42.0f);
  dlb_buffer_release(r);
}

// ---- driver errors ------------------------------------------------------

TEST_F(FakeCudaTest, DriverErrorsBecomeBackendErrorsWithTheirNames) {
  int64_t shape[1] = {8};
  dlb_buffer* b = nullptr;
  drv().fake_cuda_fail("cuMemAlloc_v2", 700, 1);
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuMemAlloc_v2 failed with CUDA_ERROR_ILLEGAL_ADDRESS (700: an illegal memory access"));
  drv().fake_cuda_fail("cuMemAlloc_v2", 2, 1);
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b), DLB_ERR_OUT_OF_MEMORY);
  EXPECT_TRUE(MessageContains("CUDA_ERROR_OUT_OF_MEMORY"));
  drv().fake_cuda_fail("cuMemsetD8Async", 719, 1);  // the allocation is given back
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDAManaged, 0}, f32(), 1, shape, &b), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuMemsetD8Async failed with CUDA_ERROR_LAUNCH_FAILED"));
  drv().fake_cuda_fail("cuMemAllocHost_v2", 999, 1);  // a code the driver cannot name
  EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDAHost, 0}, f32(), 1, shape, &b), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuMemAllocHost_v2 failed with an unknown CUresult (999"));
  EXPECT_EQ(b, nullptr);

  b = alloc(kDLCUDA, {8});
  CUstream consumer = new_stream();
  DLManagedTensorVersioned* m = nullptr;
  drv().fake_cuda_fail("cuStreamWaitEvent", 400, 1);
  const dlb_export_options o = stream_options(value_of(consumer));
  EXPECT_EQ(dlb_export_versioned(b, &o, &m), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("backend 'cuda:0': wait_ready failed"));
  EXPECT_TRUE(MessageContains("cuStreamWaitEvent failed with CUDA_ERROR_INVALID_HANDLE"));
  EXPECT_EQ(dlb_buffer_refcount(b), 1);

  dlb_export_options cpu_opt;
  dlb_export_options_init(&cpu_opt);
  cpu_opt.has_target_device = 1;
  cpu_opt.target_device = cpu();
  drv().fake_cuda_fail("cuMemcpyDtoHAsync_v2", 700, 1);
  EXPECT_EQ(dlb_export_versioned(b, &cpu_opt, &m), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("copy_to_host failed"));
  EXPECT_TRUE(MessageContains("cuMemcpyDtoHAsync_v2 failed with CUDA_ERROR_ILLEGAL_ADDRESS"));
  drv().fake_cuda_fail("cuStreamSynchronize", 700, 1);
  EXPECT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);

  drv().fake_cuda_fail("cuPointerGetAttribute", 3, 1);
  DLTensor view{reinterpret_cast<void*>(1), DLDevice{kDLCUDA, 0}, 1, f32(), shape, nullptr, 0};
  dlb_buffer* w = nullptr;
  EXPECT_EQ(dlb_cuda_buffer_wrap(backend_, &view, 0, 1, nullptr, nullptr, &w), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuPointerGetAttribute failed with CUDA_ERROR_NOT_INITIALIZED"));
  dlb_buffer_release(b);

  dlb_backend* be = nullptr;
  drv().fake_cuda_fail("cuDevicePrimaryCtxRetain", 101, 1);
  EXPECT_EQ(dlb_cuda_backend_create(0, &be), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuda:0: cuDevicePrimaryCtxRetain failed with CUDA_ERROR_INVALID_DEVICE"));
  EXPECT_EQ(be, nullptr);
}

// ---- threads ------------------------------------------------------------

// Threads each with their own producer and consumer streams and buffers,
// and all of them exporting one shared buffer to their per-thread default
// stream, while the buffer's stream changes under them.
TEST_F(CudaTest, Threads) {
  const int threads = 4;
  // Each round sleeps on the streams: a few dozen rounds are enough, also
  // where the sanitizer stages raise DLB_TEST_ITERATIONS.
  const int rounds = static_cast<int>(std::min(iterations(20), 40L));
  dlb_buffer* shared = alloc(kDLCUDA, {64});
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      void* popped = nullptr;
      if (drv().cuCtxPushCurrent_v2(context_) != 0) {
        ++failures;
        return;
      }
      CUstream producer = nullptr, consumer = nullptr;
      drv().cuStreamCreate(&producer, 1);
      drv().cuStreamCreate(&consumer, 1);
      const std::size_t n = 128;
      void* src_mem = nullptr;
      void* dst_mem = nullptr;
      drv().cuMemAllocHost_v2(&src_mem, n * sizeof(float));
      drv().cuMemAllocHost_v2(&dst_mem, n * sizeof(float));
      float* src = static_cast<float*>(src_mem);
      float* dst = static_cast<float*>(dst_mem);
      for (int r = 0; r < rounds; ++r) {
        int64_t shape[1] = {static_cast<int64_t>(n)};
        dlb_buffer* b = nullptr;
        if (dlb_cuda_buffer_alloc(backend_, DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b) != DLB_OK) {
          ++failures;
          continue;
        }
        DLManagedTensorVersioned* m = nullptr;
        dlb_export_versioned(b, nullptr, &m);
        const CUdeviceptr dev = reinterpret_cast<CUdeviceptr>(m->dl_tensor.data);
        m->deleter(m);
        for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<float>(t * 100000 + r * 1000 + static_cast<int>(i));
        Delay delay;
        delay.ms = 2;
        drv().cuLaunchHostFunc(producer, sleep_then_flag, &delay);
        drv().cuMemcpyHtoDAsync_v2(dev, src, n * sizeof(float), producer);
        dlb_cuda_buffer_set_stream(b, value_of(producer));
        const dlb_export_options o = stream_options(value_of(consumer));
        if (dlb_export_versioned(b, &o, &m) != DLB_OK) {
          ++failures;
        } else {
          drv().cuMemcpyDtoHAsync_v2(dst, dev, n * sizeof(float), consumer);
          drv().cuStreamSynchronize(consumer);
          if (std::memcmp(dst, src, n * sizeof(float)) != 0) ++failures;
          m->deleter(m);
        }
        drv().cuStreamSynchronize(producer);  // `delay` and `src` are reused
        dlb_buffer_release(b);

        dlb_cuda_buffer_set_stream(shared, r % 2 == 0 ? 1 : 2);
        const dlb_export_options po = stream_options(2);
        DLManagedTensorVersioned* sm = nullptr;
        if (dlb_export_versioned(shared, &po, &sm) != DLB_OK)
          ++failures;
        else
          sm->deleter(sm);
      }
      drv().cuMemFreeHost(src_mem);
      drv().cuMemFreeHost(dst_mem);
      drv().cuStreamDestroy_v2(producer);
      drv().cuStreamDestroy_v2(consumer);
      drv().cuCtxPopCurrent_v2(&popped);
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(dlb_buffer_refcount(shared), 1);
  dlb_buffer_release(shared);
}

// ---- no driver, a stub driver, no CUDA support ----------------------------

TEST_F(NoDriver, EveryCudaCallSaysTheDriverWasNotFound) {
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_cuda_backend_create(0, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("the CUDA driver was not found"));
  EXPECT_EQ(be, nullptr);
  int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_cuda_buffer_alloc(nullptr, DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("the CUDA driver was not found"));
  float x[4] = {};
  DLTensor view{x, DLDevice{kDLCUDA, 0}, 1, f32(), shape, nullptr, 0};
  EXPECT_EQ(dlb_cuda_buffer_wrap(nullptr, &view, 0, 1, nullptr, nullptr, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("the CUDA driver was not found"));
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCUDAHost, 0}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("dlb_buffer_alloc cannot allocate cuda_host:0 memory: the CUDA driver was not found"));
  // A routed import comes in as plain memory.
  ForeignTensor f(f32(), {4}, {}, 16);
  f.tensor().device = DLDevice{kDLCUDA, 0};
  dlb_import_options io;
  dlb_import_options_init(&io);
  io.flags = DLB_IMPORT_CUDA_BACKEND;
  ASSERT_EQ(dlb_import_versioned_on_stream(f.as_versioned(), &io, 1, &b), DLB_OK) << last_message();
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_IMPORTED);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
  // Everything else works as before.
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &b), DLB_OK);
  EXPECT_EQ(dlb_cuda_buffer_set_stream(b, 1), DLB_ERR_INVALID_ARGUMENT);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  m->deleter(m);
  dlb_buffer_release(b);
}

class StubDriver : public DlbTest {};

TEST_F(StubDriver, TheToolkitsLinkStubIsNoDriver) {
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_cuda_backend_create(0, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("cannot be used: cuInit failed with"));
  EXPECT_EQ(be, nullptr);
}

class Disabled : public DlbTest {};

TEST_F(Disabled, EveryCudaCallSaysItWasNotBuilt) {
  dlb_backend* be = nullptr;
  EXPECT_EQ(dlb_cuda_backend_create(0, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("built without CUDA support"));
  int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_cuda_buffer_alloc(nullptr, DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("dlb_cuda_buffer_alloc: this dlbridge was built without CUDA support"));
  EXPECT_EQ(dlb_cuda_buffer_wrap(nullptr, nullptr, 0, 1, nullptr, nullptr, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("cannot allocate cuda:0 memory: this dlbridge was built without CUDA support"));
  EXPECT_EQ(dlb_cuda_buffer_set_stream(nullptr, 1), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_cuda_import_versioned(nullptr, nullptr, 1, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_cuda_import_legacy(nullptr, nullptr, 1, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  int64_t s = 0;
  EXPECT_EQ(dlb_cuda_buffer_stream(nullptr, &s), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(be, nullptr);
  EXPECT_EQ(b, nullptr);
}

}  // namespace
