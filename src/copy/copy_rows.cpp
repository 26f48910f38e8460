// The row kernels: each innermost run of a view gathered into its compact
// destination row. Compact runs are one memcpy; reversed runs and
// every-other runs of 4- and 8-byte elements go through SSE2 words; odd
// widths (3, 6, 12 bytes) move through the next wider word, the next
// element overwriting its tail; anything else element by element.
#include "copy_kernels.hpp"

namespace dlb {
namespace copy_detail {
namespace {

#if defined(DLB_COPY_SSE2)
// Reverses the order of the E-byte elements in a 16-byte word.
template <std::size_t E>
inline __m128i reverse16(__m128i v) noexcept {
  if constexpr (E == 8) {
    return _mm_shuffle_epi32(v, 0x4E);
  } else if constexpr (E == 4) {
    return _mm_shuffle_epi32(v, 0x1B);
  } else if constexpr (E == 2) {
    v = _mm_shufflelo_epi16(v, 0x1B);
    v = _mm_shufflehi_epi16(v, 0x1B);
    return _mm_shuffle_epi32(v, 0x4E);
  } else {
    static_assert(E == 1);
    // Bytes: swap within 16-bit lanes, then reverse the 16-bit lanes.
    v = _mm_or_si128(_mm_slli_epi16(v, 8), _mm_srli_epi16(v, 8));
    v = _mm_shufflelo_epi16(v, 0x1B);
    v = _mm_shufflehi_epi16(v, 0x1B);
    return _mm_shuffle_epi32(v, 0x4E);
  }
}
#endif

// Elements before dst reaches a 16-byte boundary, or -1 when it never does
// (dst not a multiple of the element's alignment residue).
template <std::size_t E>
inline std::int64_t head_to_align16(const byte* dst) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(dst) & 15u;
  if (a == 0) return 0;
  const std::uintptr_t gap = 16 - a;
  return gap % E == 0 ? static_cast<std::int64_t>(gap / E) : -1;
}

// Word an odd width is moved through: the next power of two.
template <std::size_t E>
constexpr std::size_t wide_word() {
  return E == 3 ? 4 : E == 6 ? 8 : E == 12 ? 16 : E;
}

// One row: n elements from src (byte stride s) into compact dst.
template <std::size_t E>
void gather_row(byte* dst, const byte* src, std::ptrdiff_t s, std::int64_t n, bool nt, int isa) noexcept {
  constexpr auto pe = static_cast<std::ptrdiff_t>(E);
  if (s == pe) {
    copy_compact(dst, src, static_cast<std::size_t>(n) * E, nt);
    return;
  }
  if (s == 0) {
    if constexpr (E == 1) {
      std::memset(dst, *src, static_cast<std::size_t>(n));
    } else {
      Elem<E> v;
      std::memcpy(&v, src, E);
      for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + i * pe, &v, E);
    }
    return;
  }
  std::int64_t i = 0;
#if defined(DLB_COPY_SSE2)
  if constexpr (E == 1 || E == 2 || E == 4 || E == 8 || E == 16) {
    constexpr std::int64_t k = 16 / static_cast<std::int64_t>(E);  // elements per word
    if (isa < kCopyIsaSse2) {
      // the scalar loops below
    } else if (s == -pe && n >= 2 * k) {
      // Reversed run: read 16-byte words backwards, reverse them, write
      // forwards.
      std::int64_t head = nt ? head_to_align16<E>(dst) : 0;
      const bool stream = nt && head >= 0;
      if (head < 0) head = 0;
      for (; i < head; ++i) move_elem<E>(dst + i * pe, src - i * pe);
      for (; i + k <= n; i += k) {
        const __m128i v = load16(src - (i + k - 1) * pe);
        if constexpr (E == 16) {
          store16(dst + i * pe, v, stream);
        } else {
          store16(dst + i * pe, reverse16<E>(v), stream);
        }
      }
    } else if constexpr (E == 4 || E == 8) {
      if (s == 2 * pe && n >= 2 * k) {
        // Every other element: two words in, one out. The last element's
        // word would read past it, so it is left to the scalar tail.
        std::int64_t head = nt ? head_to_align16<E>(dst) : 0;
        const bool stream = nt && head >= 0;
        if (head < 0) head = 0;
        for (; i < head; ++i) move_elem<E>(dst + i * pe, src + i * s);
        for (; i + k < n; i += k) {
          const byte* p = src + i * s;
          if constexpr (E == 4) {
            const __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(p));
            const __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(p + 16));
            store16(dst + i * pe, _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), stream);
          } else {
            const __m128i a = load16(p);
            const __m128i b = load16(p + 16);
            store16(dst + i * pe, _mm_unpacklo_epi64(a, b), stream);
          }
        }
      }
    } else if constexpr (E == 16) {
      std::int64_t head = nt ? head_to_align16<E>(dst) : 0;
      if (head == 0 && nt) {
        for (; i < n; ++i) store16(dst + i * pe, load16(src + i * s), true);
      }
    }
  }
