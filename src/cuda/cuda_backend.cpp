// The built-in CUDA backend: device, pinned host and managed memory as
// backend storages, stream-ordered exports, and the copy to the host. The
// driver library is loaded with dlopen on first use; nothing links to CUDA.
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "../alloc.hpp"
#include "../backend.hpp"
#include "../buffer.hpp"
#include "../dtype.hpp"
#include "../errors.hpp"
#include "../layout.hpp"
#include "cuda_backend.hpp"
#include "cuda_driver.hpp"

namespace dlb {
namespace {

using namespace cu;

// ---- the driver, loaded once --------------------------------------------

// Test-only: names another driver library (the test suite's fake driver).
constexpr const char* kDriverEnv = "DLB_TEST_CUDA_DRIVER";
constexpr const char* kDriverLibrary = "libcuda.so.1";

struct Driver {
#define DLB_CUDA_MEMBER(name, type) \
  using name##_fn = type;             \
  name##_fn name = nullptr;
  DLB_CUDA_DRIVER_FUNCTIONS(DLB_CUDA_MEMBER)
#undef DLB_CUDA_MEMBER
  bool usable = false;
  CUresult init_result = kSuccess;
  char why[384] = {0};  // why it is not usable
};

Driver load_driver() noexcept {
  Driver d;
  const char* env = std::getenv(kDriverEnv);
  const char* path = env != nullptr && env[0] != '\0' ? env : kDriverLibrary;
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

const Driver& driver() noexcept {
  static const Driver d = load_driver();
  return d;
}

dlb_status no_driver() noexcept { return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%s", driver().why); }

// "cuMemAlloc_v2 failed with CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
void describe(const char* call, CUresult rc, char* out, std::size_t size) noexcept {
  const Driver& d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName(rc, &name) != kSuccess || name == nullptr) name = "an unknown CUresult";
  if (d.cuGetErrorString(rc, &text) != kSuccess || text == nullptr) text = "no description";
  std::snprintf(out, size, "%s failed with %s (%d: %s)", call, name, rc, text);
}

// For the entry points: the thread's last error.
dlb_status driver_error(std::int32_t device_id, const char* call, CUresult rc) noexcept {
  char text[300];
  describe(call, rc, text, sizeof text);
  return set_error(rc == kErrorOutOfMemory ? DLB_ERR_OUT_OF_MEMORY : DLB_ERR_BACKEND, "cuda:%d: %s",
                   static_cast<int>(device_id), text);
}

// For the callbacks: the backend text dlbridge adds to DLB_ERR_BACKEND.
std::int32_t callback_error(const char* call, CUresult rc) noexcept {
  char text[256];
  describe(call, rc, text, sizeof text);
  set_backend_text(text);
  return 1;
}

// ---- backend and storages ----------------------------------------------

struct CudaBackend {
  std::int32_t device_id = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
};

struct CudaStorage {
  CUdeviceptr ptr = 0;            // what the layout's byte_offset applies to
  std::int32_t device_type = 0;   // kDLCUDA, kDLCUDAHost, kDLCUDAManaged
  bool owned = false;             // allocated here (else release(ctx))
  dlb_release_fn release = nullptr;
  void* release_ctx = nullptr;
  std::atomic<std::int64_t> stream{1};  // last writer's stream value
  // The layout, for copy_to_host.
  DLDataType dtype{};
  std::int32_t ndim = 0;
  std::uint64_t byte_offset = 0;
  std::vector<std::int64_t> shape, strides;
  LayoutInfo info;
};

// The context made current for the scope of a driver call sequence, and the
// caller's restored after it.
class ContextScope {
 public:
  explicit ContextScope(CUcontext c) noexcept : rc_(driver().cuCtxPushCurrent_v2(c)) {}
  ~ContextScope() {
    if (rc_ == kSuccess) {
      CUcontext popped = nullptr;
      (void)driver().cuCtxPopCurrent_v2(&popped);
    }
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  CUresult result() const noexcept { return rc_; }

 private:
  CUresult rc_;
};

// A stream value as a CUstream: 0 and 1 the legacy default stream, 2 the
// per-thread one, others a handle. -1 has no stream.
CUstream as_stream(std::int64_t value) noexcept {
  if (value == 0 || value == 1) return legacy_stream();
  if (value == 2) return per_thread_stream();
  return reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(value));
}

bool is_host_memory(std::int32_t device_type) noexcept {
  return device_type == kDLCUDAHost || device_type == kDLCUDAManaged;
}

// ---- callbacks ---------------------------------------------------------

std::int32_t cb_acquire(void*, void* storage, void** data, void** access_ref) noexcept {
  *data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(static_cast<CudaStorage*>(storage)->ptr));
  *access_ref = nullptr;
  return 0;
}

void cb_release_access(void*, void*, void*) noexcept {}

// Orders the buffer's pending writes before the consumer: its stream waits
// for an event recorded on the writer's stream, or (no stream given) the host
// waits for the writer's stream.
std::int32_t cb_wait_ready(void* ctx, void* storage, std::int64_t consumer) noexcept {
  const auto* be = static_cast<const CudaBackend*>(ctx);
  const auto* s = static_cast<const CudaStorage*>(storage);
  const std::int64_t writer = s->stream.load(std::memory_order_acquire);
  // The consumer's stream passed the protocol's rule in the export planner
  // (streams.hpp): -1, DLB_STREAM_NONE, 1, 2 or a handle.
  if (consumer == -1 || writer == -1) return 0;
  const Driver& d = driver();
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return callback_error("cuCtxPushCurrent_v2", scope.result());
  if (consumer == DLB_STREAM_NONE) {
    const CUresult rc = d.cuStreamSynchronize(as_stream(writer));
    return rc == kSuccess ? 0 : callback_error("cuStreamSynchronize", rc);
  }
  if (as_stream(consumer) == as_stream(writer)) return 0;  // the same stream is ordered already
  CUevent event = nullptr;
  CUresult rc = d.cuEventCreate(&event, kEventDisableTiming);
  if (rc != kSuccess) return callback_error("cuEventCreate", rc);
  rc = d.cuEventRecord(event, as_stream(writer));
  if (rc == kSuccess) {
    rc = d.cuStreamWaitEvent(as_stream(consumer), event, 0);
    if (rc != kSuccess) {
      (void)d.cuEventDestroy_v2(event);
      return callback_error("cuStreamWaitEvent", rc);
    }
  } else {
    (void)d.cuEventDestroy_v2(event);
    return callback_error("cuEventRecord", rc);
  }
  // Destroying an event others wait on is allowed: the wait keeps its state.
  rc = d.cuEventDestroy_v2(event);
  return rc == kSuccess ? 0 : callback_error("cuEventDestroy_v2", rc);
}

// The whole storage into `dst`, compact row-major, after the writer's work.
std::int32_t cb_copy_to_host(void* ctx, void* storage, void* dst, std::uint64_t dst_size) noexcept {
  const auto* be = static_cast<const CudaBackend*>(ctx);
  const auto* s = static_cast<const CudaStorage*>(storage);
  if (s->info.nbytes == 0) return 0;
  if (dst_size < s->info.nbytes) {
    set_backend_text("the copy destination is smaller than the tensor");
    return 1;
  }
  const Driver& d = driver();
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return callback_error("cuCtxPushCurrent_v2", scope.result());
  const std::int64_t writer = s->stream.load(std::memory_order_acquire);
  const CUstream stream = as_stream(writer == -1 ? 1 : writer);

  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.device = DLDevice{kDLCPU, 0};
  view.dtype = s->dtype;
  view.ndim = s->ndim;
  view.shape = const_cast<std::int64_t*>(s->shape.data());
  view.strides = s->ndim > 0 ? const_cast<std::int64_t*>(s->strides.data()) : nullptr;

  if (is_host_memory(s->device_type)) {
    // Host-readable: wait for the writer, then read it in place.
    if (writer != -1) {
      const CUresult rc = d.cuStreamSynchronize(stream);
      if (rc != kSuccess) return callback_error("cuStreamSynchronize", rc);
    }
    view.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(s->ptr));
    view.byte_offset = s->byte_offset;
    const dlb_status st = copy_view_to_contiguous(view, s->info, dst);
    if (st != DLB_OK) {
      set_backend_text(last_error_message());
      return 1;
    }
    return 0;
  }

