// The CUDA backend against a driver: stream-ordered exports (a consumer
// that reads without being ordered after the producer's stream sees stale
// data) and copies to the host.
#include "cuda_fixture.hpp"

using namespace cudatest;

namespace {

// ---- stream-ordered exports ----------------------------------------------

// The core of the stream rules: a write pending on the producer stream is
// what the consumer's stream sees after the export, and the host never waited.
TEST_F(CudaTest, ExportToConsumerStreamOrdersAfterPendingWrite) {
  const std::size_t n = 1024;
  dlb_buffer* b = alloc(kDLCUDA, {static_cast<int64_t>(n)});
  ASSERT_NE(b, nullptr);
  DLTensor view;
  ASSERT_EQ(dlb_buffer_dltensor(b, &view), DLB_OK);
  DLManagedTensorVersioned* probe = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &probe), DLB_OK);
  const CUdeviceptr dev = reinterpret_cast<CUdeviceptr>(probe->dl_tensor.data);
  probe->deleter(probe);

  CUstream producer = new_stream(), consumer = new_stream();
  float* src = pinned<float>(n);
  const std::vector<float> values = iota(n);
  std::memcpy(src, values.data(), n * sizeof(float));
  Delay delay;
  delayed_write(producer, &delay, dev, src, n);
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);

  const dlb_export_options o = stream_options(value_of(consumer));
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
  EXPECT_FALSE(delay.done.load()) << "the export waited on the host";
  EXPECT_EQ(read_on(consumer, m->dl_tensor.data, n), values);
  EXPECT_TRUE(delay.done.load());
  m->deleter(m);
  dlb_buffer_release(b);
}

// Without ordering (-1), the same read sees the stale zeros: the fake is
// asynchronous enough for an ordering mistake to show up as wrong data.
TEST_F(CudaTest, NoSynchronisationMeansStaleData) {
  const std::size_t n = 256;
  dlb_buffer* b = alloc(kDLCUDA, {static_cast<int64_t>(n)});
  CUstream producer = new_stream(), consumer = new_stream();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  const CUdeviceptr dev = reinterpret_cast<CUdeviceptr>(m->dl_tensor.data);
  m->deleter(m);
  float* src = pinned<float>(n);
  const std::vector<float> values = iota(n);
  std::memcpy(src, values.data(), n * sizeof(float));
  Delay delay;
  delay.ms = 400;
  delayed_write(producer, &delay, dev, src, n);
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);
  const dlb_export_options o = stream_options(-1);
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
  EXPECT_EQ(read_on(consumer, m->dl_tensor.data, n), std::vector<float>(n, 0.0f));
  EXPECT_FALSE(delay.done.load());
  ASSERT_EQ(drv().cuStreamSynchronize(producer), 0);
  EXPECT_EQ(read_on(consumer, m->dl_tensor.data, n), values);
  m->deleter(m);
  dlb_buffer_release(b);
}

// 1 (legacy default) and 2 (per-thread default) as the consumer's stream.
TEST_F(CudaTest, ExportToDefaultStreams) {
  for (int64_t consumer : {int64_t{1}, int64_t{2}}) {
    const std::size_t n = 64;
    dlb_buffer* b = alloc(kDLCUDA, {static_cast<int64_t>(n)});
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    const CUdeviceptr dev = reinterpret_cast<CUdeviceptr>(m->dl_tensor.data);
    m->deleter(m);
    CUstream producer = new_stream();
    float* src = pinned<float>(n);
    const std::vector<float> values = iota(n, static_cast<float>(consumer * 100));
    std::memcpy(src, values.data(), n * sizeof(float));
    Delay delay;
    delayed_write(producer, &delay, dev, src, n);
    ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);
    const dlb_export_options o = stream_options(consumer);
    ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
    EXPECT_FALSE(delay.done.load()) << "stream " << consumer;
    EXPECT_EQ(read_on(reinterpret_cast<CUstream>(consumer), m->dl_tensor.data, n), values) << "stream " << consumer;
    m->deleter(m);
    dlb_buffer_release(b);
  }
}

// No stream given: the host waits for the writer, so any consumer is ordered.
TEST_F(CudaTest, ExportWithoutStreamWaitsOnTheHost) {
  const std::size_t n = 64;
  dlb_buffer* b = alloc(kDLCUDA, {static_cast<int64_t>(n)});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  const CUdeviceptr dev = reinterpret_cast<CUdeviceptr>(m->dl_tensor.data);
  m->deleter(m);
  CUstream producer = new_stream(), consumer = new_stream();
  float* src = pinned<float>(n);
  const std::vector<float> values = iota(n);
  std::memcpy(src, values.data(), n * sizeof(float));
  Delay delay;
  delayed_write(producer, &delay, dev, src, n);
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK) << last_message();
  EXPECT_TRUE(delay.done.load()) << "the export did not wait for the producer stream";
  EXPECT_EQ(read_on(consumer, m->dl_tensor.data, n), values);
  m->deleter(m);
  dlb_buffer_release(b);
}

