// The copy engine (dlb_copy_to_contiguous) against memcpy of the same bytes,
// both measured in this process, turn about.
//
// Engine cases copy a view into a warm destination (touched before the
// timing): every iteration times one memcpy of the destination's size
// between the same two buffers, then one engine copy, so that a noisy
// neighbour slows both alike. Counters:
//   bytes_per_second  bytes of the compact result written per second
//   vs_memcpy         median memcpy time / median engine time: 1.0 is
//                     memcpy's bandwidth
// The second argument of every engine case is the copy thread setting
// (dlb_set_copy_threads): 1 serial, 0 one per core; memcpy is one thread.
//
// Fresh-destination cases time allocation plus first touch, as a caller
// who asks for a new array pays it:
//   BM_AllocZeroed   dlb_buffer_alloc + release of n bytes (zeroed memory)
//                    against calloc + free (what np.zeros does)
//   BM_ToHost*       dlb_buffer_to_host of a wrapped view (allocate + copy)
//                    against malloc + memcpy + free of the same bytes
//
// BM_Swapped times a copy from memory in the other byte order
// (dlb_copy_to_contiguous_flags with DLB_COPY_FLAG_SWAP_BYTES) beside the
// plain copy of the same view, turn about; vs_plain is the median plain
// time / the median swapping time (1.0: the swap costs nothing). Arguments:
// k (a k x k float64 matrix), 0 compact or 1 transposed, threads.
//
// Run: build/bench/bench/bench_copy [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <dlbridge/dlbridge.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace {

// A huge-page-aligned buffer, asked to use huge pages like numpy does for
// large arrays, and touched so that page faults stay out of the timings.
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

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

