#ifndef DLBRIDGE_SRC_EXPORT_HPP_
#define DLBRIDGE_SRC_EXPORT_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

dlb_status export_versioned(dlb_buffer* b, const dlb_export_options* options, DLManagedTensorVersioned** out) noexcept;
dlb_status export_legacy(dlb_buffer* b, const dlb_export_options* options, DLManagedTensor** out) noexcept;
std::int64_t live_exports() noexcept;
// dlb_buffer_resolve: the planner's decision without an export.
dlb_status buffer_resolve(dlb_buffer* b, const dlb_export_options* options, dlb_buffer** out) noexcept;

}  // namespace dlb

#endif
