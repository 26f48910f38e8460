// The CUDA tests' driver, loaded once, before any test runs.
#include "cuda_fixture.hpp"

namespace cudatest {
namespace {

template <class F>
void resolve(void* lib, const char* name, F& f, bool& ok) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (f == nullptr) ok = false;
}

}  // namespace

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


void sleep_then_flag(void* p) {
  auto* d = static_cast<Delay*>(p);
  std::this_thread::sleep_for(std::chrono::milliseconds(d->ms));
  d->done.store(true);
}

namespace {

// The driver is loaded before any test runs, so that the library's own
// dlopen("libcuda.so.1") finds this object (the fake driver's SONAME is
// libcuda.so.1; so is the toolkit stub's and a real driver's).
const bool kDriverPreloaded = (drv(), true);

}  // namespace
}  // namespace cudatest
