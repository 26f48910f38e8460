// Shared pieces of the libFuzzer targets: a byte reader, checks that abort
// with a message, and the layout arithmetic every target needs to keep the
// tensors it builds inside memory it owns.
//
// Each target is one translation unit built together with all library
// sources (see scripts/fuzz); this header is included once per binary.
#ifndef DLBRIDGE_FUZZ_FUZZ_COMMON_HPP_
#define DLBRIDGE_FUZZ_FUZZ_COMMON_HPP_

#include <dlbridge/dlbridge.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// Huge allocations attempted by the library (refused sizes) must come back
// as NULL so that it reports DLB_ERR_OUT_OF_MEMORY instead of ASan aborting.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

#define FUZZ_CHECK(cond, ...)                                                      \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                           \
      std::fprintf(stderr, " [last error: %s]\n", dlb_last_error_message());       \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

namespace fuzz {

// Reads little-endian values from the front of the input; zeros once the
// input is exhausted, so every input is a complete program.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  uint8_t u8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(u8()) << (8 * i);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  // Mostly small values (tag < 0xF0: tag % 16, minus 4 when `signed_small`),
  // otherwise eight raw bytes, so both realistic and hostile extents and
  // strides are reached.
  int64_t extent(bool signed_small) {
    uint8_t tag = u8();
    if (tag < 0xF0) {
      int64_t v = tag % 16;
      return signed_small ? v - 4 : v;
    }
    return i64();
  }
  void bytes(void* out, size_t len) {
    auto* o = static_cast<uint8_t*>(out);
    for (size_t i = 0; i < len; ++i) o[i] = u8();
  }
  size_t left() const { return n_; }

 private:
  const uint8_t* p_;
  size_t n_;
};

// DLDeviceType is a C enum whose declared range (0.6 header) ends at 15,
// while producers may write any int32_t (DLPack 1.x adds 16..20). Reading
// or writing such a value through the enum type is undefined in C++, so the
// harness goes through the bytes.
inline int32_t dev_type(const DLDevice& d) {
  int32_t v;
  std::memcpy(&v, &d.device_type, sizeof(v));
  return v;
}
inline void set_dev_type(DLDevice& d, int32_t v) { std::memcpy(&d.device_type, &v, sizeof(v)); }
inline DLDevice make_device(int32_t type, int32_t id) {
  DLDevice d;
  set_dev_type(d, type);
  d.device_id = id;
  return d;
}

// Device types dlbridge must know (DLPack 0.6 .. 1.3).
inline bool known_device(const DLDevice& d) {
  int32_t t = dev_type(d);
  return d.device_id >= 0 && ((t >= 1 && t <= 4) || (t >= 7 && t <= 18));
}

// Device types whose memory the host can read directly.
inline bool host_device(int32_t t) {
  return t == kDLCPU || t == kDLCUDAHost || t == kDLROCMHost || t == kDLCUDAManaged;
}

// The dtypes DLPack defines (the header documents the same table): int and
// uint of 2 and 4 bits are DLPack 1.1's sub-byte integers.
inline bool dtype_legal(DLDataType d) {
  if (d.lanes < 1) return false;
  switch (d.code) {
    case kDLInt:
    case kDLUInt:
      return d.bits == 2 || d.bits == 4 || d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLOpaqueHandle:
      return d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLFloat:
      return d.bits == 16 || d.bits == 32 || d.bits == 64;
    case kDLBfloat:
      return d.bits == 16;
    case kDLComplex:
      return d.bits == 32 || d.bits == 64 || d.bits == 128;
    case 6:  // bool
      return d.bits == 8;
    default:
      if (d.code >= 7 && d.code <= 14) return d.bits == 8;
      if (d.code == 15 || d.code == 16) return d.bits == 6;
      if (d.code == 17) return d.bits == 4;
      return false;
  }
}

