#include "layout.hpp"

#include <cinttypes>

#include "device.hpp"
#include "dtype.hpp"
#include "errors.hpp"

namespace dlb {
namespace {

const char* what(Origin origin) noexcept { return origin == Origin::argument ? "" : "tensor "; }

}  // namespace

void compact_strides(std::int32_t ndim, const std::int64_t* shape, std::int64_t* strides) noexcept {
  std::int64_t step = 1;
  for (std::int32_t i = ndim - 1; i >= 0; --i) {
    strides[i] = step;
    // Extents of 0 and 1 do not advance the step. For a non-empty tensor
    // check_layout has bounded the product; an empty one may multiply huge
    // extents (its strides are arbitrary anyway), so saturate.
    const std::int64_t n = shape[i] > 1 ? shape[i] : 1;
    if (__builtin_mul_overflow(step, n, &step)) step = INT64_MAX;
  }
}

dlb_status check_layout(const DLTensor* t, Origin origin, bool check_data, LayoutInfo* info, bool padded) noexcept {
  if (padded && paddable(t->dtype)) {
    DLB_TRY(check_dtype(t->dtype));
    DLTensor carrier = *t;
    carrier.dtype = carrier_dtype(t->dtype, true);
    return check_layout(&carrier, origin, check_data, info, false);
  }
  const dlb_status shape_status = origin == Origin::argument ? DLB_ERR_INVALID_ARGUMENT : DLB_ERR_MALFORMED;
  if (t->ndim < 0 || t->ndim > DLB_MAX_NDIM)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "%sndim is %d (must be 0..%d)", what(origin), t->ndim,
                     DLB_MAX_NDIM);
  const std::int32_t ndim = t->ndim;
  if (ndim > 0 && t->shape == nullptr)
    return set_error(shape_status, "%sshape is NULL with ndim %d", what(origin), ndim);
  DLB_TRY(check_dtype(t->dtype));
  if (!device_type_known(device_type_of(t->device)))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%sdevice type %d is not a DLPack device type", what(origin),
                     static_cast<int>(device_type_of(t->device)));
  if (t->device.device_id < 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%sdevice id %d is negative", what(origin),
                     static_cast<int>(t->device.device_id));

  LayoutInfo out;
  std::uint64_t numel = 1;
  bool overflow = false;
  for (std::int32_t i = 0; i < ndim; ++i) {
    const std::int64_t n = t->shape[i];
    if (n < 0)
      return set_error(DLB_ERR_MALFORMED, "%sshape[%d] is %" PRId64 " (extents must be >= 0)", what(origin), i, n);
    if (n == 0) out.empty = true;
    if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(n), &numel)) overflow = true;
  }
  if (out.empty) {
    numel = 0;
  } else if (overflow || numel > static_cast<std::uint64_t>(INT64_MAX)) {
    return set_error(DLB_ERR_OVERFLOW, "%selement count of the shape overflows 64 bits", what(origin));
  }
  out.numel = numel;
  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, element_bits(t->dtype), &bits))
    return set_error(DLB_ERR_OVERFLOW, "%sbyte size (%" PRIu64 " elements of %" PRIu64 " bits) overflows 64 bits",
                     what(origin), numel, element_bits(t->dtype));
  out.nbytes = bits / 8 + (bits % 8 != 0 ? 1 : 0);

  // Strided extent, in elements relative to element 0.
  const std::uint64_t elem_bytes = byte_addressable(t->dtype) ? element_bits(t->dtype) / 8 : 1;
  if (t->strides != nullptr && !out.empty) {
    std::int64_t expected = 1;
    for (std::int32_t i = ndim - 1; i >= 0; --i) {
      const std::int64_t n = t->shape[i];
      const std::int64_t s = t->strides[i];
      if (n > 1) {
        std::int64_t reach = 0;
        if (__builtin_mul_overflow(s, n - 1, &reach))
          return set_error(DLB_ERR_OVERFLOW, "%sstrides[%d] = %" PRId64 " times extent %" PRId64 " overflows 64 bits",
                           what(origin), i, s, n);
        if (reach < 0 ? __builtin_add_overflow(out.min_offset, reach, &out.min_offset)
                      : __builtin_add_overflow(out.max_offset, reach, &out.max_offset))
          return set_error(DLB_ERR_OVERFLOW, "%sbyte extent of the strided view overflows 64 bits", what(origin));
        if (s != expected) out.contiguous = false;
      }
      // expected cannot overflow: it is bounded by the element count.
      expected *= n;
    }
  } else if (!out.empty) {
    out.max_offset = static_cast<std::int64_t>(numel) - 1;
  }
  // The extent in bytes. Whole-byte elements: (max - min + 1) elements,
  // `below` = -min of them before element 0. Packed sub-byte elements sit
  // at bit offsets (offset * bits), so the view reaches from the byte that
  // holds bit min * bits to the byte that holds the last bit of element max.
  if (!out.empty) {
    std::int64_t reach = 0;
    if (__builtin_sub_overflow(out.max_offset, out.min_offset, &reach))
      return set_error(DLB_ERR_OVERFLOW, "%sbyte extent of the strided view overflows 64 bits", what(origin));
    const std::uint64_t count = static_cast<std::uint64_t>(reach) + 1;  // reach >= 0: at most 2^63
    const std::uint64_t down = std::uint64_t{0} - static_cast<std::uint64_t>(out.min_offset);  // -min, elements
    const std::uint64_t up = static_cast<std::uint64_t>(out.max_offset) + 1;                   // max + 1, elements
    if (byte_addressable(t->dtype)) {
      if (__builtin_mul_overflow(count, elem_bytes, &out.span_bytes))
        return set_error(DLB_ERR_OVERFLOW, "%sbyte extent of the strided view overflows 64 bits", what(origin));
      out.below_bytes = down * elem_bytes;  // <= span_bytes
    } else {
      const std::uint64_t bits = element_bits(t->dtype);
      std::uint64_t down_bits = 0;
      std::uint64_t up_bits = 0;
      if (__builtin_mul_overflow(down, bits, &down_bits) || __builtin_mul_overflow(up, bits, &up_bits))
        return set_error(DLB_ERR_OVERFLOW, "%sbit extent of the strided view overflows 64 bits", what(origin));
      out.below_bytes = down_bits / 8 + (down_bits % 8 != 0 ? 1 : 0);
      out.span_bytes = out.below_bytes + up_bits / 8 + (up_bits % 8 != 0 ? 1 : 0);
    }
    std::uint64_t end = 0;
    if (__builtin_add_overflow(out.span_bytes, t->byte_offset, &end))
      return set_error(DLB_ERR_OVERFLOW, "%sbyte_offset %" PRIu64 " plus the view's extent overflows 64 bits",
                       what(origin), static_cast<std::uint64_t>(t->byte_offset));
    // A view no address space can hold is refused before anything reads
    // it, whatever its data pointer: see kMaxAddressSpan.
    if (out.span_bytes > kMaxAddressSpan)
      return set_error(DLB_ERR_OVERFLOW,
                       "%sstrided view spans %" PRIu64 " bytes, more than any address space holds (2^%d bytes)",
                       what(origin), out.span_bytes, kMaxAddressSpanLog2);
    if (t->byte_offset > kMaxAddressSpan)
      return set_error(DLB_ERR_OVERFLOW,
                       "%sbyte_offset %" PRIu64 " is past the end of any address space (2^%d bytes)", what(origin),
                       static_cast<std::uint64_t>(t->byte_offset), kMaxAddressSpanLog2);
  }
  if (check_data && !out.empty) {
    if (t->data == nullptr)
      return set_error(DLB_ERR_MALFORMED, "%sdata is NULL but the tensor has %" PRIu64 " elements", what(origin),
                       numel);
    // Lowest and highest byte addressed must lie within the address space.
    const std::uint64_t base = reinterpret_cast<std::uintptr_t>(t->data);
    std::uint64_t first = 0;
    const std::uint64_t below = out.below_bytes;
    std::uint64_t last = 0;
    if (__builtin_add_overflow(base, static_cast<std::uint64_t>(t->byte_offset), &first) || first < below ||
        __builtin_add_overflow(first - below, out.span_bytes, &last))
      return set_error(DLB_ERR_OVERFLOW, "%sdata %p with byte_offset %" PRIu64 " and this extent leaves the address space",
                       what(origin), t->data, static_cast<std::uint64_t>(t->byte_offset));
  }
  *info = out;
  return DLB_OK;
}

}  // namespace dlb
