// The thread-local last error and the exception firewall every C entry
// point runs inside.
#ifndef DLBRIDGE_SRC_ERRORS_HPP_
#define DLBRIDGE_SRC_ERRORS_HPP_

#include <dlbridge/dlbridge.h>

#include <exception>
#include <new>

#if defined(__GNUC__)
#define DLB_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DLB_PRINTF_LIKE(fmt, args)
#endif

namespace dlb {

// Records `code` and the formatted message as the calling thread's last
// error and returns `code`. Never allocates; the message is truncated to the
// thread-local buffer's size.
dlb_status set_error(dlb_status code, const char* fmt, ...) noexcept DLB_PRINTF_LIKE(2, 3);
void clear_error() noexcept;
const char* last_error_message() noexcept;
dlb_status last_error_code() noexcept;

// The text a backend callback left with dlb_backend_set_error() ("" if
// none); taking it clears it.
void set_backend_text(const char* text) noexcept;
const char* take_backend_text() noexcept;

// Runs `body` (returning dlb_status) with every exception turned into a
// status: std::bad_alloc -> DLB_ERR_OUT_OF_MEMORY, anything else ->
// DLB_ERR_INTERNAL. The library's own code reports errors by status; an
// exception here means an allocation inside the standard library failed or
// a bug.
template <class Body>
dlb_status firewall(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return set_error(DLB_ERR_OUT_OF_MEMORY, "%s: out of memory", function);
  } catch (const std::exception& e) {
    return set_error(DLB_ERR_INTERNAL, "%s: internal error: %s", function, e.what());
  } catch (...) {
    return set_error(DLB_ERR_INTERNAL, "%s: internal error (unknown exception)", function);
  }
}

// For entry points without a status (release functions): swallows
// everything, records it as the last error.
template <class Body>
void firewall_void(const char* function, Body&& body) noexcept {
  (void)firewall(function, [&]() -> dlb_status {
    body();
    return DLB_OK;
  });
}

// For entry points that return a value other than a status (getters,
// retain): `fallback` when an exception was caught and recorded.
template <class T, class Body>
T firewall_value(const char* function, T fallback, Body&& body) noexcept {
  T result = fallback;
  (void)firewall(function, [&]() -> dlb_status {
    result = body();
    return DLB_OK;
  });
  return result;
}

}  // namespace dlb

#define DLB_TRY(expr)                       \
  do {                                      \
    const dlb_status dlb_try_s_ = (expr);   \
    if (dlb_try_s_ != DLB_OK) return dlb_try_s_; \
  } while (0)

#endif