  const CUdeviceptr origin = s->ptr + s->byte_offset;
  if (s->info.contiguous) {
    // One device-to-host copy on the writer's stream, then wait for it.
    CUresult rc = d.cuMemcpyDtoHAsync_v2(dst, origin, static_cast<std::size_t>(s->info.nbytes), stream);
    if (rc != kSuccess) return callback_error("cuMemcpyDtoHAsync_v2", rc);
    rc = d.cuStreamSynchronize(stream);
    return rc == kSuccess ? 0 : callback_error("cuStreamSynchronize", rc);
  }
  if (!byte_addressable(s->dtype)) {
    set_backend_text("a strided view of a sub-byte dtype cannot be copied: its elements do not start on bytes");
    return 1;
  }
  // Strided: the span the view touches, compact, into staging memory; then
  // the strided engine makes it compact row-major.
  const std::uint64_t elem = element_bits(s->dtype) / 8;
  const std::uint64_t below = static_cast<std::uint64_t>(-s->info.min_offset) * elem;
  const std::uint64_t span = static_cast<std::uint64_t>(s->info.max_offset - s->info.min_offset + 1) * elem;
  void* staging = mem_alloc_aligned(64, static_cast<std::size_t>(span));
  if (staging == nullptr) {
    set_backend_text("out of memory allocating host staging memory for a strided copy");
    return 1;
  }
  const char* call = "cuMemcpyDtoHAsync_v2";
  CUresult rc = d.cuMemcpyDtoHAsync_v2(staging, origin - below, static_cast<std::size_t>(span), stream);
  if (rc == kSuccess) {
    call = "cuStreamSynchronize";
    rc = d.cuStreamSynchronize(stream);
  }
  if (rc != kSuccess) {
    mem_free_aligned(staging);
    return callback_error(call, rc);
  }
  view.data = staging;
  view.byte_offset = below;
  const dlb_status st = copy_view_to_contiguous(view, s->info, dst);
  mem_free_aligned(staging);
  if (st != DLB_OK) {
    set_backend_text(last_error_message());
    return 1;
  }
  return 0;
}

void cb_free_storage(void* ctx, void* storage) noexcept {
  const auto* be = static_cast<const CudaBackend*>(ctx);
  auto* s = static_cast<CudaStorage*>(storage);
  if (s->owned) {
    const Driver& d = driver();
    ContextScope scope(be->context);
    // A failure here has nobody to report to; the memory is then lost.
    if (s->device_type == kDLCUDAHost)
      (void)d.cuMemFreeHost(reinterpret_cast<void*>(static_cast<std::uintptr_t>(s->ptr)));
    else
      (void)d.cuMemFree_v2(s->ptr);
  } else if (s->release != nullptr) {
    s->release(s->release_ctx);
  }
  delete s;
}

void cb_destroy(void* ctx) noexcept {
  auto* be = static_cast<CudaBackend*>(ctx);
  (void)driver().cuDevicePrimaryCtxRelease_v2(be->device);
  delete be;
}

// ---- entry point bodies ------------------------------------------------

CudaBackend* cuda_backend_of(dlb_backend* backend) noexcept {
  const Backend* be = reinterpret_cast<const Backend*>(backend);
  if (be->vt.wait_ready != &cb_wait_ready) return nullptr;
  return static_cast<CudaBackend*>(be->ctx);
}

CudaStorage* cuda_storage_of(const dlb_buffer* b) noexcept {
  if (b->ops != &kBackendStorage || b->owner.store.backend->vt.wait_ready != &cb_wait_ready) return nullptr;
  return static_cast<CudaStorage*>(b->owner.store.storage);
}

dlb_status backend_create_impl(std::int32_t device_id, dlb_backend** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  const Driver& d = driver();
  if (!d.usable) return no_driver();
  int count = 0;
  CUresult rc = d.cuDeviceGetCount(&count);
  if (rc != kSuccess) return driver_error(device_id, "cuDeviceGetCount", rc);
  if (device_id < 0 || device_id >= count)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "CUDA device %d does not exist; the driver sees %d device%s",
                     static_cast<int>(device_id), count, count == 1 ? "" : "s");
  CUdevice dev = 0;
  rc = d.cuDeviceGet(&dev, device_id);
  if (rc != kSuccess) return driver_error(device_id, "cuDeviceGet", rc);
  CUcontext context = nullptr;
  rc = d.cuDevicePrimaryCtxRetain(&context, dev);
  if (rc != kSuccess) return driver_error(device_id, "cuDevicePrimaryCtxRetain", rc);
  auto* ctx = new (std::nothrow) CudaBackend;
  if (ctx == nullptr) {
    (void)d.cuDevicePrimaryCtxRelease_v2(dev);
    return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory creating the CUDA backend");
  }
  ctx->device_id = device_id;
  ctx->device = dev;
  ctx->context = context;
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  char name[32];
  std::snprintf(name, sizeof name, "cuda:%d", static_cast<int>(device_id));
  vt.name = name;
  vt.acquire_access = cb_acquire;
  vt.release_access = cb_release_access;
  vt.copy_to_host = cb_copy_to_host;
  vt.wait_ready = cb_wait_ready;
  vt.free_storage = cb_free_storage;
  vt.destroy = cb_destroy;
  const dlb_status s = backend_create(&vt, ctx, out);
  if (s != DLB_OK) {
    (void)d.cuDevicePrimaryCtxRelease_v2(dev);
    delete ctx;
  }
  return s;
}

