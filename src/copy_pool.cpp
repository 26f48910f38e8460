#include "copy_pool.hpp"

#include <dlbridge/dlbridge.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "errors.hpp"

namespace dlb {
namespace {

// Most threads a copy uses (the setting is clamped to it).
constexpr int kMaxCopyThreads = 64;

// The workers and the one job they share. Every field is guarded by mu.
// A job is (fn, ctx, parts); parts are claimed in order under mu, so a
// worker that wakes late either finds parts left of the current job or
// goes back to sleep: it never runs a finished job's function.
struct Pool {
  std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::vector<pthread_t> workers;
  Pool* orphan_next = nullptr;  // the list of pools a fork left behind
  std::uint64_t generation = 0;
  bool stop = false;
  void (*fn)(void*, int) = nullptr;
  void* ctx = nullptr;
  int parts = 0;
  int next = 0;
  int done = 0;

  // Claims and runs parts of the current job until none is left; lk holds
  // mu on entry and on return.
  void run_parts(std::unique_lock<std::mutex>& lk) {
    while (next < parts) {
      const int p = next++;
      void (*f)(void*, int) = fn;
      void* c = ctx;
      lk.unlock();
      f(c, p);
      lk.lock();
      if (++done == parts) done_cv.notify_all();
    }
  }

  void worker_main() {
    std::unique_lock<std::mutex> lk(mu);
    std::uint64_t seen = generation;
    for (;;) {
      work_cv.wait(lk, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      run_parts(lk);
    }
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
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
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
  if (p == nullptr) return nullptr;
  try {
    p->workers.reserve(static_cast<std::size_t>(workers));
  } catch (...) {
    delete p;
    return nullptr;
  }
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

void copy_pool_run(int parts, void (*fn)(void* ctx, int part), void* ctx) noexcept {
  if (parts <= 0) return;
  const int threads = effective_threads();
  std::unique_lock<std::mutex> run(g_run_mu, std::try_to_lock);
  Pool* pool = nullptr;
  if (parts > 1 && threads > 1 && run.owns_lock() && !g_shut_down) {
    pool = pool_with(threads - 1);  // restarts it only when the setting changed
  }
  if (pool == nullptr) {
    for (int p = 0; p < parts; ++p) fn(ctx, p);
    return;
  }
  std::unique_lock<std::mutex> lk(pool->mu);
  pool->fn = fn;
  pool->ctx = ctx;
  pool->parts = parts;
  pool->next = 0;
  pool->done = 0;
  ++pool->generation;
  pool->work_cv.notify_all();
  pool->run_parts(lk);
  pool->done_cv.wait(lk, [&] { return pool->done == pool->parts; });
}

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

DLB_API int dlb_copy_threads(void) { return dlb::effective_threads(); }

}  // extern "C"
