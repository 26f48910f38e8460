// The strided copy engine.
//
// Plan of a copy:
//  1. Normalise the view: an empty view copies nothing; size-1 dimensions
//     are dropped (their strides mean nothing); adjacent dimensions that
//     walk memory as one (stride[i] == stride[i+1] * shape[i+1]) are merged.
//     Strides become byte strides from here on.
//  2. Split large copies (kParallelCopyBytes and up) along the outermost
//     dimension into parts for the worker pool (copy_pool.hpp); each part
//     is a view of its own and goes through step 3.
//  3. Choose a kernel for what is left:
//     - a single compact run: one memcpy;
//     - innermost stride == element size: one memcpy per row;
//     - some outer dimension walks memory more tightly than the innermost
//       one (a transpose, or any permutation that moves the compact axis
//       away from the end): that dimension and the innermost one are copied
//       as a 2-D block in tiles of one cache line by one cache line
//       (gathered transposed in registers, then written a line at a time),
//       walked in panels so that the pages in use stay in the TLB and the
//       source lines of the next tiles are prefetched;
//     - otherwise a gather along the innermost dimension: reversed runs and
//       every-other runs through vector shuffles, other strides element by
//       element; widths 1, 2, 4, 8, 16 and the odd 3, 6, 12 have kernels
//       of their own (odd widths move a wider word and let the next
//       element overwrite its tail), any other width a generic loop.
//     Large destinations are written with non-temporal stores where the
//     kernel writes whole aligned 16-byte words (transposes from 32 MiB,
//     row gathers beyond the last-level cache): no read-for-ownership of
//     lines that are about to be overwritten, no eviction of the source.
//  4. The dimensions not handled by the kernel are walked by an odometer
//     that keeps a running source offset; the destination only advances.
//
// Elements are moved through fixed-size memcpy calls, which compilers turn
// into plain loads and stores without any alignment assumption. Only SSE2
// is assumed (the x86-64 baseline); other targets take the scalar paths.
// Kernels for wider vectors (AVX2: 1- and 2-byte tiles) are compiled for
// their instruction set alone and chosen at run time when the CPU has it
// (detect_isa below); DLB_COPY_ISA=scalar|sse2|avx2 caps the level, so
// that tests and benchmarks reach every kernel on one machine.

