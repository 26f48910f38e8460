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

// DLPack 1.1's padded sub-byte layout (DLB_BUFFER_SUBBYTE_PADDED,
// DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED): each element of fewer than
// 8 bits sits in a byte of its own. Every size, stride and copy of such a
// tensor is that of a uint8 tensor of the same shape: the "carrier" dtype,
// which the layout arithmetic and the copies use in its place.
inline bool paddable(DLDataType dtype) noexcept { return element_bits(dtype) < 8; }
inline DLDataType carrier_dtype(DLDataType dtype, bool padded) noexcept {
  if (!padded || !paddable(dtype)) return dtype;
  DLDataType byte;
  byte.code = kDLUInt;
  byte.bits = 8;
  byte.lanes = 1;
  return byte;
}

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

namespace device_bits {
constexpr std::uint32_t K = DLB_DEVICE_KNOWN;
constexpr std::uint32_t H = DLB_DEVICE_HOST_READABLE;
constexpr std::uint32_t A = DLB_DEVICE_ADDRESS;
constexpr std::uint32_t S = DLB_DEVICE_HAS_STREAMS;
constexpr std::uint32_t C = DLB_DEVICE_CUDA_BACKEND;
}  // namespace device_bits

// The table itself, indexed by device type; a null name marks a code
// DLPack leaves unused. Defined here so that the hot paths inline their
// lookups; nothing outside this header spells a device property.
inline constexpr DeviceTypeInfo kDeviceTable[] = {
    {nullptr, 0},                                                                 // 0
    {"cpu", device_bits::K | device_bits::H | device_bits::A},                    // kDLCPU
    {"cuda", device_bits::K | device_bits::A | device_bits::S | device_bits::C},  // kDLCUDA
    {"cuda_host", device_bits::K | device_bits::H | device_bits::A | device_bits::S | device_bits::C},  // kDLCUDAHost
    {"opencl", device_bits::K},                                                   // kDLOpenCL: cl_mem handle
    {nullptr, 0},                                                                 // 5: unused
    {nullptr, 0},                                                                 // 6: unused
    {"vulkan", device_bits::K},                                                   // kDLVulkan: VkBuffer handle
    {"metal", device_bits::K},                                                    // kDLMetal: MTLBuffer handle
    {"vpi", device_bits::K | device_bits::A},                                     // kDLVPI
    {"rocm", device_bits::K | device_bits::A | device_bits::S},                   // kDLROCM
    {"rocm_host", device_bits::K | device_bits::H | device_bits::A | device_bits::S},     // kDLROCMHost (pinned)
    {"ext_dev", device_bits::K | device_bits::A},                                 // kDLExtDev
    {"cuda_managed", device_bits::K | device_bits::H | device_bits::A | device_bits::S | device_bits::C},  // kDLCUDAManaged
    {"oneapi", device_bits::K | device_bits::A},                                  // kDLOneAPI (USM pointer)
    {"webgpu", device_bits::K},                                                   // kDLWebGPU: GPUBuffer handle
    {"hexagon", device_bits::K | device_bits::A},                                 // kDLHexagon
    {"maia", device_bits::K | device_bits::A},                                    // kDLMAIA
    {"trn", device_bits::K | device_bits::A},                                     // kDLTrn
    {"tpu", device_bits::K | device_bits::A},                                     // kDLTPU (DLPack main)
    {"tpu_host", device_bits::K | device_bits::A},                                // kDLTPUHost (DLPack main)
};

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
// Memory the built-in CUDA backend takes in and allocates.
inline bool device_for_cuda_backend(std::int32_t device_type) noexcept {
  return (device_flags(device_type) & DLB_DEVICE_CUDA_BACKEND) != 0;
}
// Short lowercase name ("cpu", "cuda", ...; "unknown"), for messages.
inline const char* device_type_name(std::int32_t device_type) noexcept {
  const DeviceTypeInfo* d = device_type_info(device_type);
  return d == nullptr ? "unknown" : d->name;
}

}  // namespace dlb

#endif
