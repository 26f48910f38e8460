// What the rest of the library asks of the OpenCL backend: its entry in the
// table of built-in device backends.
#ifndef DLBRIDGE_SRC_OPENCL_OPENCL_BACKEND_HPP_
#define DLBRIDGE_SRC_OPENCL_OPENCL_BACKEND_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

#include "core/device_backend.hpp"

namespace dlb {

// dlb_buffer_alloc() of kDLOpenCL memory: dlb_opencl_buffer_alloc() on the
// library's backend of the device (one kept per device index below 64,
// made on first use). The layout is checked by the caller. Without a
// usable ICD loader, or built without OpenCL, DLB_ERR_UNSUPPORTED_DEVICE
// naming the device and the reason.
dlb_status opencl_default_alloc(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                                dlb_buffer** out);

// A managed tensor's DLTensor `t` in, as dlb_opencl_import_*(NULL, ...):
// on success the buffer owns the managed tensor (`versioned` says which
// struct `managed` is). DLB_ERR_UNSUPPORTED_DEVICE when the backend cannot
// take it (no loader, built without OpenCL); the caller then still owns the
// tensor. `flags` is 0 or DLB_BUFFER_READ_ONLY.
dlb_status opencl_take_in(const DLTensor& t, std::uint64_t flags, std::int64_t stream, bool versioned, void* managed,
                          dlb_buffer** out) noexcept;

// Host elements laid out as `src` says into `dst`, a compact buffer of this
// backend: one blocking write ordered after the buffer's last writer.
dlb_status opencl_copy_from_host(dlb_buffer* dst, const DLTensor& src) noexcept;

// The OpenCL backend's entry in the table of built-in device backends
// (core/device_backend.hpp, listed in src/device_backends.cpp): the
// functions above, whichever file of this folder the build compiles
// (opencl_backend.cpp and opencl_storage.cpp, or opencl_disabled.cpp,
// whose versions refuse).
inline constexpr DeviceBackend kOpenclDeviceBackend = {
    "OpenCL", {kDLOpenCL, 0, 0, 0}, 0, opencl_default_alloc, opencl_take_in, opencl_copy_from_host};

}  // namespace dlb

#endif