TEST_F(CudaTest, ExportToTheWritersOwnStream) {
  const std::size_t n = 32;
  dlb_buffer* b = alloc(kDLCUDA, {static_cast<int64_t>(n)});
  CUstream s = new_stream();
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(s)), DLB_OK);
  const dlb_export_options o = stream_options(value_of(s));
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
  EXPECT_EQ(read_on(s, m->dl_tensor.data, n), std::vector<float>(n, 0.0f));
  m->deleter(m);
  dlb_buffer_release(b);
}

#ifdef DLB_EXPORT_STREAM_GIVEN
// The array API standard refuses stream 0 for CUDA: ambiguous between the
// legacy and the per-thread default stream.
TEST_F(CudaTest, StreamZeroGivenIsRefused) {
  dlb_buffer* b = alloc(kDLCUDA, {4});
  dlb_export_options o = stream_options(0);
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream 0 is not allowed for cuda memory"));
  o = stream_options(-5);
  EXPECT_EQ(dlb_export_versioned(b, &o, &m), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("stream -5 is not allowed"));
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);
  dlb_buffer_release(b);
}
#endif

TEST_F(CudaTest, LegacyExportWithStream) {
  const std::size_t n = 16;
  dlb_buffer* b = alloc(kDLCUDA, {static_cast<int64_t>(n)});
  CUstream consumer = new_stream();
  const dlb_export_options o = stream_options(value_of(consumer));
  DLManagedTensor* m = nullptr;
  ASSERT_EQ(dlb_export_legacy(b, &o, &m), DLB_OK) << last_message();
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(read_on(consumer, m->dl_tensor.data, n), std::vector<float>(n, 0.0f));
  m->deleter(m);
  dlb_buffer_release(b);
}

// ---- the host-copy fallback ---------------------------------------------

TEST_F(CudaTest, ExportToCpuCopiesAfterPendingWrite) {
  const std::size_t n = 2 * 3 * 4;
  dlb_buffer* b = alloc(kDLCUDA, {2, 3, 4});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  const CUdeviceptr dev = reinterpret_cast<CUdeviceptr>(m->dl_tensor.data);
  m->deleter(m);
  CUstream producer = new_stream();
  float* src = pinned<float>(n);
  const std::vector<float> values = iota(n);
  std::memcpy(src, values.data(), n * sizeof(float));
  Delay delay;
  delayed_write(producer, &delay, dev, src, n);
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);

  dlb_export_options o;
  dlb_export_options_init(&o);
  o.has_target_device = 1;
  o.target_device = cpu();
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(dlb_buffer_refcount(b), 1);  // a copy holds no reference
  const float* got = static_cast<const float*>(m->dl_tensor.data);
  EXPECT_EQ(std::vector<float>(got, got + n), values);
  m->deleter(m);

  // dlb_buffer_to_host and a copy-only request give the same.
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << last_message();
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(h, &t), DLB_OK);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(std::vector<float>(static_cast<float*>(t.data), static_cast<float*>(t.data) + n), values);
  dlb_buffer_release(h);
  dlb_export_options_init(&o);
  o.copy = DLB_COPY_ALWAYS;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_COPIED);
  got = static_cast<const float*>(m->dl_tensor.data);
  EXPECT_EQ(std::vector<float>(got, got + n), values);
  m->deleter(m);
  dlb_buffer_release(b);
}

// Pinned and managed memory are host-readable: an export to the CPU hands
// out the memory itself, after the host waited for the writer.
TEST_F(CudaTest, PinnedAndManagedExportToCpuWithoutACopy) {
  for (int32_t type : {static_cast<int32_t>(kDLCUDAHost), static_cast<int32_t>(kDLCUDAManaged)}) {
    const std::size_t n = 64;
    dlb_buffer* b = alloc(type, {static_cast<int64_t>(n)});
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    void* memory = m->dl_tensor.data;
    m->deleter(m);
    CUstream producer = new_stream();
    float* src = pinned<float>(n);
    const std::vector<float> values = iota(n, 3.0f);
    std::memcpy(src, values.data(), n * sizeof(float));
    Delay delay;
    delayed_write(producer, &delay, reinterpret_cast<CUdeviceptr>(memory), src, n);
    ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);
    dlb_export_options o;
    dlb_export_options_init(&o);
    o.has_target_device = 1;
    o.target_device = cpu();
    o.copy = DLB_COPY_NEVER;
    ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK) << last_message();
    EXPECT_TRUE(delay.done.load()) << "type " << type;
    EXPECT_EQ(m->dl_tensor.data, memory);
    EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
    EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
    const float* got = static_cast<const float*>(m->dl_tensor.data);
    EXPECT_EQ(std::vector<float>(got, got + n), values) << "type " << type;
    m->deleter(m);
    dlb_buffer_release(b);
  }
}

