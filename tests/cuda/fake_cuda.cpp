// A fake CUDA driver for the tests: the driver entry points the CUDA backend
// and its tests use, backed by host memory. Every stream has a worker thread
// that runs its work in order, so work is really asynchronous: reading
// memory before waiting for the stream that writes it gives stale data, as
// on a GPU. Loaded through DLB_TEST_CUDA_DRIVER.
//
// What it models: one device ("device 0"; the count is FAKE_CUDA_DEVICES,
// default 1), device / pinned host / managed allocations with their pointer
// attributes, streams (the legacy and per-thread default streams included)
// as independent queues, events, stream waits, host functions, async copies
// and memsets. What it does not: the legacy default stream's implicit
// synchronisation with other blocking streams (every stream here behaves as
// non-blocking, which is stricter), kernels, more than one context.
//
// Test controls (not part of the driver API): fake_cuda_fail() makes the
// next calls of one entry point fail with a given CUresult, and
// fake_cuda_live_allocations() counts allocations not yet freed.
//
// For CUDA IPC, device memory is a shared mapping and an interprocess
// event keeps its counters in shared memory, so a child made by fork()
// sees both; the child starts with fresh streams. The IPC entry points are
// in fake_cuda_ipc.cpp; what both files share is in fake_cuda.hpp.
#include "fake_cuda.hpp"

namespace fakecuda {

State& state() {
  static State* s = new State;  // lives for the process: worker threads may outlive static destruction
  return *s;
}

CUresult injected(const char* name) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.failures.find(name);
  if (it == s.failures.end()) return kSuccess;
  const CUresult code = it->second.first;
  if (--it->second.second <= 0) s.failures.erase(it);
  return code;
}

namespace {

Stream* legacy_stream() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  if (s.legacy == nullptr) s.legacy = std::make_shared<Stream>();
  return s.legacy.get();
}

Stream* per_thread_stream() {
  thread_local Stream* mine = nullptr;
  thread_local int epoch = 0;
  if (epoch != state().fork_epoch.load()) {  // made before a fork: its worker is gone
    mine = nullptr;
    epoch = state().fork_epoch.load();
  }
  if (mine == nullptr) {
    auto st = std::make_shared<Stream>();
    mine = st.get();
    State& s = state();
    std::lock_guard<std::mutex> lock(s.m);
    s.per_thread.push_back(std::move(st));
  }
  return mine;
}


// In a forked child the parent's stream workers do not exist: their
// streams are let go without destroying them (destroying joins the
// worker), and the child makes new ones as it needs them.
void forget_streams_after_fork() {
  State& s = state();
  auto* parked = new std::vector<std::shared_ptr<Stream>>(s.streams);  // never freed
  if (s.legacy != nullptr) parked->push_back(s.legacy);
  parked->insert(parked->end(), s.per_thread.begin(), s.per_thread.end());
  s.streams.clear();
  s.legacy = nullptr;
  s.per_thread.clear();
  s.ipc_open.clear();
  s.ipc_opened.store(0);
  s.ipc_closed.store(0);
  s.fork_epoch.fetch_add(1);
}

[[maybe_unused]] const bool kForkHandler = (pthread_atfork(nullptr, nullptr, forget_streams_after_fork), true);

// Every stream idle: what freeing memory implies on a real device.
void synchronize_all() {
  State& s = state();
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard<std::mutex> lock(s.m);
    all = s.streams;
    if (s.legacy != nullptr) all.push_back(s.legacy);
    all.insert(all.end(), s.per_thread.begin(), s.per_thread.end());
  }
  for (const auto& st : all) st->synchronize();
}


// The allocation holding [p, p + n), or nullptr.
bool find_allocation(std::uintptr_t p, std::size_t n, Allocation* out) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return false;
  --it;
  if (p < it->first || p + n > it->first + it->second.size) return false;
  if (out != nullptr) *out = it->second;
  return true;
}

struct FakeContext {
  int device;
};
FakeContext g_contexts[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
thread_local std::vector<void*> t_context_stack;

}  // namespace

bool has_current_context() { return !t_context_stack.empty(); }

