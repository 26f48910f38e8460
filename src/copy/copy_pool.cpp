#include "copy_pool.hpp"

#include <dlbridge/dlbridge.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/errors.hpp"

namespace dlb {
namespace {

// Part tracing for diagnostics (testing::trace_parts): off unless a
// diagnostic program turned it on.
std::atomic<testing::PartRecord*> g_trace{nullptr};
std::atomic<int> g_trace_capacity{0};
std::atomic<int> g_trace_count{0};
// testing::set_parts_per_thread: 0 for split_rows' own rule.
std::atomic<int> g_parts_per_thread{0};

std::int64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::int64_t thread_minor_faults() noexcept {
  rusage ru;
  return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt : 0;
}

// Runs part p of fn on thread `who`, recording it when tracing is on.
void run_part(void (*fn)(void*, int), void* ctx, int p, int who) noexcept {
  testing::PartRecord* trace = g_trace.load(std::memory_order_relaxed);
  if (trace == nullptr) {
    fn(ctx, p);
    return;
  }
  const std::int64_t f0 = thread_minor_faults();
  const std::int64_t t0 = now_ns();
  fn(ctx, p);
  const std::int64_t t1 = now_ns();
  const std::int64_t f1 = thread_minor_faults();
  const int i = g_trace_count.fetch_add(1, std::memory_order_relaxed);
  if (i < g_trace_capacity.load(std::memory_order_relaxed)) trace[i] = testing::PartRecord{p, who, t0, t1, f1 - f0};
}

// Most threads a copy uses (the setting is clamped to it).
constexpr int kMaxCopyThreads = 64;

// The workers and the one job they share. A job is (fn, ctx, parts);
// parts are claimed one at a time from the counter `next` (no lock per
// claim), so a thread that a busy core slows down claims fewer, and the
// copy waits at most for the parts in flight when the others run out.
// Everything but `next` is guarded by mu. A worker joins a job under mu,
// only while it is open, and leaves it under mu; the caller closes the job
// when it runs out of parts and waits until no worker is in it, so a
// worker that wakes late never claims a part of a later job with an
// earlier job's function.
struct Pool {
  std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::vector<pthread_t> workers;
  Pool* orphan_next = nullptr;  // the list of pools a fork left behind
  std::uint64_t generation = 0;
  bool stop = false;
  bool open = false;  // the current job takes workers
  int active = 0;     // workers in the current job
  void (*fn)(void*, int) = nullptr;
  void* ctx = nullptr;
  int parts = 0;
  std::atomic<int> next{0};
  int started = 0;

  // Claims and runs parts of the job (f, c, n) until none is left.
  void claim_parts(void (*f)(void*, int), void* c, int n, int who) noexcept {
    for (;;) {
      const int p = next.fetch_add(1, std::memory_order_relaxed);
      if (p >= n) return;
      run_part(f, c, p, who);
    }
  }

  void worker_main() {
    std::unique_lock<std::mutex> lk(mu);
    const int who = ++started;  // 1, 2, ...: names the worker in traces
    // Every worker starts with the pool, before its first job (generation
    // 0), so that it joins that job too when it wakes in time.
    std::uint64_t seen = 0;
    for (;;) {
      work_cv.wait(lk, [&] { return stop || (open && generation != seen); });
      if (stop) return;
      seen = generation;
      ++active;
      void (*f)(void*, int) = fn;
      void* c = ctx;
      const int n = parts;
      lk.unlock();
      claim_parts(f, c, n, who);
      lk.lock();
      if (--active == 0 && !open) done_cv.notify_all();
    }
  }

  // Runs a job on the caller and the workers; returns when every part has
  // run and no worker is in the job.
  void run(int n, void (*f)(void*, int), void* c) noexcept {
    {
      std::lock_guard<std::mutex> lk(mu);
      fn = f;
      ctx = c;
      parts = n;
      next.store(0, std::memory_order_relaxed);
      open = true;
      ++generation;
    }
    // Woken outside the lock, so that a worker does not wake only to
    // wait for it.
    work_cv.notify_all();
    claim_parts(f, c, n, 0);
    std::unique_lock<std::mutex> lk(mu);
    open = false;
    done_cv.wait(lk, [&] { return active == 0; });
  }

