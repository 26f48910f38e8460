// The strided copy engine.
//
// Plan of a copy:
//  1. Normalise the view: an empty view copies nothing; size-1 dimensions
//     are dropped (their strides mean nothing); adjacent dimensions that
//     walk memory as one (stride[i] == stride[i+1] * shape[i+1]) are merged.
//     Strides become byte strides from here on.
//  2. Choose a kernel for what is left:
//     - a single compact run (one dimension, stride == element size): one
//       memcpy;
//     - innermost stride == element size: one memcpy per row;
//     - some outer dimension walks memory more tightly than the innermost
//       one (a transpose, or any permutation that moves the compact axis
//       away from the end): that dimension and the innermost one are copied
//       as a 2-D block in tiles of one cache line by one cache line, so
//       that every line read and every line written is used whole while it
//       is in L1, whatever the power-of-two row pitch;
//     - otherwise a gather along the innermost dimension (reversed, gapped,
//       broadcast), specialised for widths 1, 2, 4, 8 and 16.
//     Tiles of 1-, 2-, 4- and 8-byte elements whose source runs are compact
//     are transposed in SSE2 registers where the target has SSE2.
//  3. The dimensions not handled by the kernel are walked by an odometer
//     that keeps a running source offset; the destination only advances.
//
// Elements are moved through fixed-size memcpy calls, which compilers turn
// into plain loads and stores without any alignment assumption.

#include "copy_engine.hpp"

#include <cstring>

#if defined(__SSE2__) && !defined(DLB_COPY_NO_SIMD)
#include <emmintrin.h>
#endif

namespace dlb {
namespace {

using byte = unsigned char;

// Most dimensions a normalised view can keep inside the fixed scratch.
// After dropping size-1 dimensions and merging, anything larger than this
// is handled by the index-by-index fallback, which needs no scratch.
constexpr int kMaxDims = 64;

// Bytes of a cache line: the side of a transpose micro tile, in bytes.
constexpr std::ptrdiff_t kLineBytes = 64;
// Side, in micro tiles, of the outer block walked before moving on, so that
// the pages touched by one block stay in the TLB (16 measured best for
// 4- and 8-byte elements on a 4096 x 4096 transpose).
constexpr std::int64_t kBlockTiles = 16;

template <std::size_t E>
struct Elem {
  byte b[E];
};

template <std::size_t E>
inline void move_elem(byte* dst, const byte* src) noexcept {
  std::memcpy(dst, src, E);
}

// One row: n elements from src (byte stride s) into compact dst.
template <std::size_t E>
void gather_row(byte* dst, const byte* src, std::ptrdiff_t s, std::int64_t n) noexcept {
  if (s == static_cast<std::ptrdiff_t>(E)) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * E);
    return;
  }
  if (s == 0) {
    if constexpr (E == 1) {
      std::memset(dst, *src, static_cast<std::size_t>(n));
    } else {
      Elem<E> v;
      std::memcpy(&v, src, E);
      for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + i * E, &v, E);
    }
    return;
  }
  if (s == -static_cast<std::ptrdiff_t>(E)) {
    // Reversed run: read backwards, write forwards.
    const byte* p = src - (n - 1) * static_cast<std::ptrdiff_t>(E);
    for (std::int64_t i = 0; i < n; ++i) {
      move_elem<E>(dst + i * E, p + (n - 1 - i) * static_cast<std::ptrdiff_t>(E));
    }
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) move_elem<E>(dst + i * E, src + i * s);
}

// The same for an element width known only at run time.
void gather_row_any(byte* dst, const byte* src, std::ptrdiff_t s, std::int64_t n,
                    std::size_t e) noexcept {
  if (s == static_cast<std::ptrdiff_t>(e)) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * e);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(dst, src + i * s, e);
    dst += e;
  }
}