DLDataType dtype_of_width(int bytes) {
  DLDataType t;
  t.code = kDLUInt;
  t.bits = static_cast<std::uint8_t>(8 * bytes);
  t.lanes = 1;
  switch (bytes) {
    case 16: t = DLDataType{kDLComplex, 128, 1}; break;    // complex128
    case 3: t = DLDataType{kDLUInt, 8, 3}; break;          // 3-lane uint8 (RGB)
    case 6: t = DLDataType{kDLUInt, 16, 3}; break;         // 3-lane uint16
    case 12: t = DLDataType{kDLFloat, 32, 3}; break;       // 3-lane float32
    default: break;
  }
  return t;
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

// Times the engine copy of `view` into dst, each iteration beside a memcpy
// of out_bytes; state.range(1) is the thread setting.
void run_copy(benchmark::State& state, const DLTensor& view, Buffer& src, Buffer& dst, std::size_t out_bytes) {
  dlb_set_copy_threads(static_cast<int>(state.range(1)));
  std::vector<double> copy_s, memcpy_s;
  for (auto _ : state) {
    auto t0 = Clock::now();
    std::memcpy(dst.data, src.data, out_bytes);
    benchmark::ClobberMemory();
    memcpy_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    const dlb_status st = dlb_copy_to_contiguous(&view, dst.data, dst.size);
    benchmark::ClobberMemory();
    const double s = seconds_since(t0);
    if (st != DLB_OK) {
      state.SkipWithError(dlb_last_error_message());
      break;
    }
    copy_s.push_back(s);
    state.SetIterationTime(s);
  }
  dlb_set_copy_threads(1);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(out_bytes));
  state.counters["vs_memcpy"] = median(memcpy_s) / median(copy_s);
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

// Every other row and column of a 2k x 2k float64 matrix (x[::2, ::2]).
void BM_EveryOther(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const auto n = static_cast<std::size_t>(k * k * 8);
  Buffer src(4 * n), dst(n);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {4 * k, 2};
  const DLTensor v = make_view(src.data, 0, 2, shape, strides, 8);
  run_copy(state, v, src, dst, n);
}

// The transpose of a `bytes` matrix of 2048 columns of element width
// state.range(0).
void transposed_of_size(benchmark::State& state, std::int64_t bytes) {
  const int e = static_cast<int>(state.range(0));
  const std::int64_t cols = 2048;
  const std::int64_t rows = bytes / (cols * e);
  const auto n = static_cast<std::size_t>(rows * cols * e);
  Buffer src(n), dst(n);
  std::int64_t shape[2] = {rows, cols};
  std::int64_t strides[2] = {1, rows};
  const DLTensor v = make_view(src.data, 0, 2, shape, strides, e);
  run_copy(state, v, src, dst, n);
}

// The transpose of a 32 MiB matrix for each element width with a kernel.
void BM_TransposedWidth(benchmark::State& state) { transposed_of_size(state, std::int64_t{32} << 20); }

// The same at 4 MiB (2048 x 2048 bytes, 2048 x 1024 2-byte elements, ...):
// below the streaming size, the destination written through the cache.
void BM_TransposedWidth4M(benchmark::State& state) { transposed_of_size(state, std::int64_t{4} << 20); }

// A 32 MiB vector reversed, for each element width with a kernel.
void BM_ReversedWidth(benchmark::State& state) {
  const int e = static_cast<int>(state.range(0));
  const std::int64_t count = (std::int64_t{32} << 20) / e;
  const auto n = static_cast<std::size_t>(count * e);
  Buffer src(n), dst(n);
  std::int64_t shape[1] = {count};
  std::int64_t strides[1] = {-1};
  const DLTensor v = make_view(src.data, n - static_cast<std::size_t>(e), 1, shape, strides, e);
  run_copy(state, v, src, dst, n);
}

// dlb_buffer_alloc (zeroed) against calloc, n bytes, allocate + free.
void BM_AllocZeroed(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::int64_t shape[1] = {static_cast<std::int64_t>(n / 8)};
  std::vector<double> ours, theirs;
  for (auto _ : state) {
    auto t0 = Clock::now();
    void* p = std::calloc(n, 1);
    benchmark::DoNotOptimize(p);
    std::free(p);
    theirs.push_back(seconds_since(t0));
    t0 = Clock::now();
    dlb_buffer* b = nullptr;
    if (dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 64, 1}, 1, shape, &b) != DLB_OK) {
      state.SkipWithError(dlb_last_error_message());
      break;
    }
    dlb_buffer_release(b);
    const double s = seconds_since(t0);
    ours.push_back(s);
    state.SetIterationTime(s);
  }
  state.counters["vs_calloc"] = median(theirs) / median(ours);
}

// dlb_buffer_to_host of a k x k float64 view (allocate + copy + free)
// against malloc + memcpy + free of the same bytes (pages faulted in by the
// copy in both).
void to_host(benchmark::State& state, const DLTensor& view, std::size_t n, const unsigned char* src) {
  dlb_set_copy_threads(static_cast<int>(state.range(1)));
  dlb_buffer* wrapped = nullptr;
  if (dlb_buffer_wrap(&view, 0, nullptr, nullptr, &wrapped) != DLB_OK) {
    state.SkipWithError(dlb_last_error_message());
    return;
  }
  std::vector<double> ours, theirs;
  for (auto _ : state) {
    auto t0 = Clock::now();
    void* p = std::malloc(n);
    std::memcpy(p, src, n);
    benchmark::DoNotOptimize(p);
    std::free(p);
    theirs.push_back(seconds_since(t0));
    t0 = Clock::now();
    dlb_buffer* copy = nullptr;
    if (dlb_buffer_to_host(wrapped, &copy) != DLB_OK) {
      state.SkipWithError(dlb_last_error_message());
      break;
    }
    dlb_buffer_release(copy);
    const double s = seconds_since(t0);
    ours.push_back(s);
    state.SetIterationTime(s);
  }
  dlb_buffer_release(wrapped);
  dlb_set_copy_threads(1);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
  state.counters["vs_malloc_memcpy"] = median(theirs) / median(ours);
}

void BM_ToHostContiguous(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const auto n = static_cast<std::size_t>(k * k * 8);
  Buffer src(n);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {k, 1};
  to_host(state, make_view(src.data, 0, 2, shape, strides, 8), n, src.data);
}