bool cuda_type(std::int32_t t) noexcept { return t == kDLCUDA || t == kDLCUDAHost || t == kDLCUDAManaged; }

dlb_status check_device(const CudaBackend* be, DLDevice device, const char* what) noexcept {
  const std::int32_t t = device_type_of(device);
  if (!cuda_type(t))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                     "%s device %s:%d is not CUDA memory (kDLCUDA, kDLCUDAHost or kDLCUDAManaged)", what,
                     device_type_name(t), static_cast<int>(device.device_id));
  if (device.device_id != be->device_id)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%s device %s:%d is not the backend's device %d", what,
                     device_type_name(t), static_cast<int>(device.device_id), static_cast<int>(be->device_id));
  return DLB_OK;
}

dlb_status check_stream_value(std::int64_t stream) noexcept {
  if (stream < -1)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "stream %" PRId64 " is not a CUDA stream value (-1, 0 or 1, 2, or a CUstream handle)", stream);
  return DLB_OK;
}

// Fills the layout part of a storage from a checked view.
void set_layout(CudaStorage* s, const DLTensor& view, const LayoutInfo& info) {
  s->dtype = view.dtype;
  s->ndim = view.ndim;
  s->byte_offset = view.byte_offset;
  s->shape.assign(view.shape, view.shape + view.ndim);
  s->strides.resize(static_cast<std::size_t>(view.ndim));
  if (view.ndim > 0) {
    if (view.strides != nullptr)
      std::memcpy(s->strides.data(), view.strides, sizeof(std::int64_t) * static_cast<std::size_t>(view.ndim));
    else
      compact_strides(view.ndim, view.shape, s->strides.data());
  }
  s->info = info;
}

