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

namespace dlb {

// Copies whose destination is smaller than this run on the caller alone:
// below it, waking a worker costs more than the half of the copy it takes
// over (bench_copy's Threads cases).
constexpr std::size_t kParallelCopyBytes = std::size_t{1} << 21;

// Threads a large copy should use now (>= 1): the setting.
int copy_threads() noexcept;

// Runs fn(ctx, part) once for every part in [0, parts), on the caller and
// up to copy threads - 1 workers, and returns when all have returned. When
// the pool is busy, shut down or cannot start, the caller runs every part.
// fn must not throw.
void copy_pool_run(int parts, void (*fn)(void* ctx, int part), void* ctx) noexcept;

}  // namespace dlb

#endif