  void shut_down() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (pthread_t t : workers) pthread_join(t, nullptr);
    workers.clear();
  }
};

// run_mu serialises jobs, pool (re)starts and shutdown; a copy that cannot
// take it at once runs serially instead of queueing behind another one.
std::mutex g_run_mu;
Pool* g_pool = nullptr;     // guarded by g_run_mu
// Pools inherited across fork, whose workers do not exist in this process:
// never touched again, only kept reachable (they are not leaks to report).
Pool* g_orphans = nullptr;
bool g_shut_down = false;   // guarded by g_run_mu: set at exit

// -1: not set yet (DLB_COPY_THREADS is read on first use); else the value
// of dlb_set_copy_threads (0: one per core).
std::atomic<int> g_setting{-1};

int cores() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  // GCOVR_EXCL_START: sched_getaffinity of the calling process fails only with more than 1024 CPUs
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
  // GCOVR_EXCL_STOP
}

int setting() noexcept {
  int s = g_setting.load(std::memory_order_acquire);
  if (s >= 0) return s;
  int from_env = 0;
  if (const char* v = std::getenv("DLB_COPY_THREADS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != nullptr && *end == '\0' && n >= 0) from_env = n > kMaxCopyThreads ? kMaxCopyThreads : static_cast<int>(n);
  }
  // Only the first reader's value sticks (or an explicit setting made
  // meanwhile).
  if (g_setting.compare_exchange_strong(s, from_env, std::memory_order_acq_rel)) return from_env;
  return s;
}

int effective_threads() noexcept {
  const int s = setting();
  const int n = s == 0 ? cores() : s;
  return n > kMaxCopyThreads ? kMaxCopyThreads : n;
}

// Fork: a child must not see the pool (its workers do not exist there) nor
// a lock held by a thread that does not exist. The prepare handler takes
// run_mu, so no job is in flight at the fork; the child drops the pool
// object without touching it (kept on the orphan list, once per fork that
// had one).
void fork_prepare() noexcept { g_run_mu.lock(); }
void fork_parent() noexcept { g_run_mu.unlock(); }
void fork_child() noexcept {
  if (g_pool != nullptr) {
    g_pool->orphan_next = g_orphans;
    g_orphans = g_pool;
  }
  g_pool = nullptr;
  g_run_mu.unlock();
}
[[maybe_unused]] const int g_atfork = pthread_atfork(fork_prepare, fork_parent, fork_child);

void* worker_entry(void* pool) noexcept {
  static_cast<Pool*>(pool)->worker_main();
  return nullptr;
}

// Joins the workers at exit (static destruction, or dlclose of the library).
struct Reaper {
  ~Reaper() {
    std::lock_guard<std::mutex> lk(g_run_mu);
    g_shut_down = true;
    if (g_pool != nullptr) {
      g_pool->shut_down();
      delete g_pool;
      g_pool = nullptr;
    }
  }
} g_reaper;

// With g_run_mu held: the pool with `workers` workers, started or
// restarted as needed; nullptr when threads cannot be started.
Pool* pool_with(int workers) noexcept {
  if (g_pool != nullptr && static_cast<int>(g_pool->workers.size()) == workers) return g_pool;
  if (g_pool != nullptr) {
    g_pool->shut_down();
    delete g_pool;
    g_pool = nullptr;
  }
  Pool* p = new (std::nothrow) Pool;
  if (p == nullptr) return nullptr;  // GCOVR_EXCL_LINE: the heap refusing a few hundred bytes, which no test arranges
  try {
    p->workers.reserve(static_cast<std::size_t>(workers));
  } catch (...) {  // GCOVR_EXCL_START: at most 64 thread ids, as above
    delete p;
    return nullptr;
  }  // GCOVR_EXCL_STOP
  // Plain pthreads: no heap state per thread, so a pool a fork leaves
  // behind holds nothing that only the lost threads could free.
  for (int i = 0; i < workers; ++i) {
    pthread_t t;
    if (pthread_create(&t, nullptr, worker_entry, p) != 0) {
      p->shut_down();
      delete p;
      return nullptr;
    }
    p->workers.push_back(t);  // within the reserved capacity: cannot throw
  }
  g_pool = p;
  return p;
}

}  // namespace

