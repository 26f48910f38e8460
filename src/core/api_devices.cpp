// The C entry points of devices.h: validation, the strided copy to a
// contiguous buffer, the device table, compact strides, resolving a buffer
// for a device, the consumer-stream rule and layout descriptions. Each body
// runs behind the firewall (errors.hpp). The copy-thread settings of the
// same header sit beside the pool they set, in copy/copy_pool.cpp.
#include <dlbridge/dlbridge.h>

#include <cinttypes>
#include <cstddef>
#include <cstring>

#include "copy/copy_engine.hpp"
#include "buffer.hpp"
#include "device.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "export.hpp"
#include "import.hpp"
#include "layout.hpp"
#include "streams.hpp"

using dlb::firewall;
using dlb::set_error;

namespace {

dlb_status layout_describe_impl(const DLTensor* layout, dlb_layout_info* out, uint64_t flags = 0) {
  constexpr std::size_t kMinSize = offsetof(dlb_layout_info, max_offset) + sizeof(int64_t);
  if (layout == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "layout is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (out->struct_size < kMinSize)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "out->struct_size is %zu (must be at least %zu: set it to "
                     "sizeof(dlb_layout_info))", out->struct_size, kMinSize);
  if ((flags & ~uint64_t{DLB_BUFFER_SUBBYTE_PADDED}) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "flags 0x%" PRIx64 " has bits other than DLB_BUFFER_SUBBYTE_PADDED",
                     flags);
  DLB_TRY(dlb::check_padded_flag(layout->dtype, flags));
  const bool padded = (flags & DLB_BUFFER_SUBBYTE_PADDED) != 0;
  DLTensor shape_only = *layout;  // data and byte_offset are not read
  shape_only.byte_offset = 0;
  dlb::LayoutInfo info;
  DLB_TRY(dlb::check_layout(&shape_only, dlb::Origin::argument, false, &info, padded));
  out->numel = info.numel;
  out->nbytes = info.nbytes;
  out->element_bits = static_cast<uint32_t>(dlb::element_bits(dlb::carrier_dtype(layout->dtype, padded)));
  out->contiguous = info.contiguous ? 1 : 0;
  out->min_offset = info.min_offset;
  out->max_offset = info.max_offset;
  return DLB_OK;
}

dlb_status compact_strides_impl(int32_t ndim, const int64_t* shape, int64_t* strides_out) {
  if (ndim < 0 || ndim > DLB_MAX_NDIM)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "ndim is %" PRId32 " (must be 0..%d)", ndim, DLB_MAX_NDIM);
  if (ndim == 0) return DLB_OK;
  if (shape == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "shape is NULL with ndim %" PRId32, ndim);
  if (strides_out == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "strides_out is NULL with ndim %" PRId32, ndim);
  bool empty = false;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0)
      return set_error(DLB_ERR_INVALID_ARGUMENT, "shape[%" PRId32 "] is %" PRId64, i, shape[i]);
    if (shape[i] == 0) empty = true;
  }
  int64_t strides[DLB_MAX_NDIM];
  dlb::compact_strides(ndim, shape, strides);
  if (!empty) {
    // compact_strides saturates; for a non-empty shape a saturated stride is
    // an overflow (the product of the trailing extents passed INT64_MAX).
    int64_t step = 1;
    for (int32_t i = ndim - 1; i > 0; --i)
      if (__builtin_mul_overflow(step, shape[i] > 1 ? shape[i] : 1, &step))
        return set_error(DLB_ERR_OVERFLOW, "the strides of this shape exceed INT64_MAX (extents from dimension %"
                         PRId32 " on multiply past it)", i);
  }
  std::memcpy(strides_out, strides, static_cast<std::size_t>(ndim) * sizeof(int64_t));
  return DLB_OK;
}

