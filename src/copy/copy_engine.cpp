// The strided copy engine.
//
// Plan of a copy:
//  1. Normalise the view: an empty view copies nothing; size-1 dimensions
//     are dropped (their strides mean nothing); adjacent dimensions that
//     walk memory as one (stride[i] == stride[i+1] * shape[i+1]) are merged.
//     Strides become byte strides from here on.
//  2. Split large copies (kParallelCopyBytes and up) into parts of about
//     a huge page each (split_rows, copy_pool.hpp), which the caller and
//     the worker pool claim one at a time; each part is a view of its own
//     and goes through step 3. Parts are ranges of the outermost dimension
//     (destination rows), except for streamed transposes of 4-, 8- and
//     16-byte elements, whose parts are ranges of the innermost dimension
//     (source rows): each part then reads a compact block of the source,
//     in the source's order.
//  3. Choose a kernel for what is left:
//     - a single compact run: one memcpy (streamed from 32 MiB);
//     - innermost stride == element size: one memcpy per row (streamed
//       from 32 MiB);
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
//     kernel writes whole aligned 16-byte words (transposes and compact
//     runs from 32 MiB, row gathers beyond the last-level cache): no read-for-ownership of
//     lines that are about to be overwritten, no eviction of the source.
//  4. The dimensions not handled by the kernel are walked by an odometer
//     that keeps a running source offset; the destination only advances.
//
// A copy from memory in the other byte order (swap_unit > 1) is planned
// as any other; its kernels reverse the bytes of each scalar on the way
// (copy_swap.cpp): compact runs as they load and store, transposes in the
// L1-resident scratch of each tile before its lines are written, gathered
// rows right after each row is written (such rows are never streamed, so
// that the row is still in the cache).
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
#include <optional>

#include "copy_kernels.hpp"
#include "copy_pool.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "core/layout.hpp"

#include <cinttypes>

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

// Compact runs (contiguous copies, and rows of views padded only in their
// outer dimensions) stream from 32 MiB, like transposes: the destination
// is then a mapping in no cache, whose lines memcpy would first read.
const std::size_t kCompactStreamingBytes = std::size_t{32} << 20;

std::atomic<std::size_t> g_streaming_bytes{0};  // 0: the default
std::atomic<std::size_t> g_parallel_bytes{0};   // 0: kParallelCopyBytes
// The dimension of the normalised view that the last split copy was split
// along (testing::last_split_axis).
std::atomic<int> g_last_split_axis{-1};
// testing::set_transpose_source_order: false for the destination-order
// walk and row split of earlier versions.
std::atomic<bool> g_source_order{true};

// A copy split into parts along one dimension of its view (`axis`: the
// outermost one, or for a streamed transpose the innermost one): part p
// copies the indices [p * chunk, min((p + 1) * chunk, shape[axis])) of it
// into the same place of the compact destination as the whole copy would.
struct SplitCopy {
  const byte* src;
  const View* v;
  const std::ptrdiff_t* dst_pitch;
  byte* dst;
  std::size_t e;
  std::int64_t chunk;
  int axis;
  Streaming nt;
  int isa;
  std::size_t swap_unit;
};

void run_split_part(void* ctx, int part) {
  const SplitCopy& c = *static_cast<const SplitCopy*>(ctx);
  const std::int64_t extent = c.v->shape[c.axis];
  const std::int64_t a = static_cast<std::int64_t>(part) * c.chunk;
  const std::int64_t b = a + c.chunk < extent ? a + c.chunk : extent;
  if (a >= b) return;
  View sub = *c.v;
  sub.shape[c.axis] = b - a;
  copy_view_pitched(c.src + a * c.v->stride[c.axis], sub, c.dst_pitch, c.dst + a * c.dst_pitch[c.axis], c.e, c.nt,
                    c.isa, c.swap_unit);
}

// How a streamed transpose is split along its innermost dimension (the
// source's rows, walked one band at a time by the tile kernel): parts of
// about kPartBytes of source each, whole 64-element groups (a multiple of
// every streamed tile width), at least kMinPartsPerThread per thread.
// Nothing when v is not a transpose that streams (tiles of 4, 8 or 16
// bytes: the widths whose kernel walks the source in its own order) or
// the innermost extent is too short for such parts; the copy is then split
// by destination rows.
std::optional<RowSplit> split_transpose_columns(const View& v, std::size_t e, Streaming nt, int threads) noexcept {
  if (!transpose_in_source_order() || !nt.tiles || (e != 4 && e != 8 && e != 16) || v.n < 2) return std::nullopt;
  if (transpose_axis(v, e) < 0) return std::nullopt;
  const std::int64_t cols = v.shape[v.n - 1];
  std::size_t col_bytes = e;  // destination (and source) bytes per index of the innermost dimension
  for (int d = 0; d < v.n - 1; ++d) col_bytes *= static_cast<std::size_t>(v.shape[d]);
  const RowSplit s = split_rows(cols, col_bytes, threads);
  if (s.rows_per_part % 64 != 0 || s.parts < threads * kMinPartsPerThread) return std::nullopt;
  return s;
}

}  // namespace

namespace copy_detail {
bool transpose_in_source_order() noexcept { return g_source_order.load(std::memory_order_relaxed); }
}  // namespace copy_detail

