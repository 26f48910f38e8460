// The CUDA backend against a driver: the fake driver of tests/cuda (host
// memory, one worker thread per stream) or, under scripts/gpu-check, the
// real one. The test drives the same driver library as the backend (found
// through DLB_TEST_CUDA_DRIVER, else libcuda.so.1, and loaded before the
// library needs a driver, so that the library's dlopen("libcuda.so.1")
// finds the same object) to make streams and to
// enqueue "kernel-like" delayed writes: a host function that sleeps, then an
// async copy into device memory, both on a producer stream. A consumer that
// reads without being ordered after that stream sees stale data.
//
// Test groups: Cuda* need a driver; FakeCuda* need the fake driver's
// controls (skipped on a real GPU); NoDriver and StubDriver run in processes
// whose DLB_TEST_CUDA_DRIVER names no driver / the toolkit's link stub;
// Disabled runs in builds with -Dcuda=disabled.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUstream = void*;

// The driver as the test uses it.
struct TestDriver {
  void* lib = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(int*, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(void**, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease_v2)(int) = nullptr;
  CUresult (*cuCtxPushCurrent_v2)(void*) = nullptr;
  CUresult (*cuCtxPopCurrent_v2)(void**) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy_v2)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuLaunchHostFunc)(CUstream, void (*)(void*), void*) = nullptr;
  CUresult (*cuMemAlloc_v2)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*cuMemFree_v2)(CUdeviceptr) = nullptr;
  CUresult (*cuMemAllocHost_v2)(void**, std::size_t) = nullptr;
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void*, std::size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync_v2)(void*, CUdeviceptr, std::size_t, CUstream) = nullptr;
  // The fake driver's controls; null with a real driver.
  void (*fake_cuda_fail)(const char*, int, int) = nullptr;
  int (*fake_cuda_live_allocations)() = nullptr;
  bool ok = false;
};

template <class F>
void resolve(void* lib, const char* name, F& f, bool& ok) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (f == nullptr) ok = false;
}

TestDriver& drv() {
  static TestDriver d = [] {
    TestDriver t;
    const char* env = std::getenv("DLB_TEST_CUDA_DRIVER");
    t.lib = dlopen(env != nullptr && *env != '\0' ? env : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (t.lib == nullptr) return t;
    t.ok = true;
#define R(name) resolve(t.lib, #name, t.name, t.ok)
    R(cuInit);
    R(cuDeviceGet);
    R(cuDevicePrimaryCtxRetain);
    R(cuDevicePrimaryCtxRelease_v2);
    R(cuCtxPushCurrent_v2);
    R(cuCtxPopCurrent_v2);
    R(cuStreamCreate);
    R(cuStreamDestroy_v2);
    R(cuStreamSynchronize);
    R(cuLaunchHostFunc);
    R(cuMemAlloc_v2);
    R(cuMemFree_v2);
    R(cuMemAllocHost_v2);
    R(cuMemFreeHost);
    R(cuMemcpyHtoDAsync_v2);
    R(cuMemcpyDtoHAsync_v2);
#undef R
    t.fake_cuda_fail = reinterpret_cast<void (*)(const char*, int, int)>(dlsym(t.lib, "fake_cuda_fail"));
    t.fake_cuda_live_allocations = reinterpret_cast<int (*)()>(dlsym(t.lib, "fake_cuda_live_allocations"));
    if (t.ok && t.cuInit(0) != 0) t.ok = false;
    return t;
  }();
  return d;
}

// The driver is loaded before any test runs, so that the library's own
// dlopen("libcuda.so.1") finds this object (the fake driver's SONAME is
// libcuda.so.1; so is the toolkit stub's and a real driver's).
const bool kDriverPreloaded = (drv(), true);

#define DRV_OK(call) ASSERT_EQ((call), 0) << #call

// A stream value for a CUstream handle.
int64_t value_of(CUstream s) { return static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(s)); }

// A host function that sleeps, then says it ran: the slow part of a
// "kernel" on the producer stream.
struct Delay {
  int ms = 200;
  std::atomic<bool> done{false};
};
void sleep_then_flag(void* p) {
  auto* d = static_cast<Delay*>(p);
  std::this_thread::sleep_for(std::chrono::milliseconds(d->ms));
  d->done.store(true);
}

