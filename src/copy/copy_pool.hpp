// The copy engine's worker pool: large copies are split into parts that the
// calling thread and a few workers run together.
//
// Process-wide setting: dlb_set_copy_threads(n) or, when that was never
// called, the environment variable DLB_COPY_THREADS read once (0 or unset:
// one thread per core the process may run on; 1: serial). Workers start on
// the first copy that wants them, stop at exit (joined) or when the setting
// changes, and are not inherited by a forked child: the child starts its
// own when it needs them. One copy uses the pool at a time; a copy that
// finds it busy runs on its caller alone.
#ifndef DLBRIDGE_SRC_COPY_POOL_HPP_
#define DLBRIDGE_SRC_COPY_POOL_HPP_

#include <cstddef>
#include <cstdint>

namespace dlb {

// Copies whose destination is smaller than this run on the caller alone:
// below it, waking a worker costs more than the half of the copy it takes
// over (bench_copy's Threads cases).
constexpr std::size_t kParallelCopyBytes = std::size_t{1} << 21;

// A large copy is split into parts of about this many destination bytes
// (one transparent huge page: a destination from alloc.hpp's large
// mappings starts on one, so that each huge page is faulted in by one
// thread), and into at least kMinPartsPerThread parts per thread. Parts
// are claimed one at a time, so a thread whose core is taken by another
// process takes fewer, and the copy waits at most for the parts in flight
// (halves, or a few parts per thread, made the whole copy wait for the
// slowest thread's share; bench/README.md, "Steadiness").
constexpr std::size_t kPartBytes = std::size_t{2} << 20;
constexpr int kMinPartsPerThread = 4;

// How a copy of `rows` rows of row_bytes destination bytes each is split:
// part p covers rows [p * rows_per_part, min((p + 1) * rows_per_part,
// rows)), parts = ceil(rows / rows_per_part), every row in exactly one
// part. rows_per_part is a multiple of 64 (a transpose tile) when it is 64
// or more. rows >= 1, row_bytes >= 1, threads >= 1.
struct RowSplit {
  std::int64_t rows_per_part;
  int parts;
};
RowSplit split_rows(std::int64_t rows, std::size_t row_bytes, int threads) noexcept;

// Threads a large copy should use now (>= 1): the setting.
int copy_threads() noexcept;

// Runs fn(ctx, part) once for every part in [0, parts), on the caller and
// up to copy threads - 1 workers, and returns when all have returned. When
// the pool is busy, shut down or cannot start, the caller runs every part.
// fn must not throw.
void copy_pool_run(int parts, void (*fn)(void* ctx, int part), void* ctx) noexcept;

namespace testing {
// One part run by the pool, for diagnostics: which thread ran it (0: the
// caller, 1..: the workers), when it started and ended (steady clock, ns)
// and the minor page faults its thread took meanwhile.
struct PartRecord {
  int part;
  int thread;
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::int64_t minor_faults;
};
// Records every part of the following copies into records[0, capacity)
// (the rest are counted, not stored); nullptr stops recording. Not for
// concurrent use with copies. Returns nothing; parts_traced() says how
// many parts ran since the last call.
void trace_parts(PartRecord* records, int capacity) noexcept;
int parts_traced() noexcept;
// Makes split_rows cut every copy into n parts per thread (the rule of
// earlier versions, n = 4), for diagnostics; 0 restores the default.
void set_parts_per_thread(int n) noexcept;
}  // namespace testing

}  // namespace dlb

#endif
