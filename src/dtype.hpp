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

// The device table: one entry per device type DLPack defines (1.3 and
// main), with its name and DLB_DEVICE_* bits. Every device question the
// library, and through dlb_device_type_info() every binding, asks is
// answered from it. nullptr for a type DLPack does not define.
struct DeviceTypeInfo {
  const char* name;     // short lowercase name ("cpu", "cuda", ...)
  std::uint32_t flags;  // DLB_DEVICE_* bits, DLB_DEVICE_KNOWN always set
};
const DeviceTypeInfo* device_type_info(std::int32_t device_type) noexcept;

// Thin readers of that table.
inline std::uint32_t device_flags(std::int32_t device_type) noexcept {
  const DeviceTypeInfo* d = device_type_info(device_type);
  return d == nullptr ? 0u : d->flags;
}
// Device types DLPack defines.
inline bool device_type_known(std::int32_t device_type) noexcept { return device_flags(device_type) != 0; }
// Memory the host CPU reads directly: CPU, CUDAHost, CUDAManaged, ROCMHost.
inline bool device_is_host_readable(std::int32_t device_type) noexcept {
  return (device_flags(device_type) & DLB_DEVICE_HOST_READABLE) != 0;
}
// `data` is an address (byte_offset can be folded into it), not an opaque handle.
inline bool device_data_is_address(std::int32_t device_type) noexcept {
  return (device_flags(device_type) & DLB_DEVICE_ADDRESS) != 0;
}
// The Python protocol's stream applies.
inline bool device_has_streams(std::int32_t device_type) noexcept {
  return (device_flags(device_type) & DLB_DEVICE_HAS_STREAMS) != 0;
}
// Short lowercase name ("cpu", "cuda", ...; "unknown"), for messages.
inline const char* device_type_name(std::int32_t device_type) noexcept {
  const DeviceTypeInfo* d = device_type_info(device_type);
  return d == nullptr ? "unknown" : d->name;
}

}  // namespace dlb

#endif
