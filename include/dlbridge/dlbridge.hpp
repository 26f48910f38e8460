/**
 * @file dlbridge.hpp
 * dlbridge for C++: a header-only layer of owners over the C API of
 * dlbridge.h, which it includes and adds no rule to.
 *
 * - dlbridge::Buffer owns one reference on a dlb_buffer (move-only; retain()
 *   takes another, release() hands one to C code).
 * - dlbridge::ManagedTensor and dlbridge::LegacyManagedTensor own a DLPack
 *   managed tensor: the destructor runs its deleter once; release() hands
 *   it to a C consumer.
 * - Errors: every call comes in two forms. `f(...)` throws dlbridge::Error
 *   (the library's status and message); `try_f(...)` returns a
 *   dlbridge::Result<T> (or a dlbridge::Status) instead and throws only
 *   std::bad_alloc.
 * - Views: data<T>() everywhere, span<T>() (std::span) with C++20.
 *
 * Compiles as C++17 and C++20. Every check (dtype, layout, device) is the C
 * library's: this header asks, it does not decide.
 */
#ifndef DLBRIDGE_DLBRIDGE_HPP_
#define DLBRIDGE_DLBRIDGE_HPP_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#if __cplusplus >= 202002L && defined(__has_include)
#if __has_include(<span>)
#include <span>
#define DLBRIDGE_HPP_HAS_SPAN 1
#endif
#endif

#include "dlbridge/dlbridge.h"

namespace dlbridge {

/** A call's outcome: DLB_OK, or a status with the library's message. */
class Status {
 public:
  Status() = default;
  Status(dlb_status code, std::string message) : code_(code), message_(std::move(message)) {}
  /** The calling thread's last error, for a call that just returned `code`. */
  static Status last(dlb_status code) {
    return code == DLB_OK ? Status() : Status(code, dlb_last_error_message());
  }
  bool ok() const noexcept { return code_ == DLB_OK; }
  dlb_status code() const noexcept { return code_; }
  /** The constant's name ("DLB_ERR_DELETED"), from dlb_status_name(). */
  const char* name() const noexcept { return dlb_status_name(code_); }
  const std::string& message() const noexcept { return message_; }
  /** Throws dlbridge::Error unless ok(). */
  inline void throw_if_error() const;

 private:
  dlb_status code_ = DLB_OK;
  std::string message_;
};

/** The exception of the throwing forms: what() is "NAME: message". */
class Error : public std::runtime_error {
 public:
  explicit Error(Status status)
      : std::runtime_error(std::string(status.name()) + ": " + status.message()), status_(std::move(status)) {}
  dlb_status code() const noexcept { return status_.code(); }
  const char* name() const noexcept { return status_.name(); }
  const std::string& message() const noexcept { return status_.message(); }
  const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

inline void Status::throw_if_error() const {
  if (!ok()) throw Error(*this);
}

/** A value or the Status of the call that failed to make it (the non-throwing form). */
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as a return value
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const noexcept { return status_.ok(); }
  explicit operator bool() const noexcept { return ok(); }
  const Status& status() const noexcept { return status_; }
  /** The value; throws dlbridge::Error when the call failed. */
  T& value() & { return status_.throw_if_error(), value_; }
  T&& value() && { return status_.throw_if_error(), std::move(value_); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  T value_{};
};

/** Runs a C call and turns its status into a Status (message read at once, same thread). */
inline Status check(dlb_status code) { return Status::last(code); }

/** Shape lists, as parameters only: braces, or any contiguous container of int64_t. */
class Extents {
 public:
  Extents(std::initializer_list<int64_t> list) : list_(list) {}
  template <class C, class = decltype(std::data(std::declval<const C&>()))>
  Extents(const C& c) : data_(std::data(c)), size_(std::size(c)) {}  // NOLINT: implicit
  Extents(const int64_t* data, size_t size) : data_(data), size_(size) {}
  const int64_t* data() const noexcept { return data_ ? data_ : list_.begin(); }
  /** The count, capped so that the library refuses more than DLB_MAX_NDIM. */
  int32_t ndim() const noexcept {
    size_t n = data_ ? size_ : list_.size();
    return n > DLB_MAX_NDIM ? DLB_MAX_NDIM + 1 : static_cast<int32_t>(n);
  }

