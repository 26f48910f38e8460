// The dtype model shared by every part of the library: type codes, legal
// widths, names. The device table is in device.hpp.
#ifndef DLBRIDGE_SRC_DTYPE_HPP_
#define DLBRIDGE_SRC_DTYPE_HPP_

#include <dlbridge/dlbridge.h>

#include <cstddef>
#include <cstdint>

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

}  // namespace dlb

#endif
