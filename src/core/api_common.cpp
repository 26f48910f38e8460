// The C entry points of common.h: versions, status names, the thread's last
// error, dtype checks and names. Like every entry point of the library, each
// body runs behind the firewall (errors.hpp: no exception leaves the
// library, every failure is a status plus the thread's message).
#include <dlbridge/dlbridge.h>

#include "dtype.hpp"
#include "errors.hpp"

using dlb::firewall;
using dlb::set_error;

namespace {

#define DLB_STR2(x) #x
#define DLB_STR(x) DLB_STR2(x)

const char* status_name(dlb_status code) noexcept {
  switch (code) {
    case DLB_OK: return "DLB_OK";
    case DLB_ERR_INVALID_ARGUMENT: return "DLB_ERR_INVALID_ARGUMENT";
    case DLB_ERR_OUT_OF_MEMORY: return "DLB_ERR_OUT_OF_MEMORY";
    case DLB_ERR_DELETED: return "DLB_ERR_DELETED";
    case DLB_ERR_NOT_ZERO_COPY: return "DLB_ERR_NOT_ZERO_COPY";
    case DLB_ERR_UNSUPPORTED_DTYPE: return "DLB_ERR_UNSUPPORTED_DTYPE";
    case DLB_ERR_UNSUPPORTED_DEVICE: return "DLB_ERR_UNSUPPORTED_DEVICE";
    case DLB_ERR_UNSUPPORTED_LAYOUT: return "DLB_ERR_UNSUPPORTED_LAYOUT";
    case DLB_ERR_READ_ONLY: return "DLB_ERR_READ_ONLY";
    case DLB_ERR_VERSION: return "DLB_ERR_VERSION";
    case DLB_ERR_OVERFLOW: return "DLB_ERR_OVERFLOW";
    case DLB_ERR_MALFORMED: return "DLB_ERR_MALFORMED";
    case DLB_ERR_ALIGNMENT: return "DLB_ERR_ALIGNMENT";
    case DLB_ERR_BACKEND: return "DLB_ERR_BACKEND";
    case DLB_ERR_INTERNAL: return "DLB_ERR_INTERNAL";
    default: return "DLB_UNKNOWN_STATUS";
  }
}

}  // namespace

extern "C" {

DLB_API const char* dlb_version_string(void) {
  return dlb::firewall_value(__func__, "", [] {
    return DLB_STR(DLB_VERSION_MAJOR) "." DLB_STR(DLB_VERSION_MINOR) "." DLB_STR(DLB_VERSION_PATCH);
  });
}

DLB_API uint32_t dlb_version_number(void) {
  return dlb::firewall_value(__func__, uint32_t{0}, [] { return uint32_t{DLB_VERSION_NUMBER}; });
}

DLB_API DLPackVersion dlb_dlpack_version(void) {
  return dlb::firewall_value(__func__, DLPackVersion{DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR}, [] {
    DLPackVersion v;
    v.major = DLB_DLPACK_MAJOR;
    v.minor = DLB_DLPACK_MINOR;
    return v;
  });
}

DLB_API const char* dlb_status_name(dlb_status code) {
  return dlb::firewall_value(__func__, "DLB_UNKNOWN_STATUS", [&] { return status_name(code); });
}

DLB_API const char* dlb_last_error_message(void) {
  return dlb::firewall_value(__func__, "", [] { return dlb::last_error_message(); });
}

DLB_API dlb_status dlb_last_error_code(void) {
  return dlb::firewall_value(__func__, DLB_ERR_INTERNAL, [] { return dlb::last_error_code(); });
}

DLB_API void dlb_clear_last_error(void) {
  dlb::firewall_void(__func__, [] { dlb::clear_error(); });
}

DLB_API dlb_status dlb_dtype_check(DLDataType dtype) {
  return firewall(__func__, [&] { return dlb::check_dtype(dtype); });
}

DLB_API dlb_status dlb_dtype_name(DLDataType dtype, char* out, size_t out_size) {
  return firewall(__func__, [&] { return dlb::format_dtype_name(dtype, out, out_size); });
}

DLB_API dlb_status dlb_dtype_from_name(const char* name, DLDataType* out) {
  return firewall(__func__, [&] { return dlb::parse_dtype_name(name, out); });
}

}  // extern "C"
