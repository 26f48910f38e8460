// The dtype and device model shared by every part of the library.
#ifndef DLBRIDGE_SRC_DTYPE_HPP_
#define DLBRIDGE_SRC_DTYPE_HPP_

#include <dlbridge/dlbridge.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dlb {

// DLB_OK or DLB_ERR_UNSUPPORTED_DTYPE with a message naming the fault.
dlb_status check_dtype(DLDataType dtype) noexcept;

// dlb_dtype_name / dlb_dtype_from_name bodies.
dlb_status format_dtype_name(DLDataType dtype, char* out, std::size_t out_size) noexcept;
dlb_status parse_dtype_name(const char* name, DLDataType* out) noexcept;

// Bits per element (bits * lanes).
inline std::uint64_t element_bits(DLDataType dtype) noexcept {
  return static_cast<std::uint64_t>(dtype.bits) * dtype.lanes;
}
// True when whole elements start on byte boundaries.
inline bool byte_addressable(DLDataType dtype) noexcept { return element_bits(dtype) % 8 == 0; }

// The device type as a plain integer. DLDeviceType is an enum whose range,
// in the 0.6 header, ends at 15: reading 17 (MAIA) or a producer's garbage
// through the enum type is undefined in C++, so it is copied out as bytes.
inline std::int32_t device_type_of(const DLDevice& d) noexcept {
  std::int32_t v;
  std::memcpy(&v, &d, sizeof v);
  return v;
}

// Writes a device type given as a plain integer, for the same reason.
inline void set_device_type(DLDevice& d, std::int32_t type) noexcept { std::memcpy(&d, &type, sizeof type); }

// Device types DLPack defines (1.3 and main).
bool device_type_known(std::int32_t device_type) noexcept;
// Memory the host CPU reads directly: CPU, CUDAHost, ROCMHost.
bool device_is_host_readable(std::int32_t device_type) noexcept;
// Short lowercase name ("cpu", "cuda", ...), for messages.
const char* device_type_name(std::int32_t device_type) noexcept;

}  // namespace dlb

#endif