// Dtypes the targets pick from by index, so most inputs use a legal one.
inline DLDataType pick_dtype(Reader& r) {
  static const DLDataType table[] = {
      {kDLInt, 8, 1},   {kDLInt, 16, 1},     {kDLInt, 32, 1},   {kDLInt, 64, 1},
      {kDLUInt, 8, 1},  {kDLFloat, 16, 1},   {kDLFloat, 32, 1}, {kDLFloat, 64, 1},
      {kDLBfloat, 16, 1}, {kDLComplex, 64, 1}, {kDLComplex, 128, 1}, {6, 8, 1},
      {10, 8, 1},       {15, 6, 1},          {17, 4, 1},        {17, 4, 2},
      {kDLFloat, 32, 4}, {kDLInt, 8, 3},     {kDLFloat, 16, 2}, {16, 6, 4},
      // Appended, so that the seeds' indices keep their meaning.
      {kDLInt, 4, 1},   {kDLUInt, 2, 1},     {kDLUInt, 4, 2},   {kDLInt, 2, 3},
  };
  uint8_t sel = r.u8();
  constexpr size_t n = sizeof(table) / sizeof(table[0]);
  if (sel < 0xF0) return table[sel % n];
  DLDataType d;
  d.code = r.u8();
  d.bits = r.u8();
  d.lanes = r.u16();
  return d;
}

inline DLDevice pick_device(Reader& r) {
  static const int32_t types[] = {kDLCPU, kDLCPU, kDLCPU, kDLCPU, kDLCPU, kDLCUDAHost,
                                  kDLCUDAManaged, kDLROCMHost, kDLCUDA, kDLROCM};
  uint8_t sel = r.u8();
  DLDevice d;
  if (sel < 0xF0) {
    set_dev_type(d, types[sel % (sizeof(types) / sizeof(types[0]))]);
    d.device_id = 0;
  } else {
    set_dev_type(d, static_cast<int32_t>(r.u32()));
    d.device_id = static_cast<int32_t>(r.u32());
  }
  return d;
}

// What the harness knows about a strided view, computed with overflow
// checks in 128-bit arithmetic.
// An ndim as a producer might write it: mostly 0..7, sometimes up to 70
// (past DLB_MAX_NDIM), rarely any int32. `alloc` is how many extents the
// harness reads and stores (0..70).
struct NdimPick {
  int32_t ndim;
  int32_t alloc;
};
inline NdimPick pick_ndim(Reader& r) {
  int32_t ndim;
  const uint8_t ns = r.u8();
  if (ns < 0xC0) ndim = ns % 8;
  else if (ns < 0xF8) ndim = ns % 71;
  else ndim = static_cast<int32_t>(r.u32());
  return NdimPick{ndim, ndim < 0 ? 0 : (ndim > 70 ? 70 : ndim)};
}

struct Extent {
  bool sane = false;       // ndim in range, extents >= 0, dtype legal, sizes fit
  bool fits = false;       // sane, and lo/hi below fit in int64 (placeable)
  bool subbyte = false;    // packed, bits * lanes not a multiple of 8
  bool padded = false;     // one byte per element (the padded sub-byte layout)
  bool compact = false;    // compact row-major (size-1 dims' strides ignored)
  int64_t numel = 0;       // element count
  int64_t elem_bytes = 0;  // bytes per element (0 for packed sub-byte)
  int64_t nbytes = 0;      // compact byte size
  int64_t lo = 0;          // lowest byte touched, relative to data + byte_offset
  int64_t hi = 0;          // one past the highest byte touched, same origin
};

// The padded sub-byte layout (DLPack 1.1's IS_SUBBYTE_TYPE_PADDED,
// dlbridge's DLB_BUFFER_SUBBYTE_PADDED), as the spec and dlbridge's docs
// define it: "sub-byte types are packed unless the flag says each element
// is padded to a byte". For a sub-byte type (bits < 8) whose element
// (bits * lanes) is narrower than a byte, each element sits in a byte of
// its own. A sub-byte type whose element is a byte or wider (int4 x 2,
// float6 x 3) has no layout the flag can mean (is each lane padded, or the
// element?): such a tensor is malformed. A type of whole bytes is not a
// sub-byte type: the flag says nothing about it (imports ignore it; wrap,
// an argument, refuses it, which the export target checks itself).
enum class Padding { none, padded, ambiguous };
inline Padding padding_of(DLDataType dtype, bool flag) {
  if (!flag || dtype.bits >= 8) return Padding::none;
  return static_cast<uint32_t>(dtype.bits) * dtype.lanes < 8 ? Padding::padded : Padding::ambiguous;
}

