// Export and import costs against baselines in the same binary: a
// malloc+free pair of the export's metadata size, and memcpy for copies.
// Heap allocations per iteration are counted by interposing malloc.
#include <benchmark/benchmark.h>
#include <atomic>
#include <dlbridge/dlbridge.h>

#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" void* __libc_malloc(size_t size);
namespace {
// Plain per-thread count: the loops run on one thread, and an atomic here
// would add its own cost to the malloc+free baseline.
thread_local long g_mallocs = 0;
}
extern "C" void* malloc(size_t size) {
  ++g_mallocs;
  return __libc_malloc(size);
}

namespace {

// What one export carries: the managed struct (80 bytes), bookkeeping, and
// shape + strides for up to 8 dimensions.
constexpr std::size_t kExportMetadataBytes = 80 + 40 + 16 * 8;

void report_allocations(benchmark::State& state, long before) {
  state.counters["allocs_per_iter"] =
      static_cast<double>(g_mallocs - before) / static_cast<double>(state.iterations());
}

void BM_Baseline_MallocFree(benchmark::State& state) {
  const long before = g_mallocs;
  for (auto _ : state) {
    void* p = std::malloc(kExportMetadataBytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  report_allocations(state, before);
}
BENCHMARK(BM_Baseline_MallocFree);

// The floor any thread-safe export has: one atomic increment when the
// export takes its reference on the buffer, one atomic decrement when the
// deleter drops it.
void BM_Baseline_AtomicRetainRelease(benchmark::State& state) {
  std::atomic<long> refs{1};
  for (auto _ : state) {
    refs.fetch_add(1, std::memory_order_relaxed);
    benchmark::DoNotOptimize(refs.fetch_sub(1, std::memory_order_acq_rel));
  }
}
BENCHMARK(BM_Baseline_AtomicRetainRelease);

dlb_buffer* make_ndim4() {
  const int64_t shape[4] = {2, 3, 4, 5};
  dlb_buffer* b = nullptr;
  dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 32, 1}, 4, shape, &b);
  return b;
}

void BM_ExportVersioned_Ndim4(benchmark::State& state) {
  dlb_buffer* b = make_ndim4();
  const long before = g_mallocs;
  for (auto _ : state) {
    DLManagedTensorVersioned* m = nullptr;
    dlb_export_versioned(b, nullptr, &m);
    benchmark::DoNotOptimize(m);
    m->deleter(m);
  }
  report_allocations(state, before);
  dlb_buffer_release(b);
}
BENCHMARK(BM_ExportVersioned_Ndim4);

void BM_ExportLegacy_Ndim4(benchmark::State& state) {
  dlb_buffer* b = make_ndim4();
  const long before = g_mallocs;
  for (auto _ : state) {
    DLManagedTensor* m = nullptr;
    dlb_export_legacy(b, nullptr, &m);
    benchmark::DoNotOptimize(m);
    m->deleter(m);
  }
  report_allocations(state, before);
  dlb_buffer_release(b);
}
BENCHMARK(BM_ExportLegacy_Ndim4);

// A foreign producer's tensor, imported and released (its deleter is a
// counter, so the loop measures dlbridge alone).
struct Foreign {
  float data[120];
  int64_t shape[4] = {2, 3, 4, 5};
  int64_t strides[4] = {60, 20, 5, 1};
  long deleted = 0;
  DLManagedTensorVersioned m{};
  Foreign() {
    m.version = DLPackVersion{1, 0};
    m.manager_ctx = this;
    m.deleter = [](DLManagedTensorVersioned* self) { ++static_cast<Foreign*>(self->manager_ctx)->deleted; };
    m.dl_tensor = DLTensor{data, DLDevice{kDLCPU, 0}, 4, DLDataType{kDLFloat, 32, 1}, shape, strides, 0};
  }
};

void BM_ImportRelease_Ndim4(benchmark::State& state) {
  Foreign f;
  const long before = g_mallocs;
  for (auto _ : state) {
    dlb_buffer* b = nullptr;
    dlb_import_versioned(&f.m, nullptr, &b);
    benchmark::DoNotOptimize(b);
    dlb_buffer_release(b);
  }
  report_allocations(state, before);
  if (f.deleted != static_cast<long>(state.iterations())) state.SkipWithError("deleter count is wrong");
}
BENCHMARK(BM_ImportRelease_Ndim4);

void BM_ImportReexportRelease_Ndim4(benchmark::State& state) {
  Foreign f;
  const long before = g_mallocs;
  for (auto _ : state) {
    dlb_buffer* b = nullptr;
    dlb_import_versioned(&f.m, nullptr, &b);
    DLManagedTensorVersioned* m = nullptr;
    dlb_export_versioned(b, nullptr, &m);
    dlb_buffer_release(b);
    m->deleter(m);
  }
  report_allocations(state, before);
}
BENCHMARK(BM_ImportReexportRelease_Ndim4);

void BM_Baseline_Memcpy(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  std::vector<unsigned char> src(n, 1), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_Baseline_Memcpy)->Arg(1 << 12)->Arg(1 << 20)->Arg(1 << 24);

void BM_ExportCopyAlways(benchmark::State& state) {
  const int64_t shape[1] = {state.range(0)};
  dlb_buffer* b = nullptr;
  dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLUInt, 8, 1}, 1, shape, &b);
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.copy = DLB_COPY_ALWAYS;
  for (auto _ : state) {
    DLManagedTensorVersioned* m = nullptr;
    dlb_export_versioned(b, &o, &m);
    benchmark::DoNotOptimize(m);
    m->deleter(m);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  dlb_buffer_release(b);
}
BENCHMARK(BM_ExportCopyAlways)->Arg(1 << 12)->Arg(1 << 20)->Arg(1 << 24);

}  // namespace

BENCHMARK_MAIN();
