// The C entry points of backend.h: user backends (callback tables) and
// buffers over their storages. Each body runs behind the firewall
// (errors.hpp) and calls backend.cpp.
#include <dlbridge/dlbridge.h>

#include "backend.hpp"
#include "buffer.hpp"
#include "errors.hpp"

using dlb::firewall;
using dlb::set_error;

extern "C" {

DLB_API dlb_status dlb_backend_create(const dlb_backend_vtable* vtable, void* ctx, dlb_backend** out) {
  return firewall(__func__, [&] { return dlb::backend_create(vtable, ctx, out); });
}

DLB_API dlb_backend* dlb_backend_retain(dlb_backend* backend) {
  return dlb::firewall_value(__func__, backend, [&] {
    if (backend != nullptr)
      reinterpret_cast<dlb::Backend*>(backend)->refs.fetch_add(1, std::memory_order_relaxed);
    return backend;
  });
}

DLB_API void dlb_backend_release(dlb_backend* backend) {
  dlb::firewall_void(__func__, [&] {
    if (backend != nullptr) dlb::backend_release(reinterpret_cast<dlb::Backend*>(backend));
  });
}

DLB_API dlb_status dlb_buffer_from_backend(dlb_backend* backend, void* storage, const DLTensor* layout,
                                           uint64_t flags, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::buffer_from_backend(backend, storage, layout, flags, dlb::StorageKind::backend, out);
  });
}

DLB_API void dlb_backend_set_error(const char* message) {
  dlb::firewall_void(__func__, [&] { dlb::set_backend_text(message); });
}

}  // extern "C"