 private:
  std::initializer_list<int64_t> list_{};
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

/** The dtype of a name ("float32", "int64", "bfloat16"), parsed by the library. */
inline Result<DLDataType> try_dtype(const char* name) {
  DLDataType out{};
  Status s = check(dlb_dtype_from_name(name, &out));
  if (!s.ok()) return s;
  return out;
}
inline DLDataType dtype(const char* name) { return try_dtype(name).value(); }

/** The library's name of a dtype. */
inline Result<std::string> try_dtype_name(DLDataType dtype) {
  char buf[64];
  Status s = check(dlb_dtype_name(dtype, buf, sizeof buf));
  if (!s.ok()) return s;
  return std::string(buf);
}
inline std::string dtype_name(DLDataType dtype) { return try_dtype_name(dtype).value(); }

/**
 * Whether T is an element type dtype_of<T>() names: bool, the integer types
 * and float and double. long double is not (its width differs between
 * ABIs, and the library takes no float of its size).
 */
template <class T>
inline constexpr bool is_element_v =
    std::is_arithmetic_v<std::remove_cv_t<T>> && !std::is_same_v<std::remove_cv_t<T>, long double>;

/** The dtype of a C++ element type (is_element_v<T>: arithmetic types but long double). */
template <class T>
constexpr DLDataType dtype_of() {
  using U = std::remove_cv_t<T>;
  static_assert(is_element_v<U>, "dtype_of<T>: T must be bool, an integer type, float or double");
  constexpr uint8_t code = std::is_same_v<U, bool> ? uint8_t{kDLBool}
                           : std::is_floating_point_v<U> ? uint8_t{kDLFloat}
                           : std::is_signed_v<U> ? uint8_t{kDLInt}
                                                 : uint8_t{kDLUInt};
  return DLDataType{code, static_cast<uint8_t>(sizeof(U) * 8), 1};
}

/** Managed tensors exported by the library whose deleter has not run. */
inline int64_t live_exports() noexcept { return dlb_live_exports(); }

/**
 * The owner of a managed tensor (M is DLManagedTensorVersioned or
 * DLManagedTensor): move-only; the destructor and reset() run the deleter
 * exactly once (through the library's dlb_managed_free_*).
 */
template <class M, void (*Free)(M*)>
class BasicManagedTensor {
 public:
  BasicManagedTensor() = default;
  /** Takes ownership of `tensor` (may be NULL). */
  explicit BasicManagedTensor(M* tensor) noexcept : p_(tensor) {}
  BasicManagedTensor(BasicManagedTensor&& o) noexcept : p_(o.release()) {}
  BasicManagedTensor& operator=(BasicManagedTensor&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  BasicManagedTensor(const BasicManagedTensor&) = delete;
  BasicManagedTensor& operator=(const BasicManagedTensor&) = delete;
  ~BasicManagedTensor() { reset(); }

  M* get() const noexcept { return p_; }
  M* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  /** The tensor, borrowed (NULL when empty). */
  const DLTensor* dl_tensor() const noexcept { return p_ ? &p_->dl_tensor : nullptr; }
  /** Hands the tensor to the caller (a C consumer that will run its deleter). */
  M* release() noexcept { return std::exchange(p_, nullptr); }
  /** Runs the deleter of the tensor held, if any, and takes `tensor`. */
  void reset(M* tensor = nullptr) noexcept {
    M* old = std::exchange(p_, tensor);
    if (old) Free(old);
  }

 private:
  M* p_ = nullptr;
};

/** A DLPack 1.x managed tensor owner. */
using ManagedTensor = BasicManagedTensor<DLManagedTensorVersioned, dlb_managed_free_versioned>;
/** A legacy (pre-1.0) managed tensor owner. */
using LegacyManagedTensor = BasicManagedTensor<DLManagedTensor, dlb_managed_free_legacy>;

/** dlb_export_options with the library's defaults, and setters. */
struct ExportOptions : dlb_export_options {
  ExportOptions() noexcept : dlb_export_options() { dlb_export_options_init(this); }
  ExportOptions& copy_policy(dlb_copy_policy p) noexcept { return copy = p, *this; }
  ExportOptions& add_flags(uint64_t f) noexcept { return flags |= f, *this; }
  ExportOptions& target(DLDevice d) noexcept { return has_target_device = 1, target_device = d, *this; }
};

/** dlb_import_options with the library's defaults, and setters. */
struct ImportOptions : dlb_import_options {
  ImportOptions() noexcept : dlb_import_options() { dlb_import_options_init(this); }
  ImportOptions& alignment(uint64_t bytes) noexcept { return require_alignment = bytes, *this; }
  ImportOptions& contiguous(bool on = true) noexcept { return require_contiguous = on, *this; }
  ImportOptions& writable(bool on = true) noexcept { return require_writable = on, *this; }
  ImportOptions& add_flags(uint64_t f) noexcept { return flags |= f, *this; }
};

/**
 * One reference on a dlb_buffer. Move-only: retain() takes another
 * reference explicitly; the destructor drops this one. An empty Buffer
 * (default, moved from, released) passes NULL to the library, which refuses
 * with DLB_ERR_INVALID_ARGUMENT.
 */
class Buffer {
 public:
  Buffer() = default;
  /** Takes ownership of one reference (the caller's) on `buffer`. */
  static Buffer adopt(dlb_buffer* buffer) noexcept { return Buffer(buffer); }
  Buffer(Buffer&& o) noexcept : p_(o.release()) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  dlb_buffer* get() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  /** Another owner of the same buffer (dlb_buffer_retain). */
  Buffer retain() const noexcept { return Buffer(dlb_buffer_retain(p_)); }
  /** Hands this reference to the caller (release it with dlb_buffer_release). */
  dlb_buffer* release() noexcept { return std::exchange(p_, nullptr); }
  /** Drops this reference and takes `buffer`'s. */
  void reset(dlb_buffer* buffer = nullptr) noexcept { dlb_buffer_release(std::exchange(p_, buffer)); }

