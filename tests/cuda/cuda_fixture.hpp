// The CUDA tests' fixture. The tests (test_cuda_*.cpp, one program) drive
// the same driver library as the backend: the fake driver of tests/cuda
// (host memory, one worker thread per stream) or, under scripts/gpu-check,
// the real one; DLB_TEST_CUDA_DRIVER names the file, else libcuda.so.1. It
// is loaded before the library needs a driver, so that the library's own
// dlopen("libcuda.so.1") finds the same object. The tests make streams and
// enqueue "kernel-like" delayed writes: a host function that sleeps, then
// an async copy into device memory, both on a producer stream. A consumer
// that reads without being ordered after that stream sees stale data.
//
// Test groups: Cuda* need a driver; FakeCuda* need the fake driver's
// controls (skipped on a real GPU); NoDriver and StubDriver run in processes
// whose DLB_TEST_CUDA_DRIVER names no driver / the toolkit's link stub;
// Disabled runs in builds with -Dcuda=disabled.
#ifndef DLBRIDGE_TESTS_CUDA_CUDA_FIXTURE_HPP_
#define DLBRIDGE_TESTS_CUDA_CUDA_FIXTURE_HPP_

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

// A coverage build's counters are written at exit(); a forked child that
// leaves with _exit() writes them first (meson defines DLB_TEST_GCOV_DUMP
// in builds with -Db_coverage=true, whose libgcov has the call).
#if defined(DLB_TEST_GCOV_DUMP)
extern "C" void __gcov_dump(void);
#endif

namespace cudatest {

// How a forked child of a test ends.
[[noreturn]] inline void child_exit(int code) {
#if defined(DLB_TEST_GCOV_DUMP)
  __gcov_dump();
#endif
  _exit(code);
}

using namespace dlbtest;

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

// The driver as the test loads it (cuda_fixture.cpp): the file
// DLB_TEST_CUDA_DRIVER names, else libcuda.so.1.
TestDriver& drv();

#define DRV_OK(call) ASSERT_EQ((call), 0) << #call

// A stream value for a CUstream handle.
inline int64_t value_of(CUstream s) { return static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(s)); }

// A host function that sleeps, then says it ran: the slow part of a
// "kernel" on the producer stream.
struct Delay {
  int ms = 200;
  std::atomic<bool> done{false};
};
void sleep_then_flag(void* p);

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

inline std::vector<float> iota(std::size_t n, float from = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

inline dlb_export_options stream_options(int64_t stream) {
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.stream = stream;
#ifdef DLB_EXPORT_STREAM_GIVEN
  o.flags |= DLB_EXPORT_STREAM_GIVEN;
#endif
  return o;
}

struct Release {
  std::atomic<int> calls{0};
};
inline void count_release(void* ctx) { static_cast<Release*>(ctx)->calls.fetch_add(1); }

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

// A process with no CUDA driver. The library loads libcuda.so.1 by name:
// where a driver is installed, a process without one cannot be made by the
// environment, so these tests skip there.
class NoDriver : public DlbTest {
 protected:
  void SetUp() override {
    DlbTest::SetUp();
    if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
      dlclose(lib);
      GTEST_SKIP() << "a CUDA driver (libcuda.so.1) is installed here";
    }
  }
};

}  // namespace cudatest

#endif
