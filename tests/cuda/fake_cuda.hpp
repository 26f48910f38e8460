// What the fake CUDA driver's sources share (fake_cuda.cpp: memory,
// streams, events and the test controls; fake_cuda_ipc.cpp: CUDA IPC):
// the driver's result codes, its objects and the process-wide state.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

namespace fakecuda {

using CUresult = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kNotFound = 500;

// ---- streams -------------------------------------------------------------

class Stream {
 public:
  Stream() : worker_([this] { run(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(m_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and drained
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      task();
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;  // last: starts after the members above exist
};

struct Signal {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  void set() {
    {
      std::lock_guard<std::mutex> lock(m);
      done = true;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [this] { return done; });
  }
};

// Records and completions of an interprocess event, in memory shared with
// forked children. Never unmapped: queued work may still write it.
struct IpcCounters {
  std::atomic<std::uint64_t> recorded;
  std::atomic<std::uint64_t> completed;
};

struct Event {
  std::mutex m;
  std::shared_ptr<Signal> last;  // the latest record; null: never recorded
  IpcCounters* ipc = nullptr;    // interprocess events only
  std::uint64_t generation = 0;
};

enum class Kind { device, host, managed };
struct Allocation {
  std::size_t size;
  Kind kind;
  int device;  // of the context current at allocation
  std::uint64_t generation = 0;
  std::size_t mapped = 0;  // device memory: bytes of its shared mapping
};

// The bytes of the fake's IPC handles (64 in all).
struct MemHandle {
  char magic[8];  // "FAKEMEM"
  std::uint64_t pid, ptr, size, generation;
  char pad[24];
};
struct EventHandle {
  char magic[8];  // "FAKEEVT"
  std::uint64_t pid, event, generation;
  char pad[32];
};
static_assert(sizeof(MemHandle) == 64 && sizeof(EventHandle) == 64);

struct State {
  std::mutex m;
  // Created streams, live. Shared: a thread freeing memory waits for every
  // stream while another may destroy its own.
  std::vector<std::shared_ptr<Stream>> streams;
  std::map<std::uintptr_t, Allocation> allocations;
  std::map<std::string, std::pair<CUresult, int>> failures;  // name -> (code, remaining)
  std::atomic<bool> initialized{false};
  std::atomic<int> primary_refs{0};
  std::shared_ptr<Stream> legacy;
  std::vector<std::shared_ptr<Stream>> per_thread;  // never destroyed (threads end at any time)
  std::atomic<std::uint64_t> generation{0};
  std::map<std::uintptr_t, std::uint64_t> ipc_events;  // live interprocess events -> generation
  std::map<std::uintptr_t, int> ipc_open;               // opened memory handles -> opens
  std::atomic<int> ipc_opened{0}, ipc_closed{0};
  std::atomic<int> fork_epoch{0};
};

State& state();                    // the process's state, never destroyed
Stream* resolve(void* handle);     // a stream handle (0, 1, 2 or made) to its queue
CUresult injected(const char* name);  // a failure injected for `name`, or kSuccess
bool has_current_context();        // a context is pushed on this thread

}  // namespace fakecuda

// Every entry point starts here: the driver initialised, then any failure
// a test injected for it.
#define FAKE_ENTER(name)                                                   \
  do {                                                                     \
    if (!state().initialized.load()) return kNotInitialized;               \
    const CUresult fake_rc_ = injected(name);                              \
    if (fake_rc_ != kSuccess) return fake_rc_;                             \
  } while (0)

#define FAKE_API __attribute__((visibility("default")))