  /** Zero-filled host memory (dlb_buffer_alloc). */
  static Result<Buffer> try_alloc(DLDataType dtype, Extents shape, DLDevice device = {kDLCPU, 0}) {
    return made([&](dlb_buffer** out) { return dlb_buffer_alloc(device, dtype, shape.ndim(), shape.data(), out); });
  }
  static Buffer alloc(DLDataType dtype, Extents shape, DLDevice device = {kDLCPU, 0}) {
    return try_alloc(dtype, shape, device).value();
  }

  /** Zero-filled host memory another process can map (dlb_buffer_alloc_shared). */
  static Result<Buffer> try_alloc_shared(DLDataType dtype, Extents shape) {
    return made([&](dlb_buffer** out) {
      return dlb_buffer_alloc_shared(DLDevice{kDLCPU, 0}, dtype, shape.ndim(), shape.data(), out);
    });
  }
  static Buffer alloc_shared(DLDataType dtype, Extents shape) { return try_alloc_shared(dtype, shape).value(); }

  /** Memory the caller keeps alive for longer than the buffer and its exports (no release callback). */
  static Result<Buffer> try_wrap(const DLTensor& view, uint64_t flags = 0) {
    return made([&](dlb_buffer** out) { return dlb_buffer_wrap(&view, flags, nullptr, nullptr, out); });
  }
  static Buffer wrap(const DLTensor& view, uint64_t flags = 0) { return try_wrap(view, flags).value(); }

