// What the rest of the library asks of the CUDA backend.
#ifndef DLBRIDGE_SRC_CUDA_CUDA_BACKEND_HPP_
#define DLBRIDGE_SRC_CUDA_CUDA_BACKEND_HPP_

#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <cstdint>

#include "core/device.hpp"
#include "core/device_backend.hpp"

namespace dlb {

// Memory the CUDA backend allocates and takes in: the device types its
// registry entry lists (kCudaDeviceBackend below).
inline bool is_cuda_memory(DLDevice device) noexcept {
  const std::int32_t t = device_type_of(device);
  return t == kDLCUDA || t == kDLCUDAHost || t == kDLCUDAManaged;
}

// A managed tensor's DLTensor `t` in through the library's CUDA backend of
// its device (dlb_cuda_import_* with a NULL backend): on success the buffer
// owns the managed tensor (`versioned` says which struct `managed` is) and
// calls its deleter once at the end. DLB_ERR_UNSUPPORTED_DEVICE when the
// backend does not take it (no driver, built without CUDA, no such device,
// memory the driver does not know as that kind); the caller then still owns
// the tensor. `flags` is 0 or DLB_BUFFER_READ_ONLY.
dlb_status cuda_take_in(const DLTensor& t, std::uint64_t flags, std::int64_t stream, bool versioned, void* managed,
                        dlb_buffer** out) noexcept;

// dlb_buffer_alloc() of CUDA memory: dlb_cuda_buffer_alloc() on a backend
// of the device kept for the life of the process (created on first use).
// The layout is checked by the caller. Without CUDA (no driver, or built
// without it) DLB_ERR_UNSUPPORTED_DEVICE naming the device.
dlb_status cuda_default_alloc(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                              dlb_buffer** out);

// The CUDA backend's entry in the table of built-in device backends
// (core/device_backend.hpp, listed in src/device_backends.cpp): the two
// functions above, whichever file of this folder the build compiles
// (cuda_backend.cpp, or cuda_disabled.cpp, whose versions refuse). Its
// types carry DLB_DEVICE_CUDA_BACKEND in either build.
inline constexpr DeviceBackend kCudaDeviceBackend = {
    "CUDA", {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, 0}, DLB_DEVICE_CUDA_BACKEND, cuda_default_alloc, cuda_take_in,
    nullptr};

// The library's backend of CUDA device `device_id` (one kept per ordinal
// below 64, made on first use; `*kept` false when the caller must release
// the one it got).
dlb_status cuda_device_backend(std::int32_t device_id, dlb_backend** out, bool* kept);

namespace share {
struct Description;
}

// Device memory of the built-in CUDA backend, which dlb_buffer_share()
// shares through CUDA IPC.
bool cuda_ipc_shareable(const dlb_buffer* b) noexcept;

// The CUDA IPC description of such a buffer into `out` (fd -1): the
// allocation's memory handle and an interprocess event recorded on the
// buffer's stream.
dlb_status cuda_ipc_share(dlb_buffer* b, bool read_only, dlb_share_descriptor* out) noexcept;

// Opens a checked CUDA IPC description as a CUDA buffer whose release
// closes the memory handle.
dlb_status cuda_ipc_open(const share::Description& d, bool read_only, dlb_buffer** out) noexcept;

}  // namespace dlb

#endif