dlb_status buffer_alloc_impl(dlb_backend* backend, DLDevice device, DLDataType dtype, std::int32_t ndim,
                             const std::int64_t* shape, dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (!driver().usable) return no_driver();
  if (backend == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "backend is NULL");
  CudaBackend* be = cuda_backend_of(backend);
  if (be == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "backend is not a CUDA backend (make it with dlb_cuda_backend_create)");
  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.device = device;
  view.dtype = dtype;
  view.ndim = ndim;
  view.shape = const_cast<std::int64_t*>(shape);
  LayoutInfo info;
  DLB_TRY(check_layout(&view, Origin::argument, false, &info));
  DLB_TRY(check_device(be, device, "the requested"));

  const Driver& d = driver();
  const std::int32_t type = device_type_of(device);
  // Zero-size tensors get a small allocation too, so that `data` is a real
  // CUDA address of the right kind.
  const std::size_t bytes = info.nbytes > 0 ? static_cast<std::size_t>(info.nbytes) : 1;
  if (static_cast<std::uint64_t>(bytes) != (info.nbytes > 0 ? info.nbytes : 1))
    return set_error(DLB_ERR_OUT_OF_MEMORY, "cannot allocate %" PRIu64 " bytes", info.nbytes);
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return driver_error(be->device_id, "cuCtxPushCurrent_v2", scope.result());
  CUdeviceptr ptr = 0;
  CUresult rc = kSuccess;
  const char* call = "";
  if (type == kDLCUDAHost) {
    void* host = nullptr;
    call = "cuMemAllocHost_v2";
    rc = d.cuMemAllocHost_v2(&host, bytes);
    if (rc == kSuccess) {
      std::memset(host, 0, bytes);
      ptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(host));
    }
  } else {
    call = type == kDLCUDA ? "cuMemAlloc_v2" : "cuMemAllocManaged";
    rc = type == kDLCUDA ? d.cuMemAlloc_v2(&ptr, bytes) : d.cuMemAllocManaged(&ptr, bytes, kMemAttachGlobal);
    if (rc == kSuccess) {
      call = "cuMemsetD8Async";
      rc = d.cuMemsetD8Async(ptr, 0, bytes, legacy_stream());
      if (rc == kSuccess) {
        call = "cuStreamSynchronize";
        rc = d.cuStreamSynchronize(legacy_stream());
      }
      if (rc != kSuccess) (void)d.cuMemFree_v2(ptr);
    }
  }
  if (rc != kSuccess) return driver_error(be->device_id, call, rc);

  auto free_memory = [&] {
    if (type == kDLCUDAHost)
      (void)d.cuMemFreeHost(reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr)));
    else
      (void)d.cuMemFree_v2(ptr);
  };
  CudaStorage* s = nullptr;
  try {
    s = new CudaStorage;
    set_layout(s, view, info);
  } catch (...) {
    delete s;
    free_memory();
    throw;
  }
  s->ptr = ptr;
  s->device_type = type;
  s->owned = true;
  s->stream.store(1, std::memory_order_relaxed);
  const dlb_status st = buffer_from_backend(backend, s, &view, 0, out);
  if (st != DLB_OK) {
    delete s;
    free_memory();
  }
  return st;
}