void BM_ToHostTransposed(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const auto n = static_cast<std::size_t>(k * k * 8);
  Buffer src(n);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {1, k};
  to_host(state, make_view(src.data, 0, 2, shape, strides, 8), n, src.data);
}

// A k x k float64 matrix, compact or transposed, copied byte-swapped
// beside the plain copy of the same view.
void BM_Swapped(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const bool transposed = state.range(1) != 0;
  const auto n = static_cast<std::size_t>(k * k * 8);
  Buffer src(n), dst(n);
  std::int64_t shape[2] = {k, k};
  std::int64_t strides[2] = {transposed ? 1 : k, transposed ? k : 1};
  const DLTensor v = make_view(src.data, 0, 2, shape, strides, 8);
  dlb_set_copy_threads(static_cast<int>(state.range(2)));
  std::vector<double> plain_s, swap_s;
  for (auto _ : state) {
    auto t0 = Clock::now();
    dlb_status st = dlb_copy_to_contiguous(&v, dst.data, dst.size);
    benchmark::ClobberMemory();
    plain_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    if (st == DLB_OK) st = dlb_copy_to_contiguous_flags(&v, dst.data, dst.size, DLB_COPY_FLAG_SWAP_BYTES);
    benchmark::ClobberMemory();
    const double s = seconds_since(t0);
    if (st != DLB_OK) {
      state.SkipWithError(dlb_last_error_message());
      break;
    }
    swap_s.push_back(s);
    state.SetIterationTime(s);
  }
  dlb_set_copy_threads(1);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
  state.counters["vs_plain"] = median(plain_s) / median(swap_s);
}

void thread_args(benchmark::internal::Benchmark* b, std::vector<std::int64_t> sizes) {
  for (const auto s : sizes) {
    b->Args({s, 1});
    b->Args({s, 0});
  }
}

}  // namespace

BENCHMARK(BM_Contiguous)->UseManualTime()->Apply([](auto* b) {
  thread_args(b, {1 << 16, 1 << 19, 1 << 20, 1 << 21, 1 << 22, 1 << 24, 1 << 27});
});
BENCHMARK(BM_Transposed)->UseManualTime()->Apply([](auto* b) { thread_args(b, {64, 256, 362, 512, 724, 1024, 4096}); });
BENCHMARK(BM_Reversed)->UseManualTime()->Apply([](auto* b) { thread_args(b, {256, 512, 1024, 4096}); });
BENCHMARK(BM_EveryOther)->UseManualTime()->Apply([](auto* b) { thread_args(b, {512, 2048}); });
BENCHMARK(BM_TransposedWidth)->UseManualTime()->Apply([](auto* b) {
  for (const int e : {1, 2, 3, 4, 6, 8, 12, 16}) b->Args({e, 1});
});
BENCHMARK(BM_TransposedWidth4M)->UseManualTime()->Apply([](auto* b) {
  for (const int e : {1, 2, 4, 8}) b->Args({e, 1});
});
BENCHMARK(BM_ReversedWidth)->UseManualTime()->Apply([](auto* b) {
  for (const int e : {1, 2, 3, 4, 6, 8, 12, 16}) b->Args({e, 1});
});
BENCHMARK(BM_AllocZeroed)->UseManualTime()->Arg(1 << 20)->Arg(1 << 27);
BENCHMARK(BM_ToHostContiguous)->UseManualTime()->Apply([](auto* b) { thread_args(b, {1024, 4096}); });
BENCHMARK(BM_ToHostTransposed)->UseManualTime()->Apply([](auto* b) { thread_args(b, {1024, 4096}); });

BENCHMARK(BM_Swapped)->UseManualTime()->Apply([](auto* b) {
  for (const int transposed : {0, 1}) {
    for (const int threads : {1, 0}) b->Args({4096, transposed, threads});
  }
});

BENCHMARK_MAIN();
