#ifndef DLBRIDGE_SRC_IMPORT_HPP_
#define DLBRIDGE_SRC_IMPORT_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

dlb_status import_versioned(DLManagedTensorVersioned* m, const dlb_import_options* options, dlb_buffer** out) noexcept;
dlb_status import_legacy(DLManagedTensor* m, const dlb_import_options* options, dlb_buffer** out) noexcept;
// `stream`: the producer's stream, for memory routed to a built-in device
// backend (DLB_IMPORT_DEVICE_BACKEND); the plain forms pass DLB_STREAM_NONE.
dlb_status import_versioned_on_stream(DLManagedTensorVersioned* m, const dlb_import_options* options,
                                      std::int64_t stream, dlb_buffer** out) noexcept;
dlb_status import_legacy_on_stream(DLManagedTensor* m, const dlb_import_options* options, std::int64_t stream,
                                   dlb_buffer** out) noexcept;
dlb_status validate(const DLTensor* t, std::uint32_t flags) noexcept;

}  // namespace dlb

#endif
