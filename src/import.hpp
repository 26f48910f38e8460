#ifndef DLBRIDGE_SRC_IMPORT_HPP_
#define DLBRIDGE_SRC_IMPORT_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

dlb_status import_versioned(DLManagedTensorVersioned* m, const dlb_import_options* options, dlb_buffer** out) noexcept;
dlb_status import_legacy(DLManagedTensor* m, const dlb_import_options* options, dlb_buffer** out) noexcept;
dlb_status validate(const DLTensor* t, std::uint32_t flags) noexcept;

}  // namespace dlb

#endif
