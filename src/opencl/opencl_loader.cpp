// The OpenCL ICD loader, loaded with dlopen on first use, the devices it
// lists, the words of its errors, and the check of handles callers pass.
#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/errors.hpp"
#include "opencl_internal.hpp"

namespace dlb {
namespace opencl {
namespace {

constexpr const char* kLoaderLibrary = "libOpenCL.so.1";

std::mutex& loader_mutex() noexcept {
  static std::mutex m;
  return m;
}

const char* g_loader_path = kLoaderLibrary;  // guarded by loader_mutex()

// The first word of an object, the ICD dispatch table (cl_khr_icd).
const void* dispatch_of(const void* object) noexcept {
  const void* word = nullptr;
  std::memcpy(&word, object, sizeof word);
  return word;
}

Loader load(const char* path) noexcept {
  Loader l;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    std::snprintf(l.why, sizeof l.why, "the OpenCL ICD loader was not found (dlopen(\"%s\") failed: %s)", path,
                  err != nullptr ? err : "unknown error");
    return l;
  }
  // Kept loaded for the life of the process: buffers may outlive anything.
#define DLB_OPENCL_RESOLVE(name, type)                                                                           \
  {                                                                                                              \
    void* sym = dlsym(lib, #name);                                                                               \
    if (sym == nullptr) {                                                                                        \
      std::snprintf(l.why, sizeof l.why,                                                                         \
                    "the OpenCL ICD loader \"%s\" cannot be used: it lacks %s (a loader older than OpenCL 1.2?)", \
                    path, #name);                                                                                \
      return l;                                                                                                  \
    }                                                                                                            \
    l.name = reinterpret_cast<type>(sym);                                                                        \
  }
  DLB_OPENCL_FUNCTIONS(DLB_OPENCL_RESOLVE)
#undef DLB_OPENCL_RESOLVE
  cl_platform_id platforms[kMaxPlatforms];
  cl_uint count = 0;
  cl_int rc = l.clGetPlatformIDs(kMaxPlatforms, platforms, &count);
  if (rc == kPlatformNotFoundKhr || (rc == kSuccess && count == 0)) {
    std::snprintf(l.why, sizeof l.why,
                  "no OpenCL platform: the ICD loader \"%s\" lists none (clGetPlatformIDs returned %s (%d); install "
                  "an ICD such as pocl-opencl-icd, or check OCL_ICD_VENDORS)",
                  path, error_name(rc), static_cast<int>(rc));
    return l;
  }
  if (rc != kSuccess) {
    std::snprintf(l.why, sizeof l.why, "the OpenCL ICD loader \"%s\" cannot be used: clGetPlatformIDs failed with %s (%d)",
                  path, error_name(rc), static_cast<int>(rc));
    return l;
  }
  if (count > static_cast<cl_uint>(kMaxPlatforms)) count = kMaxPlatforms;
  for (cl_uint p = 0; p < count; ++p) {
    l.dispatch[l.dispatch_count++] = dispatch_of(platforms[p]);
    cl_uint n = 0;
    rc = l.clGetDeviceIDs(platforms[p], kDeviceTypeAll, 0, nullptr, &n);
    if (rc == kDeviceNotFound || n == 0) continue;
    if (rc != kSuccess) {
      std::snprintf(l.why, sizeof l.why, "OpenCL platform %u: clGetDeviceIDs failed with %s (%d)", p, error_name(rc),
                    static_cast<int>(rc));
      return l;
    }
    const cl_uint room = static_cast<cl_uint>(kMaxDevices - l.device_count);
    if (n > room) n = room;
    rc = l.clGetDeviceIDs(platforms[p], kDeviceTypeAll, n, l.devices + l.device_count, nullptr);
    if (rc != kSuccess) {
      std::snprintf(l.why, sizeof l.why, "OpenCL platform %u: clGetDeviceIDs failed with %s (%d)", p, error_name(rc),
                    static_cast<int>(rc));
      return l;
    }
    for (cl_uint d = 0; d < n; ++d) l.device_platform[l.device_count + static_cast<std::int32_t>(d)] = platforms[p];
    l.device_count += static_cast<std::int32_t>(n);
  }
  if (l.device_count == 0) {
    std::snprintf(l.why, sizeof l.why, "no OpenCL device: the %u platform%s the ICD loader \"%s\" lists ha%s none",
                  count, count == 1 ? "" : "s", path, count == 1 ? "s" : "ve");
    return l;
  }
  l.usable = true;
  return l;
}

char g_why[sizeof(Loader::why)] = {0};  // the latest failure's reason, guarded by loader_mutex()

}  // namespace

// A usable loader is loaded once and kept for the life of the process. A
// failed attempt is not kept: the next call tries again, and its reason
// replaces the one before (written and read under the lock).
const Loader& loader() noexcept {
  static std::atomic<const Loader*> loaded{nullptr};
  static Loader kept;
  static const Loader unusable;
  if (const Loader* l = loaded.load(std::memory_order_acquire)) return *l;
  std::lock_guard<std::mutex> lock(loader_mutex());
  if (const Loader* l = loaded.load(std::memory_order_acquire)) return *l;
  Loader attempt = load(g_loader_path);
  if (!attempt.usable) {
    std::memcpy(g_why, attempt.why, sizeof g_why);
    return unusable;
  }
  kept = attempt;
  loaded.store(&kept, std::memory_order_release);
  return kept;
}

void set_loader_path_for_tests(const char* path) noexcept {
  std::lock_guard<std::mutex> lock(loader_mutex());
  g_loader_path = path != nullptr ? path : kLoaderLibrary;
}

void why_unusable(char* out, std::size_t size) noexcept {
  std::lock_guard<std::mutex> lock(loader_mutex());
  std::snprintf(out, size, "%s", g_why[0] != '\0' ? g_why : "the OpenCL ICD loader is usable");
}

dlb_status no_loader() noexcept {
  char why[sizeof(Loader::why)];
  why_unusable(why, sizeof why);
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%s", why);
}

const char* error_name(cl_int rc) noexcept {
  switch (rc) {
    case 0: return "CL_SUCCESS";
    case -1: return "CL_DEVICE_NOT_FOUND";
    case -2: return "CL_DEVICE_NOT_AVAILABLE";
    case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case -5: return "CL_OUT_OF_RESOURCES";
    case -6: return "CL_OUT_OF_HOST_MEMORY";
    case -8: return "CL_MEM_COPY_OVERLAP";
    case -13: return "CL_MISALIGNED_SUB_BUFFER_OFFSET";
    case -14: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    case -30: return "CL_INVALID_VALUE";
    case -32: return "CL_INVALID_PLATFORM";
    case -33: return "CL_INVALID_DEVICE";
    case -34: return "CL_INVALID_CONTEXT";
    case -35: return "CL_INVALID_QUEUE_PROPERTIES";
    case -36: return "CL_INVALID_COMMAND_QUEUE";
    case -37: return "CL_INVALID_HOST_PTR";
    case -38: return "CL_INVALID_MEM_OBJECT";
    case -57: return "CL_INVALID_EVENT_WAIT_LIST";
    case -58: return "CL_INVALID_EVENT";
    case -59: return "CL_INVALID_OPERATION";
    case -61: return "CL_INVALID_BUFFER_SIZE";
    case -64: return "CL_INVALID_PROPERTY";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an unknown cl_int";
  }
}

namespace {

bool allocation_failure(cl_int rc) noexcept {
  return rc == kOutOfHostMemory || rc == kOutOfResources || rc == kMemObjectAllocationFailure ||
         rc == kInvalidBufferSize;
}

}  // namespace

dlb_status call_error(std::int32_t device_id, const char* call, cl_int rc) noexcept {
  return set_error(allocation_failure(rc) ? DLB_ERR_OUT_OF_MEMORY : DLB_ERR_BACKEND, "opencl:%d: %s failed with %s (%d)",
                   static_cast<int>(device_id), call, error_name(rc), static_cast<int>(rc));
}

dlb_status verb_error_text(const dlb_buffer* b, const char* verb, const char* text) noexcept {
  return set_error(DLB_ERR_BACKEND, "backend '%s': %s failed (returned 1): %s", b->owner.store.backend->name, verb,
                   text);
}

dlb_status verb_error(const dlb_buffer* b, const char* verb, const char* call, cl_int rc) noexcept {
  char text[200];
  std::snprintf(text, sizeof text, "%s failed with %s (%d)", call, error_name(rc), static_cast<int>(rc));
  return verb_error_text(b, verb, text);
}

namespace {

// The first word at `address`, read through the kernel, which reports an
// address that is not mapped readable (EFAULT) instead of faulting. Where
// the call is not allowed (a seccomp filter), the word is read directly.
__attribute__((no_sanitize("address"))) bool read_word(const void* address, const void** out) noexcept {
  const void* word = nullptr;
  iovec local{&word, sizeof word};
  iovec remote{const_cast<void*>(address), sizeof word};
  const ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(sizeof word)) {
    *out = word;
    return true;
  }
  if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
    std::memcpy(&word, address, sizeof word);
    *out = word;
    return true;
  }
  return false;
}

}  // namespace

bool live_handle(const void* handle) noexcept {
  if (handle == nullptr || reinterpret_cast<std::uintptr_t>(handle) % alignof(void*) != 0) return false;
  const Loader& l = loader();
  const void* word = nullptr;
  if (!read_word(handle, &word)) return false;
  for (std::int32_t i = 0; i < l.dispatch_count; ++i)
    if (word == l.dispatch[i]) return true;
  return false;
}

namespace {
std::atomic<std::uint64_t> g_reads{0};
}  // namespace

std::uint64_t reads_enqueued() noexcept { return g_reads.load(std::memory_order_relaxed); }
void count_read() noexcept { g_reads.fetch_add(1, std::memory_order_relaxed); }

std::int32_t device_index(cl_device_id device) noexcept {
  const Loader& l = loader();
  for (std::int32_t i = 0; i < l.device_count; ++i)
    if (l.devices[i] == device) return i;
  return -1;
}

void device_name(cl_device_id device, char* out, std::size_t size) noexcept {
  out[0] = '\0';
  if (size < 2 || loader().clGetDeviceInfo(device, kDeviceName, size - 1, out, nullptr) != kSuccess) out[0] = '\0';
  out[size - 1] = '\0';
}

}  // namespace opencl
}  // namespace dlb