namespace {

// Allocations belong to the current context's device, as on a GPU.
CUresult allocate(std::size_t bytes, Kind kind, std::uintptr_t* out) {
  if (t_context_stack.empty()) return kInvalidContext;
  const int device = static_cast<FakeContext*>(t_context_stack.back())->device;
  if (bytes == 0) return kInvalidValue;
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  std::size_t mapped = 0;
  void* p = nullptr;
  if (kind == Kind::device) {  // shared with forked children, for IPC
    mapped = (rounded + 4095) / 4096 * 4096;
    p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return kOutOfMemory;
  } else {
    p = std::aligned_alloc(256, rounded);
    if (p == nullptr) return kOutOfMemory;
  }
  std::memset(p, 0xCD, rounded);  // fresh device memory is not zero
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  s.allocations[reinterpret_cast<std::uintptr_t>(p)] =
      Allocation{bytes, kind, device, s.generation.fetch_add(1) + 1, mapped};
  *out = reinterpret_cast<std::uintptr_t>(p);
  return kSuccess;
}

CUresult release(std::uintptr_t p, bool host) {
  synchronize_all();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  auto it = s.allocations.find(p);
  if (it == s.allocations.end() || (it->second.kind == Kind::host) != host) return kInvalidValue;
  const std::size_t mapped = it->second.mapped;
  s.allocations.erase(it);
  if (mapped != 0)
    munmap(reinterpret_cast<void*>(p), mapped);
  else
    std::free(reinterpret_cast<void*>(p));
  return kSuccess;
}

int device_count() {
  const char* env = std::getenv("FAKE_CUDA_DEVICES");
  return env != nullptr ? std::atoi(env) : 1;
}

}  // namespace

Stream* resolve(void* handle) {
  const auto v = reinterpret_cast<std::uintptr_t>(handle);
  if (v == 0 || v == 1) return legacy_stream();
  if (v == 2) return per_thread_stream();
  return static_cast<Stream*>(handle);
}

}  // namespace fakecuda

using namespace fakecuda;

extern "C" {

// ---- test controls ---------------------------------------------------------

__attribute__((visibility("default"))) void fake_cuda_fail(const char* name, int code, int times) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  if (times <= 0)
    s.failures.erase(name);
  else
    s.failures[name] = {code, times};
}

__attribute__((visibility("default"))) int fake_cuda_live_allocations(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  return static_cast<int>(s.allocations.size());
}

__attribute__((visibility("default"))) void fake_cuda_ipc_counts(int* opened, int* closed, int* open_now) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  if (opened != nullptr) *opened = s.ipc_opened.load();
  if (closed != nullptr) *closed = s.ipc_closed.load();
  int now = 0;
  for (const auto& e : s.ipc_open) now += e.second;
  if (open_now != nullptr) *open_now = now;
}

// ---- the driver API --------------------------------------------------------

FAKE_API CUresult cuInit(unsigned flags) {
  if (flags != 0) return kInvalidValue;
  const CUresult rc = injected("cuInit");
  if (rc != kSuccess) return rc;
  state().initialized.store(true);
  return kSuccess;
}

FAKE_API CUresult cuGetErrorName(CUresult error, const char** out) {
  if (out == nullptr) return kInvalidValue;
  switch (error) {
    case 0: *out = "CUDA_SUCCESS"; return kSuccess;
    case 1: *out = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case 2: *out = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case 3: *out = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case 100: *out = "CUDA_ERROR_NO_DEVICE"; return kSuccess;
    case 101: *out = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
    case 201: *out = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
    case 400: *out = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
    case 500: *out = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
    case 700: *out = "CUDA_ERROR_ILLEGAL_ADDRESS"; return kSuccess;
    case 719: *out = "CUDA_ERROR_LAUNCH_FAILED"; return kSuccess;
    default: *out = nullptr; return kInvalidValue;
  }
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char** out) {
  if (out == nullptr) return kInvalidValue;
  switch (error) {
    case 0: *out = "no error"; return kSuccess;
    case 1: *out = "invalid argument"; return kSuccess;
    case 2: *out = "out of memory"; return kSuccess;
    case 3: *out = "initialization error"; return kSuccess;
    case 100: *out = "no CUDA-capable device is detected"; return kSuccess;
    case 101: *out = "invalid device ordinal"; return kSuccess;
    case 201: *out = "invalid device context"; return kSuccess;
    case 400: *out = "invalid resource handle"; return kSuccess;
    case 500: *out = "named symbol not found"; return kSuccess;
    case 700: *out = "an illegal memory access was encountered"; return kSuccess;
    case 719: *out = "unspecified launch failure"; return kSuccess;
    default: *out = nullptr; return kInvalidValue;
  }
}

FAKE_API CUresult cuDeviceGetCount(int* count) {
  FAKE_ENTER("cuDeviceGetCount");
  if (count == nullptr) return kInvalidValue;
  *count = device_count();
  return kSuccess;
}

