// CUDA IPC for dlb_buffer_share() and dlb_buffer_open_shared() (share.h):
// the producer's side names the allocation with cuIpcGetMemHandle() and
// orders the receiver after its last write with an interprocess event; the
// receiver opens both and wraps the memory as a CUDA buffer whose release
// closes the handle. The description's format is in share_format.hpp.
#include <cinttypes>
#include <cstring>
#include <mutex>
#include <new>

#include "core/buffer.hpp"
#include "core/errors.hpp"
#include "share/share_format.hpp"
#include "cuda_backend.hpp"
#include "cuda_internal.hpp"

namespace dlb {
namespace {

using namespace cuda;

// What the release of an opened buffer closes.
struct Opened {
  CUdeviceptr base;
  CUcontext context;
};

void close_opened(void* ctx) noexcept {
  auto* o = static_cast<Opened*>(ctx);
  {
    ContextScope scope(o->context);
    // Nobody to report a failure to; the mapping is then left to the driver.
    (void)driver().cuIpcCloseMemHandle(o->base);
  }
  delete o;
}

void close_handle(CUcontext context, CUdeviceptr base) noexcept {
  ContextScope scope(context);
  (void)driver().cuIpcCloseMemHandle(base);
}

dlb_status share_impl(dlb_buffer* b, bool read_only, dlb_share_descriptor* out) {
  CudaStorage* s = cuda_storage_of(b);
  const CudaBackend* be = cuda_backend_of(b);
  const Driver& d = driver();
  DLTensor t;
  DLB_TRY(dlb_buffer_dltensor(b, &t));
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return driver_error(be->device_id, "cuCtxPushCurrent_v2", scope.result());
  const CUdeviceptr data = s->ptr + t.byte_offset;  // dltensor gives no address for backend memory
  CUdeviceptr base = 0;
  std::size_t size = 0;
  CUresult rc = d.cuMemGetAddressRange_v2(&base, &size, data);
  if (rc != kSuccess) return driver_error(be->device_id, "cuMemGetAddressRange_v2", rc);
  CUipcMemHandle mem;
  rc = d.cuIpcGetMemHandle(&mem, base);
  if (rc != kSuccess) return driver_error(be->device_id, "cuIpcGetMemHandle", rc);
  CUipcEventHandle event;
  {
    std::lock_guard<std::mutex> lock(s->ipc_mutex);
    if (s->ipc_event == nullptr) {
      CUevent e = nullptr;
      rc = d.cuEventCreate(&e, kEventInterprocess | kEventDisableTiming);
      if (rc != kSuccess) return driver_error(be->device_id, "cuEventCreate", rc);
      s->ipc_event = e;
    }
    // Recorded again for every share: the newest record follows the
    // buffer's latest write.
    const std::int64_t writer = s->stream.load(std::memory_order_acquire);
    rc = d.cuEventRecord(s->ipc_event, as_stream(writer == -1 ? 1 : writer));
    if (rc != kSuccess) return driver_error(be->device_id, "cuEventRecord", rc);
    rc = d.cuIpcGetEventHandle(&event, s->ipc_event);
    if (rc != kSuccess) return driver_error(be->device_id, "cuIpcGetEventHandle", rc);
  }
  DLTensor view = t;
  view.byte_offset = data - base;
  out->fd = -1;
  out->size = static_cast<std::uint32_t>(share::write_cuda_description(
      view, size, read_only ? share::kDescReadOnly : 0, reinterpret_cast<const unsigned char*>(mem.reserved),
      reinterpret_cast<const unsigned char*>(event.reserved), out->description));
  return DLB_OK;
}

dlb_status open_on(dlb_backend* backend, const share::Description& desc, bool read_only, dlb_buffer** out) {
  const CudaBackend* be = static_cast<const CudaBackend*>(reinterpret_cast<const Backend*>(backend)->ctx);
  const Driver& d = driver();
  ContextScope scope(be->context);
  if (scope.result() != kSuccess) return driver_error(be->device_id, "cuCtxPushCurrent_v2", scope.result());
  CUipcMemHandle mem;
  std::memcpy(mem.reserved, desc.mem_handle, sizeof mem.reserved);
  CUdeviceptr base = 0;
  CUresult rc = d.cuIpcOpenMemHandle_v2(&base, mem, kIpcMemLazyEnablePeerAccess);
  if (rc == kErrorInvalidContext)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "cuda:%d: cuIpcOpenMemHandle_v2 failed with CUDA_ERROR_INVALID_CONTEXT: a CUDA IPC handle "
                     "cannot be opened in the process that made it (use the buffer itself there)",
                     static_cast<int>(be->device_id));
  if (rc != kSuccess) return driver_error(be->device_id, "cuIpcOpenMemHandle_v2", rc);
  CUdeviceptr range_base = 0;
  std::size_t range = 0;
  rc = d.cuMemGetAddressRange_v2(&range_base, &range, base);
  if (rc != kSuccess) {
    close_handle(be->context, base);
    return driver_error(be->device_id, "cuMemGetAddressRange_v2", rc);
  }
  // The driver may round an opened range up to its mapping granularity;
  // what matters is that every byte the layout reaches is inside it.
  if (range_base != base || static_cast<std::uint64_t>(range) < desc.file_size) {
    close_handle(be->context, base);
    return set_error(DLB_ERR_MALFORMED,
                     "the CUDA IPC description says the allocation has %" PRIu64 " bytes; the one its handle opens "
                     "has %zu from its base",
                     desc.file_size, range);
  }
  CUipcEventHandle event_handle;
  std::memcpy(event_handle.reserved, desc.event_handle, sizeof event_handle.reserved);
  CUevent event = nullptr;
  rc = d.cuIpcOpenEventHandle(&event, event_handle);
  if (rc != kSuccess) {
    close_handle(be->context, base);
    return driver_error(be->device_id, "cuIpcOpenEventHandle", rc);
  }
  // The legacy default stream, the opened buffer's stream, waits for the
  // producer's last write.
  rc = d.cuStreamWaitEvent(legacy_stream(), event, 0);
  (void)d.cuEventDestroy_v2(event);  // the wait keeps what it needs
  if (rc != kSuccess) {
    close_handle(be->context, base);
    return driver_error(be->device_id, "cuStreamWaitEvent", rc);
  }
  auto* opened = new (std::nothrow) Opened{base, be->context};
  if (opened == nullptr) {
    close_handle(be->context, base);
    return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory opening a CUDA IPC handle");
  }
  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(base));
  view.device = desc.device;
  view.dtype = desc.dtype;
  view.ndim = desc.ndim;
  view.shape = const_cast<std::int64_t*>(desc.shape);
  view.strides = const_cast<std::int64_t*>(desc.strides);
  view.byte_offset = desc.byte_offset;
  const dlb_status s =
      dlb_cuda_buffer_wrap(backend, &view, read_only ? DLB_BUFFER_READ_ONLY : 0, 1, close_opened, opened, out);
  if (s != DLB_OK) {
    delete opened;
    close_handle(be->context, base);
  }
  return s;
}

}  // namespace

bool cuda_ipc_shareable(const dlb_buffer* b) noexcept {
  return b->ops == &cuda::kCudaStorage && cuda_storage_of(b)->device_type == kDLCUDA;
}

dlb_status cuda_ipc_share(dlb_buffer* b, bool read_only, dlb_share_descriptor* out) noexcept {
  return firewall("the CUDA backend's share", [&] { return share_impl(b, read_only, out); });
}

dlb_status cuda_ipc_open(const share::Description& d, bool read_only, dlb_buffer** out) noexcept {
  return firewall("the CUDA backend's open", [&] {
    if (!driver().usable)
      return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "a CUDA IPC description cannot be opened: %s", driver().why);
    dlb_backend* backend = nullptr;
    bool kept = false;
    DLB_TRY(cuda_device_backend(d.device.device_id, &backend, &kept));
    const dlb_status s = open_on(backend, d, read_only, out);
    if (!kept) dlb_backend_release(backend);
    return s;
  });
}

}  // namespace dlb
