// The transpose kernels: a pair of dimensions whose outer one walks the
// source more tightly than the innermost one, copied in tiles of one
// cache line by one cache line (gathered transposed in SSE2 or AVX2
// registers, written a line at a time, streamed for large destinations),
// walked in panels so that the pages in use stay in the TLB; streamed
// transposes of 4-, 8- and 16-byte elements are walked in the source's
// order instead, one band of source rows after another.
#include "copy_kernels.hpp"

namespace dlb {
namespace copy_detail {
namespace {

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


#if defined(DLB_COPY_AVX2)
// A 64 x 64 tile of bytes, out[i * op + j] = s0[j * sc + i], in AVX2
// registers: the SSE2 kernel's 16 x 16 interleaving rounds, run on two
// 16 x 16 blocks at once (one in each 128-bit lane: a 32-byte load of a
// source run holds a row of both), so half the loads and shuffles per
// byte (faster than the SSE2 kernel on L2-resident tiles:
// BM_TransposedWidth4M/1 with DLB_COPY_ISA=sse2 against the default).
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
//
// swap > 1 (a source in the other byte order): every tile goes through the
// L1-resident scratch, whose bytes are swapped before its lines are
// written; the elements of a partial tile are swapped one by one.
template <std::size_t E>
void copy_tiled(byte* dst, std::ptrdiff_t dr, const byte* src, std::ptrdiff_t sr, std::ptrdiff_t sc,
                std::int64_t rows, std::int64_t cols, bool nt, int isa, std::size_t swap) noexcept {
  constexpr auto pe = static_cast<std::ptrdiff_t>(E);
  constexpr std::int64_t T = (kLineBytes / pe) > 0 ? kLineBytes / pe : 1;
  constexpr std::int64_t PR = T * kPanelTiles;
  constexpr std::int64_t PW = T * kPanelWidth;
  constexpr std::size_t L = static_cast<std::size_t>(T) * E;
  // Streaming needs every row segment 16-byte aligned.
  const bool stream = nt && L % 16 == 0 && (reinterpret_cast<std::uintptr_t>(dst) & 15u) == 0 && dr % 16 == 0;
  // One tile: destination rows [ti, ti_end), columns [tj, tj_end).
  // Inlined into both walks, as the tile body was before it served two.
  auto tile = [&](std::int64_t ti, std::int64_t ti_end, std::int64_t tj,
                  std::int64_t tj_end) __attribute__((always_inline)) {
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
          const bool direct = !stream && isa < kCopyIsaAvx2 && swap <= 1;
          if (direct) {
            if (gather_tile_simd<E, T>(d0, dr, stage, pe, T * pe, isa)) return;
          } else {
            alignas(64) byte tmp[T * T * E];
            if (gather_tile_simd<E, T>(tmp, T * pe, stage, pe, T * pe, isa)) {
              if (swap > 1) swap_bytes(tmp, sizeof tmp, swap, isa);
              for (std::int64_t i = 0; i < T; ++i) write_segment<L>(d0 + i * dr, tmp + i * T * pe, stream);
              return;
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
      if (!stream && E != 4 && swap <= 1 && gather_tile_simd<E, T>(d0, dr, s0, sr, sc, isa)) return;
      alignas(64) byte tmp[T * T * E];
      if (!gather_tile_simd<E, T>(tmp, T * pe, s0, sr, sc, isa)) {
        for (std::int64_t j = 0; j < T; ++j) {
          const byte* s = s0 + j * sc;
          for (std::int64_t i = 0; i < T; ++i) move_elem<E>(tmp + (i * T + j) * pe, s + i * sr);
        }
      }
      if (swap > 1) swap_bytes(tmp, sizeof tmp, swap, isa);
      for (std::int64_t i = 0; i < T; ++i) write_segment<L>(d0 + i * dr, tmp + i * T * pe, stream);
    } else {
      for (std::int64_t j = tj; j < tj_end; ++j) {
        const byte* s = src + j * sc;
        byte* d = dst + j * pe;
        for (std::int64_t i = ti; i < ti_end; ++i) {
          move_elem<E>(d + i * dr, s + i * sr);
          if (swap > 1) swap_bytes(d + i * dr, E, swap, isa);
        }
      }
    }
  };
  if (stream && E >= 4 && transpose_in_source_order()) {
    // Streamed destinations (32 MiB and more, in no cache): the source is
    // walked in its own order, a band of T source rows (T destination
    // columns) at a time from the first destination row to the last, so
    // that the source is read as T sequential runs that the hardware
    // prefetchers follow, and every destination line, written whole with
    // streaming stores, costs no read. Walked in the destination's order,
    // each tile's T source lines came from T rows a whole pitch apart and
    // the copy waited on memory (bench/README.md, "Steadiness").
    for (std::int64_t tj = 0; tj < cols; tj += T) {
      const std::int64_t tj_end = tj + T < cols ? tj + T : cols;
      for (std::int64_t ti = 0; ti < rows; ti += T) tile(ti, ti + T < rows ? ti + T : rows, tj, tj_end);
    }
    return;
  }
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
          tile(ti, ti + T < i_end ? ti + T : i_end, tj, tj_end);
        }
      }
    }
  }
}

void copy_tiled_any(byte* dst, std::ptrdiff_t dr, const byte* src, std::ptrdiff_t sr, std::ptrdiff_t sc,
                    std::int64_t rows, std::int64_t cols, std::size_t e, int isa, std::size_t swap) noexcept {
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
          if (swap > 1) swap_bytes(dst + i * dr + j * pe, e, swap, isa);
        }
      }
    }
  }
}

}  // namespace

template <std::size_t E>
void copy_transposed(const byte* src, const View& v, int k, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e,
                     bool nt, int isa, std::size_t swap) noexcept {
  const int last = v.n - 1;
  int dims[kMaxDims];
  int nd = 0;
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
      copy_tiled_any(dst + dof, dr, src + so, sr, sc, rows, cols, e, isa, swap);
    } else {
      (void)e;
      copy_tiled<E>(dst + dof, dr, src + so, sr, sc, rows, cols, nt, isa, swap);
    }
  });
}

#define DLB_COPY_INSTANTIATE(W)                                                                                    \
  template void copy_transposed<W>(const byte*, const View&, int, const std::ptrdiff_t*, byte*, std::size_t, bool, \
                                   int, std::size_t) noexcept;
DLB_COPY_WIDTHS(DLB_COPY_INSTANTIATE)
#undef DLB_COPY_INSTANTIATE

}  // namespace copy_detail
}  // namespace dlb