// Every test of a driver-backed group: the backend of device 0, the primary
// context current on the test's thread for its own driver calls, and pinned
// staging memory for delayed writes and reads.
class CudaTest : public DlbTest {
 protected:
  void SetUp() override {
    DlbTest::SetUp();
    if (!drv().ok) {
      // scripts/gpu-check sets DLB_TEST_REQUIRE_CUDA: there a skip is a failure.
      if (std::getenv("DLB_TEST_REQUIRE_CUDA") != nullptr) FAIL() << "no usable CUDA driver, and one is required";
      GTEST_SKIP() << "no CUDA driver to drive";
    }
    ASSERT_EQ(dlb_cuda_backend_create(0, &backend_), DLB_OK) << last_message();
    DRV_OK(drv().cuDeviceGet(&device_, 0));
    DRV_OK(drv().cuDevicePrimaryCtxRetain(&context_, device_));
    DRV_OK(drv().cuCtxPushCurrent_v2(context_));
    if (drv().fake_cuda_live_allocations != nullptr) allocations_at_start_ = drv().fake_cuda_live_allocations();
  }
  void TearDown() override {
    if (backend_ != nullptr) {
      for (CUstream s : streams_) EXPECT_EQ(drv().cuStreamDestroy_v2(s), 0);
      for (void* p : pinned_) EXPECT_EQ(drv().cuMemFreeHost(p), 0);
      dlb_backend_release(backend_);
      if (drv().fake_cuda_live_allocations != nullptr) {
        EXPECT_EQ(drv().fake_cuda_live_allocations(), allocations_at_start_) << "device memory leaked";
      }
      void* popped = nullptr;
      EXPECT_EQ(drv().cuCtxPopCurrent_v2(&popped), 0);
      EXPECT_EQ(drv().cuDevicePrimaryCtxRelease_v2(device_), 0);
    }
    DlbTest::TearDown();
  }

  CUstream new_stream() {
    CUstream s = nullptr;
    EXPECT_EQ(drv().cuStreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */), 0);
    streams_.push_back(s);
    return s;
  }
  template <class T>
  T* pinned(std::size_t n) {
    void* p = nullptr;
    EXPECT_EQ(drv().cuMemAllocHost_v2(&p, n * sizeof(T) + 1), 0);
    pinned_.push_back(p);
    return static_cast<T*>(p);
  }
  // Enqueues on `s`: sleep `delay`, then copy `n` floats from `src` to `dst`.
  void delayed_write(CUstream s, Delay* delay, CUdeviceptr dst, const float* src, std::size_t n) {
    ASSERT_EQ(drv().cuLaunchHostFunc(s, sleep_then_flag, delay), 0);
    ASSERT_EQ(drv().cuMemcpyHtoDAsync_v2(dst, src, n * sizeof(float), s), 0);
  }
  // Reads `n` floats at `src` on stream `s` (enqueued, then the host waits).
  std::vector<float> read_on(CUstream s, const void* src, std::size_t n) {
    float* host = pinned<float>(n);
    EXPECT_EQ(drv().cuMemcpyDtoHAsync_v2(host, reinterpret_cast<CUdeviceptr>(src), n * sizeof(float), s), 0);
    EXPECT_EQ(drv().cuStreamSynchronize(s), 0);
    return std::vector<float>(host, host + n);
  }
  dlb_buffer* alloc(int32_t type, std::vector<int64_t> shape) {
    dlb_buffer* b = nullptr;
    EXPECT_EQ(dlb_cuda_buffer_alloc(backend_, DLDevice{static_cast<DLDeviceType>(type), 0}, f32(),
                                    static_cast<int32_t>(shape.size()), shape.data(), &b),
              DLB_OK)
        << last_message();
    return b;
  }

  dlb_backend* backend_ = nullptr;
  int device_ = 0;
  void* context_ = nullptr;
  int allocations_at_start_ = 0;
  std::vector<CUstream> streams_;
  std::vector<void*> pinned_;
};

class FakeCudaTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    if (drv().fake_cuda_fail == nullptr) GTEST_SKIP() << "needs the fake driver's controls";
  }
};

std::vector<float> iota(std::size_t n, float from = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

dlb_export_options stream_options(int64_t stream) {
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.stream = stream;
#ifdef DLB_EXPORT_STREAM_GIVEN
  o.flags |= DLB_EXPORT_STREAM_GIVEN;
#endif
  return o;
}

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
  EXPECT_TRUE(MessageContains("backend 'cuda:0' is a built-in backend"));
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

// ---- wrapping memory someone else owns ---------------------------------

struct Release {
  std::atomic<int> calls{0};
};
void count_release(void* ctx) { static_cast<Release*>(ctx)->calls.fetch_add(1); }

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

// ---- imports from a CUDA producer ----------------------------------------

struct CudaProducer {
  int64_t shape[2] = {4, 8};
  std::atomic<int> deleted{0};
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
  CudaProducer(void* data, DLDevice device, uint64_t flags = 0) {
    DLTensor t{data, device, 2, f32(), shape, nullptr, 0};
    versioned.version = DLPackVersion{1, 3};
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* m) { ++static_cast<CudaProducer*>(m->manager_ctx)->deleted; };
    versioned.flags = flags;
    versioned.dl_tensor = t;
    legacy.dl_tensor = t;
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* m) { ++static_cast<CudaProducer*>(m->manager_ctx)->deleted; };
  }
};

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

class NoDriver : public DlbTest {
 protected:
  void SetUp() override {
    DlbTest::SetUp();
    // The library loads libcuda.so.1 by name: where a driver is installed,
    // a process without one cannot be made by the environment.
    if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
      dlclose(lib);
      GTEST_SKIP() << "a CUDA driver (libcuda.so.1) is installed here";
    }
  }
};

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