dlb_status copy_impl(const DLTensor* src, void* dst, uint64_t dst_size, uint32_t flags = 0) {
  if (src == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "src is NULL");
  constexpr uint32_t kKnown = DLB_COPY_FLAG_SWAP_BYTES | DLB_COPY_FLAG_SUBBYTE_PADDED | DLB_COPY_FLAG_BYTE_STRIDES;
  if ((flags & ~kKnown) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "flags 0x%x has bits no DLB_COPY_FLAG_* names",
                     static_cast<unsigned>(flags));
  if ((flags & DLB_COPY_FLAG_BYTE_STRIDES) != 0)  // the copy engine's byte-stride path (copy_engine.hpp)
    return dlb::copy_byte_strided(*src, dst, dst_size, (flags & DLB_COPY_FLAG_SWAP_BYTES) != 0);
  // The padded layout is its carrier's (one byte per element), which has no
  // byte order either.
  const bool padded = (flags & DLB_COPY_FLAG_SUBBYTE_PADDED) != 0 && dlb::paddable(src->dtype);
  DLTensor view = *src;
  if (padded) {
    DLB_TRY(dlb::check_dtype(src->dtype));
    view.dtype = dlb::carrier_dtype(src->dtype, true);
  }
  src = &view;
  dlb::LayoutInfo info;
  DLB_TRY(dlb::check_layout(src, dlb::Origin::incoming, true, &info));
  if (!dlb::device_is_host_readable(dlb::device_type_of(src->device)))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "src is on %s:%d, which the host cannot read",
                     dlb::device_type_name(dlb::device_type_of(src->device)),
                     static_cast<int>(src->device.device_id));
  if (dst_size < info.nbytes)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "dst_size is %" PRIu64 " bytes but the tensor needs %" PRIu64, dst_size,
                     info.nbytes);
  if (dst == nullptr && info.nbytes > 0) return set_error(DLB_ERR_INVALID_ARGUMENT, "dst is NULL");
  const std::size_t swap = (flags & DLB_COPY_FLAG_SWAP_BYTES) != 0 ? dlb::swap_unit(src->dtype) : 0;
  return dlb::copy_view_to_contiguous(*src, info, dst, swap);
}

}  // namespace

extern "C" {

DLB_API dlb_status dlb_validate(const DLTensor* t, uint32_t flags) {
  return firewall(__func__, [&] { return dlb::validate(t, flags); });
}

DLB_API dlb_status dlb_copy_to_contiguous(const DLTensor* src, void* dst, uint64_t dst_size) {
  return firewall(__func__, [&] { return copy_impl(src, dst, dst_size); });
}

DLB_API dlb_status dlb_device_type_info(int32_t device_type, dlb_device_info* out) {
  return firewall(__func__, [&] { return dlb::describe_device_type(device_type, out); });
}

DLB_API dlb_status dlb_compact_strides(int32_t ndim, const int64_t* shape, int64_t* strides_out) {
  return firewall(__func__, [&] { return compact_strides_impl(ndim, shape, strides_out); });
}

DLB_API dlb_status dlb_buffer_resolve(dlb_buffer* buffer, const dlb_export_options* options, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::buffer_resolve(buffer, options, out); });
}

DLB_API dlb_status dlb_check_consumer_stream(DLDevice device, int64_t stream) {
  return firewall(__func__, [&] { return dlb::check_consumer_stream(device, stream); });
}

DLB_API dlb_status dlb_layout_describe(const DLTensor* layout, dlb_layout_info* out) {
  return firewall(__func__, [&] { return layout_describe_impl(layout, out); });
}

DLB_API dlb_status dlb_copy_to_contiguous_flags(const DLTensor* src, void* dst, uint64_t dst_size, uint32_t flags) {
  return firewall(__func__, [&] { return copy_impl(src, dst, dst_size, flags); });
}

DLB_API dlb_status dlb_layout_describe_flags(const DLTensor* layout, uint64_t flags, dlb_layout_info* out) {
  return firewall(__func__, [&] { return layout_describe_impl(layout, out, flags); });
}

}  // extern "C"
