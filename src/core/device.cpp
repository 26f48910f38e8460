#include "device.hpp"

#include <cinttypes>
#include <cstddef>

#include "device_backend.hpp"
#include "errors.hpp"

namespace dlb {

dlb_status describe_device_type(std::int32_t device_type, dlb_device_info* out) noexcept {
  constexpr std::size_t kMinSize = offsetof(dlb_device_info, name) + sizeof(const char*);
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (out->struct_size < kMinSize)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "out->struct_size is %zu (must be at least %zu: set it to "
                     "sizeof(dlb_device_info))", out->struct_size, kMinSize);
  const DeviceTypeInfo* d = device_type_info(device_type);
  if (d == nullptr)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "device type %" PRId32 " is not a DLPack device type", device_type);
  out->device_type = device_type;
  out->flags = d->flags | device_backend_flags(device_type);
  out->name = d->name;
  return DLB_OK;
}

}  // namespace dlb