  /**
   * Memory someone else owns: `on_release()` runs exactly once when neither
   * a handle nor an export uses it any more, on whichever thread lets go
   * last; it must not throw. On failure it is destroyed without being
   * called (the memory is still the caller's).
   */
  template <class F>
  static Result<Buffer> try_wrap(const DLTensor& view, uint64_t flags, F&& on_release) {
    using Fn = std::decay_t<F>;
    Fn* ctx = new Fn(std::forward<F>(on_release));
    Result<Buffer> r = made([&](dlb_buffer** out) { return dlb_buffer_wrap(&view, flags, &run_once<Fn>, ctx, out); });
    if (!r.ok()) delete ctx;
    return r;
  }
  template <class F>
  static Buffer wrap(const DLTensor& view, uint64_t flags, F&& on_release) {
    return try_wrap(view, flags, std::forward<F>(on_release)).value();
  }

  /**
   * Takes a managed tensor in (dlb_import_versioned). On success the
   * Buffer owns it and `tensor` is left empty; on failure `tensor` still
   * owns it. An empty `tensor` (imported already) is refused by the library.
   */
  static Result<Buffer> try_import(ManagedTensor&& tensor, const ImportOptions* options = nullptr) {
    Result<Buffer> r = made([&](dlb_buffer** out) { return dlb_import_versioned(tensor.get(), options, out); });
    if (r.ok()) tensor.release();
    return r;
  }
  static Buffer import(ManagedTensor&& tensor, const ImportOptions* options = nullptr) {
    return try_import(std::move(tensor), options).value();
  }
  /** The same for a legacy managed tensor (dlb_import_legacy). */
  static Result<Buffer> try_import(LegacyManagedTensor&& tensor, const ImportOptions* options = nullptr) {
    Result<Buffer> r = made([&](dlb_buffer** out) { return dlb_import_legacy(tensor.get(), options, out); });
    if (r.ok()) tensor.release();
    return r;
  }
  static Buffer import(LegacyManagedTensor&& tensor, const ImportOptions* options = nullptr) {
    return try_import(std::move(tensor), options).value();
  }

  /** A DLPack 1.x export (dlb_export_versioned); NULL options: the defaults. */
  Result<ManagedTensor> try_export_versioned(const ExportOptions* options = nullptr) const {
    DLManagedTensorVersioned* out = nullptr;
    Status s = check(dlb_export_versioned(p_, options, &out));
    if (!s.ok()) return s;
    return ManagedTensor(out);
  }
  ManagedTensor export_versioned(const ExportOptions* options = nullptr) const {
    return try_export_versioned(options).value();
  }
  /** A legacy export (dlb_export_legacy). */
  Result<LegacyManagedTensor> try_export_legacy(const ExportOptions* options = nullptr) const {
    DLManagedTensor* out = nullptr;
    Status s = check(dlb_export_legacy(p_, options, &out));
    if (!s.ok()) return s;
    return LegacyManagedTensor(out);
  }
  LegacyManagedTensor export_legacy(const ExportOptions* options = nullptr) const {
    return try_export_legacy(options).value();
  }

  /** A compact host copy (dlb_buffer_to_host). */
  Result<Buffer> try_to_host() const {
    return made([&](dlb_buffer** out) { return dlb_buffer_to_host(p_, out); });
  }
  Buffer to_host() const { return try_to_host().value(); }

  /** Marks the buffer deleted (donated): later exports fail with DLB_ERR_DELETED. */
  Status try_mark_deleted() const { return check(dlb_buffer_delete(p_)); }
  void mark_deleted() const { try_mark_deleted().throw_if_error(); }

  /** The metadata (dlb_buffer_dltensor): shape and strides point into the buffer. */
  Result<DLTensor> try_dltensor() const {
    DLTensor t{};
    Status s = check(dlb_buffer_dltensor(p_, &t));
    if (!s.ok()) return s;
    return t;
  }
  DLTensor dltensor() const { return try_dltensor().value(); }