#include "copy_engine.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "copy_pool.hpp"

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
namespace {

using byte = unsigned char;

// Most dimensions a normalised view can keep inside the fixed scratch.
// After dropping size-1 dimensions and merging, anything larger than this
// is handled by the index-by-index fallback, which needs no scratch.
constexpr int kMaxDims = 64;

// Bytes of a cache line: the side of a transpose micro tile, in bytes.
constexpr std::ptrdiff_t kLineBytes = 64;
// Destination rows of a transpose panel, in micro tiles: the panel walks
// the whole width (the source's consecutive rows) before moving down, so
// every destination line is written in one go and the source lines of a
// tile are prefetched a few tiles ahead.
#ifndef DLB_COPY_PANEL_TILES
#define DLB_COPY_PANEL_TILES 1
#endif
// Width of a panel, in micro tiles (bounds the pages a panel touches).
#ifndef DLB_COPY_PANEL_WIDTH
#define DLB_COPY_PANEL_WIDTH 64
#endif
// Tiles ahead whose source lines are prefetched. The prefetches ask for
// the L2 only (locality 2, prefetcht1), not the L1: a band's source lines
// all fall in one L1 set when the pitch is a multiple of 4 KiB, so lines
// fetched into the L1 for later tiles would evict the current tile's.
// Four tiles ahead into the L2 beat two into the L1 in bench_copy's
// BM_Transposed, streamed (4096^2) and cached (1024^2).
#ifndef DLB_COPY_PREFETCH_TILES
#define DLB_COPY_PREFETCH_TILES 4
#endif
constexpr std::int64_t kPanelTiles = DLB_COPY_PANEL_TILES;
constexpr std::int64_t kPanelWidth = DLB_COPY_PANEL_WIDTH;
#ifndef DLB_COPY_PREFETCH_TILES_SMALL
#define DLB_COPY_PREFETCH_TILES_SMALL 0
#endif
// Tiles of 1- and 2-byte elements span 64 or 32 source rows, which share
// one L1 set when the pitch is a multiple of 4 KiB: lines prefetched for
// later tiles would evict the current ones.
template <std::size_t E>
constexpr std::int64_t prefetch_tiles() {
  return E <= 2 ? DLB_COPY_PREFETCH_TILES_SMALL : DLB_COPY_PREFETCH_TILES;
}

// Tiled transposes of 32 MiB and more are written with streaming stores
// (a tile's rows leave an L1-resident scratch a line at a time): no
// read-for-ownership of lines that are about to be overwritten, no
// eviction of the source, and no destination lines competing for the L1
// sets of power-of-two pitches. 32 MiB is also where allocations become
// fresh mappings (alloc.hpp), so a destination that large is in no cache
// when the copy starts; the L3 size sysconf reports is not consulted for
// transposes, because in a VM it is often the host's (508 MiB on the
// development machine, where no transpose streamed before; bench/README.md
// has the figures before and after).
const std::size_t kTileStreamingBytes = std::size_t{32} << 20;

// Row gathers (reversed, every-other and other strided runs) stream only
// beyond the last-level cache as sysconf reports it, and from 32 MiB at
// least: streamed, the 128 MiB reversal came out either slightly faster or
// clearly slower than cached, depending on the machine's memory traffic,
// while cached it runs at about memcpy's speed.
std::size_t default_row_streaming_bytes() noexcept {
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const std::size_t floor = std::size_t{32} << 20;
  return llc > 0 && static_cast<std::size_t>(llc) > floor ? static_cast<std::size_t>(llc) : floor;
}
const std::size_t kRowStreamingBytes = default_row_streaming_bytes();

// Which kernels write with streaming stores.
struct Streaming {
  bool tiles;
  bool rows;
};
std::atomic<std::size_t> g_streaming_bytes{0};  // 0: the default
std::atomic<std::size_t> g_parallel_bytes{0};   // 0: kParallelCopyBytes

// The widest kernels the CPU runs, capped by DLB_COPY_ISA when it names a
// lower level (scalar, sse2, avx2; anything else is ignored).
int detect_isa() noexcept {
  int best = kCopyIsaScalar;
#if defined(DLB_COPY_SSE2)
  best = kCopyIsaSse2;
#if defined(DLB_COPY_AVX2)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) best = kCopyIsaAvx2;
#endif
#endif
  if (const char* v = std::getenv("DLB_COPY_ISA"); v != nullptr) {
    int cap = best;
    if (std::strcmp(v, "scalar") == 0) cap = kCopyIsaScalar;
    else if (std::strcmp(v, "sse2") == 0) cap = kCopyIsaSse2;
    else if (std::strcmp(v, "avx2") == 0) cap = kCopyIsaAvx2;
    if (cap < best) best = cap;
  }
  return best;
}
const int kBestIsa = detect_isa();
std::atomic<int> g_isa{kBestIsa};

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
    std::memcpy(dst, src, static_cast<std::size_t>(n) * E);
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
void gather_row_any(byte* dst, const byte* src, std::ptrdiff_t s, std::int64_t n, std::size_t e) noexcept {
  if (s == static_cast<std::ptrdiff_t>(e)) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * e);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(dst, src + i * s, e);
    dst += e;
  }
}

#if defined(DLB_COPY_AVX2)
// A 64 x 64 tile of bytes, out[i * op + j] = s0[j * sc + i], in AVX2
// registers: the SSE2 kernel's 16 x 16 interleaving rounds, run on two
// 16 x 16 blocks at once (one in each 128-bit lane: a 32-byte load of a
// source run holds a row of both), so half the loads and shuffles per
// byte. About 1.5 times the SSE2 kernel's speed on L2-resident tiles.
__attribute__((target("avx2"))) void transpose_tile1_avx2(byte* out, std::ptrdiff_t op, const byte* s0,
                                                          std::ptrdiff_t sc) noexcept {
  constexpr int kBitReverse4[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
  for (int j = 0; j < 64; j += 16) {
    const byte* r0 = s0 + j * sc;
    for (int i = 0; i < 64; i += 32) {
      __m256i x[16];
      __m256i y[16];
      for (int r = 0; r < 16; ++r) x[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + r * sc + i));
      for (int r = 0; r < 8; ++r) {
        y[r] = _mm256_unpacklo_epi8(x[2 * r], x[2 * r + 1]);
        y[r + 8] = _mm256_unpackhi_epi8(x[2 * r], x[2 * r + 1]);
      }
      for (int r = 0; r < 8; ++r) {
        x[r] = _mm256_unpacklo_epi16(y[2 * r], y[2 * r + 1]);
        x[r + 8] = _mm256_unpackhi_epi16(y[2 * r], y[2 * r + 1]);
      }
      for (int r = 0; r < 8; ++r) {
        y[r] = _mm256_unpacklo_epi32(x[2 * r], x[2 * r + 1]);
        y[r + 8] = _mm256_unpackhi_epi32(x[2 * r], x[2 * r + 1]);
      }
      for (int r = 0; r < 8; ++r) {
        x[r] = _mm256_unpacklo_epi64(y[2 * r], y[2 * r + 1]);
        x[r + 8] = _mm256_unpackhi_epi64(y[2 * r], y[2 * r + 1]);
      }
      // Lane 0 holds output rows i + r, lane 1 rows i + 16 + r.
      for (int r = 0; r < 16; ++r) {
        const __m256i v = x[kBitReverse4[r]];
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i + r) * op + j), _mm256_castsi256_si128(v));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i + 16 + r) * op + j), _mm256_extracti128_si256(v, 1));
      }
    }
  }
}

