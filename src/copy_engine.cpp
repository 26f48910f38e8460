// The strided copy engine.
//
// Plan of a copy:
//  1. Normalise the view: an empty view copies nothing; size-1 dimensions
//     are dropped (their strides mean nothing); adjacent dimensions that
//     walk memory as one (stride[i] == stride[i+1] * shape[i+1]) are merged.
//     Strides become byte strides from here on.
//  2. Split large copies (kParallelCopyBytes and up) along the outermost
//     dimension into parts of about a huge page of destination each
//     (split_rows, copy_pool.hpp), which the caller and the worker pool
//     claim one at a time; each part is a view of its own and goes through
//     step 3.
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
// Files: this one plans (steps 1, 2 and the streaming decision);
// copy_dispatch.cpp chooses the kernel and the instruction-set level
// (step 3); copy_rows.cpp holds the row kernels, copy_tiles.cpp the
// transpose kernels; copy_kernels.hpp what they share (step 4's odometer).
//
// Elements are moved through fixed-size memcpy calls, which compilers turn
// into plain loads and stores without any alignment assumption. Only SSE2
// is assumed (the x86-64 baseline); other targets take the scalar paths.
// Kernels for wider vectors (AVX2: 1- and 2-byte tiles) are compiled for
// their instruction set alone and chosen at run time when the CPU has it
// (detect_isa in copy_dispatch.cpp); DLB_COPY_ISA=scalar|sse2|avx2 caps the level, so
// that tests and benchmarks reach every kernel on one machine.

#include "copy_engine.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "copy_kernels.hpp"
#include "copy_pool.hpp"

namespace dlb {
namespace {

using namespace copy_detail;

// Tiled transposes of 32 MiB and more are written with streaming stores
// (a tile's rows leave an L1-resident scratch a line at a time): no
// read-for-ownership of lines that are about to be overwritten, no
// eviction of the source, and no destination lines competing for the L1
// sets of power-of-two pitches. 32 MiB is also where allocations become
// fresh mappings (alloc.hpp), so a destination that large is in no cache
// when the copy starts; the L3 size sysconf reports is not consulted for
// transposes, because in a VM it is often the host's (bench/README.md,
// "Copy engine", has the figures before and after, from bench_copy).
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

std::atomic<std::size_t> g_streaming_bytes{0};  // 0: the default
std::atomic<std::size_t> g_parallel_bytes{0};   // 0: kParallelCopyBytes

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
  const int isa = current_isa();
  // Streaming stores are SSE2 instructions: none at the scalar level.
  const Streaming nt{isa >= kCopyIsaSse2 && total >= (streaming != 0 ? streaming : kTileStreamingBytes),
                     isa >= kCopyIsaSse2 && total >= (streaming != 0 ? streaming : kRowStreamingBytes)};
  const int threads = total >= (parallel != 0 ? parallel : kParallelCopyBytes) ? copy_threads() : 1;
  if (threads > 1 && v.shape[0] > 1) {
    // Parts of about one huge page of destination each, claimed one at a
    // time (split_rows in copy_pool.hpp).
    SplitCopy c{src, &v, dst, elem_size, 0, 0, nt, isa};
    std::ptrdiff_t dst_pitch[kMaxDims];
    compact_pitches(v, elem_size, dst_pitch);
    c.dst_pitch0 = dst_pitch[0];
    const RowSplit split = split_rows(v.shape[0], static_cast<std::size_t>(dst_pitch[0]), threads);
    c.chunk = split.rows_per_part;
    const int parts = split.parts;
    copy_pool_run(parts, run_split_part, &c);
    return;
  }
  copy_view_any_width(src, v, dst, elem_size, nt, isa);
}

namespace testing {
void set_copy_thresholds(std::size_t parallel_bytes, std::size_t streaming_bytes) noexcept {
  g_parallel_bytes.store(parallel_bytes, std::memory_order_relaxed);
  g_streaming_bytes.store(streaming_bytes, std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace dlb
