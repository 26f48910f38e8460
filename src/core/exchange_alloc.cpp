// The parts of the DLPack 1.3 C exchange API that need no Python: the
// allocator of the table (DLPackManagedTensorAllocator). Its failures are
// named with Python exception names, decided here for every binding.
#include <dlbridge/dlbridge.h>

#include <cstring>

#include "device.hpp"
#include "errors.hpp"
#include "layout.hpp"

using dlb::firewall;
using dlb::set_error;

namespace {

// The Python exception a Python producer raises for the same failure
// (numpy's choices: ValueError for a bad shape or a size too big to
// describe, TypeError for a dtype it does not know, MemoryError when the
// allocation itself fails).
const char* python_kind(dlb_status status) noexcept {
  switch (status) {
    case DLB_ERR_INVALID_ARGUMENT:
    case DLB_ERR_MALFORMED:
    case DLB_ERR_UNSUPPORTED_DEVICE:
    case DLB_ERR_OVERFLOW:
      return "ValueError";
    case DLB_ERR_UNSUPPORTED_DTYPE:
      return "TypeError";
    case DLB_ERR_OUT_OF_MEMORY:
      return "MemoryError";
    default:  // GCOVR_EXCL_START: no status but those above reaches here short of a bug (DLB_ERR_INTERNAL)
      return "RuntimeError";  // GCOVR_EXCL_STOP
  }
}

// Re-records the message just set by a check as being about the prototype.
dlb_status about_prototype(dlb_status status) noexcept {
  char text[512];
  std::strncpy(text, dlb::last_error_message(), sizeof text - 1);
  text[sizeof text - 1] = '\0';
  return set_error(status, "prototype %s", text);
}

dlb_status alloc_impl(DLTensor* prototype, DLManagedTensorVersioned** out) {
  if (prototype == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "prototype is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  // Only dtype, ndim, shape and device count: checked as an argument of
  // our own API, without data or strides.
  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.device = prototype->device;
  view.dtype = prototype->dtype;
  view.ndim = prototype->ndim;
  view.shape = prototype->shape;
  dlb::LayoutInfo info;
  const dlb_status checked = dlb::check_layout(&view, dlb::Origin::argument, false, &info);
  if (checked != DLB_OK) return about_prototype(checked);
  const std::int32_t device_type = dlb::device_type_of(view.device);
  if (device_type != kDLCPU || view.device.device_id != 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                     "prototype device is %s:%d; dlb_managed_tensor_alloc allocates host memory only (cpu:0)",
                     dlb::device_type_name(device_type), static_cast<int>(view.device.device_id));
  dlb_buffer* buffer = nullptr;
  DLB_TRY(dlb_buffer_alloc(view.device, view.dtype, view.ndim, view.shape, &buffer));
  // The export holds its own reference; ours goes either way.
  const dlb_status exported = dlb_export_versioned(buffer, nullptr, out);
  dlb_buffer_release(buffer);
  return exported;
}

}  // namespace

extern "C" {

DLB_API int dlb_managed_tensor_alloc(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                                     void (*set_error_fn)(void* error_ctx, const char* kind, const char* message)) {
  const dlb_status status = firewall(__func__, [&] { return alloc_impl(prototype, out); });
  if (status == DLB_OK) return 0;
  if (set_error_fn != nullptr) {
    // A copy: the callback may call into the library, which may overwrite
    // the thread's message.
    char message[512];
    std::strncpy(message, dlb::last_error_message(), sizeof message - 1);
    message[sizeof message - 1] = '\0';
    set_error_fn(error_ctx, python_kind(status), message);
  }
  return -1;
}

}  // extern "C"