void copy_strided_to_contiguous(const unsigned char* src, std::int32_t ndim, const std::int64_t* shape,
                                const std::int64_t* strides, std::size_t elem_size, unsigned char* dst,
                                std::size_t swap_unit, bool strides_in_bytes) noexcept {
  if (elem_size == 0) return;
  const bool swap = swap_unit > 1;
  for (std::int32_t d = 0; d < ndim; ++d) {
    if (shape[d] == 0) return;
  }

  // Drop size-1 dimensions and merge dimensions that walk memory as one.
  View v;
  const std::ptrdiff_t pe = strides_in_bytes ? 1 : static_cast<std::ptrdiff_t>(elem_size);
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
    // v.n < kMaxDims here: kMaxDims dimensions of extent 2 or more are
    // already 2^64 elements or more, which no layout the library accepts has.
    v.shape[v.n] = shape[d];
    v.stride[v.n] = s;
    ++v.n;
  }

  if (v.n == 0) {  // 0-d, or only size-1 dimensions: one element.
    std::memcpy(dst, src, elem_size);
    if (swap) swap_bytes(dst, elem_size, swap_unit, current_isa());
    return;
  }
  const std::size_t streaming = g_streaming_bytes.load(std::memory_order_relaxed);
  const std::size_t parallel = g_parallel_bytes.load(std::memory_order_relaxed);
  const int isa = current_isa();
  // Streaming stores are SSE2 instructions: none at the scalar level.
  const auto streams_from = [&](std::size_t bytes) {
    return isa >= kCopyIsaSse2 && total >= (streaming != 0 ? streaming : bytes);
  };
  const Streaming nt{streams_from(kTileStreamingBytes), streams_from(kRowStreamingBytes),
                     streams_from(kCompactStreamingBytes) && compact_streaming()};
  const int threads = total >= (parallel != 0 ? parallel : kParallelCopyBytes) ? copy_threads() : 1;
  if (threads > 1) {
    std::ptrdiff_t dst_pitch[kMaxDims];
    compact_pitches(v, elem_size, dst_pitch);
    SplitCopy c{src, &v, dst_pitch, dst, elem_size, 0, 0, nt, isa, swap_unit};
    RowSplit split{1, 0};
    if (const std::optional<RowSplit> cols = split_transpose_columns(v, elem_size, nt, threads)) {
      // A streamed transpose: parts of about one huge page of source rows
      // (destination columns) each, every part reading a compact block of
      // the source in its own order (copy_tiles.cpp).
      c.axis = v.n - 1;
      split = *cols;
    } else if (v.shape[0] > 1) {
      // Parts of about one huge page of destination rows each.
      split = split_rows(v.shape[0], static_cast<std::size_t>(dst_pitch[0]), threads);
    }
    if (split.parts > 0) {
      // Claimed one at a time by the caller and the pool (copy_pool.hpp).
      c.chunk = split.rows_per_part;
      g_last_split_axis.store(c.axis, std::memory_order_relaxed);
      copy_pool_run(split.parts, run_split_part, &c);
      return;
    }
  }
  copy_view_any_width(src, v, dst, elem_size, nt, isa, swap_unit);
}

dlb_status copy_byte_strided(const DLTensor& t, void* dst, std::uint64_t dst_size, bool swap) noexcept {
  DLB_TRY(check_dtype(t.dtype));
  if (!byte_addressable(t.dtype))
    return set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                     "byte strides (DLB_COPY_FLAG_BYTE_STRIDES) need elements of whole bytes; these have %u bits",
                     static_cast<unsigned>(element_bits(t.dtype)));
  if (t.ndim < 0 || t.ndim >= DLB_MAX_NDIM)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "ndim is %" PRId32 "; a copy by byte strides takes 0 to %d",
                     t.ndim, DLB_MAX_NDIM - 1);
  if (t.ndim > 0 && t.shape == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "shape is NULL");
  if (t.ndim > 0 && t.strides == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "strides is NULL; DLB_COPY_FLAG_BYTE_STRIDES says they are given");
  const std::int64_t item = static_cast<std::int64_t>(element_bits(t.dtype) / 8);
  // The bytes of the view as uint8 elements, each element's bytes a last,
  // compact dimension: the one layout check of the core, in whole bytes.
  std::int64_t shape[DLB_MAX_NDIM];
  std::int64_t strides[DLB_MAX_NDIM];
  for (std::int32_t i = 0; i < t.ndim; ++i) {
    shape[i] = t.shape[i];
    strides[i] = t.strides[i];
  }
  shape[t.ndim] = item;
  strides[t.ndim] = 1;
  DLTensor bytes = t;
  bytes.dtype = DLDataType{kDLUInt, 8, 1};
  bytes.ndim = t.ndim + 1;
  bytes.shape = shape;
  bytes.strides = strides;
  LayoutInfo info;
  DLB_TRY(check_layout(&bytes, Origin::incoming, true, &info));
  if (!device_is_host_readable(device_type_of(t.device)))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "src is on %s:%d, which the host cannot read",
                     device_type_name(device_type_of(t.device)), static_cast<int>(t.device.device_id));
  if (dst_size < info.nbytes)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "dst_size is %" PRIu64 " bytes but the tensor needs %" PRIu64, dst_size,
                     info.nbytes);
  if (info.nbytes == 0) return DLB_OK;
  if (dst == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "dst is NULL");
  copy_strided_to_contiguous(static_cast<const unsigned char*>(t.data) + t.byte_offset, t.ndim, t.shape, t.strides,
                             static_cast<std::size_t>(item), static_cast<unsigned char*>(dst),
                             swap ? swap_unit(t.dtype) : 0, true);
  return DLB_OK;
}

namespace testing {
void set_copy_thresholds(std::size_t parallel_bytes, std::size_t streaming_bytes) noexcept {
  g_parallel_bytes.store(parallel_bytes, std::memory_order_relaxed);
  g_streaming_bytes.store(streaming_bytes, std::memory_order_relaxed);
}
void set_transpose_source_order(bool on) noexcept { g_source_order.store(on, std::memory_order_relaxed); }
int last_split_axis() noexcept { return g_last_split_axis.load(std::memory_order_relaxed); }
}  // namespace testing

}  // namespace dlb
