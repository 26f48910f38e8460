// The byte-order kernels of the copy engine, for a source in the other
// byte order (a big-endian numpy array on a little-endian machine): the
// bytes of every 2-, 4- or 8-byte word reversed, either in place in
// memory the kernel has just written and that is still in the cache (a
// tile's scratch, a gathered row), or on the way from source to
// destination (compact runs, streamed like copy_compact's).
#include "copy_kernels.hpp"

namespace dlb {
namespace copy_detail {
namespace {

template <class W>
inline W swapped(W w) noexcept {
  if constexpr (sizeof(W) == 2) return __builtin_bswap16(w);
  else if constexpr (sizeof(W) == 4) return __builtin_bswap32(w);
  else return __builtin_bswap64(w);
}

template <class W>
void swap_scalar(byte* p, std::size_t n) noexcept {
  for (std::size_t i = 0; i + sizeof(W) <= n; i += sizeof(W)) {
    W w;
    std::memcpy(&w, p + i, sizeof w);
    w = swapped(w);
    std::memcpy(p + i, &w, sizeof w);
  }
}

#if defined(DLB_COPY_SSE2)
// SSE2 has no byte shuffle: the 16-bit words of each unit are reversed
// with the word shuffles, then the two bytes of every 16-bit word swapped.
template <std::size_t U>
inline __m128i swap16(__m128i v) noexcept {
  if constexpr (U == 4) {
    v = _mm_shufflelo_epi16(v, 0xB1);  // (1, 0, 3, 2): the halves of each 32-bit word
    v = _mm_shufflehi_epi16(v, 0xB1);
  } else if constexpr (U == 8) {
    v = _mm_shufflelo_epi16(v, 0x1B);  // (3, 2, 1, 0): the quarters of each 64-bit word
    v = _mm_shufflehi_epi16(v, 0x1B);
  }
  return _mm_or_si128(_mm_slli_epi16(v, 8), _mm_srli_epi16(v, 8));
}

template <std::size_t U, class W>
void swap_sse2(byte* p, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = load16(p + i);
    const __m128i b = load16(p + i + 16);
    const __m128i c = load16(p + i + 32);
    const __m128i d = load16(p + i + 48);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i), swap16<U>(a));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i + 16), swap16<U>(b));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i + 32), swap16<U>(c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i + 48), swap16<U>(d));
  }
  for (; i + 16 <= n; i += 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i), swap16<U>(load16(p + i)));
  swap_scalar<W>(p + i, n - i);
}

template <std::size_t U, class W>
void copy_swapped_sse2(byte* dst, const byte* src, std::size_t n, bool nt) noexcept {
  std::size_t i = 0;
  // Streamed: whole 64-byte destination lines, when the head before the
  // first one is whole words.
  const std::size_t head = (64 - (reinterpret_cast<std::uintptr_t>(dst) & 63u)) & 63u;
  if (nt && head % U == 0 && n >= head + 64) {
    std::memcpy(dst, src, head);
    swap_scalar<W>(dst, head);
    for (i = head; i + 64 <= n; i += 64) {
      const __m128i a = load16(src + i), b = load16(src + i + 16), c = load16(src + i + 32), d = load16(src + i + 48);
      store16(dst + i, swap16<U>(a), true);
      store16(dst + i + 16, swap16<U>(b), true);
      store16(dst + i + 32, swap16<U>(c), true);
      store16(dst + i + 48, swap16<U>(d), true);
    }
  }
  for (; i + 16 <= n; i += 16) store16(dst + i, swap16<U>(load16(src + i)), false);
  std::memcpy(dst + i, src + i, n - i);
  swap_scalar<W>(dst + i, n - i);
}

#if defined(DLB_COPY_AVX2)
// AVX2 has the byte shuffle: one instruction per 32 bytes.
template <std::size_t U>
__attribute__((target("avx2"))) inline __m256i swap32(__m256i v) noexcept {
  static_assert(U == 2 || U == 4 || U == 8);
  const __m256i mask = U == 2   ? _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14, 1, 0, 3, 2, 5,
                                                     4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
                       : U == 4 ? _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7,
                                                     6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12)
                                : _mm256_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3,
                                                     2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8);
  return _mm256_shuffle_epi8(v, mask);
}

template <std::size_t U, class W>
__attribute__((target("avx2"))) void copy_swapped_avx2(byte* dst, const byte* src, std::size_t n, bool nt) noexcept {
  std::size_t i = 0;
  const std::size_t head = (64 - (reinterpret_cast<std::uintptr_t>(dst) & 63u)) & 63u;
  if (nt && head % U == 0 && n >= head + 64) {
    std::memcpy(dst, src, head);
    swap_scalar<W>(dst, head);
    for (i = head; i + 64 <= n; i += 64) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), swap32<U>(a));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), swap32<U>(b));
    }
  }
  for (; i + 32 <= n; i += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), swap32<U>(a));
  }
  std::memcpy(dst + i, src + i, n - i);
  swap_scalar<W>(dst + i, n - i);
}
#endif
#endif

}  // namespace

void copy_compact_swapped(byte* dst, const byte* src, std::size_t n, bool nt, std::size_t unit, int isa) noexcept {
#if defined(DLB_COPY_AVX2)
  if (isa >= kCopyIsaAvx2) {
    switch (unit) {
      case 2: copy_swapped_avx2<2, std::uint16_t>(dst, src, n, nt); return;
      case 4: copy_swapped_avx2<4, std::uint32_t>(dst, src, n, nt); return;
      case 8: copy_swapped_avx2<8, std::uint64_t>(dst, src, n, nt); return;
      default: break;
    }
  }
#endif
#if defined(DLB_COPY_SSE2)
  if (isa >= kCopyIsaSse2) {
    switch (unit) {
      case 2: copy_swapped_sse2<2, std::uint16_t>(dst, src, n, nt); return;
      case 4: copy_swapped_sse2<4, std::uint32_t>(dst, src, n, nt); return;
      case 8: copy_swapped_sse2<8, std::uint64_t>(dst, src, n, nt); return;
      default: break;
    }
  }
#else
  (void)nt;
#endif
  std::memcpy(dst, src, n);
  swap_bytes(dst, n, unit, isa);
}

void swap_bytes(byte* p, std::size_t n, std::size_t unit, int isa) noexcept {
#if defined(DLB_COPY_AVX2)
  if (isa >= kCopyIsaAvx2) {  // in place: the same kernel with src == dst, never streamed
    copy_compact_swapped(p, p, n, false, unit, isa);
    return;
  }
#endif
#if defined(DLB_COPY_SSE2)
  if (isa >= kCopyIsaSse2) {
    switch (unit) {
      case 2: swap_sse2<2, std::uint16_t>(p, n); return;
      case 4: swap_sse2<4, std::uint32_t>(p, n); return;
      case 8: swap_sse2<8, std::uint64_t>(p, n); return;
      default: return;
    }
  }
#else
  (void)isa;
#endif
  switch (unit) {
    case 2: swap_scalar<std::uint16_t>(p, n); return;
    case 4: swap_scalar<std::uint32_t>(p, n); return;
    case 8: swap_scalar<std::uint64_t>(p, n); return;
    default: return;
  }
}

}  // namespace copy_detail
}  // namespace dlb
