// DLPack's device types as data: one row per device type the standard
// defines (1.3 and main), with its short name and the DLB_DEVICE_* bits of
// its memory (known, host-readable, `data` an address, streams). The core's
// device lookups (core/device.hpp) read this table and nothing else; which
// built-in backend serves a device type is not a fact of the standard and
// is not here (core/device_backend.hpp).
#ifndef DLBRIDGE_SRC_DEVICES_DEVICE_TYPES_HPP_
#define DLBRIDGE_SRC_DEVICES_DEVICE_TYPES_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

// A row: the name (nullptr for a code DLPack leaves unused) and the
// DLB_DEVICE_* bits, DLB_DEVICE_KNOWN always set.
struct DeviceTypeInfo {
  const char* name;     // short lowercase name ("cpu", "rocm", ...)
  std::uint32_t flags;  // DLB_DEVICE_* bits
};

namespace device_bits {
constexpr std::uint32_t K = DLB_DEVICE_KNOWN;
constexpr std::uint32_t H = DLB_DEVICE_HOST_READABLE;
constexpr std::uint32_t A = DLB_DEVICE_ADDRESS;
constexpr std::uint32_t S = DLB_DEVICE_HAS_STREAMS;
}  // namespace device_bits

// Indexed by device type. Defined in a header so that the hot paths inline
// their lookups; nothing outside core/device.hpp reads it.
inline constexpr DeviceTypeInfo kDeviceTable[] = {
    {nullptr, 0},                                                                         // 0
    {"cpu", device_bits::K | device_bits::H | device_bits::A},                            // kDLCPU
    {"cuda", device_bits::K | device_bits::A | device_bits::S},                           // kDLCUDA
    {"cuda_host", device_bits::K | device_bits::H | device_bits::A | device_bits::S},     // kDLCUDAHost
    {"opencl", device_bits::K},                                                           // kDLOpenCL: cl_mem handle
    {nullptr, 0},                                                                         // 5: unused
    {nullptr, 0},                                                                         // 6: unused
    {"vulkan", device_bits::K},                                                           // kDLVulkan: VkBuffer handle
    {"metal", device_bits::K},                                                            // kDLMetal: MTLBuffer handle
    {"vpi", device_bits::K | device_bits::A},                                             // kDLVPI
    {"rocm", device_bits::K | device_bits::A | device_bits::S},                           // kDLROCM
    {"rocm_host", device_bits::K | device_bits::H | device_bits::A | device_bits::S},     // kDLROCMHost (pinned)
    {"ext_dev", device_bits::K | device_bits::A},                                         // kDLExtDev
    {"cuda_managed", device_bits::K | device_bits::H | device_bits::A | device_bits::S},  // kDLCUDAManaged
    {"oneapi", device_bits::K | device_bits::A},                                          // kDLOneAPI (USM pointer)
    {"webgpu", device_bits::K},                                                           // kDLWebGPU: GPUBuffer handle
    {"hexagon", device_bits::K | device_bits::A},                                         // kDLHexagon
    {"maia", device_bits::K | device_bits::A},                                            // kDLMAIA
    {"trn", device_bits::K | device_bits::A},                                             // kDLTrn
    {"tpu", device_bits::K | device_bits::A},                                             // kDLTPU (DLPack main)
    {"tpu_host", device_bits::K | device_bits::A},                                        // kDLTPUHost (DLPack main)
};

}  // namespace dlb

#endif