int copy_threads() noexcept { return effective_threads(); }

RowSplit split_rows(std::int64_t rows, std::size_t row_bytes, int threads) noexcept {
  if (rows < 1) return RowSplit{1, 0};
  if (row_bytes < 1) row_bytes = 1;
  if (threads < 1) threads = 1;
  if (const int fixed = g_parts_per_thread.load(std::memory_order_relaxed); fixed > 0) {
    // The split of earlier versions, for diagnostics: `fixed` parts per
    // thread, whole tiles where the extent allows.
    std::int64_t parts = std::int64_t{fixed} * threads;
    if (parts > rows) parts = rows;
    std::int64_t per = (rows + parts - 1) / parts;
    if (rows >= 64 * parts) per = (per + 63) / 64 * 64;
    return RowSplit{per, static_cast<int>((rows + per - 1) / per)};
  }
  const std::int64_t min_parts = static_cast<std::int64_t>(threads) * kMinPartsPerThread;
  std::int64_t per = static_cast<std::int64_t>(kPartBytes / row_bytes);
  if (per < 1) per = 1;
  // Small copies: smaller parts, so that every thread gets a few.
  if ((rows + per - 1) / per < min_parts) per = (rows + min_parts - 1) / min_parts;
  if (per >= 64) per = (per + 32) / 64 * 64;  // whole transpose tiles
  // Parts are counted in an int.
  constexpr std::int64_t kMaxParts = std::int64_t{1} << 30;
  if ((rows + per - 1) / per > kMaxParts) per = (rows + kMaxParts - 1) / kMaxParts;
  return RowSplit{per, static_cast<int>((rows + per - 1) / per)};
}

void copy_pool_run(int parts, void (*fn)(void* ctx, int part), void* ctx) noexcept {
  if (parts <= 0) return;
  const int threads = effective_threads();
  std::unique_lock<std::mutex> run(g_run_mu, std::try_to_lock);
  Pool* pool = nullptr;
  if (parts > 1 && threads > 1 && run.owns_lock() && !g_shut_down) {
    pool = pool_with(threads - 1);  // restarts it only when the setting changed
  }
  if (pool == nullptr) {
    for (int p = 0; p < parts; ++p) run_part(fn, ctx, p, 0);
    return;
  }
  pool->run(parts, fn, ctx);
}

namespace testing {
void trace_parts(PartRecord* records, int capacity) noexcept {
  g_trace_count.store(0, std::memory_order_relaxed);
  g_trace_capacity.store(records != nullptr ? capacity : 0, std::memory_order_relaxed);
  g_trace.store(records, std::memory_order_release);
}
int parts_traced() noexcept { return g_trace_count.load(std::memory_order_relaxed); }
void set_parts_per_thread(int n) noexcept { g_parts_per_thread.store(n > 0 ? n : 0, std::memory_order_relaxed); }
}  // namespace testing

}  // namespace dlb

extern "C" {

DLB_API dlb_status dlb_set_copy_threads(int n) {
  return dlb::firewall(__func__, [&]() -> dlb_status {
    if (n < 0 || n > dlb::kMaxCopyThreads)
      return dlb::set_error(DLB_ERR_INVALID_ARGUMENT, "copy threads must be 0 (one per core) to %d, not %d",
                            dlb::kMaxCopyThreads, n);
    dlb::g_setting.store(n, std::memory_order_release);
    return DLB_OK;
  });
}

DLB_API int dlb_copy_threads(void) {
  return dlb::firewall_value(__func__, 1, [] { return dlb::effective_threads(); });
}

}  // extern "C"