FAKE_API CUresult cuDeviceGet(int* device, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  if (device == nullptr) return kInvalidValue;
  if (ordinal < 0 || ordinal >= device_count() || ordinal >= 8) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(void** ctx, int device) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  if (ctx == nullptr) return kInvalidValue;
  if (device < 0 || device >= device_count() || device >= 8) return kInvalidDevice;
  state().primary_refs.fetch_add(1);
  *ctx = &g_contexts[device];
  return kSuccess;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(int device) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease_v2");
  if (device < 0 || device >= device_count()) return kInvalidDevice;
  state().primary_refs.fetch_sub(1);
  return kSuccess;
}

FAKE_API CUresult cuCtxPushCurrent_v2(void* ctx) {
  FAKE_ENTER("cuCtxPushCurrent_v2");
  if (ctx == nullptr) return kInvalidValue;
  t_context_stack.push_back(ctx);
  return kSuccess;
}

FAKE_API CUresult cuCtxPopCurrent_v2(void** ctx) {
  FAKE_ENTER("cuCtxPopCurrent_v2");
  if (t_context_stack.empty()) return kInvalidValue;
  if (ctx != nullptr) *ctx = t_context_stack.back();
  t_context_stack.pop_back();
  return kSuccess;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr* out, std::size_t bytes) {
  FAKE_ENTER("cuMemAlloc_v2");
  if (out == nullptr) return kInvalidValue;
  std::uintptr_t p = 0;
  const CUresult rc = allocate(bytes, Kind::device, &p);
  if (rc == kSuccess) *out = p;
  return rc;
}

FAKE_API CUresult cuMemAllocManaged(CUdeviceptr* out, std::size_t bytes, unsigned flags) {
  FAKE_ENTER("cuMemAllocManaged");
  if (out == nullptr || (flags != 1 && flags != 2)) return kInvalidValue;
  std::uintptr_t p = 0;
  const CUresult rc = allocate(bytes, Kind::managed, &p);
  if (rc == kSuccess) *out = p;
  return rc;
}

FAKE_API CUresult cuMemAllocHost_v2(void** out, std::size_t bytes) {
  FAKE_ENTER("cuMemAllocHost_v2");
  if (out == nullptr) return kInvalidValue;
  std::uintptr_t p = 0;
  const CUresult rc = allocate(bytes, Kind::host, &p);
  if (rc == kSuccess) *out = reinterpret_cast<void*>(p);
  return rc;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr p) {
  FAKE_ENTER("cuMemFree_v2");
  return release(static_cast<std::uintptr_t>(p), false);
}

FAKE_API CUresult cuMemFreeHost(void* p) {
  FAKE_ENTER("cuMemFreeHost");
  return release(reinterpret_cast<std::uintptr_t>(p), true);
}

FAKE_API CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char value, std::size_t n, void* stream) {
  FAKE_ENTER("cuMemsetD8Async");
  if (!find_allocation(static_cast<std::uintptr_t>(p), n, nullptr)) return kInvalidValue;
  resolve(stream)->enqueue([p, value, n] { std::memset(reinterpret_cast<void*>(p), value, n); });
  return kSuccess;
}

FAKE_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t n, void* stream) {
  FAKE_ENTER("cuMemcpyDtoHAsync_v2");
  if (dst == nullptr || !find_allocation(static_cast<std::uintptr_t>(src), n, nullptr)) return kInvalidValue;
  resolve(stream)->enqueue([dst, src, n] { std::memcpy(dst, reinterpret_cast<const void*>(src), n); });
  return kSuccess;
}

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t n, void* stream) {
  FAKE_ENTER("cuMemcpyHtoDAsync_v2");
  if (src == nullptr || !find_allocation(static_cast<std::uintptr_t>(dst), n, nullptr)) return kInvalidValue;
  resolve(stream)->enqueue([dst, src, n] { std::memcpy(reinterpret_cast<void*>(dst), src, n); });
  return kSuccess;
}

FAKE_API CUresult cuLaunchHostFunc(void* stream, void (*fn)(void*), void* user_data) {
  FAKE_ENTER("cuLaunchHostFunc");
  if (fn == nullptr) return kInvalidValue;
  resolve(stream)->enqueue([fn, user_data] { fn(user_data); });
  return kSuccess;
}

FAKE_API CUresult cuStreamCreate(void** out, unsigned flags) {
  FAKE_ENTER("cuStreamCreate");
  if (out == nullptr || flags > 1) return kInvalidValue;
  auto st = std::make_shared<Stream>();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  *out = st.get();
  s.streams.push_back(std::move(st));
  return kSuccess;
}

