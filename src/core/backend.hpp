#ifndef DLBRIDGE_SRC_BACKEND_HPP_
#define DLBRIDGE_SRC_BACKEND_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

#include "buffer.hpp"

namespace dlb {

// dlb_backend_create(): a user's callback table, adapted (kBackendStorage).
dlb_status backend_create(const dlb_backend_vtable* vtable, void* ctx, dlb_backend** out) noexcept;

// A backend of a built-in kind: its buffers use `ops` directly; `destroy`
// (may be NULL) gets `ctx` when its last reference goes.
dlb_status backend_create_builtin(const StorageOps& ops, const char* name, void* ctx, void (*destroy)(void*),
                                  dlb_backend** out) noexcept;

// A buffer over `storage` on `backend`, whose storage table must be of
// `kind` (dlb_buffer_from_backend asks for StorageKind::backend, a built-in
// kind for its own); the buffer takes a reference on the backend.
dlb_status buffer_from_backend(dlb_backend* backend, void* storage, const DLTensor* layout, std::uint64_t flags,
                               StorageKind kind, dlb_buffer** out) noexcept;

}  // namespace dlb

#endif