// Fills the compact T x T tile tmp[i][j] = *(s0 + i*sr + j*sc) with SSE2
// register transposes, when the source runs are compact (sr == E) and the
// width has a kernel (1, 2, 4 and 8 bytes); returns false to leave the tile
// to the scalar loop.
template <std::size_t E, std::int64_t T>
inline bool gather_tile_simd(byte* tmp, const byte* s0, std::ptrdiff_t sr,
                             std::ptrdiff_t sc) noexcept {
#if defined(__SSE2__) && !defined(DLB_COPY_NO_SIMD)
  if (sr != static_cast<std::ptrdiff_t>(E)) return false;
  if constexpr (E == 8) {
    // 2 x 2 blocks: two source runs (j, j+1), two elements each (i, i+1).
    for (std::int64_t j = 0; j < T; j += 2) {
      const byte* a_row = s0 + j * sc;
      const byte* b_row = a_row + sc;
      for (std::int64_t i = 0; i < T; i += 2) {
        const __m128d a = _mm_loadu_pd(reinterpret_cast<const double*>(a_row + i * 8));
        const __m128d b = _mm_loadu_pd(reinterpret_cast<const double*>(b_row + i * 8));
        _mm_store_pd(reinterpret_cast<double*>(tmp + (i * T + j) * 8), _mm_unpacklo_pd(a, b));
        _mm_store_pd(reinterpret_cast<double*>(tmp + ((i + 1) * T + j) * 8), _mm_unpackhi_pd(a, b));
      }
    }
    return true;
  } else if constexpr (E == 4) {
    // 4 x 4 blocks.
    for (std::int64_t j = 0; j < T; j += 4) {
      const byte* r0 = s0 + j * sc;
      for (std::int64_t i = 0; i < T; i += 4) {
        __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(r0 + i * 4));
        __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(r0 + sc + i * 4));
        __m128 c = _mm_loadu_ps(reinterpret_cast<const float*>(r0 + 2 * sc + i * 4));
        __m128 d = _mm_loadu_ps(reinterpret_cast<const float*>(r0 + 3 * sc + i * 4));
        _MM_TRANSPOSE4_PS(a, b, c, d);
        _mm_store_ps(reinterpret_cast<float*>(tmp + (i * T + j) * 4), a);
        _mm_store_ps(reinterpret_cast<float*>(tmp + ((i + 1) * T + j) * 4), b);
        _mm_store_ps(reinterpret_cast<float*>(tmp + ((i + 2) * T + j) * 4), c);
        _mm_store_ps(reinterpret_cast<float*>(tmp + ((i + 3) * T + j) * 4), d);
      }
    }
    return true;
  } else if constexpr (E == 2) {
    // 8 x 8 blocks of 16-bit lanes: three rounds of interleaving.
    for (std::int64_t j = 0; j < T; j += 8) {
      const byte* r0 = s0 + j * sc;
      for (std::int64_t i = 0; i < T; i += 8) {
        __m128i x[8];
        for (int r = 0; r < 8; ++r) {
          x[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + r * sc + i * 2));
        }
        __m128i y[8];
        for (int r = 0; r < 4; ++r) {
          y[2 * r] = _mm_unpacklo_epi16(x[2 * r], x[2 * r + 1]);
          y[2 * r + 1] = _mm_unpackhi_epi16(x[2 * r], x[2 * r + 1]);
        }
        // y[0] = a0 b0 a1 b1 a2 b2 a3 b3, y[2] = c0 d0 ..., y[4] = e0 f0 ..., y[6] = g0 h0 ...
        __m128i z[8];
        z[0] = _mm_unpacklo_epi32(y[0], y[2]);  // a0 b0 c0 d0 a1 b1 c1 d1
        z[1] = _mm_unpackhi_epi32(y[0], y[2]);  // a2 b2 c2 d2 a3 b3 c3 d3
        z[2] = _mm_unpacklo_epi32(y[1], y[3]);  // a4 .. d4 a5 .. d5
        z[3] = _mm_unpackhi_epi32(y[1], y[3]);  // a6 .. d6 a7 .. d7
        z[4] = _mm_unpacklo_epi32(y[4], y[6]);  // e0 .. h0 e1 .. h1
        z[5] = _mm_unpackhi_epi32(y[4], y[6]);
        z[6] = _mm_unpacklo_epi32(y[5], y[7]);
        z[7] = _mm_unpackhi_epi32(y[5], y[7]);
        const __m128i out[8] = {
            _mm_unpacklo_epi64(z[0], z[4]), _mm_unpackhi_epi64(z[0], z[4]),
            _mm_unpacklo_epi64(z[1], z[5]), _mm_unpackhi_epi64(z[1], z[5]),
            _mm_unpacklo_epi64(z[2], z[6]), _mm_unpackhi_epi64(z[2], z[6]),
            _mm_unpacklo_epi64(z[3], z[7]), _mm_unpackhi_epi64(z[3], z[7]),
        };
        for (int r = 0; r < 8; ++r) {
          _mm_store_si128(reinterpret_cast<__m128i*>(tmp + ((i + r) * T + j) * 2), out[r]);
        }
      }
    }
    return true;
  } else if constexpr (E == 1) {
    // 16 x 16 blocks of bytes: four rounds of pairwise interleaving leave
    // output row i in register bit_reverse4(i).
    constexpr int kBitReverse4[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    for (std::int64_t j = 0; j < T; j += 16) {
      const byte* r0 = s0 + j * sc;
      for (std::int64_t i = 0; i < T; i += 16) {
        __m128i x[16];
        __m128i y[16];
        for (int r = 0; r < 16; ++r) {
          x[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + r * sc + i));
        }
        for (int r = 0; r < 8; ++r) {
          y[r] = _mm_unpacklo_epi8(x[2 * r], x[2 * r + 1]);
          y[r + 8] = _mm_unpackhi_epi8(x[2 * r], x[2 * r + 1]);
        }
        for (int r = 0; r < 8; ++r) {
          x[r] = _mm_unpacklo_epi16(y[2 * r], y[2 * r + 1]);
          x[r + 8] = _mm_unpackhi_epi16(y[2 * r], y[2 * r + 1]);
        }
        for (int r = 0; r < 8; ++r) {
          y[r] = _mm_unpacklo_epi32(x[2 * r], x[2 * r + 1]);
          y[r + 8] = _mm_unpackhi_epi32(x[2 * r], x[2 * r + 1]);
        }
        for (int r = 0; r < 8; ++r) {
          x[r] = _mm_unpacklo_epi64(y[2 * r], y[2 * r + 1]);
          x[r + 8] = _mm_unpackhi_epi64(y[2 * r], y[2 * r + 1]);
        }
        for (int r = 0; r < 16; ++r) {
          _mm_store_si128(reinterpret_cast<__m128i*>(tmp + (i + r) * T + j), x[kBitReverse4[r]]);
        }
      }
    }
    return true;
  }