// A 32 x 32 tile of 2-byte elements the same way: the SSE2 kernel's 8 x 8
// rounds on two blocks at once, one per lane.
__attribute__((target("avx2"))) void transpose_tile2_avx2(byte* out, std::ptrdiff_t op, const byte* s0,
                                                          std::ptrdiff_t sc) noexcept {
  for (int j = 0; j < 32; j += 8) {
    const byte* r0 = s0 + j * sc;
    for (int i = 0; i < 32; i += 16) {
      __m256i x[8];
      for (int r = 0; r < 8; ++r) x[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + r * sc + i * 2));
      __m256i y[8];
      for (int r = 0; r < 4; ++r) {
        y[2 * r] = _mm256_unpacklo_epi16(x[2 * r], x[2 * r + 1]);
        y[2 * r + 1] = _mm256_unpackhi_epi16(x[2 * r], x[2 * r + 1]);
      }
      __m256i z[8];
      z[0] = _mm256_unpacklo_epi32(y[0], y[2]);
      z[1] = _mm256_unpackhi_epi32(y[0], y[2]);
      z[2] = _mm256_unpacklo_epi32(y[1], y[3]);
      z[3] = _mm256_unpackhi_epi32(y[1], y[3]);
      z[4] = _mm256_unpacklo_epi32(y[4], y[6]);
      z[5] = _mm256_unpackhi_epi32(y[4], y[6]);
      z[6] = _mm256_unpacklo_epi32(y[5], y[7]);
      z[7] = _mm256_unpackhi_epi32(y[5], y[7]);
      const __m256i res[8] = {
          _mm256_unpacklo_epi64(z[0], z[4]), _mm256_unpackhi_epi64(z[0], z[4]),
          _mm256_unpacklo_epi64(z[1], z[5]), _mm256_unpackhi_epi64(z[1], z[5]),
          _mm256_unpacklo_epi64(z[2], z[6]), _mm256_unpackhi_epi64(z[2], z[6]),
          _mm256_unpacklo_epi64(z[3], z[7]), _mm256_unpackhi_epi64(z[3], z[7]),
      };
      // Lane 0 holds output rows i + r, lane 1 rows i + 8 + r.
      for (int r = 0; r < 8; ++r) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i + r) * op + j * 2), _mm256_castsi256_si128(res[r]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i + 8 + r) * op + j * 2),
                         _mm256_extracti128_si256(res[r], 1));
      }
    }
  }
}
#endif