TEST_F(CudaTest, CopyNeverToCpuIsRefused) {
  dlb_buffer* b = alloc(kDLCUDA, {4});
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.has_target_device = 1;
  o.target_device = cpu();
  o.copy = DLB_COPY_NEVER;
  DLManagedTensorVersioned* m = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, &o, &m), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_EQ(m, nullptr);
  dlb_buffer_release(b);
}

// Strided device views (negative and gapped strides, a byte offset) copied
// to the host compact, compared with the same view read on the host.
TEST_F(CudaTest, StridedDeviceViewsCopyToHost) {
  const std::size_t n = 6 * 8;
  CUdeviceptr dev = 0;
  DRV_OK(drv().cuMemAlloc_v2(&dev, n * sizeof(float)));
  float* src = pinned<float>(n);
  const std::vector<float> values = iota(n);
  std::memcpy(src, values.data(), n * sizeof(float));
  CUstream producer = new_stream();
  Delay delay;
  delay.ms = 50;
  delayed_write(producer, &delay, dev, src, n);

  struct Case {
    std::vector<int64_t> shape, strides;
    uint64_t byte_offset;
  };
  const std::vector<Case> cases = {
      {{8, 6}, {1, 8}, 0},                       // transposed
      {{3, 4}, {16, 2}, 4},                      // every other row and column, offset one element
      {{6, 8}, {-8, -1}, (n - 1) * sizeof(float)},  // both axes reversed
      {{2, 3, 2}, {24, 1, -8}, 8 * sizeof(float)},  // 3-d, mixed signs
      {{4, 5}, {0, 1}, 0},                       // broadcast rows
  };
  for (const Case& c : cases) {
    DLTensor view{reinterpret_cast<void*>(dev), DLDevice{kDLCUDA, 0}, static_cast<int32_t>(c.shape.size()), f32(),
                  const_cast<int64_t*>(c.shape.data()), const_cast<int64_t*>(c.strides.data()), c.byte_offset};
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_cuda_buffer_wrap(backend_, &view, 0, value_of(producer), nullptr, nullptr, &b), DLB_OK)
        << last_message();
    dlb_buffer* h = nullptr;
    ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << last_message();
    // The reference: the same view over the host copy of the values.
    DLTensor host_view = view;
    host_view.data = const_cast<float*>(values.data());
    host_view.device = cpu();
    std::vector<float> want(dlb_buffer_nbytes(b) / sizeof(float));
    ASSERT_EQ(dlb_copy_to_contiguous(&host_view, want.data(), want.size() * sizeof(float)), DLB_OK);
    DLTensor t;
    ASSERT_EQ(dlb_buffer_dltensor(h, &t), DLB_OK);
    EXPECT_EQ(std::vector<float>(static_cast<float*>(t.data), static_cast<float*>(t.data) + want.size()), want)
        << "shape[0] " << c.shape[0];
    dlb_buffer_release(h);
    dlb_buffer_release(b);
  }
  EXPECT_TRUE(delay.done.load());
  DRV_OK(drv().cuMemFree_v2(dev));
}

// Pinned memory under a strided view: copied in place after the writer.
TEST_F(CudaTest, StridedPinnedViewCopiesToHost) {
  dlb_buffer* b = alloc(kDLCUDAHost, {4, 4});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  float* p = static_cast<float*>(m->dl_tensor.data);
  for (int i = 0; i < 16; ++i) p[i] = static_cast<float>(i);
  int64_t shape[2] = {4, 4}, strides[2] = {1, 4};
  DLTensor view{p, DLDevice{kDLCUDAHost, 0}, 2, f32(), shape, strides, 0};
  dlb_buffer* t = nullptr;
  ASSERT_EQ(dlb_cuda_buffer_wrap(backend_, &view, DLB_BUFFER_READ_ONLY, 1, nullptr, nullptr, &t), DLB_OK)
      << last_message();
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(t, &h), DLB_OK) << last_message();
  DLTensor ht;
  ASSERT_EQ(dlb_buffer_dltensor(h, &ht), DLB_OK);
  const float* got = static_cast<const float*>(ht.data);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got[i * 4 + j], static_cast<float>(j * 4 + i));
  dlb_buffer_release(h);
  dlb_buffer_release(t);
  m->deleter(m);
  dlb_buffer_release(b);
}

}  // namespace