#endif
  (void)tmp;
  (void)s0;
  (void)sr;
  (void)sc;
  return false;
}

// A 2-D block: dst[i][j] (row pitch dr bytes, compact rows) receives the
// element at src + i*sr + j*sc, for i < rows, j < cols. Used when |sr| is
// the tighter source stride, so reading down a destination column walks the
// source sequentially. Tiles are one cache line on each side.
template <std::size_t E>
void copy_tiled(byte* dst, std::ptrdiff_t dr, const byte* src, std::ptrdiff_t sr,
                std::ptrdiff_t sc, std::int64_t rows, std::int64_t cols) noexcept {
  constexpr std::int64_t T = (kLineBytes / static_cast<std::ptrdiff_t>(E)) > 0
                                 ? kLineBytes / static_cast<std::ptrdiff_t>(E)
                                 : 1;
  constexpr std::int64_t B = T * kBlockTiles;
  for (std::int64_t i0 = 0; i0 < rows; i0 += B) {
    const std::int64_t i_end = i0 + B < rows ? i0 + B : rows;
    for (std::int64_t j0 = 0; j0 < cols; j0 += B) {
      const std::int64_t j_end = j0 + B < cols ? j0 + B : cols;
      for (std::int64_t ti = i0; ti < i_end; ti += T) {
        const std::int64_t ti_end = ti + T < i_end ? ti + T : i_end;
        for (std::int64_t tj = j0; tj < j_end; tj += T) {
          const std::int64_t tj_end = tj + T < j_end ? tj + T : j_end;
          if (ti_end - ti == T && tj_end - tj == T) {
            // Full tile: gather it transposed into an L1-resident scratch,
            // then write each destination row segment in one go. Every
            // source and destination line is touched once, so rows that
            // alias in the cache (power-of-two pitches) cost nothing extra.
            alignas(64) byte tmp[T * T * E];
            const byte* s0 = src + ti * sr + tj * sc;
            if (!gather_tile_simd<E, T>(tmp, s0, sr, sc)) {
              for (std::int64_t j = 0; j < T; ++j) {
                const byte* s = s0 + j * sc;
                for (std::int64_t i = 0; i < T; ++i) {
                  move_elem<E>(tmp + (i * T + j) * static_cast<std::ptrdiff_t>(E), s + i * sr);
                }
              }
            }
            byte* d0 = dst + ti * dr + tj * static_cast<std::ptrdiff_t>(E);
            for (std::int64_t i = 0; i < T; ++i) {
              std::memcpy(d0 + i * dr, tmp + i * T * static_cast<std::ptrdiff_t>(E), T * E);
            }
          } else {
            for (std::int64_t j = tj; j < tj_end; ++j) {
              const byte* s = src + j * sc;
              byte* d = dst + j * static_cast<std::ptrdiff_t>(E);
              for (std::int64_t i = ti; i < ti_end; ++i) move_elem<E>(d + i * dr, s + i * sr);
            }
          }
        }
      }
    }
  }
}

