#ifndef DLBRIDGE_SRC_BACKEND_HPP_
#define DLBRIDGE_SRC_BACKEND_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

dlb_status backend_create(const dlb_backend_vtable* vtable, void* ctx, dlb_backend** out) noexcept;
dlb_status buffer_from_backend(dlb_backend* backend, void* storage, const DLTensor* layout, std::uint64_t flags,
                               dlb_buffer** out) noexcept;

}  // namespace dlb

#endif
