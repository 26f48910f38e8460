// The words of the stream rule's refusals, and its entry point's body.
#include "streams.hpp"

#include <cinttypes>

#include "errors.hpp"

namespace dlb {

dlb_status stream_refusal(StreamFault fault, DLDevice device, std::int64_t stream) noexcept {
  const std::int32_t type = device_type_of(device);
  if (fault == StreamFault::no_streams)
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "stream %" PRId64 " was given for %s:%d memory, which has no streams: host memory and devices "
                     "without streams take none; pass no stream (stream=None in Python)",
                     stream, device_type_name(type), static_cast<int>(device.device_id));
  return set_error(DLB_ERR_INVALID_ARGUMENT,
                   "stream %" PRId64 " is not allowed for %s memory (use 1 for the legacy default stream, 2 for the "
                   "per-thread default stream, -1 for no synchronisation, or a stream handle; 0 is ambiguous)",
                   stream, device_type_name(type));
}

dlb_status check_consumer_stream(DLDevice device, std::int64_t stream) noexcept {
  const std::int32_t type = device_type_of(device);
  if (!device_type_known(type))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "device type %" PRId32 " is not a DLPack device type", type);
  const StreamFault fault = consumer_stream_fault(type, stream);
  if (fault != StreamFault::none) return stream_refusal(fault, device, stream);
  return DLB_OK;
}

}  // namespace dlb
