// The Python protocol's rule for a stream the consumer gives explicitly:
// the one place it is written. The export planner applies it to
// dlb_export_options.stream, dlb_check_consumer_stream() to a binding's
// stream argument.
#ifndef DLBRIDGE_SRC_STREAMS_HPP_
#define DLBRIDGE_SRC_STREAMS_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

#include "device.hpp"

namespace dlb {

enum class StreamFault : std::uint8_t {
  none,        // legal
  no_streams,  // the device has no streams (host memory and the like): only "no stream" is
  bad_value,   // 0 (ambiguous) or below -1 on a device with streams
};

// Whether `stream`, given by the consumer for memory of `device_type`, is
// legal: on a device with streams -1 (no synchronisation), 1 and 2 (the
// legacy and per-thread default streams) and larger values (handles).
inline StreamFault consumer_stream_fault(std::int32_t device_type, std::int64_t stream) noexcept {
  if (!device_has_streams(device_type)) return StreamFault::no_streams;
  if (stream == 0 || stream < -1) return StreamFault::bad_value;
  return StreamFault::none;
}

// Puts a fault into words (the thread's last error) and returns
// DLB_ERR_INVALID_ARGUMENT.
dlb_status stream_refusal(StreamFault fault, DLDevice device, std::int64_t stream) noexcept;

// dlb_check_consumer_stream().
dlb_status check_consumer_stream(DLDevice device, std::int64_t stream) noexcept;

}  // namespace dlb

#endif