dlb_status check_pointer(const CudaBackend* be, const DLTensor& view) noexcept {
  const Driver& d = driver();
  const std::int32_t type = device_type_of(view.device);
  const CUdeviceptr ptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(view.data));
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return driver_error(be->device_id, "cuCtxPushCurrent_v2", scope.result());
  unsigned memory_type = 0;
  CUresult rc = d.cuPointerGetAttribute(&memory_type, kPointerAttributeMemoryType, ptr);
  if (rc == kErrorInvalidValue)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                     "data %p is not memory the CUDA driver knows (cuPointerGetAttribute: CUDA_ERROR_INVALID_VALUE), "
                     "but the view says %s:%d",
                     view.data, device_type_name(type), static_cast<int>(view.device.device_id));
  if (rc != kSuccess) return driver_error(be->device_id, "cuPointerGetAttribute", rc);
  // "A boolean" of unstated width: zeroed wide storage reads right for any.
  unsigned long long managed = 0;
  rc = d.cuPointerGetAttribute(&managed, kPointerAttributeIsManaged, ptr);
  if (rc != kSuccess) return driver_error(be->device_id, "cuPointerGetAttribute", rc);
  const char* found = managed != 0 ? "managed memory"
                      : memory_type == kMemoryTypeHost ? "pinned host memory"
                      : memory_type == kMemoryTypeDevice || memory_type == kMemoryTypeUnified ? "device memory"
                                                                                                : "memory of an unknown kind";
  bool fits = false;
  if (type == kDLCUDAManaged) fits = managed != 0;
  if (type == kDLCUDAHost) fits = managed == 0 && memory_type == kMemoryTypeHost;
  if (type == kDLCUDA) fits = managed != 0 || memory_type == kMemoryTypeDevice || memory_type == kMemoryTypeUnified;
  if (!fits)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "data %p is %s, but the view says %s:%d", view.data, found,
                     device_type_name(type), static_cast<int>(view.device.device_id));
  if (type == kDLCUDA && managed == 0) {
    int ordinal = -1;
    rc = d.cuPointerGetAttribute(&ordinal, kPointerAttributeDeviceOrdinal, ptr);
    if (rc != kSuccess) return driver_error(be->device_id, "cuPointerGetAttribute", rc);
    if (ordinal != be->device_id)
      return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "data %p is device memory of CUDA device %d, but the view says cuda:%d",
                       view.data, ordinal, static_cast<int>(view.device.device_id));
  }
  return DLB_OK;
}

