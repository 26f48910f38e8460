// What the rest of the library asks of the CUDA backend.
#ifndef DLBRIDGE_SRC_CUDA_CUDA_BACKEND_HPP_
#define DLBRIDGE_SRC_CUDA_CUDA_BACKEND_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

#include "../dtype.hpp"

namespace dlb {

// Memory the CUDA backend allocates: kDLCUDA, kDLCUDAHost, kDLCUDAManaged.
inline bool is_cuda_memory(DLDevice device) noexcept {
  const std::int32_t t = device_type_of(device);
  return t == kDLCUDA || t == kDLCUDAHost || t == kDLCUDAManaged;
}

// dlb_buffer_alloc() of CUDA memory: dlb_cuda_buffer_alloc() on a backend
// of the device kept for the life of the process (created on first use).
// The layout is checked by the caller. Without CUDA (no driver, or built
// without it) DLB_ERR_UNSUPPORTED_DEVICE naming the device.
dlb_status cuda_default_alloc(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                              dlb_buffer** out);

}  // namespace dlb

#endif