// `padded`: the tensor carries the padded flag (padding_of says what it
// means for the dtype).
inline Extent compute_extent(int32_t ndim, const int64_t* shape, const int64_t* strides,
                             DLDataType dtype, bool padded = false) {
  using i128 = __int128;
  const i128 lim = static_cast<i128>(INT64_MAX);
  Extent e;
  if (ndim < 0 || ndim > DLB_MAX_NDIM) return e;
  if (ndim > 0 && shape == nullptr) return e;
  if (!dtype_legal(dtype)) return e;
  const Padding padding = padding_of(dtype, padded);
  if (padding == Padding::ambiguous) return e;
  e.padded = padding == Padding::padded;
  const i128 elem_bits = e.padded ? 8 : static_cast<i128>(dtype.bits) * dtype.lanes;
  e.subbyte = elem_bits % 8 != 0;
  e.elem_bytes = e.subbyte ? 0 : static_cast<int64_t>(elem_bits / 8);
  i128 numel = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0) return e;
  }
  bool zero = false;
  for (int32_t i = 0; i < ndim; ++i) zero = zero || shape[i] == 0;
  for (int32_t i = 0; i < ndim && !zero; ++i) {
    numel *= shape[i];
    if (numel > lim) return e;
  }
  if (zero) numel = 0;
  i128 nbits = numel * elem_bits;
  // The library counts bits in 64 unsigned bits.
  if (nbits > static_cast<i128>(UINT64_MAX)) return e;
  e.numel = static_cast<int64_t>(numel);
  e.nbytes = static_cast<int64_t>((nbits + 7) / 8);
  e.sane = true;  // the byte extent below may still not fit
  // Compactness and the touched range, in elements first.
  i128 lo_el = 0, hi_el = 0;  // hi_el: index of the highest element
  bool compact = true;
  i128 expect = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    i128 st = strides ? static_cast<i128>(strides[i]) : expect;
    if (shape[i] != 1 && st != expect) compact = false;
    i128 span = static_cast<i128>(shape[i] - 1) * st;
    if (numel > 0) {
      if (span < 0) lo_el += span; else hi_el += span;
      if (lo_el < -lim || hi_el > lim) return e;  // byte extent cannot fit
    }
    expect *= shape[i];
    if (expect > lim) expect = lim;  // only compared with strides, which fit
  }
  e.compact = compact || numel <= 1;  // (only meaningful when fits)
  if (numel == 0) {
    e.lo = e.hi = 0;
  } else {
    i128 lo_bits = lo_el * elem_bits;
    i128 hi_bits = (hi_el + 1) * elem_bits;
    i128 lo_b = lo_bits >= 0 ? lo_bits / 8 : -((-lo_bits + 7) / 8);
    i128 hi_b = (hi_bits + 7) / 8;
    if (lo_b < -lim || hi_b > lim) return e;
    e.lo = static_cast<int64_t>(lo_b);
    e.hi = static_cast<int64_t>(hi_b);
  }
  e.fits = true;
  return e;
}

// The bound on what a view may reach (src/core/layout.hpp, kMaxAddressSpan):
// no machine has more than 2^57 bytes of address space, so a non-empty view
// whose span (lowest to highest byte) or byte_offset exceeds it cannot
// exist, and the library must refuse it whatever its data pointer says.
constexpr uint64_t kMaxAddressSpan = uint64_t{1} << 57;
inline bool addressable(const Extent& e, uint64_t byte_offset) {
  if (!e.sane) return false;
  if (e.numel == 0) return true;  // nothing is addressed
  return e.fits && static_cast<__int128>(e.hi) - e.lo <= static_cast<__int128>(kMaxAddressSpan) &&
         byte_offset <= kMaxAddressSpan;
}

// Memory for a view: an exact-size heap block (so that ASan flags any byte
// read outside it) and the data pointer that makes [lo, hi) of the view
// land in it for a given byte_offset.
struct Placement {
  uint8_t* block = nullptr;  // malloc'ed, may be NULL for size 0
  size_t size = 0;
  void* data = nullptr;
};

// Places a sane view of extent `e` with `byte_offset`; false when it would
// need more than `cap` bytes (the caller then must not let anything read it).
inline bool place(const Extent& e, uint64_t byte_offset, size_t cap, Reader& r, Placement* out) {
  if (!e.fits || byte_offset > cap) return false;
  // 128-bit: lo and hi may each be near the 64-bit limits.
  const __int128 first = static_cast<__int128>(byte_offset) + e.lo;  // relative to data
  const __int128 shift128 = first < 0 ? -first : 0;
  const __int128 size128 = shift128 + static_cast<__int128>(byte_offset) + e.hi;
  if (size128 < 0 || size128 > static_cast<__int128>(cap)) return false;
  const int64_t shift = static_cast<int64_t>(shift128);
  const int64_t size = static_cast<int64_t>(size128);
  size_t alloc = size > 0 ? static_cast<size_t>(size) : 1;
  out->block = static_cast<uint8_t*>(std::malloc(alloc));
  if (out->block == nullptr) return false;
  out->size = static_cast<size_t>(size);
  // Contents from one input byte, so that large views do not swallow the
  // rest of the input.
  const uint32_t seed = r.u8() * 2654435761u + 1;
  for (size_t i = 0; i < alloc; ++i)
    out->block[i] = static_cast<uint8_t>((seed * (i + 1) * 2246822519u) >> 24);
  out->data = out->block + shift;
  return true;
}

