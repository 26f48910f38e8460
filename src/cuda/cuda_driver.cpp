// The CUDA driver, loaded with dlopen on first use, and the words of its
// errors.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "core/errors.hpp"
#include "cuda_internal.hpp"

namespace dlb {
namespace cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

Driver load_driver() noexcept {
  Driver d;
  const char* path = kDriverLibrary;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    std::snprintf(d.why, sizeof d.why, "the CUDA driver was not found (dlopen(\"%s\") failed: %s)", path,
                  err != nullptr ? err : "unknown error");
    return d;
  }
  // Kept loaded for the life of the process: buffers may outlive anything.
#define DLB_CUDA_RESOLVE(name, type)                                                                     \
  {                                                                                                      \
    void* sym = dlsym(lib, #name);                                                                       \
    if (sym == nullptr) {                                                                                \
      std::snprintf(d.why, sizeof d.why,                                                                 \
                    "the CUDA driver was not found: \"%s\" lacks %s (a driver older than CUDA 11?)", path, \
                    #name);                                                                              \
      return d;                                                                                          \
    }                                                                                                    \
    d.name = reinterpret_cast<type>(sym);                                                                \
  }
  DLB_CUDA_DRIVER_FUNCTIONS(DLB_CUDA_RESOLVE)
#undef DLB_CUDA_RESOLVE
  d.init_result = d.cuInit(0);
  if (d.init_result != kSuccess) {
    const char* name = nullptr;
    if (d.cuGetErrorName(d.init_result, &name) != kSuccess || name == nullptr) name = "an unknown CUresult";
    std::snprintf(d.why, sizeof d.why, "the CUDA driver \"%s\" cannot be used: cuInit failed with %s (%d)", path,
                  name, d.init_result);
    return d;
  }
  d.usable = true;
  return d;
}

}  // namespace

// A usable driver is loaded once and kept for the life of the process. A
// failed attempt is not kept: the next call tries again (a driver the
// process loads later is then found). The reason reported is the first
// failure's, written once under the lock and never changed.
const Driver& driver() noexcept {
  static std::atomic<const Driver*> loaded{nullptr};
  static std::mutex mutex;
  static Driver kept;
  static Driver first_failure;
  static bool failed_before = false;
  if (const Driver* d = loaded.load(std::memory_order_acquire)) return *d;
  std::lock_guard<std::mutex> lock(mutex);
  if (const Driver* d = loaded.load(std::memory_order_acquire)) return *d;
  Driver attempt = load_driver();
  if (!attempt.usable) {
    if (!failed_before) {
      first_failure = attempt;
      failed_before = true;
    }
    return first_failure;
  }
  kept = attempt;
  loaded.store(&kept, std::memory_order_release);
  return kept;
}

dlb_status no_driver() noexcept { return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%s", driver().why); }

namespace {

// "cuMemAlloc_v2 failed with CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
void describe(const char* call, CUresult rc, char* out, std::size_t size) noexcept {
  const Driver& d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName(rc, &name) != kSuccess || name == nullptr) name = "an unknown CUresult";
  if (d.cuGetErrorString(rc, &text) != kSuccess || text == nullptr) text = "no description";
  std::snprintf(out, size, "%s failed with %s (%d: %s)", call, name, rc, text);
}

}  // namespace

// For the entry points: the thread's last error.
dlb_status driver_error(std::int32_t device_id, const char* call, CUresult rc) noexcept {
  char text[300];
  describe(call, rc, text, sizeof text);
  return set_error(rc == kErrorOutOfMemory ? DLB_ERR_OUT_OF_MEMORY : DLB_ERR_BACKEND, "cuda:%d: %s",
                   static_cast<int>(device_id), text);
}

dlb_status verb_error_text(const dlb_buffer* b, const char* verb, const char* text) noexcept {
  return set_error(DLB_ERR_BACKEND, "backend '%s': %s failed (returned 1): %s", b->owner.store.backend->name, verb,
                   text);
}

dlb_status verb_error(const dlb_buffer* b, const char* verb, const char* call, CUresult rc) noexcept {
  char text[256];
  describe(call, rc, text, sizeof text);
  return verb_error_text(b, verb, text);
}

}  // namespace cuda
}  // namespace dlb
