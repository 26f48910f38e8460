// The storage table of CUDA buffers: stream-ordered readiness, zero-copy
// access to the device address, the copy to the host, and freeing.
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/alloc.hpp"
#include "core/buffer.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "cuda_internal.hpp"

namespace dlb {
namespace cuda {
namespace {

dlb_status acquire_access(dlb_buffer* b, void** data, void** ref) noexcept {
  *data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(cuda_storage_of(b)->ptr));
  *ref = nullptr;
  return DLB_OK;
}

void release_access(dlb_buffer*, void*) noexcept {}

// A failure of the strided copy engine, as the verb's failure.
dlb_status engine_error(const dlb_buffer* b, dlb_status) noexcept {
  char text[256];
  std::snprintf(text, sizeof text, "%s", last_error_message());
  return verb_error_text(b, "copy_to_host", text);
}

dlb_status wait_ready(dlb_buffer* b, std::int64_t consumer) noexcept {
  const CudaBackend* be = cuda_backend_of(b);
  const CudaStorage* s = cuda_storage_of(b);
  const std::int64_t writer = s->stream.load(std::memory_order_acquire);
  // The consumer's stream passed the protocol's rule in the export planner
  // (streams.hpp): -1, DLB_STREAM_NONE, 1, 2 or a handle.
  if (consumer == -1 || writer == -1) return DLB_OK;
  const Driver& d = driver();
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return verb_error(b, "wait_ready", "cuCtxPushCurrent_v2", scope.result());
  if (consumer == DLB_STREAM_NONE) {
    const CUresult rc = d.cuStreamSynchronize(as_stream(writer));
    return rc == kSuccess ? DLB_OK : verb_error(b, "wait_ready", "cuStreamSynchronize", rc);
  }
  if (as_stream(consumer) == as_stream(writer)) return DLB_OK;  // the same stream is ordered already
  CUevent event = nullptr;
  CUresult rc = d.cuEventCreate(&event, kEventDisableTiming);
  if (rc != kSuccess) return verb_error(b, "wait_ready", "cuEventCreate", rc);
  rc = d.cuEventRecord(event, as_stream(writer));
  if (rc == kSuccess) {
    rc = d.cuStreamWaitEvent(as_stream(consumer), event, 0);
    if (rc != kSuccess) {
      (void)d.cuEventDestroy_v2(event);
      return verb_error(b, "wait_ready", "cuStreamWaitEvent", rc);
    }
  } else {
    (void)d.cuEventDestroy_v2(event);
    return verb_error(b, "wait_ready", "cuEventRecord", rc);
  }
  // Destroying an event others wait on is allowed: the wait keeps its state.
  rc = d.cuEventDestroy_v2(event);
  return rc == kSuccess ? DLB_OK : verb_error(b, "wait_ready", "cuEventDestroy_v2", rc);
}

// The whole storage into `dst`, compact row-major, after the writer's work.
dlb_status copy_storage(dlb_buffer* b, void* dst) noexcept {
  const CudaBackend* be = cuda_backend_of(b);
  const CudaStorage* s = cuda_storage_of(b);
  if (s->info.nbytes == 0) return DLB_OK;
  const Driver& d = driver();
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return verb_error(b, "copy_to_host", "cuCtxPushCurrent_v2", scope.result());
  const std::int64_t writer = s->stream.load(std::memory_order_acquire);
  const CUstream stream = as_stream(writer == -1 ? 1 : writer);

  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.device = DLDevice{kDLCPU, 0};
  view.dtype = s->dtype;
  view.ndim = s->ndim;
  view.shape = const_cast<std::int64_t*>(s->shape.data());
  view.strides = s->ndim > 0 ? const_cast<std::int64_t*>(s->strides.data()) : nullptr;

  if (device_is_host_readable(s->device_type)) {
    // Host-readable: wait for the writer, then read it in place.
    if (writer != -1) {
      const CUresult rc = d.cuStreamSynchronize(stream);
      if (rc != kSuccess) return verb_error(b, "copy_to_host", "cuStreamSynchronize", rc);
    }
    view.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(s->ptr));
    view.byte_offset = s->byte_offset;
    const dlb_status st = copy_view_to_contiguous(view, s->info, dst);
    return st == DLB_OK ? DLB_OK : engine_error(b, st);
  }

  const CUdeviceptr origin = s->ptr + s->byte_offset;
  if (s->info.contiguous) {
    // One device-to-host copy on the writer's stream, then wait for it.
    CUresult rc = d.cuMemcpyDtoHAsync_v2(dst, origin, static_cast<std::size_t>(s->info.nbytes), stream);
    if (rc != kSuccess) return verb_error(b, "copy_to_host", "cuMemcpyDtoHAsync_v2", rc);
    rc = d.cuStreamSynchronize(stream);
    return rc == kSuccess ? DLB_OK : verb_error(b, "copy_to_host", "cuStreamSynchronize", rc);
  }
  if (!byte_addressable(s->dtype)) {
    return verb_error_text(b, "copy_to_host",
                           "a strided view of a sub-byte dtype cannot be copied: its elements do not start on bytes");
  }
  // Strided: the span the view touches, compact, into staging memory; then
  // the strided engine makes it compact row-major.
  const std::uint64_t elem = element_bits(s->dtype) / 8;
  const std::uint64_t below = static_cast<std::uint64_t>(-s->info.min_offset) * elem;
  const std::uint64_t span = static_cast<std::uint64_t>(s->info.max_offset - s->info.min_offset + 1) * elem;
  void* staging = mem_alloc_aligned(64, static_cast<std::size_t>(span));
  if (staging == nullptr) {
    return verb_error_text(b, "copy_to_host", "out of memory allocating host staging memory for a strided copy");
  }
  const char* call = "cuMemcpyDtoHAsync_v2";
  CUresult rc = d.cuMemcpyDtoHAsync_v2(staging, origin - below, static_cast<std::size_t>(span), stream);
  if (rc == kSuccess) {
    call = "cuStreamSynchronize";
    rc = d.cuStreamSynchronize(stream);
  }
  if (rc != kSuccess) {
    mem_free_aligned(staging);
    return verb_error(b, "copy_to_host", call, rc);
  }
  view.data = staging;
  view.byte_offset = below;
  const dlb_status st = copy_view_to_contiguous(view, s->info, dst);
  mem_free_aligned(staging);
  return st == DLB_OK ? DLB_OK : engine_error(b, st);
}

void free_storage(dlb_buffer* b) noexcept {
  const CudaBackend* be = cuda_backend_of(b);
  CudaStorage* s = cuda_storage_of(b);
  if (s->ipc_event != nullptr) {
    ContextScope scope(be->context);
    (void)driver().cuEventDestroy_v2(s->ipc_event);
  }
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
  backend_release(b->owner.store.backend);
}

// The whole storage into `dst`, compact row-major, ordered after the
// consumer's stream wait as every storage's copy is.
dlb_status copy_to_host(dlb_buffer* b, void* dst, std::int64_t stream) noexcept {
  DLB_TRY(wait_ready(b, stream));
  return copy_storage(b, dst);
}

}  // namespace

const StorageOps kCudaStorage = {StorageKind::device, "cuda",      false,         nullptr,     wait_ready,
                                 acquire_access,    release_access, copy_to_host, free_storage};

void destroy_backend(void* ctx) noexcept {
  auto* be = static_cast<CudaBackend*>(ctx);
  (void)driver().cuDevicePrimaryCtxRelease_v2(be->device);
  delete be;
}

}  // namespace cuda
}  // namespace dlb