void copy_tiled_any(byte* dst, std::ptrdiff_t dr, const byte* src, std::ptrdiff_t sr,
                    std::ptrdiff_t sc, std::int64_t rows, std::int64_t cols,
                    std::size_t e) noexcept {
  std::int64_t t = kLineBytes / static_cast<std::int64_t>(e);
  if (t < 1) t = 1;
  const std::ptrdiff_t pe = static_cast<std::ptrdiff_t>(e);
  for (std::int64_t ti = 0; ti < rows; ti += t) {
    const std::int64_t ti_end = ti + t < rows ? ti + t : rows;
    for (std::int64_t tj = 0; tj < cols; tj += t) {
      const std::int64_t tj_end = tj + t < cols ? tj + t : cols;
      for (std::int64_t j = tj; j < tj_end; ++j) {
        for (std::int64_t i = ti; i < ti_end; ++i) {
          std::memcpy(dst + i * dr + j * pe, src + i * sr + j * sc, e);
        }
      }
    }
  }
}

// A normalised view: n >= 1 dimensions, every extent >= 2, strides in bytes.
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
void for_each_outer(const View& v, const int* dims, int nd, const std::ptrdiff_t* dst_pitch,
                    F&& f) noexcept {
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

std::ptrdiff_t abs_pd(std::ptrdiff_t x) noexcept { return x < 0 ? -x : x; }

template <std::size_t E>
void copy_view(const byte* src, const View& v, byte* dst, std::size_t e) noexcept {
  const int last = v.n - 1;
  std::ptrdiff_t dst_pitch[kMaxDims];
  dst_pitch[last] = static_cast<std::ptrdiff_t>(e);
  for (int d = last - 1; d >= 0; --d) dst_pitch[d] = dst_pitch[d + 1] * v.shape[d + 1];

  // The outer dimension with the tightest non-zero source stride: if it is
  // tighter than the innermost one, the innermost pair is a transpose.
  int k = -1;
  const std::ptrdiff_t inner = abs_pd(v.stride[last]);
  if (inner != static_cast<std::ptrdiff_t>(e)) {
    std::ptrdiff_t best = inner == 0 ? 0 : inner;
    for (int d = 0; d < last; ++d) {
      const std::ptrdiff_t a = abs_pd(v.stride[d]);
      if (a != 0 && (best == 0 || a < best)) {
        best = a;
        k = d;
      }
    }
    // A broadcast innermost dimension (stride 0) is cheap as it is.
    if (inner == 0) k = -1;
  }

  int dims[kMaxDims];
  int nd = 0;
  if (k >= 0) {
    for (int d = 0; d < last; ++d) {
      if (d != k) dims[nd++] = d;
    }
    const std::int64_t rows = v.shape[k];
    const std::int64_t cols = v.shape[last];
    const std::ptrdiff_t dr = dst_pitch[k];
    const std::ptrdiff_t sr = v.stride[k];
    const std::ptrdiff_t sc = v.stride[last];
    for_each_outer(v, dims, nd, dst_pitch, [&](std::ptrdiff_t so, std::ptrdiff_t dof) {
      if constexpr (E == 0) {
        copy_tiled_any(dst + dof, dr, src + so, sr, sc, rows, cols, e);
      } else {
        copy_tiled<E>(dst + dof, dr, src + so, sr, sc, rows, cols);
      }
    });
    return;
  }

  for (int d = 0; d < last; ++d) dims[nd++] = d;
  const std::int64_t n = v.shape[last];
  const std::ptrdiff_t s = v.stride[last];
  for_each_outer(v, dims, nd, dst_pitch, [&](std::ptrdiff_t so, std::ptrdiff_t dof) {
    if constexpr (E == 0) {
      gather_row_any(dst + dof, src + so, s, n, e);
    } else {
      gather_row<E>(dst + dof, src + so, s, n);
    }
  });
}

// Index-by-index copy for views with more dimensions than the scratch
// holds; recomputes every source offset from the linear index.
void copy_by_index(const byte* src, std::int32_t ndim, const std::int64_t* shape,
                   const std::int64_t* strides, std::size_t e, byte* dst) noexcept {
  std::int64_t total = 1;
  for (std::int32_t d = 0; d < ndim; ++d) total *= shape[d];
  const std::ptrdiff_t pe = static_cast<std::ptrdiff_t>(e);
  for (std::int64_t lin = 0; lin < total; ++lin) {
    std::int64_t rest = lin;
    std::ptrdiff_t off = 0;
    for (std::int32_t d = ndim - 1; d >= 0; --d) {
      off += (rest % shape[d]) * strides[d] * pe;
      rest /= shape[d];
    }
    std::memcpy(dst + lin * pe, src + off, e);
  }
}

}  // namespace

