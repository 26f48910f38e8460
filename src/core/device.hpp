// The device table and its lookups, shared by every part of the library:
// one entry per device type DLPack defines, and the questions asked of it
// (is it known, can the host read it, is `data` an address, do streams
// apply). dlb_device_type_info() hands the same table to every binding,
// with the bits the built-in device backends add (device_backend.hpp).
#ifndef DLBRIDGE_SRC_DEVICE_HPP_
#define DLBRIDGE_SRC_DEVICE_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>
#include <cstring>

#include "devices/device_types.hpp"

namespace dlb {

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

inline const DeviceTypeInfo* device_type_info(std::int32_t t) noexcept {
  constexpr std::int32_t n = static_cast<std::int32_t>(sizeof kDeviceTable / sizeof kDeviceTable[0]);
  if (t < 0 || t >= n || kDeviceTable[t].name == nullptr) return nullptr;
  return &kDeviceTable[t];
}

// Thin readers of that table.
inline std::uint32_t device_flags(std::int32_t device_type) noexcept {
  const DeviceTypeInfo* d = device_type_info(device_type);
  return d == nullptr ? 0u : d->flags;
}
// Device types DLPack defines.
inline bool device_type_known(std::int32_t device_type) noexcept { return device_flags(device_type) != 0; }
// Memory the host CPU reads directly: the CPU's, and devices' pinned or
// managed host memory.
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
// Short lowercase name ("cpu", "rocm", ...; "unknown"), for messages.
inline const char* device_type_name(std::int32_t device_type) noexcept {
  const DeviceTypeInfo* d = device_type_info(device_type);
  return d == nullptr ? "unknown" : d->name;
}

// dlb_device_type_info's body: the table's entry for `device_type` into
// `out` (whose struct_size the caller set).
dlb_status describe_device_type(std::int32_t device_type, dlb_device_info* out) noexcept;

}  // namespace dlb

#endif