dlb_status wrap_common(dlb_backend* backend, const DLTensor* view, std::uint64_t flags, std::int64_t stream,
                       dlb_release_fn release, void* ctx, Origin origin, dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (!driver().usable) return no_driver();
  if (backend == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "backend is NULL");
  if (view == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "view is NULL");
  CudaBackend* be = cuda_backend_of(backend);
  if (be == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "backend is not a CUDA backend (make it with dlb_cuda_backend_create)");
  if ((flags & ~DLB_BUFFER_READ_ONLY) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "flags has bits 0x%" PRIx64 " that dlb_cuda_buffer_wrap does not take",
                     flags & ~DLB_BUFFER_READ_ONLY);
  DLB_TRY(check_stream_value(stream));
  LayoutInfo info;
  DLB_TRY(check_layout(view, origin, true, &info));
  DLB_TRY(check_device(be, view->device, "the view's"));
  if (view->data != nullptr) DLB_TRY(check_pointer(be, *view));

  auto* s = new CudaStorage;
  try {
    set_layout(s, *view, info);
  } catch (...) {
    delete s;
    throw;
  }
  s->ptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(view->data));
  s->device_type = device_type_of(view->device);
  s->owned = false;
  s->release = release;
  s->release_ctx = ctx;
  s->stream.store(stream, std::memory_order_relaxed);
  const dlb_status st = buffer_from_backend(backend, s, view, flags, out);
  if (st != DLB_OK) delete s;  // the caller keeps the memory: release is not called
  return st;
}

dlb_status buffer_wrap_impl(dlb_backend* backend, const DLTensor* view, std::uint64_t flags, std::int64_t stream,
                            dlb_release_fn release, void* ctx, dlb_buffer** out) {
  return wrap_common(backend, view, flags, stream, release, ctx, Origin::argument, out);
}

dlb_status default_backend(std::int32_t device_id, dlb_backend** out);
constexpr std::int32_t kDefaultBackends = 64;

void release_versioned(void* ctx) noexcept {
  auto* m = static_cast<DLManagedTensorVersioned*>(ctx);
  if (m->deleter != nullptr) m->deleter(m);
}

void release_legacy(void* ctx) noexcept {
  auto* m = static_cast<DLManagedTensor*>(ctx);
  if (m->deleter != nullptr) m->deleter(m);
}

// A managed tensor of CUDA memory in, as a buffer of `backend` (NULL: the
// library's backend of the tensor's device).
dlb_status import_common(dlb_backend* backend, const DLTensor& t, std::uint64_t flags, std::int64_t stream,
                         dlb_release_fn release, void* managed, dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (!driver().usable) return no_driver();
  if (backend != nullptr) return wrap_common(backend, &t, flags, stream, release, managed, Origin::incoming, out);
  if (!is_cuda_memory(t.device))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "the tensor is on %s:%d, not CUDA memory",
                     device_type_name(device_type_of(t.device)), static_cast<int>(t.device.device_id));
  dlb_backend* own = nullptr;
  DLB_TRY(default_backend(t.device.device_id, &own));
  const dlb_status s = wrap_common(own, &t, flags, stream, release, managed, Origin::incoming, out);
  if (t.device.device_id < 0 || t.device.device_id >= kDefaultBackends) dlb_backend_release(own);
  return s;
}

