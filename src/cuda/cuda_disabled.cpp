// The CUDA entry points of a library built without CUDA support
// (-Dcuda=disabled): each one refuses with DLB_ERR_UNSUPPORTED_DEVICE.
#include <dlbridge/dlbridge.h>

#include "core/errors.hpp"
#include "cuda_backend.hpp"

namespace {

dlb_status refuse(const char* function) noexcept {
  return dlb::set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                        "%s: this dlbridge was built without CUDA support (meson option -Dcuda=disabled); rebuild "
                        "with -Dcuda=enabled to use CUDA memory",
                        function);
}

// An entry point's body behind the firewall, as every entry point's is.
dlb_status refused(const char* function) noexcept {
  return dlb::firewall(function, [&] { return refuse(function); });
}

}  // namespace

dlb_status dlb::cuda_default_alloc(DLDevice device, DLDataType, std::int32_t, const std::int64_t*, dlb_buffer**) {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                   "dlb_buffer_alloc cannot allocate %s:%d memory: this dlbridge was built without CUDA support "
                   "(meson option -Dcuda=disabled)",
                   device_type_name(device_type_of(device)), static_cast<int>(device.device_id));
}

dlb_status dlb::cuda_take_in(const DLTensor& t, std::uint64_t, std::int64_t, bool, void*, dlb_buffer**) noexcept {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                   "%s:%d memory cannot go to the CUDA backend: this dlbridge was built without CUDA support",
                   device_type_name(device_type_of(t.device)), static_cast<int>(t.device.device_id));
}

dlb_status dlb::cuda_device_backend(std::int32_t device_id, dlb_backend**, bool*) {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "CUDA device %d: this dlbridge was built without CUDA support",
                   static_cast<int>(device_id));
}

bool dlb::cuda_ipc_shareable(const dlb_buffer*) noexcept { return false; }

dlb_status dlb::cuda_ipc_share(dlb_buffer*, bool, dlb_share_descriptor*) noexcept {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "CUDA IPC: this dlbridge was built without CUDA support");
}

dlb_status dlb::cuda_ipc_open(const share::Description&, bool, dlb_buffer**) noexcept {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                   "a CUDA IPC description cannot be opened: this dlbridge was built without CUDA support "
                   "(meson option -Dcuda=disabled)");
}

extern "C" {

DLB_API dlb_status dlb_cuda_backend_create(int32_t, dlb_backend**) { return refused(__func__); }

DLB_API dlb_status dlb_cuda_buffer_alloc(dlb_backend*, DLDevice, DLDataType, int32_t, const int64_t*, dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_cuda_buffer_wrap(dlb_backend*, const DLTensor*, uint64_t, int64_t, dlb_release_fn, void*,
                                        dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_cuda_import_versioned(dlb_backend*, DLManagedTensorVersioned*, int64_t, dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_cuda_import_legacy(dlb_backend*, DLManagedTensor*, int64_t, dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_cuda_buffer_set_stream(dlb_buffer*, int64_t) { return refused(__func__); }

DLB_API dlb_status dlb_cuda_buffer_stream(const dlb_buffer*, int64_t*) { return refused(__func__); }

}  // extern "C"
