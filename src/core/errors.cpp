#include "errors.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace dlb {
namespace {

struct LastError {
  dlb_status code;
  char message[512];
};

// Trivially destructible, so it is usable from any thread at any time,
// including from deleters that run while a thread exits.
thread_local LastError tl_error = {DLB_OK, {0}};
thread_local char tl_backend_text[256] = {0};

}  // namespace

dlb_status set_error(dlb_status code, const char* fmt, ...) noexcept {
  tl_error.code = code;
  va_list args;
  va_start(args, fmt);
  const int n = std::vsnprintf(tl_error.message, sizeof tl_error.message, fmt, args);
  va_end(args);
  if (n < 0) tl_error.message[0] = '\0';  // GCOVR_EXCL_BR_LINE: an encoding error no format of the library makes
  return code;
}

void clear_error() noexcept {
  tl_error.code = DLB_OK;
  tl_error.message[0] = '\0';
}

const char* last_error_message() noexcept { return tl_error.message; }
dlb_status last_error_code() noexcept { return tl_error.code; }

void set_backend_text(const char* text) noexcept {
  if (text == nullptr) {
    tl_backend_text[0] = '\0';
    return;
  }
  std::snprintf(tl_backend_text, sizeof tl_backend_text, "%s", text);
}

const char* take_backend_text() noexcept {
  // The caller formats the text into the last-error message right away;
  // a copy keeps it valid after the clear below.
  thread_local char taken[256];
  std::memcpy(taken, tl_backend_text, sizeof taken);
  tl_backend_text[0] = '\0';
  return taken;
}

}  // namespace dlb
