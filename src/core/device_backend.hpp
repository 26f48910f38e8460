// The built-in device backends as the core sees them: what the core asks of
// the backend that serves a DLPack device type (allocating its memory,
// taking a foreign tensor of it in, copying host data into it). The core
// names no backend: it looks the device type up with device_backend() and
// calls what the entry holds. A buffer a backend made reaches its memory
// through that backend's own storage table (buffer.hpp: waits on streams,
// zero-copy access, copies to the host), like every buffer.
//
// The entries are constant tables, each defined by its backend's folder (a
// build without the backend defines one that refuses), and listed in
// src/device_backends.cpp: constant-initialised data, so no static
// initialiser runs and no order between files matters.
#ifndef DLBRIDGE_SRC_DEVICE_BACKEND_HPP_
#define DLBRIDGE_SRC_DEVICE_BACKEND_HPP_

#include <dlbridge/dlbridge.h>

#include <cstdint>

namespace dlb {

struct DeviceBackend {
  // The backend's name in messages ("the <name> backend").
  const char* name;
  // The DLPack device types it serves, ending with 0 (no device type is 0).
  std::int32_t device_types[4];
  // DLB_DEVICE_* bits dlb_device_type_info() adds for those types.
  std::uint32_t device_flags;
  // dlb_buffer_alloc() of `device` memory; the layout was checked by the
  // caller. A new buffer owned by the caller on success.
  dlb_status (*alloc)(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                      dlb_buffer** out);
  // The importer's routing (DLB_IMPORT_DEVICE_BACKEND): a managed tensor's
  // checked DLTensor `t` in, its producer's work ordered before `stream`. On
  // success the buffer owns the managed tensor (`versioned` says which
  // struct `managed` is) and calls its deleter once at the end.
  // DLB_ERR_UNSUPPORTED_DEVICE when the backend cannot take it (no driver,
  // built without it, memory it does not know): the tensor then comes in as
  // any other memory does, and the caller still owns it. `flags` is 0 or
  // DLB_BUFFER_READ_ONLY.
  dlb_status (*take_in)(const DLTensor& t, std::uint64_t flags, std::int64_t stream, bool versioned, void* managed,
                        dlb_buffer** out) noexcept;
  // Copies host-readable elements laid out as `src` says (same dtype and
  // shape, any strides) into `dst`, a compact buffer this backend made;
  // the data is in place for every later use of `dst` when it returns.
  // NULL: the backend takes no host data.
  dlb_status (*copy_from_host)(dlb_buffer* dst, const DLTensor& src) noexcept;
};

// The built-in backend serving `device_type`, or nullptr.
const DeviceBackend* device_backend(std::int32_t device_type) noexcept;

// The DLB_DEVICE_* bits the backends add to `device_type`'s table entry.
inline std::uint32_t device_backend_flags(std::int32_t device_type) noexcept {
  const DeviceBackend* be = device_backend(device_type);
  return be == nullptr ? 0u : be->device_flags;
}

}  // namespace dlb

#endif
