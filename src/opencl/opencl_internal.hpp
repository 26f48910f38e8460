// What the OpenCL backend's files share: the loaded ICD loader and the
// devices it lists, the words of its errors, the handle check, and the
// backend and storage objects. opencl_loader.cpp loads the loader,
// opencl_storage.cpp is the storage table, opencl_backend.cpp the entry
// points.
#ifndef DLBRIDGE_SRC_OPENCL_OPENCL_INTERNAL_HPP_
#define DLBRIDGE_SRC_OPENCL_OPENCL_INTERNAL_HPP_

#include <dlbridge/dlbridge.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/buffer.hpp"
#include "core/layout.hpp"
#include "opencl_cl.hpp"

namespace dlb {
namespace opencl {

using namespace cl;

// ---- the ICD loader, loaded once (opencl_loader.cpp) ----------------------

constexpr std::int32_t kMaxPlatforms = 16;
constexpr std::int32_t kMaxDevices = 64;

struct Loader {
#define DLB_OPENCL_MEMBER(name, type) \
  using name##_fn = type;             \
  name##_fn name = nullptr;
  DLB_OPENCL_FUNCTIONS(DLB_OPENCL_MEMBER)
#undef DLB_OPENCL_MEMBER
  bool usable = false;
  char why[384] = {0};  // why it is not usable
  // The devices, numbered as DLPack's device_id for kDLOpenCL: every
  // platform's in the order clGetPlatformIDs lists the platforms, each
  // platform's in the order clGetDeviceIDs(CL_DEVICE_TYPE_ALL) gives.
  std::int32_t device_count = 0;
  cl_device_id devices[kMaxDevices] = {};
  cl_platform_id device_platform[kMaxDevices] = {};
  // The ICD dispatch table of each platform (the first word of every
  // object it makes: cl_khr_icd), for the handle check.
  std::int32_t dispatch_count = 0;
  const void* dispatch[kMaxPlatforms] = {};
};

// libOpenCL.so.1 (the ICD loader), loaded with dlopen on the first call and
// kept for the life of the process once it lists a device; without one,
// every call tries again.
const Loader& loader() noexcept;

// The file loader() opens from now on instead of libOpenCL.so.1, for the
// tests of a missing loader (nullptr: libOpenCL.so.1 again). Not exported:
// tests linked with the library's objects call it.
void set_loader_path_for_tests(const char* path) noexcept;

// Why there is no usable loader (the latest attempt's reason), into `out`.
void why_unusable(char* out, std::size_t size) noexcept;

// DLB_ERR_UNSUPPORTED_DEVICE saying why there is no usable loader.
dlb_status no_loader() noexcept;

// "CL_INVALID_VALUE" for an OpenCL error code ("an unknown cl_int" else).
const char* error_name(cl_int rc) noexcept;

// For the entry points: the thread's last error, "opencl:N: <call> failed
// with <name> (<code>)"; DLB_ERR_OUT_OF_MEMORY for the allocation failures
// (CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES, CL_MEM_OBJECT_ALLOCATION_
// FAILURE, CL_INVALID_BUFFER_SIZE), else DLB_ERR_BACKEND.
dlb_status call_error(std::int32_t device_id, const char* call, cl_int rc) noexcept;

// For the storage verbs: DLB_ERR_BACKEND, "backend 'opencl:N': <verb>
// failed (returned 1): <call> failed with ...".
dlb_status verb_error(const dlb_buffer* b, const char* verb, const char* call, cl_int rc) noexcept;
dlb_status verb_error_text(const dlb_buffer* b, const char* verb, const char* text) noexcept;

// Whether `handle` is, by its first word, an object of a platform the
// loader lists (every object of an ICD starts with its platform's dispatch
// table). Reads that word without trusting the address: an unmapped one
// gives false instead of a fault. A released object's memory has been
// reused or overwritten by the allocator, which this catches before any
// call is made through it (the loader would jump through the stale word).
bool live_handle(const void* handle) noexcept;

// How many reads (clEnqueueReadBuffer, clEnqueueReadBufferRect) the host
// copies have enqueued in this process: the tests check that a strided copy
// takes one read per compact block of rows, not one per element.
std::uint64_t reads_enqueued() noexcept;
void count_read() noexcept;

// The device index (device_id) of `device`, or -1.
std::int32_t device_index(cl_device_id device) noexcept;

// The device's name (CL_DEVICE_NAME) into `out`, "" when it cannot be read.
void device_name(cl_device_id device, char* out, std::size_t size) noexcept;

// ---- backend and storages -------------------------------------------------

struct OpenclBackend {
  std::int32_t device_id = 0;
  cl_device_id device = nullptr;
  cl_context context = nullptr;      // retained
  cl_command_queue queue = nullptr;  // retained
};

struct OpenclStorage {
  cl_mem mem = nullptr;        // retained for the storage's life
  std::uint64_t mem_size = 0;  // CL_MEM_SIZE
  LayoutInfo info;             // the layout's arithmetic (byte_offset is the buffer's)
  dlb_release_fn release = nullptr;  // called once at the end (wrap: the caller's; import: the deleter)
  void* release_ctx = nullptr;
  std::mutex mutex;            // guards writer
  cl_event writer = nullptr;   // the last writer's event (retained); nullptr: nothing pending
};

// The storage table of OpenCL buffers (kind StorageKind::device), and the
// backend's destroy (releases the queue and the context).
extern const StorageOps kOpenclStorage;
void destroy_backend(void* ctx) noexcept;

inline OpenclBackend* opencl_backend_of(const dlb_buffer* b) noexcept {
  return static_cast<OpenclBackend*>(b->owner.store.backend->ctx);
}
inline OpenclStorage* opencl_storage_of(const dlb_buffer* b) noexcept {
  return static_cast<OpenclStorage*>(b->owner.store.storage);
}

// The writer's event, retained for the caller (who releases it), or
// nullptr when nothing is pending.
cl_event take_writer(OpenclStorage* s) noexcept;

// Makes `event` (retained here; nullptr: nothing pending) the buffer's
// last writer, releasing the previous one.
void set_writer(OpenclStorage* s, cl_event event) noexcept;

}  // namespace opencl
}  // namespace dlb

#endif