#else
  (void)nt;
  (void)isa;
#endif
  constexpr std::size_t W = wide_word<E>();
  if constexpr (W != E) {
    // Odd widths through wide words: each move also writes the head of the
    // next element (rewritten by the next move) and, for a positive stride
    // of at least W, reads only bytes of this element's stride.
    if (s >= static_cast<std::ptrdiff_t>(W)) {
      for (; i + 1 < n; ++i) std::memcpy(dst + i * pe, src + i * s, W);
    }
  }
  for (; i < n; ++i) move_elem<E>(dst + i * pe, src + i * s);
}

// The same for an element width known only at run time.
void gather_row_any(byte* dst, const byte* src, std::ptrdiff_t s, std::int64_t n, std::size_t e, bool nt) noexcept {
  if (s == static_cast<std::ptrdiff_t>(e)) {
    copy_compact(dst, src, static_cast<std::size_t>(n) * e, nt);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(dst, src + i * s, e);
    dst += e;
  }
}

}  // namespace

void copy_compact(byte* dst, const byte* src, std::size_t n, bool nt) noexcept {
#if defined(DLB_COPY_SSE2)
  // Streamed, the destination's lines are written without being read
  // first (no read-for-ownership: two thirds of memcpy's memory traffic
  // for a destination beyond the caches) and evict nothing.
  const std::size_t head = (64 - (reinterpret_cast<std::uintptr_t>(dst) & 63u)) & 63u;
  if (nt && n >= head + 64) {
    std::memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
      const __m128i a = load16(src), b = load16(src + 16), c = load16(src + 32), d = load16(src + 48);
      store16(dst, a, true);
      store16(dst + 16, b, true);
      store16(dst + 32, c, true);
      store16(dst + 48, d, true);
    }
  }
#else
  (void)nt;
#endif
  std::memcpy(dst, src, n);
}

template <std::size_t E>
void copy_rows(const byte* src, const View& v, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e, bool nt,
               int isa, std::size_t swap) noexcept {
  const int last = v.n - 1;
  int dims[kMaxDims];
  int nd = 0;
  for (int d = 0; d < last; ++d) dims[nd++] = d;
  const std::int64_t n = v.shape[last];
  const std::ptrdiff_t s = v.stride[last];
  if (swap > 1) {
    // A source in the other byte order: compact runs swap as they move;
    // a gathered row is written through the cache and swapped in place
    // while it is there.
    const std::size_t row = static_cast<std::size_t>(n) * e;
    for_each_outer(v, dims, nd, dst_pitch, [&](std::ptrdiff_t so, std::ptrdiff_t dof) {
      if (s == static_cast<std::ptrdiff_t>(e)) {
        copy_compact_swapped(dst + dof, src + so, row, nt, swap, isa);
        return;
      }
      if constexpr (E == 0) {
        gather_row_any(dst + dof, src + so, s, n, e, false);
      } else {
        gather_row<E>(dst + dof, src + so, s, n, false, isa);
      }
      swap_bytes(dst + dof, row, swap, isa);
    });
    return;
  }
  for_each_outer(v, dims, nd, dst_pitch, [&](std::ptrdiff_t so, std::ptrdiff_t dof) {
    if constexpr (E == 0) {
      gather_row_any(dst + dof, src + so, s, n, e, nt);
    } else {
      gather_row<E>(dst + dof, src + so, s, n, nt, isa);
    }
  });
}

#define DLB_COPY_INSTANTIATE(W) \
  template void copy_rows<W>(const byte*, const View&, const std::ptrdiff_t*, byte*, std::size_t, bool, int, \
                             std::size_t) noexcept;
DLB_COPY_WIDTHS(DLB_COPY_INSTANTIATE)
#undef DLB_COPY_INSTANTIATE

}  // namespace copy_detail
}  // namespace dlb