// Fills the compact T x T tile tmp[i][j] = *(s0 + i*sr + j*sc) with
// register transposes (SSE2; AVX2 for 1- and 2-byte tiles where isa
// allows), when the source runs are compact (sr == E) and the width has a
// kernel (1, 2, 4 and 8 bytes); returns false to leave the tile to the
// scalar loop.
template <std::size_t E, std::int64_t T>
inline bool gather_tile_simd(byte* out, std::ptrdiff_t op, const byte* s0, std::ptrdiff_t sr, std::ptrdiff_t sc,
                             int isa) noexcept {
#if defined(DLB_COPY_SSE2)
  if (sr != static_cast<std::ptrdiff_t>(E) || isa < kCopyIsaSse2) return false;
#if defined(DLB_COPY_AVX2)
  if constexpr (E == 1 && T == 64) {
    if (isa >= kCopyIsaAvx2) {
      transpose_tile1_avx2(out, op, s0, sc);
      return true;
    }
  } else if constexpr (E == 2 && T == 32) {
    if (isa >= kCopyIsaAvx2) {
      transpose_tile2_avx2(out, op, s0, sc);
      return true;
    }
  }
#endif
  if constexpr (E == 8) {
    // 2 x 2 blocks: two source runs (j, j+1), two elements each (i, i+1).
    for (std::int64_t j = 0; j < T; j += 2) {
      const byte* a_row = s0 + j * sc;
      const byte* b_row = a_row + sc;
      for (std::int64_t i = 0; i < T; i += 2) {
        const __m128d a = _mm_loadu_pd(reinterpret_cast<const double*>(a_row + i * 8));
        const __m128d b = _mm_loadu_pd(reinterpret_cast<const double*>(b_row + i * 8));
        _mm_storeu_pd(reinterpret_cast<double*>(out + i * op + j * 8), _mm_unpacklo_pd(a, b));
        _mm_storeu_pd(reinterpret_cast<double*>(out + (i + 1) * op + j * 8), _mm_unpackhi_pd(a, b));
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
        _mm_storeu_ps(reinterpret_cast<float*>(out + i * op + j * 4), a);
        _mm_storeu_ps(reinterpret_cast<float*>(out + (i + 1) * op + j * 4), b);
        _mm_storeu_ps(reinterpret_cast<float*>(out + (i + 2) * op + j * 4), c);
        _mm_storeu_ps(reinterpret_cast<float*>(out + (i + 3) * op + j * 4), d);
      }
    }
    return true;
  } else if constexpr (E == 2) {
    // 8 x 8 blocks of 16-bit lanes: three rounds of interleaving.
    for (std::int64_t j = 0; j < T; j += 8) {
      const byte* r0 = s0 + j * sc;
      for (std::int64_t i = 0; i < T; i += 8) {
        __m128i x[8];
        for (int r = 0; r < 8; ++r) x[r] = load16(r0 + r * sc + i * 2);
        __m128i y[8];
        for (int r = 0; r < 4; ++r) {
          y[2 * r] = _mm_unpacklo_epi16(x[2 * r], x[2 * r + 1]);
          y[2 * r + 1] = _mm_unpackhi_epi16(x[2 * r], x[2 * r + 1]);
        }
        __m128i z[8];
        z[0] = _mm_unpacklo_epi32(y[0], y[2]);
        z[1] = _mm_unpackhi_epi32(y[0], y[2]);
        z[2] = _mm_unpacklo_epi32(y[1], y[3]);
        z[3] = _mm_unpackhi_epi32(y[1], y[3]);
        z[4] = _mm_unpacklo_epi32(y[4], y[6]);
        z[5] = _mm_unpackhi_epi32(y[4], y[6]);
        z[6] = _mm_unpacklo_epi32(y[5], y[7]);
        z[7] = _mm_unpackhi_epi32(y[5], y[7]);
        const __m128i res[8] = {
            _mm_unpacklo_epi64(z[0], z[4]), _mm_unpackhi_epi64(z[0], z[4]),
            _mm_unpacklo_epi64(z[1], z[5]), _mm_unpackhi_epi64(z[1], z[5]),
            _mm_unpacklo_epi64(z[2], z[6]), _mm_unpackhi_epi64(z[2], z[6]),
            _mm_unpacklo_epi64(z[3], z[7]), _mm_unpackhi_epi64(z[3], z[7]),
        };
        for (int r = 0; r < 8; ++r) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i + r) * op + j * 2), res[r]);
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
        for (int r = 0; r < 16; ++r) x[r] = load16(r0 + r * sc + i);
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
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i + r) * op + j), x[kBitReverse4[r]]);
        }
      }
    }
    return true;
  }
#endif
  (void)out;
  (void)op;
  (void)s0;
  (void)sr;
  (void)sc;
  (void)isa;
  return false;
}

// Writes one destination row segment of a tile (L bytes from the aligned
// scratch), streaming when asked and the segment is 16-byte aligned.
template <std::size_t L>
inline void write_segment(byte* d, const byte* from, bool stream) noexcept {
#if defined(DLB_COPY_SSE2)
  if constexpr (L % 16 == 0) {
    if (stream) {
      for (std::size_t o = 0; o < L; o += 16) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + o),
                         _mm_load_si128(reinterpret_cast<const __m128i*>(from + o)));
      }
      return;
    }
  }