void copy_strided_to_contiguous(const unsigned char* src, std::int32_t ndim,
                                const std::int64_t* shape, const std::int64_t* strides,
                                std::size_t elem_size, unsigned char* dst) noexcept {
  if (elem_size == 0) return;
  for (std::int32_t d = 0; d < ndim; ++d) {
    if (shape[d] == 0) return;
  }

  // Drop size-1 dimensions and merge dimensions that walk memory as one.
  View v;
  const std::ptrdiff_t pe = static_cast<std::ptrdiff_t>(elem_size);
  for (std::int32_t d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    const std::ptrdiff_t s = static_cast<std::ptrdiff_t>(strides[d]) * pe;
    if (v.n > 0 && v.stride[v.n - 1] == s * shape[d]) {
      v.shape[v.n - 1] *= shape[d];
      v.stride[v.n - 1] = s;
      continue;
    }
    if (v.n == kMaxDims) {
      copy_by_index(src, ndim, shape, strides, elem_size, dst);
      return;
    }
    v.shape[v.n] = shape[d];
    v.stride[v.n] = s;
    ++v.n;
  }

  if (v.n == 0) {  // 0-d, or only size-1 dimensions: one element.
    std::memcpy(dst, src, elem_size);
    return;
  }
  if (v.n == 1 && v.stride[0] == pe) {
    std::memcpy(dst, src, static_cast<std::size_t>(v.shape[0]) * elem_size);
    return;
  }

  switch (elem_size) {
    case 1: copy_view<1>(src, v, dst, elem_size); break;
    case 2: copy_view<2>(src, v, dst, elem_size); break;
    case 4: copy_view<4>(src, v, dst, elem_size); break;
    case 8: copy_view<8>(src, v, dst, elem_size); break;
    case 16: copy_view<16>(src, v, dst, elem_size); break;
    default: copy_view<0>(src, v, dst, elem_size); break;
  }
}

}  // namespace dlb
