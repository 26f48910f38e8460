// The copy engine's dispatch: which instruction-set level the kernels
// use (detected once, capped by DLB_COPY_ISA), and which kernel a
// normalised view takes (one memcpy, rows, or a tiled transpose) for its
// element width.
#include <atomic>
#include <cstdlib>

#include "copy_kernels.hpp"

#if defined(DLB_COPY_AVX2)
#include <cpuid.h>
#endif

namespace dlb {
namespace copy_detail {
namespace {

#if defined(DLB_COPY_AVX2)
// Whether the CPU has AVX2 and the system saves the YMM registers, read
// with CPUID and XGETBV here rather than with __builtin_cpu_supports: that
// builtin needs the compiler's runtime (__cpu_model), and a library built
// with Zig for the manylinux wheels then links Zig's compiler_rt, whose
// memcpy, memmove and memset take the place of the C library's (slower
// copies; bench/README.md, "Wheels").
bool cpu_has_avx2() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  if ((c & bit_OSXSAVE) == 0 || (c & bit_AVX) == 0) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6u) != 0x6u) return false;  // the XMM and YMM states
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & bit_AVX2) != 0;
}
#endif

// The widest kernels the CPU runs, capped by DLB_COPY_ISA when it names a
// lower level (scalar, sse2, avx2; anything else is ignored).
int detect_isa() noexcept {
  int best = kCopyIsaScalar;
#if defined(DLB_COPY_SSE2)
  best = kCopyIsaSse2;
#if defined(DLB_COPY_AVX2)
  if (cpu_has_avx2()) best = kCopyIsaAvx2;
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
std::atomic<bool> g_compact_streaming{true};

}  // namespace

int current_isa() noexcept { return g_isa.load(std::memory_order_relaxed); }
bool compact_streaming() noexcept { return g_compact_streaming.load(std::memory_order_relaxed); }

template <std::size_t E>
void copy_view(const byte* src, const View& v, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e,
               Streaming nt, int isa, std::size_t swap) noexcept {
  const int k = transpose_axis(v, e);
  if (k >= 0) {
    copy_transposed<E>(src, v, k, dst_pitch, dst, e, nt.tiles, isa, swap);
  } else {
    // The innermost stride is the same for every row: the rows are all
    // compact runs or all gathers.
    const bool compact = v.stride[v.n - 1] == static_cast<std::ptrdiff_t>(e);
    copy_rows<E>(src, v, dst_pitch, dst, e, compact ? nt.compact : nt.rows, isa, swap);
  }
}

int transpose_axis(const View& v, std::size_t e) noexcept {
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
  return k;
}

void copy_view_any_width(const byte* src, const View& v, byte* dst, std::size_t e, Streaming nt, int isa,
                         std::size_t swap) noexcept {
  std::ptrdiff_t dst_pitch[kMaxDims];
  compact_pitches(v, e, dst_pitch);
  copy_view_pitched(src, v, dst_pitch, dst, e, nt, isa, swap);
}

void copy_view_pitched(const byte* src, const View& v, const std::ptrdiff_t* dst_pitch, byte* dst, std::size_t e,
                       Streaming nt, int isa, std::size_t swap) noexcept {
  if (v.n == 1 && v.stride[0] == static_cast<std::ptrdiff_t>(e)) {
    const std::size_t n = static_cast<std::size_t>(v.shape[0]) * e;
    if (swap > 1) {
      copy_compact_swapped(dst, src, n, nt.compact, swap, isa);
    } else {
      copy_compact(dst, src, n, nt.compact);
    }
#if defined(DLB_COPY_SSE2)
    if (nt.compact) _mm_sfence();
#endif
    return;
  }
  switch (e) {
    case 1: copy_view<1>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    case 2: copy_view<2>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    case 3: copy_view<3>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    case 4: copy_view<4>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    case 6: copy_view<6>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    case 8: copy_view<8>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    case 12: copy_view<12>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    case 16: copy_view<16>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
    default: copy_view<0>(src, v, dst_pitch, dst, e, nt, isa, swap); break;
  }
#if defined(DLB_COPY_SSE2)
  // Streaming stores are weakly ordered: fence them before the copy counts
  // as done (and before a worker reports its part finished).
  if (nt.tiles || nt.rows || nt.compact) _mm_sfence();
#endif
}

}  // namespace copy_detail

namespace testing {
int set_copy_isa(int level) noexcept {
  using copy_detail::kBestIsa;
  if (level < 0 || level > kBestIsa) level = kBestIsa;
  copy_detail::g_isa.store(level, std::memory_order_relaxed);
  return level;
}
void set_compact_streaming(bool on) noexcept { copy_detail::g_compact_streaming.store(on, std::memory_order_relaxed); }
}  // namespace testing

}  // namespace dlb
