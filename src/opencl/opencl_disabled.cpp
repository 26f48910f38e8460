// The OpenCL entry points of a library built without OpenCL support
// (-Dopencl=disabled): each one refuses with DLB_ERR_UNSUPPORTED_DEVICE,
// and so does the backend's entry in the table of device backends.
#include <dlbridge/dlbridge.h>

#include "core/device.hpp"
#include "core/errors.hpp"
#include "opencl_backend.hpp"

namespace {

dlb_status refuse(const char* function) noexcept {
  return dlb::set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                        "%s: this dlbridge was built without OpenCL support (meson option -Dopencl=disabled); "
                        "rebuild with -Dopencl=enabled to use OpenCL memory",
                        function);
}

// An entry point's body behind the firewall, as every entry point's is.
dlb_status refused(const char* function) noexcept {
  return dlb::firewall(function, [&] { return refuse(function); });
}

}  // namespace

dlb_status dlb::opencl_default_alloc(DLDevice device, DLDataType, std::int32_t, const std::int64_t*, dlb_buffer**) {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                   "dlb_buffer_alloc cannot allocate opencl:%d memory: this dlbridge was built without OpenCL support "
                   "(meson option -Dopencl=disabled)",
                   static_cast<int>(device.device_id));
}

dlb_status dlb::opencl_take_in(const DLTensor& t, std::uint64_t, std::int64_t, bool, void*, dlb_buffer**) noexcept {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                   "opencl:%d memory cannot go to the OpenCL backend: this dlbridge was built without OpenCL support",
                   static_cast<int>(t.device.device_id));
}

dlb_status dlb::opencl_copy_from_host(dlb_buffer*, const DLTensor&) noexcept {
  return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "this dlbridge was built without OpenCL support");
}

extern "C" {

DLB_API dlb_status dlb_opencl_device_count(int32_t*) { return refused(__func__); }

DLB_API dlb_status dlb_opencl_device_index(void*, int32_t*) { return refused(__func__); }

DLB_API dlb_status dlb_opencl_queue_device_index(void*, int32_t*) { return refused(__func__); }

DLB_API dlb_status dlb_opencl_backend_create(int32_t, dlb_backend**) { return refused(__func__); }

DLB_API dlb_status dlb_opencl_backend_from_queue(void*, void*, dlb_backend**) { return refused(__func__); }

DLB_API dlb_status dlb_opencl_backend_queue(const dlb_backend*, void**, void**) { return refused(__func__); }

DLB_API dlb_status dlb_opencl_buffer_alloc(dlb_backend*, DLDataType, int32_t, const int64_t*, dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_opencl_buffer_wrap(dlb_backend*, const DLTensor*, uint64_t, void*, dlb_release_fn, void*,
                                          dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_opencl_import_versioned(dlb_backend*, DLManagedTensorVersioned*, int64_t, dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_opencl_import_legacy(dlb_backend*, DLManagedTensor*, int64_t, dlb_buffer**) {
  return refused(__func__);
}

DLB_API dlb_status dlb_opencl_buffer_set_event(dlb_buffer*, void*) { return refused(__func__); }

}  // extern "C"
