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

// The bytes of one scalar whose byte order a copy from memory in the other
// byte order reverses: each lane on its own, each of a complex number's two
// parts on its own; 0 for one-byte and sub-byte scalars (nothing to swap).
inline std::size_t swap_unit(DLDataType dtype) noexcept {
  const unsigned bits = dtype.code == kDLComplex ? dtype.bits / 2u : dtype.bits;
  return bits > 8 && bits % 8 == 0 ? bits / 8u : 0;
}

}  // namespace dlb

#endif
