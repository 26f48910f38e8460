#ifndef DLBRIDGE_SRC_EXPORT_HPP_
#define DLBRIDGE_SRC_EXPORT_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

dlb_status export_versioned(dlb_buffer* b, const dlb_export_options* options, DLManagedTensorVersioned** out) noexcept;
dlb_status export_legacy(dlb_buffer* b, const dlb_export_options* options, DLManagedTensor** out) noexcept;
std::int64_t live_exports() noexcept;
// Whether `m` is a legacy export of this library; if so, `dl_flags` gets the
// DLPack flags its struct could not carry: IS_COPIED for a copy, READ_ONLY
// for read-only memory shared under DLB_EXPORT_ALLOW_READ_ONLY_LEGACY.
bool own_legacy_export(const DLManagedTensor* m, std::uint64_t* dl_flags) noexcept;
// dlb_buffer_resolve: the planner's decision without an export.
dlb_status buffer_resolve(dlb_buffer* b, const dlb_export_options* options, dlb_buffer** out) noexcept;

}  // namespace dlb

#endif