FAKE_API CUresult cuStreamDestroy_v2(void* stream) {
  FAKE_ENTER("cuStreamDestroy_v2");
  std::shared_ptr<Stream> st;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.m);
    auto it = std::find_if(s.streams.begin(), s.streams.end(),
                           [stream](const std::shared_ptr<Stream>& p) { return p.get() == stream; });
    if (it == s.streams.end()) return kInvalidHandle;
    st = std::move(*it);
    s.streams.erase(it);
  }
  // The last holder (here, or a thread waiting for every stream) runs what
  // is queued, then stops the worker.
  return kSuccess;
}

FAKE_API CUresult cuStreamSynchronize(void* stream) {
  FAKE_ENTER("cuStreamSynchronize");
  resolve(stream)->synchronize();
  return kSuccess;
}

FAKE_API CUresult cuEventCreate(void** out, unsigned flags) {
  FAKE_ENTER("cuEventCreate");
  if (out == nullptr || flags > 0xF) return kInvalidValue;
  // CU_EVENT_INTERPROCESS needs CU_EVENT_DISABLE_TIMING.
  if ((flags & 0x4) != 0 && (flags & 0x2) == 0) return kInvalidValue;
  auto* e = new Event;
  if ((flags & 0x4) != 0) {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
      delete e;
      return kOutOfMemory;
    }
    e->ipc = new (page) IpcCounters{{0}, {0}};
    State& s = state();
    std::lock_guard<std::mutex> lock(s.m);
    e->generation = s.generation.fetch_add(1) + 1;
    s.ipc_events[reinterpret_cast<std::uintptr_t>(e)] = e->generation;
  }
  *out = e;
  return kSuccess;
}

FAKE_API CUresult cuEventRecord(void* event, void* stream) {
  FAKE_ENTER("cuEventRecord");
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  auto signal = std::make_shared<Signal>();
  {
    std::lock_guard<std::mutex> lock(e->m);
    e->last = signal;
  }
  IpcCounters* ipc = e->ipc;
  const std::uint64_t n = ipc != nullptr ? ipc->recorded.fetch_add(1) + 1 : 0;
  resolve(stream)->enqueue([signal, ipc, n] {
    signal->set();
    if (ipc != nullptr) {
      std::uint64_t c = ipc->completed.load();
      while (c < n && !ipc->completed.compare_exchange_weak(c, n)) {
      }
    }
  });
  return kSuccess;
}

FAKE_API CUresult cuStreamWaitEvent(void* stream, void* event, unsigned flags) {
  FAKE_ENTER("cuStreamWaitEvent");
  if (event == nullptr) return kInvalidHandle;
  if (flags != 0) return kInvalidValue;
  auto* e = static_cast<Event*>(event);
  if (e->ipc != nullptr) {  // possibly recorded in another process: poll the shared counters
    IpcCounters* ipc = e->ipc;
    const std::uint64_t n = ipc->recorded.load();
    resolve(stream)->enqueue([ipc, n] {
      while (ipc->completed.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    return kSuccess;
  }
  std::shared_ptr<Signal> signal;
  {
    std::lock_guard<std::mutex> lock(e->m);
    signal = e->last;
  }
  if (signal != nullptr) resolve(stream)->enqueue([signal] { signal->wait(); });
  return kSuccess;
}

FAKE_API CUresult cuEventDestroy_v2(void* event) {
  FAKE_ENTER("cuEventDestroy_v2");
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.m);
    s.ipc_events.erase(reinterpret_cast<std::uintptr_t>(e));
  }
  delete e;  // queued waits keep their signal (and the counters' page stays)
  return kSuccess;
}

FAKE_API CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr p) {
  FAKE_ENTER("cuPointerGetAttribute");
  if (data == nullptr) return kInvalidValue;
  Allocation a{};
  if (!find_allocation(static_cast<std::uintptr_t>(p), 1, &a)) return kInvalidValue;
  switch (attribute) {
    case 2:  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
      *static_cast<unsigned*>(data) = a.kind == Kind::host ? 1u : 2u;
      return kSuccess;
    case 8:  // CU_POINTER_ATTRIBUTE_IS_MANAGED: a boolean
      *static_cast<bool*>(data) = a.kind == Kind::managed;
      return kSuccess;
    case 9:  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
      *static_cast<int*>(data) = a.device;
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

}  // extern "C"