#endif
  (void)stream;
  std::memcpy(d, from, L);
}

// A 2-D block: dst[i][j] (row pitch dr bytes, compact rows) receives the
// element at src + i*sr + j*sc, for i < rows, j < cols. Used when |sr| is
// the tighter source stride, so reading down a destination column walks the
// source sequentially. Tiles are one cache line on each side.
template <std::size_t E>
void copy_tiled(byte* dst, std::ptrdiff_t dr, const byte* src, std::ptrdiff_t sr, std::ptrdiff_t sc,
                std::int64_t rows, std::int64_t cols, bool nt, int isa) noexcept {
  constexpr auto pe = static_cast<std::ptrdiff_t>(E);
  constexpr std::int64_t T = (kLineBytes / pe) > 0 ? kLineBytes / pe : 1;
  constexpr std::int64_t PR = T * kPanelTiles;
  constexpr std::int64_t PW = T * kPanelWidth;
  constexpr std::size_t L = static_cast<std::size_t>(T) * E;
  // Streaming needs every row segment 16-byte aligned.
  const bool stream = nt && L % 16 == 0 && (reinterpret_cast<std::uintptr_t>(dst) & 15u) == 0 && dr % 16 == 0;
  for (std::int64_t j0 = 0; j0 < cols; j0 += PW) {
    const std::int64_t j_end = j0 + PW < cols ? j0 + PW : cols;
    for (std::int64_t i0 = 0; i0 < rows; i0 += PR) {
      const std::int64_t i_end = i0 + PR < rows ? i0 + PR : rows;
      for (std::int64_t tj = j0; tj < j_end; tj += T) {
        const std::int64_t tj_end = tj + T < j_end ? tj + T : j_end;
        if constexpr (prefetch_tiles<E>() > 0) {
          // The source lines of the band's tiles a few columns of tiles ahead.
          const std::int64_t pj = tj + prefetch_tiles<E>() * T;
          if (pj + T <= j_end && i_end - i0 == PR) {
            const byte* p = src + i0 * sr + pj * sc;
            for (std::int64_t j = 0; j < T; ++j) {
              for (std::int64_t l = 0; l < kPanelTiles; ++l) prefetch(p + j * sc + l * T * sr);
            }
          }
        }
        for (std::int64_t ti = i0; ti < i_end; ti += T) {
          const std::int64_t ti_end = ti + T < i_end ? ti + T : i_end;
          if (ti_end - ti == T && tj_end - tj == T) {
            const byte* s0 = src + ti * sr + tj * sc;
            // Full tile: every source and destination line is touched once
            // and used whole, so rows that alias in the cache (power-of-two
            // pitches) cost nothing extra.
            byte* d0 = dst + ti * dr + tj * pe;
            if constexpr (E <= 2) {
              // 1- and 2-byte tiles read 32 or 64 source lines, more than an
              // L1 set holds when the pitch is a multiple of 4 KiB: stage
              // them in a compact scratch first, each line read once. When
              // streaming, 2-byte tiles are staged too and then transposed
              // into the scratch that is streamed out (faster for 32 MiB
              // in BM_TransposedWidth/2); 1-byte tiles were not faster
              // staged.
              if (sr == pe && (E == 2 || !stream)) {
                alignas(64) byte stage[T * T * E];
                for (std::int64_t j = 0; j < T; ++j) std::memcpy(stage + j * T * pe, s0 + j * sc, T * E);
                // The AVX2 kernels write 32 or 16 destination rows at once,
                // too many lines for one L1 set at power-of-two pitches:
                // they go through the scratch too, which beat both SSE2
                // and AVX2 straight into the destination in
                // BM_TransposedWidth4M/1 and /2 (DLB_COPY_ISA=sse2 against
                // the default reproduces the SSE2 side).
                const bool direct = !stream && isa < kCopyIsaAvx2;
                if (direct) {
                  if (gather_tile_simd<E, T>(d0, dr, stage, pe, T * pe, isa)) continue;
                } else {
                  alignas(64) byte tmp[T * T * E];
                  if (gather_tile_simd<E, T>(tmp, T * pe, stage, pe, T * pe, isa)) {
                    for (std::int64_t i = 0; i < T; ++i) write_segment<L>(d0 + i * dr, tmp + i * T * pe, stream);
                    continue;
                  }
                }
              }
            }
            // Register transposes straight into the destination; or, when
            // streaming (or without a kernel for the width), into an
            // L1-resident scratch whose rows are then written whole. 4-byte
            // tiles always take the scratch: their kernel writes each of 16
            // destination lines in four visits, and 16 lines overflow an L1
            // set at power-of-two pitches (8-byte tiles were slower through
            // the scratch).
            if (!stream && E != 4 && gather_tile_simd<E, T>(d0, dr, s0, sr, sc, isa)) continue;
            alignas(64) byte tmp[T * T * E];
            if (!gather_tile_simd<E, T>(tmp, T * pe, s0, sr, sc, isa)) {
              for (std::int64_t j = 0; j < T; ++j) {
                const byte* s = s0 + j * sc;
                for (std::int64_t i = 0; i < T; ++i) move_elem<E>(tmp + (i * T + j) * pe, s + i * sr);
              }
            }
            for (std::int64_t i = 0; i < T; ++i) write_segment<L>(d0 + i * dr, tmp + i * T * pe, stream);
          } else {
            for (std::int64_t j = tj; j < tj_end; ++j) {
              const byte* s = src + j * sc;
              byte* d = dst + j * pe;
              for (std::int64_t i = ti; i < ti_end; ++i) move_elem<E>(d + i * dr, s + i * sr);
            }
          }
        }
      }
    }
  }
}

