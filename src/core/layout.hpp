// Checked arithmetic over tensor layouts: element counts, byte sizes, the
// byte extent of strided views, contiguity; and the DLPack rules.
#ifndef DLBRIDGE_SRC_LAYOUT_HPP_
#define DLBRIDGE_SRC_LAYOUT_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

// Who gave us the tensor: an argument of our own API (alloc, wrap, a
// backend layout) or a tensor from another producer (import, validate).
// The statuses differ: a NULL shape is a bad argument in the first case and
// a malformed tensor in the second.
enum class Origin { argument, incoming };

// The most bytes a view may reach, and the largest byte_offset it may
// have: 2^57, the whole virtual address space of the largest machines
// Linux runs on (x86-64 and RISC-V with five-level paging translate 57-bit
// addresses, a user half of 2^56 bytes; AArch64 at most 52 bits). A span or
// offset past it cannot be backed by any mapping, so such a tensor is
// refused with DLB_ERR_OVERFLOW before anything reads it, whatever its data
// pointer says (a tagged pointer's top byte does not count: the bound is on
// the distance from it, not on the address).
constexpr int kMaxAddressSpanLog2 = 57;
constexpr std::uint64_t kMaxAddressSpan = std::uint64_t{1} << kMaxAddressSpanLog2;

struct LayoutInfo {
  std::uint64_t numel = 0;       // product of the extents
  std::uint64_t nbytes = 0;      // compact size in bytes, sub-byte rounded up
  // Range of element offsets the view touches, relative to element 0
  // (min <= 0 <= max); both 0 for an empty view.
  std::int64_t min_offset = 0;
  std::int64_t max_offset = 0;
  // Bytes the view reaches, from `below` bytes before element 0 on, `span`
  // of them (both 0 for an empty view): the view's memory is
  // [data + byte_offset - below_bytes, ... + span_bytes).
  std::uint64_t below_bytes = 0;
  std::uint64_t span_bytes = 0;
  bool contiguous = true;        // compact row-major (NULL strides count)
  bool empty = false;            // some extent is 0
};

// Checks ndim, shape, dtype, device, strides and the arithmetic of `t`,
// and that a non-empty view's span and byte_offset are at most
// kMaxAddressSpan. When check_data is set, also "NULL data with a non-zero
// size" and that data + byte_offset + extent fits 64-bit addresses. Fills
// `info`. `strides` and `shape` are read only for ndim > 0.
// Sets the error message and returns its status on failure. `padded`: the
// tensor's sub-byte elements are padded to a byte each (carrier_dtype);
// ignored for dtypes of 8 bits or more.
dlb_status check_layout(const DLTensor* t, Origin origin, bool check_data, LayoutInfo* info,
                        bool padded = false) noexcept;

// Compact row-major strides for a shape (strides[i] in elements).
void compact_strides(std::int32_t ndim, const std::int64_t* shape, std::int64_t* strides) noexcept;

}  // namespace dlb

#endif