// The naive copy the library's engine is checked against: an odometer over
// every index, one memcpy per element. `base` is data + byte_offset.
inline void reference_copy(const uint8_t* base, int32_t ndim, const int64_t* shape,
                           const int64_t* strides, int64_t elem_bytes, uint8_t* dst) {
  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; ++i) numel *= shape[i];
  if (numel == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(ndim), 0);
  std::vector<int64_t> st(static_cast<size_t>(ndim), 0);
  int64_t expect = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    st[static_cast<size_t>(i)] = strides ? strides[i] : expect;
    expect *= shape[i];
  }
  for (int64_t n = 0; n < numel; ++n) {
    int64_t off = 0;
    for (int32_t i = 0; i < ndim; ++i) off += idx[static_cast<size_t>(i)] * st[static_cast<size_t>(i)];
    std::memcpy(dst + n * elem_bytes, base + off * elem_bytes, static_cast<size_t>(elem_bytes));
    for (int32_t i = ndim - 1; i >= 0; --i) {
      if (++idx[static_cast<size_t>(i)] < shape[i]) break;
      idx[static_cast<size_t>(i)] = 0;
    }
  }
}

// A refusal of a valid view that a build may choose to tolerate while a
// reported library bug is open (scripts/fuzz passes DLB_FUZZ_CXXFLAGS on):
// DLB_FUZZ_TOLERATE_NEGATIVE_STRIDE_OVERFLOW accepts DLB_ERR_OVERFLOW for
// views that reach below element 0. Strict by default.
inline bool refusal_tolerated(const Extent& e, dlb_status s) {
#ifdef DLB_FUZZ_TOLERATE_NEGATIVE_STRIDE_OVERFLOW
  return e.lo < 0 && s == DLB_ERR_OVERFLOW;
#else
  (void)e;
  (void)s;
  return false;
#endif
}

inline bool status_known(dlb_status s) { return s >= 0 && s < DLB_STATUS_COUNT; }

// Checks the conventions every failing call keeps.
inline void check_failure(dlb_status s, const char* call) {
  FUZZ_CHECK(status_known(s), "%s returned unknown status %d", call, s);
  FUZZ_CHECK(dlb_last_error_code() == s, "%s: last error code %d, returned %d", call,
             dlb_last_error_code(), s);
  FUZZ_CHECK(dlb_last_error_message()[0] != '\0', "%s failed with an empty message", call);
}

// Export options from raw bytes: every field fuzzed, struct_size included;
// heap-allocated at its exact size so reads past it are caught.
inline dlb_export_options* make_export_options(Reader& r) {
  auto* o = static_cast<dlb_export_options*>(std::malloc(sizeof(dlb_export_options)));
  r.bytes(o, sizeof(*o));
  uint8_t fix = r.u8();
  if (fix & 1) o->struct_size = sizeof(dlb_export_options);
  if (fix & 2) o->copy = static_cast<int32_t>(static_cast<uint32_t>(o->copy) % 3u);
  if (fix & 4) o->flags &= 3;
  if (fix & 8) o->stream = DLB_STREAM_NONE;
  if (fix & 16) {
    o->target_device = make_device(kDLCPU, 0);
  }
  if (fix & 32) o->has_target_device = (fix & 64) ? 1 : 0;
  return o;
}

inline dlb_import_options* make_import_options(Reader& r) {
  auto* o = static_cast<dlb_import_options*>(std::malloc(sizeof(dlb_import_options)));
  r.bytes(o, sizeof(*o));
  uint8_t fix = r.u8();
  if (fix & 1) o->struct_size = sizeof(dlb_import_options);
  if (fix & 2) o->require_alignment = (fix & 64) ? 0 : (uint64_t{1} << (o->require_alignment % 8));
  if (fix & 4) o->flags &= DLB_IMPORT_LEGACY_READ_ONLY;
  if (fix & 8) o->require_contiguous = 0;
  if (fix & 16) o->require_writable = 0;
  return o;
}

}  // namespace fuzz

#endif
