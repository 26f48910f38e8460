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

// The header rule of a versioned tensor a device backend takes in through
// its own import call (dlb_<backend>_import_versioned): DLB_ERR_VERSION
// unless major version 1; DLB_ERR_UNSUPPORTED_DTYPE for padded sub-byte
// elements, which device backends do not read (`backend` names it in the
// message); else DLB_OK with DLB_BUFFER_READ_ONLY or 0 in *flags.
dlb_status device_import_flags(const DLManagedTensorVersioned& m, const char* backend, std::uint64_t* flags) noexcept;

}  // namespace dlb

#endif
