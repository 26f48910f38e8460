#ifndef DLBRIDGE_SRC_EXPORT_HPP_
#define DLBRIDGE_SRC_EXPORT_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

dlb_status export_versioned(dlb_buffer* b, const dlb_export_options* options, DLManagedTensorVersioned** out) noexcept;
dlb_status export_legacy(dlb_buffer* b, const dlb_export_options* options, DLManagedTensor** out) noexcept;
std::int64_t live_exports() noexcept;

}  // namespace dlb

#endif