  uint64_t flags() const noexcept { return dlb_buffer_flags(p_); }
  uint64_t nbytes() const noexcept { return dlb_buffer_nbytes(p_); }
  int64_t refcount() const noexcept { return dlb_buffer_refcount(p_); }
  bool read_only() const noexcept { return (flags() & DLB_BUFFER_READ_ONLY) != 0; }

  /**
   * The elements of a compact host buffer of dtype dtype_of<T>(), valid
   * while this Buffer lives (`const T` for read-only access). Refused:
   * another dtype (DLB_ERR_UNSUPPORTED_DTYPE), memory the CPU cannot read
   * (DLB_ERR_UNSUPPORTED_DEVICE), a layout that is not compact row-major
   * (DLB_ERR_UNSUPPORTED_LAYOUT), non-const T of a read-only buffer
   * (DLB_ERR_READ_ONLY), and what dlb_buffer_dltensor() refuses.
   */
  template <class T>
  Result<T*> try_data() const {
    size_t n = 0;
    return host_elements<T>(&n);
  }
  template <class T>
  T* data() const {
    return try_data<T>().value();
  }
  /** The element count, from dlb_layout_describe(); 0 for an empty or deleted buffer. */
  uint64_t numel() const {
    DLTensor t{};
    dlb_layout_info info{};
    info.struct_size = sizeof info;
    if (dlb_buffer_dltensor(p_, &t) != DLB_OK || dlb_layout_describe(&t, &info) != DLB_OK) return 0;
    return info.numel;
  }
#ifdef DLBRIDGE_HPP_HAS_SPAN
  /** data<T>() as a std::span of numel() elements (C++20). */
  template <class T>
  Result<std::span<T>> try_span() const {
    size_t n = 0;
    Result<T*> r = host_elements<T>(&n);
    if (!r.ok()) return r.status();
    return std::span<T>(*r, n);
  }
  template <class T>
  std::span<T> span() const {
    return try_span<T>().value();
  }
#endif

 private:
  explicit Buffer(dlb_buffer* p) noexcept : p_(p) {}

  template <class Make>
  static Result<Buffer> made(Make&& make) {
    dlb_buffer* out = nullptr;
    Status s = check(make(&out));
    if (!s.ok()) return s;
    return Buffer(out);
  }

  template <class Fn>
  static void run_once(void* ctx) noexcept {
    Fn* f = static_cast<Fn*>(ctx);
    (*f)();
    delete f;
  }

  // The library's host view (dlb_buffer_host_view decides what may be
  // viewed); only the element type is checked here, against T. Never
  // throws (but std::bad_alloc): a dtype without a name is shown by its fields.
  template <class T>
  Result<T*> host_elements(size_t* count) const {
    dlb_host_view v{};
    v.struct_size = sizeof v;
    Status s = check(dlb_buffer_host_view(p_, std::is_const_v<T> ? DLB_HOST_VIEW_READ : DLB_HOST_VIEW_WRITE, &v));
    if (!s.ok()) return s;
    constexpr DLDataType want = dtype_of<T>();
    if (v.dtype.code != want.code || v.dtype.bits != want.bits || v.dtype.lanes != want.lanes) {
      return Status(DLB_ERR_UNSUPPORTED_DTYPE, "the buffer holds " + name_of(v.dtype) + ", not " + name_of(want));
    }
    *count = static_cast<size_t>(v.numel);
    return static_cast<T*>(v.data);
  }

  static std::string name_of(DLDataType d) {
    char buf[64];
    if (dlb_dtype_name(d, buf, sizeof buf) == DLB_OK) return buf;
    return "dtype {code " + std::to_string(d.code) + ", bits " + std::to_string(d.bits) + ", lanes " +
           std::to_string(d.lanes) + "}";
  }

  dlb_buffer* p_ = nullptr;
};

}  // namespace dlbridge

#endif /* DLBRIDGE_DLBRIDGE_HPP_ */
