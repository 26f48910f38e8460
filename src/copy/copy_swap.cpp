// The byte-order kernel of the copy engine: the bytes of every 2-, 4- or
// 8-byte word of a destination range reversed in place. A copy from
// memory in the other byte order (a big-endian numpy array on a
// little-endian machine) runs it on each part of its destination right
// after the part is copied, while the part is in the cache
// (copy_engine.cpp), so the swap costs a pass over cached lines, not a
// second pass over memory.
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
#endif

}  // namespace

void swap_bytes(byte* p, std::size_t n, std::size_t unit, int isa) noexcept {
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
