// The built-in CUDA backend's entry points: backends of a device, buffers
// allocated or wrapped on them, CUDA memory taken in from other producers,
// and the stream of a buffer's last writer. The driver is loaded in
// cuda_driver.cpp, the storages' verbs are in cuda_storage.cpp; nothing
// links to CUDA.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include "core/backend.hpp"
#include "core/buffer.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "core/import.hpp"
#include "core/layout.hpp"
#include "cuda_backend.hpp"
#include "cuda_internal.hpp"

namespace dlb {
namespace {

using namespace cuda;

// The CUDA backend behind a handle, or nullptr for another kind of backend.
CudaBackend* cuda_backend_of(dlb_backend* backend) noexcept {
  const Backend* be = reinterpret_cast<const Backend*>(backend);
  if (be->ops != &kCudaStorage) return nullptr;
  return static_cast<CudaBackend*>(be->ctx);
}

// The storage of a CUDA buffer, or nullptr for a buffer of another kind.
CudaStorage* cuda_storage_if(const dlb_buffer* b) noexcept {
  return b->ops == &kCudaStorage ? cuda_storage_of(b) : nullptr;
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
  char name[32];
  std::snprintf(name, sizeof name, "cuda:%d", static_cast<int>(device_id));
  const dlb_status s = backend_create_builtin(kCudaStorage, name, ctx, destroy_backend, out);
  if (s != DLB_OK) {
    (void)d.cuDevicePrimaryCtxRelease_v2(dev);
    delete ctx;
  }
  return s;
}

dlb_status check_device(const CudaBackend* be, DLDevice device, const char* what) noexcept {
  const std::int32_t t = device_type_of(device);
  if (!is_cuda_memory(device))
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
  const dlb_status st = buffer_from_backend(backend, s, &view, 0, StorageKind::device, out);
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
  const dlb_status st = buffer_from_backend(backend, s, view, flags, StorageKind::device, out);
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
  std::uint64_t flags = 0;
  DLB_TRY(device_import_flags(*m, kCudaDeviceBackend.name, &flags));
  return import_common(backend, m->dl_tensor, flags, stream, release_versioned, m, out);
}

dlb_status import_legacy_impl(dlb_backend* backend, DLManagedTensor* m, std::int64_t stream, dlb_buffer** out) {
  if (m == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  return import_common(backend, m->dl_tensor, 0, stream, release_legacy, m, out);
}

dlb_status set_stream_impl(dlb_buffer* buffer, std::int64_t stream) noexcept {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  CudaStorage* s = cuda_storage_if(buffer);
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
  const CudaStorage* s = cuda_storage_if(buffer);
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

dlb_status cuda_device_backend(std::int32_t device_id, dlb_backend** out, bool* kept) {
  *kept = device_id >= 0 && device_id < kDefaultBackends;
  return default_backend(device_id, out);
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
