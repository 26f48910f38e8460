// Bandwidth of dlb_copy_to_contiguous against memcpy of the same bytes,
// both measured in this process.
//
// Every benchmark times its copies itself (manual time), and before its
// timed loop measures a memcpy of the same number of bytes between the same
// two buffers. Counters:
//   bytes_per_second  bytes of the compact result written per second
//   vs_memcpy         memcpy time / copy time (best of the runs each):
//                     1.0 means memcpy's bandwidth
//
// Run: build/bench/bench_copy [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <dlbridge/dlbridge.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace {

// A page-aligned buffer, asked to use huge pages like numpy does for large
// arrays, and touched so that page faults stay out of the timings.
struct Buffer {
  explicit Buffer(std::size_t n) : size(n) {
    constexpr std::size_t kAlign = std::size_t{1} << 21;
    const std::size_t rounded = (n + kAlign - 1) / kAlign * kAlign;
    data = static_cast<unsigned char*>(std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded));
    if (data == nullptr) throw std::bad_alloc();
    madvise(data, rounded, MADV_HUGEPAGE);
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<unsigned char>(i * 131u + 7u);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  unsigned char* data = nullptr;
  std::size_t size = 0;
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double best_memcpy_seconds(unsigned char* dst, const unsigned char* src, std::size_t n) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    std::memcpy(dst, src, n);
    benchmark::ClobberMemory();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

DLDataType dtype_of_width(int bytes) {
  DLDataType t;
  t.code = kDLUInt;
  t.bits = static_cast<std::uint8_t>(8 * bytes);
  t.lanes = 1;
  if (bytes == 16) {  // no 128-bit uint in DLPack: complex128 is 16 bytes
    t.code = kDLComplex;
    t.bits = 128;
  }
  return t;
}

// Times dlb_copy_to_contiguous of `view` (whose data lies in src) into dst.
void run_copy(benchmark::State& state, const DLTensor& view, Buffer& src, Buffer& dst,
              std::size_t out_bytes) {
  const double memcpy_s = best_memcpy_seconds(dst.data, src.data, out_bytes);
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const dlb_status st = dlb_copy_to_contiguous(&view, dst.data, dst.size);
    benchmark::ClobberMemory();
    const double s = seconds_since(t0);
    if (st != DLB_OK) {
      state.SkipWithError(dlb_last_error_message());
      return;
    }
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(out_bytes));
  state.counters["vs_memcpy"] = memcpy_s / best;
}

DLTensor make_view(unsigned char* data, std::uint64_t byte_offset, int ndim, std::int64_t* shape,
                   std::int64_t* strides, int elem_bytes) {
  DLTensor t;
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype_of_width(elem_bytes);
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = byte_offset;
  return t;
}

// Plain memcpy, timed the same way, for the bandwidth column.
void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer src(n), dst(n);
  for (auto _ : state) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data, src.data, n);
    benchmark::ClobberMemory();
    state.SetIterationTime(seconds_since(t0));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

// A compact float64 vector: one block copy.
void BM_Contiguous(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer src(n), dst(n);
  std::int64_t shape[1] = {static_cast<std::int64_t>(n / 8)};
  std::int64_t strides[1] = {1};
  const DLTensor v = make_view(src.data, 0, 1, shape, strides, 8);
  run_copy(state, v, src, dst, n);
}

// The transpose of a compact k x k float64 matrix (strides (1, k)).
void BM_Transposed(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const auto n = static_cast<std::size_t>(k * k * 8);
  Buffer src(n), dst(n);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {1, k};
  const DLTensor v = make_view(src.data, 0, 2, shape, strides, 8);
  run_copy(state, v, src, dst, n);
}

// A k x k float64 matrix reversed on both axes (x[::-1, ::-1]).
void BM_Reversed(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const auto n = static_cast<std::size_t>(k * k * 8);
  Buffer src(n), dst(n);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {-k, -1};
  const DLTensor v = make_view(src.data, n - 8, 2, shape, strides, 8);
  run_copy(state, v, src, dst, n);
}

// The transpose of a 32 MiB matrix for each specialised element width.
void BM_TransposedWidth(benchmark::State& state) {
  const int e = static_cast<int>(state.range(0));
  const std::int64_t cols = 2048;
  const std::int64_t rows = (std::int64_t{32} << 20) / (cols * e);
  const auto n = static_cast<std::size_t>(rows * cols * e);
  Buffer src(n), dst(n);
  std::int64_t shape[2] = {rows, cols};
  std::int64_t strides[2] = {1, rows};
  const DLTensor v = make_view(src.data, 0, 2, shape, strides, e);
  run_copy(state, v, src, dst, n);
}

// Every other row and column of a float32 matrix (a gapped gather).
void BM_EveryOther(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const auto n_src = static_cast<std::size_t>(k * k * 4);
  const auto n = n_src / 4;
  Buffer src(n_src), dst(n);
  std::int64_t shape[2] = {k / 2, k / 2};
  std::int64_t strides[2] = {2 * k, 2};
  const DLTensor v = make_view(src.data, 0, 2, shape, strides, 4);
  run_copy(state, v, src, dst, n);
}

}  // namespace

BENCHMARK(BM_Memcpy)->UseManualTime()->RangeMultiplier(8)->Range(1 << 12, 1 << 27);
BENCHMARK(BM_Contiguous)->UseManualTime()->RangeMultiplier(8)->Range(1 << 12, 1 << 27);
BENCHMARK(BM_Transposed)->UseManualTime()->RangeMultiplier(4)->Range(64, 4096);
BENCHMARK(BM_Reversed)->UseManualTime()->RangeMultiplier(4)->Range(64, 4096);
BENCHMARK(BM_TransposedWidth)->UseManualTime()->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16);
BENCHMARK(BM_EveryOther)->UseManualTime()->Arg(1024)->Arg(4096);

BENCHMARK_MAIN();
