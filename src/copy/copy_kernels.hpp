// Internal to the copy engine: what the planner (copy_engine.cpp), the
// dispatch (copy_dispatch.cpp), the row kernels (copy_rows.cpp) and the
// transpose kernels (copy_tiles.cpp) share: the normalised view, the
// odometer over outer dimensions, and small load/store helpers.
#ifndef DLBRIDGE_SRC_COPY_KERNELS_HPP_
#define DLBRIDGE_SRC_COPY_KERNELS_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "copy_engine.hpp"

#if (defined(__SSE2__) || defined(__x86_64__)) && !defined(DLB_COPY_NO_SIMD)
#define DLB_COPY_SSE2 1
#include <emmintrin.h>
#include <xmmintrin.h>
// AVX2 kernels carry their own target attribute; the rest of the library
// stays baseline x86-64.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DLB_COPY_AVX2 1
#include <immintrin.h>
#endif
#endif

namespace dlb {
namespace copy_detail {


using byte = unsigned char;

// Most dimensions a normalised view can keep inside the fixed scratch.
// After dropping size-1 dimensions and merging, anything larger than this
// is handled by the index-by-index fallback, which needs no scratch.
constexpr int kMaxDims = 64;

template <std::size_t E>
struct Elem {
  byte b[E];
};

template <std::size_t E>
inline void move_elem(byte* dst, const byte* src) noexcept {
  std::memcpy(dst, src, E);
}

#ifndef DLB_COPY_PREFETCH_LOCALITY
#define DLB_COPY_PREFETCH_LOCALITY 2
#endif
inline void prefetch(const void* p) noexcept {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, DLB_COPY_PREFETCH_LOCALITY);
#else
  (void)p;
#endif
}
#if defined(DLB_COPY_SSE2)
inline void store16(byte* d, __m128i v, bool nt) noexcept {
  if (nt) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), v);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), v);
  }
}
inline __m128i load16(const byte* s) noexcept { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)); }
#endif

// A normalised view: n >= 1 dimensions, every extent >= 1, strides in bytes.
struct View {
  int n = 0;
  std::int64_t shape[kMaxDims];
  std::ptrdiff_t stride[kMaxDims];
};

// Walks every combination of the outer dimensions listed in `dims`
// (row-major order over them) and calls f(src_offset, dst_offset) with the
// byte offsets of that combination. dst_pitch[d] is dimension d's stride in
// the compact destination.
template <class F>
void for_each_outer(const View& v, const int* dims, int nd, const std::ptrdiff_t* dst_pitch, F&& f) noexcept {
  if (nd == 0) {
    f(std::ptrdiff_t{0}, std::ptrdiff_t{0});
    return;
  }
  std::int64_t idx[kMaxDims] = {};
  std::ptrdiff_t so = 0;
  std::ptrdiff_t dof = 0;
  for (;;) {
    f(so, dof);
    int k = nd - 1;
    for (; k >= 0; --k) {
      const int d = dims[k];
      if (++idx[k] < v.shape[d]) {
        so += v.stride[d];
        dof += dst_pitch[d];
        break;
      }
      so -= (v.shape[d] - 1) * v.stride[d];
      dof -= (v.shape[d] - 1) * dst_pitch[d];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

inline std::ptrdiff_t abs_pd(std::ptrdiff_t x) noexcept { return x < 0 ? -x : x; }

// dst_pitch[d]: dimension d's byte stride in the compact destination.
inline void compact_pitches(const View& v, std::size_t e, std::ptrdiff_t* dst_pitch) noexcept {
  const int last = v.n - 1;
  dst_pitch[last] = static_cast<std::ptrdiff_t>(e);
  for (int d = last - 1; d >= 0; --d) dst_pitch[d] = dst_pitch[d + 1] * v.shape[d + 1];
}

// Which kernels write with streaming stores.
struct Streaming {
  bool tiles;    // transposes
  bool rows;     // row gathers
  bool compact;  // compact runs
};

// n bytes from src to dst (a compact run), with streaming stores when nt
// (whole 64-byte destination lines; the unaligned head and the tail
// through memcpy).
void copy_compact(byte* dst, const byte* src, std::size_t n, bool nt) noexcept;
// The same, each `unit`-byte word's bytes reversed on the way (unit 2, 4
// or 8; n a multiple of it) (copy_swap.cpp).
void copy_compact_swapped(byte* dst, const byte* src, std::size_t n, bool nt, std::size_t unit, int isa) noexcept;
// false once testing::set_compact_streaming turned streamed compact runs
// off: the planner then leaves Streaming::compact unset (copy_dispatch.cpp).
bool compact_streaming() noexcept;

// The row kernels (copy_rows.cpp): every innermost run of v gathered into
// its compact destination row. E is the element width (0: any width e).
// swap > 1: each swap-byte word of the destination reversed (a source in
// the other byte order; 0 for none).
template <std::size_t E>
void copy_rows(const byte* src, const View& v, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e, bool nt,
               int isa, std::size_t swap) noexcept;
// The transpose kernels (copy_tiles.cpp): dimension k (the one with the
// tightest source stride) and the innermost one copied as 2-D blocks in
// tiles, the other outer dimensions walked around them; swap as above.
template <std::size_t E>
void copy_transposed(const byte* src, const View& v, int k, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e,
                     bool nt, int isa, std::size_t swap) noexcept;

#define DLB_COPY_WIDTHS(X) X(0) X(1) X(2) X(3) X(4) X(6) X(8) X(12) X(16)
#define DLB_COPY_DECLARE(W)                                                                                       \
  extern template void copy_rows<W>(const byte*, const View&, const std::ptrdiff_t*, byte*, std::size_t, bool,   \
                                    int, std::size_t) noexcept;                                                   \
  extern template void copy_transposed<W>(const byte*, const View&, int, const std::ptrdiff_t*, byte*, std::size_t, \
                                          bool, int, std::size_t) noexcept;
DLB_COPY_WIDTHS(DLB_COPY_DECLARE)
#undef DLB_COPY_DECLARE

// The dispatch (copy_dispatch.cpp): v (normalised, strides in bytes) into
// compact dst with the kernel its strides call for, at ISA level isa;
// swap > 1: each swap-byte word's bytes reversed on the way.
void copy_view_any_width(const byte* src, const View& v, byte* dst, std::size_t e, Streaming nt, int isa,
                         std::size_t swap) noexcept;
// The same into a destination whose dimensions have the byte strides
// dst_pitch (a part of a larger compact array: v covers a block of it).
void copy_view_pitched(const byte* src, const View& v, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e,
                       Streaming nt, int isa, std::size_t swap) noexcept;
// The outer dimension that copy_view_any_width copies as a transpose with
// the innermost one (the one with the tightest source stride, when that is
// tighter than the innermost stride), or -1 when v's rows are gathered.
int transpose_axis(const View& v, std::size_t e) noexcept;
// Whether streamed transposes walk the source in its own order (the
// default; testing::set_transpose_source_order turns it off).
bool transpose_in_source_order() noexcept;
// The level copies use now (testing::set_copy_isa changes it).
int current_isa() noexcept;
// The byte-order kernel (copy_swap.cpp): reverses the bytes of each
// `unit`-byte word (2, 4 or 8) of the n bytes at p (n a multiple of unit),
// in place, at ISA level isa.
void swap_bytes(byte* p, std::size_t n, std::size_t unit, int isa) noexcept;

}  // namespace copy_detail
}  // namespace dlb

#endif