void copy_tiled_any(byte* dst, std::ptrdiff_t dr, const byte* src, std::ptrdiff_t sr, std::ptrdiff_t sc,
                    std::int64_t rows, std::int64_t cols, std::size_t e) noexcept {
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

std::ptrdiff_t abs_pd(std::ptrdiff_t x) noexcept { return x < 0 ? -x : x; }

// dst_pitch[d]: dimension d's byte stride in the compact destination.
void compact_pitches(const View& v, std::size_t e, std::ptrdiff_t* dst_pitch) noexcept {
  const int last = v.n - 1;
  dst_pitch[last] = static_cast<std::ptrdiff_t>(e);
  for (int d = last - 1; d >= 0; --d) dst_pitch[d] = dst_pitch[d + 1] * v.shape[d + 1];
}

template <std::size_t E>
void copy_view(const byte* src, const View& v, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e,
               Streaming nt, int isa) noexcept {
  const int last = v.n - 1;

  // The outer dimension with the tightest non-zero source stride: if it is
  // tighter than the innermost one, the innermost pair is a transpose.
  int k = -1;
  const std::ptrdiff_t inner = abs_pd(v.stride[last]);
  if (inner != static_cast<std::ptrdiff_t>(e) && inner != 0) {
    std::ptrdiff_t best = inner;
    for (int d = 0; d < last; ++d) {
      const std::ptrdiff_t a = abs_pd(v.stride[d]);
      if (a != 0 && a < best && v.shape[d] > 1) {
        best = a;
        k = d;
      }
    }
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
        copy_tiled<E>(dst + dof, dr, src + so, sr, sc, rows, cols, nt.tiles, isa);
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
      gather_row<E>(dst + dof, src + so, s, n, nt.rows, isa);
    }
  });
}

void copy_view_any_width(const byte* src, const View& v, byte* dst, std::size_t e, Streaming nt, int isa) noexcept {
  std::ptrdiff_t dst_pitch[kMaxDims];
  compact_pitches(v, e, dst_pitch);
  if (v.n == 1 && v.stride[0] == static_cast<std::ptrdiff_t>(e)) {
    std::memcpy(dst, src, static_cast<std::size_t>(v.shape[0]) * e);
    return;
  }
  switch (e) {
    case 1: copy_view<1>(src, v, dst_pitch, dst, e, nt, isa); break;
    case 2: copy_view<2>(src, v, dst_pitch, dst, e, nt, isa); break;
    case 3: copy_view<3>(src, v, dst_pitch, dst, e, nt, isa); break;
    case 4: copy_view<4>(src, v, dst_pitch, dst, e, nt, isa); break;
    case 6: copy_view<6>(src, v, dst_pitch, dst, e, nt, isa); break;
    case 8: copy_view<8>(src, v, dst_pitch, dst, e, nt, isa); break;
    case 12: copy_view<12>(src, v, dst_pitch, dst, e, nt, isa); break;
    case 16: copy_view<16>(src, v, dst_pitch, dst, e, nt, isa); break;
    default: copy_view<0>(src, v, dst_pitch, dst, e, nt, isa); break;
  }
#if defined(DLB_COPY_SSE2)
  // Streaming stores are weakly ordered: fence them before the copy counts
  // as done (and before a worker reports its part finished).
  if (nt.tiles || nt.rows) _mm_sfence();
#endif
}