dlb_status import_versioned_impl(dlb_backend* backend, DLManagedTensorVersioned* m, std::int64_t stream,
                                 dlb_buffer** out) {
  if (m == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  if (m->version.major != 1)
    return set_error(DLB_ERR_VERSION, "tensor has DLPack major version %u; dlbridge reads major version 1",
                     static_cast<unsigned>(m->version.major));
  const std::uint64_t flags = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0 ? DLB_BUFFER_READ_ONLY : 0;
  return import_common(backend, m->dl_tensor, flags, stream, release_versioned, m, out);
}

dlb_status import_legacy_impl(dlb_backend* backend, DLManagedTensor* m, std::int64_t stream, dlb_buffer** out) {
  if (m == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  return import_common(backend, m->dl_tensor, 0, stream, release_legacy, m, out);
}

dlb_status set_stream_impl(dlb_buffer* buffer, std::int64_t stream) noexcept {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  CudaStorage* s = cuda_storage_of(buffer);
  if (s == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "the buffer is not CUDA memory of the built-in backend (dlb_cuda_buffer_alloc or "
                     "dlb_cuda_buffer_wrap)");
  DLB_TRY(check_stream_value(stream));
  s->stream.store(stream, std::memory_order_release);
  return DLB_OK;
}

dlb_status get_stream_impl(const dlb_buffer* buffer, std::int64_t* out) noexcept {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  const CudaStorage* s = cuda_storage_of(buffer);
  if (s == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "the buffer is not CUDA memory of the built-in backend (dlb_cuda_buffer_alloc or "
                     "dlb_cuda_buffer_wrap)");
  *out = s->stream.load(std::memory_order_acquire);
  return DLB_OK;
}

// The backends dlb_buffer_alloc() and the imports use, one per device
// ordinal below kDefaultBackends, made on first use and kept for the life of
// the process (each holds its device's primary context, as the CUDA runtime
// does). Other ordinals get a backend per call.

dlb_status default_backend(std::int32_t device_id, dlb_backend** out) {
  static std::mutex mutex;
  static dlb_backend* backends[kDefaultBackends] = {};
  if (device_id < 0 || device_id >= kDefaultBackends) return backend_create_impl(device_id, out);
  std::lock_guard<std::mutex> lock(mutex);
  if (backends[device_id] == nullptr) DLB_TRY(backend_create_impl(device_id, &backends[device_id]));
  *out = backends[device_id];
  return DLB_OK;
}

}  // namespace

dlb_status cuda_take_in(const DLTensor& t, std::uint64_t flags, std::int64_t stream, bool versioned, void* managed,
                        dlb_buffer** out) noexcept {
  // Called from inside the import, behind its entry point's firewall, but
  // from a noexcept function: its own firewall keeps allocation failures a
  // status.
  return firewall("the CUDA backend's import", [&] {
    return import_common(nullptr, t, flags, stream, versioned ? release_versioned : release_legacy, managed, out);
  });
}

dlb_status cuda_default_alloc(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                              dlb_buffer** out) {
  if (!driver().usable)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "dlb_buffer_alloc cannot allocate %s:%d memory: %s",
                     device_type_name(device_type_of(device)), static_cast<int>(device.device_id), driver().why);
  dlb_backend* backend = nullptr;
  DLB_TRY(default_backend(device.device_id, &backend));
  const dlb_status s = buffer_alloc_impl(backend, device, dtype, ndim, shape, out);
  if (device.device_id < 0 || device.device_id >= kDefaultBackends) dlb_backend_release(backend);
  return s;
}

}  // namespace dlb

extern "C" {

DLB_API dlb_status dlb_cuda_backend_create(int32_t device_id, dlb_backend** out) {
  return dlb::firewall(__func__, [&] { return dlb::backend_create_impl(device_id, out); });
}

DLB_API dlb_status dlb_cuda_buffer_alloc(dlb_backend* backend, DLDevice device, DLDataType dtype, int32_t ndim,
                                         const int64_t* shape, dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::buffer_alloc_impl(backend, device, dtype, ndim, shape, out); });
}

DLB_API dlb_status dlb_cuda_buffer_wrap(dlb_backend* backend, const DLTensor* view, uint64_t flags, int64_t stream,
                                        dlb_release_fn release, void* ctx, dlb_buffer** out) {
  return dlb::firewall(__func__,
                       [&] { return dlb::buffer_wrap_impl(backend, view, flags, stream, release, ctx, out); });
}

DLB_API dlb_status dlb_cuda_import_versioned(dlb_backend* backend, DLManagedTensorVersioned* tensor, int64_t stream,
                                            dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::import_versioned_impl(backend, tensor, stream, out); });
}

DLB_API dlb_status dlb_cuda_import_legacy(dlb_backend* backend, DLManagedTensor* tensor, int64_t stream,
                                         dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::import_legacy_impl(backend, tensor, stream, out); });
}

DLB_API dlb_status dlb_cuda_buffer_set_stream(dlb_buffer* buffer, int64_t stream) {
  return dlb::firewall(__func__, [&] { return dlb::set_stream_impl(buffer, stream); });
}

DLB_API dlb_status dlb_cuda_buffer_stream(const dlb_buffer* buffer, int64_t* out) {
  return dlb::firewall(__func__, [&] { return dlb::get_stream_impl(buffer, out); });
}

}  // extern "C"