// Index-by-index copy for views with more dimensions than the scratch
// holds; recomputes every source offset from the linear index.
void copy_by_index(const byte* src, std::int32_t ndim, const std::int64_t* shape, const std::int64_t* strides,
                   std::size_t e, byte* dst) noexcept {
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

// A copy split along the outermost dimension of its view: part p copies
// the rows [p * chunk, min((p + 1) * chunk, shape[0])).
struct SplitCopy {
  const byte* src;
  const View* v;
  byte* dst;
  std::size_t e;
  std::int64_t chunk;
  std::ptrdiff_t dst_pitch0;
  Streaming nt;
  int isa;
};

void run_split_part(void* ctx, int part) {
  const SplitCopy& c = *static_cast<const SplitCopy*>(ctx);
  const std::int64_t a = static_cast<std::int64_t>(part) * c.chunk;
  const std::int64_t b = a + c.chunk < c.v->shape[0] ? a + c.chunk : c.v->shape[0];
  if (a >= b) return;
  View sub = *c.v;
  sub.shape[0] = b - a;
  copy_view_any_width(c.src + a * c.v->stride[0], sub, c.dst + a * c.dst_pitch0, c.e, c.nt, c.isa);
}

}  // namespace

void copy_strided_to_contiguous(const unsigned char* src, std::int32_t ndim, const std::int64_t* shape,
                                const std::int64_t* strides, std::size_t elem_size, unsigned char* dst) noexcept {
  if (elem_size == 0) return;
  for (std::int32_t d = 0; d < ndim; ++d) {
    if (shape[d] == 0) return;
  }

  // Drop size-1 dimensions and merge dimensions that walk memory as one.
  View v;
  const std::ptrdiff_t pe = static_cast<std::ptrdiff_t>(elem_size);
  std::size_t total = elem_size;
  for (std::int32_t d = 0; d < ndim; ++d) {
    total *= static_cast<std::size_t>(shape[d]);
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
  const std::size_t streaming = g_streaming_bytes.load(std::memory_order_relaxed);
  const std::size_t parallel = g_parallel_bytes.load(std::memory_order_relaxed);
  const int isa = g_isa.load(std::memory_order_relaxed);
  // Streaming stores are SSE2 instructions: none at the scalar level.
  const Streaming nt{isa >= kCopyIsaSse2 && total >= (streaming != 0 ? streaming : kTileStreamingBytes),
                     isa >= kCopyIsaSse2 && total >= (streaming != 0 ? streaming : kRowStreamingBytes)};
  const int threads = total >= (parallel != 0 ? parallel : kParallelCopyBytes) ? copy_threads() : 1;
  if (threads > 1 && v.shape[0] > 1) {
    // Parts of whole tiles (64 rows) where the extent allows; a few parts
    // per thread so that a thread slowed by a neighbour takes fewer.
    SplitCopy c{src, &v, dst, elem_size, 0, 0, nt, isa};
    std::ptrdiff_t dst_pitch[kMaxDims];
    compact_pitches(v, elem_size, dst_pitch);
    c.dst_pitch0 = dst_pitch[0];
    std::int64_t parts = 4 * static_cast<std::int64_t>(threads);
    if (parts > v.shape[0]) parts = v.shape[0];
    c.chunk = (v.shape[0] + parts - 1) / parts;
    if (v.shape[0] >= 64 * parts) c.chunk = (c.chunk + 63) / 64 * 64;
    parts = (v.shape[0] + c.chunk - 1) / c.chunk;
    copy_pool_run(static_cast<int>(parts), run_split_part, &c);
    return;
  }
  copy_view_any_width(src, v, dst, elem_size, nt, isa);
}

namespace testing {
int set_copy_isa(int level) noexcept {
  if (level < 0 || level > kBestIsa) level = kBestIsa;
  g_isa.store(level, std::memory_order_relaxed);
  return level;
}

void set_copy_thresholds(std::size_t parallel_bytes, std::size_t streaming_bytes) noexcept {
  g_parallel_bytes.store(parallel_bytes, std::memory_order_relaxed);
  g_streaming_bytes.store(streaming_bytes, std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace dlb
