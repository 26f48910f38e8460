// The CUDA backend's error paths against the fake driver, with the
// library's objects linked in (its allocation-failure injector reachable)
// and this program's own operator new, which can be made to fail: every
// allocation of every CUDA entry point failed in turn, a storage object
// that cannot be made (std::bad_alloc through the exception firewall),
// driver calls failing at each step of a strided copy, a wait and a share,
// and, in forked children (a CUDA IPC handle opens only in another
// process), every refusal of opening a shared buffer, the handle closed
// each time.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>

#include "core/alloc.hpp"
#include "cuda/cuda_internal.hpp"
#include "cuda_fixture.hpp"

// The replacements below pair malloc with free; GCC, seeing both inlined
// into the standard library's callers, cannot tell.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// operator new, failing once for the next allocation of a given size when
// armed (the size of one of the backend's objects: the fake driver in the
// same process allocates too, and must not be the one that fails).
namespace {
std::atomic<std::size_t> g_fail_size{0};
bool new_fails(std::size_t n) noexcept {
  std::size_t want = n;
  return g_fail_size.load(std::memory_order_relaxed) == n &&
         g_fail_size.compare_exchange_strong(want, 0, std::memory_order_relaxed);
}
}  // namespace

void* operator new(std::size_t n) {
  if (new_fails(n)) throw std::bad_alloc();
  void* p = std::malloc(n != 0 ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (new_fails(n)) return nullptr;
  return std::malloc(n != 0 ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace cudatest {
namespace {

// Runs `body` with allocation n failing, n = 1, 2, ... until it succeeds;
// every failure must be `expected` with nothing left behind (the fake's
// allocations back where they were). Returns how many failed.
int fail_each_allocation(const std::function<dlb_status()>& body, dlb_status expected = DLB_ERR_OUT_OF_MEMORY) {
  int failed = 0;
  for (std::int64_t n = 1; n < 200; ++n) {
    const int live = drv().fake_cuda_live_allocations();
    dlb::testing::drop_thread_caches();
    dlb::testing::fail_allocation_after(n);
    const dlb_status s = body();
    dlb::testing::fail_allocation_after(0);
    if (s == DLB_OK) return failed;
    EXPECT_EQ(s, expected) << "allocation " << n << ": " << last_message();
    EXPECT_EQ(drv().fake_cuda_live_allocations(), live) << "allocation " << n;
    ++failed;
  }
  ADD_FAILURE() << "never succeeded";
  return failed;
}

// `body` with the next allocation of `size` bytes by operator new failing:
// it must fail with DLB_ERR_OUT_OF_MEMORY, nothing left behind; then once
// more without the failure, succeeding.
void fails_once_then_works(std::size_t size, const std::function<dlb_status()>& body) {
  const int live = drv().fake_cuda_live_allocations();
  g_fail_size.store(size);
  EXPECT_EQ(body(), DLB_ERR_OUT_OF_MEMORY) << last_message();
  EXPECT_EQ(g_fail_size.load(), 0u) << "no allocation of " << size << " bytes was made";
  g_fail_size.store(0);
  EXPECT_EQ(drv().fake_cuda_live_allocations(), live);
  EXPECT_EQ(body(), DLB_OK) << last_message();
}

class CudaFaults : public FakeCudaTest {};

TEST_F(CudaFaults, EveryAllocationOfTheEntryPointsFailsCleanly) {
  std::int64_t shape[2] = {4, 8};
  for (int type : {kDLCUDA, kDLCUDAHost, kDLCUDAManaged}) {
    SCOPED_TRACE(type);
    EXPECT_GE(fail_each_allocation([&] {
                dlb_buffer* b = nullptr;
                const dlb_status s = dlb_cuda_buffer_alloc(backend_, DLDevice{static_cast<DLDeviceType>(type), 0},
                                                           f32(), 2, shape, &b);
                if (s == DLB_OK) dlb_buffer_release(b);
                return s;
              }),
              1);
  }
  EXPECT_GE(fail_each_allocation([&] {
              dlb_backend* be = nullptr;
              const dlb_status s = dlb_cuda_backend_create(0, &be);
              if (s == DLB_OK) dlb_backend_release(be);
              return s;
            }),
            1);
  // Wrapping and taking in device memory; copying a strided view to the host.
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  ASSERT_NE(b, nullptr);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  void* data = m->dl_tensor.data;
  EXPECT_GE(fail_each_allocation([&] {
              std::int64_t s2[2] = {8, 4};
              std::int64_t st[2] = {1, 8};  // transposed: a staged, strided copy
              DLTensor view{data, DLDevice{kDLCUDA, 0}, 2, f32(), s2, st, 0};
              Release rel;
              dlb_buffer* w = nullptr;
              dlb_status s = dlb_cuda_buffer_wrap(backend_, &view, 0, 1, count_release, &rel, &w);
              if (s != DLB_OK) {
                EXPECT_EQ(rel.calls.load(), 0);
                return s;
              }
              dlb_buffer* h = nullptr;
              s = dlb_buffer_to_host(w, &h);
              if (s == DLB_OK) dlb_buffer_release(h);
              dlb_buffer_release(w);
              EXPECT_EQ(rel.calls.load(), 1);
              return s == DLB_ERR_BACKEND && std::string(last_message()).find("out of memory") != std::string::npos
                         ? DLB_ERR_OUT_OF_MEMORY
                         : s;
            }),
            2);
  EXPECT_GE(fail_each_allocation([&] {
              CudaProducer p(data, DLDevice{kDLCUDA, 0});
              dlb_import_options o;
              dlb_import_options_init(&o);
              o.flags = DLB_IMPORT_CUDA_BACKEND;
              dlb_buffer* w = nullptr;
              const dlb_status s = dlb_import_versioned(&p.versioned, &o, &w);
              if (s == DLB_OK) {
                dlb_buffer_release(w);
                EXPECT_EQ(p.deleted.load(), 1);
              } else {
                EXPECT_EQ(p.deleted.load(), 0);
              }
              return s;
            }),
            1);
  m->deleter(m);
  dlb_buffer_release(b);
}

// A storage object or a backend that cannot be made: std::bad_alloc from
// the backend's own `new` (through the exception firewall) or NULL from
// its nothrow `new`, each DLB_ERR_OUT_OF_MEMORY with the device memory it
// had allocated freed again.
TEST_F(CudaFaults, OperatorNewFailingInsideTheBackend) {
  std::int64_t shape[2] = {4, 8};
  for (int type : {kDLCUDA, kDLCUDAHost}) {
    fails_once_then_works(sizeof(dlb::cuda::CudaStorage), [&] {
      dlb_buffer* b = nullptr;
      const dlb_status s =
          dlb_cuda_buffer_alloc(backend_, DLDevice{static_cast<DLDeviceType>(type), 0}, f32(), 2, shape, &b);
      if (s == DLB_OK) dlb_buffer_release(b);
      return s;
    });
  }
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  DLTensor view{m->dl_tensor.data, DLDevice{kDLCUDA, 0}, 2, f32(), shape, nullptr, 0};
  fails_once_then_works(sizeof(dlb::cuda::CudaStorage), [&] {
    dlb_buffer* w = nullptr;
    const dlb_status s = dlb_cuda_buffer_wrap(backend_, &view, 0, 1, nullptr, nullptr, &w);
    if (s == DLB_OK) dlb_buffer_release(w);
    return s;
  });
  fails_once_then_works(sizeof(dlb::cuda::CudaBackend), [&] {
    dlb_backend* be = nullptr;
    const dlb_status s = dlb_cuda_backend_create(0, &be);
    if (s == DLB_OK) dlb_backend_release(be);
    return s;
  });
  m->deleter(m);
  dlb_buffer_release(b);
}

// The steps of a strided device-to-host copy, a sub-byte strided view, and
// a consumer stream's wait, each failing.
TEST_F(CudaFaults, DriverFailuresInCopiesAndWaits) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  std::int64_t s2[2] = {8, 4};
  std::int64_t st[2] = {1, 8};
  DLTensor view{m->dl_tensor.data, DLDevice{kDLCUDA, 0}, 2, f32(), s2, st, 0};
  dlb_buffer* w = nullptr;
  ASSERT_EQ(dlb_cuda_buffer_wrap(backend_, &view, 0, 1, nullptr, nullptr, &w), DLB_OK) << last_message();
  dlb_buffer* h = nullptr;
  for (const char* call : {"cuMemcpyDtoHAsync_v2", "cuStreamSynchronize"}) {
    drv().fake_cuda_fail(call, 1, 1);
    EXPECT_EQ(dlb_buffer_to_host(w, &h), DLB_ERR_BACKEND) << call;
    EXPECT_TRUE(MessageContains(call)) << last_message();
    drv().fake_cuda_fail(call, 0, 0);
  }
  ASSERT_EQ(dlb_buffer_to_host(w, &h), DLB_OK) << last_message();
  dlb_buffer_release(h);
  dlb_buffer_release(w);

  // int4, strided: elements off byte boundaries cannot be copied one by one.
  std::int64_t s4[2] = {4, 4};
  std::int64_t st4[2] = {1, 4};
  DLTensor packed{m->dl_tensor.data, DLDevice{kDLCUDA, 0}, 2, DLDataType{kDLInt, 4, 1}, s4, st4, 0};
  ASSERT_EQ(dlb_cuda_buffer_wrap(backend_, &packed, 0, 1, nullptr, nullptr, &w), DLB_OK) << last_message();
  EXPECT_EQ(dlb_buffer_to_host(w, &h), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("sub-byte")) << last_message();
  dlb_buffer_release(w);

  // An export to another stream than the buffer's writer: an event, then a
  // wait; each failing.
  CUstream producer = new_stream();
  CUstream consumer = new_stream();
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);
  for (const char* call : {"cuEventRecord", "cuStreamWaitEvent", "cuEventCreate"}) {
    drv().fake_cuda_fail(call, 1, 1);
    dlb_export_options o = stream_options(value_of(consumer));
    DLManagedTensorVersioned* x = nullptr;
    EXPECT_EQ(dlb_export_versioned(b, &o, &x), DLB_ERR_BACKEND) << call;
    EXPECT_TRUE(MessageContains(call)) << last_message();
    drv().fake_cuda_fail(call, 0, 0);
  }
  m->deleter(m);
  dlb_buffer_release(b);
}

// Making a backend: each driver call failing; a device that does not
// exist; an error code the driver cannot name.
TEST_F(CudaFaults, BackendCreationRefusals) {
  dlb_backend* be = nullptr;
  for (const char* call : {"cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain"}) {
    drv().fake_cuda_fail(call, 999, 1);  // a code without a name
    EXPECT_EQ(dlb_cuda_backend_create(0, &be), DLB_ERR_BACKEND) << call;
    EXPECT_TRUE(MessageContains(call)) << last_message();
    EXPECT_TRUE(MessageContains("an unknown CUresult")) << last_message();
    drv().fake_cuda_fail(call, 0, 0);
  }
  EXPECT_EQ(dlb_cuda_backend_create(7, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("CUDA device 7 does not exist; the driver sees 1 device")) << last_message();
  EXPECT_EQ(dlb_cuda_backend_create(-1, &be), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_cuda_backend_create(0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  // Through dlb_buffer_alloc: a device with no backend.
  std::int64_t shape[1] = {4};
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCUDA, 70}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCUDA, 3}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
}

// Wrapping memory: arguments, the wrong backend, pointers of another kind
// than the view says, and the driver's pointer queries failing.
TEST_F(CudaFaults, WrapRefusals) {
  dlb_buffer* dev = alloc(kDLCUDA, {8});
  dlb_buffer* pin = alloc(kDLCUDAHost, {8});
  dlb_buffer* man = alloc(kDLCUDAManaged, {8});
  auto address = [](dlb_buffer* b) {
    DLManagedTensorVersioned* m = nullptr;
    EXPECT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    void* p = m->dl_tensor.data;
    m->deleter(m);
    return p;
  };
  void* d = address(dev);
  void* p = address(pin);
  void* mg = address(man);
  std::int64_t shape[1] = {8};
  dlb_buffer* w = nullptr;
  auto wrap = [&](void* data, int type, std::uint64_t flags = 0, dlb_backend* be = nullptr) {
    DLTensor v{data, DLDevice{static_cast<DLDeviceType>(type), 0}, 1, f32(), shape, nullptr, 0};
    const dlb_status s = dlb_cuda_buffer_wrap(be != nullptr ? be : backend_, &v, flags, 1, nullptr, nullptr, &w);
    if (s == DLB_OK) dlb_buffer_release(w);
    return s;
  };
  EXPECT_EQ(wrap(p, kDLCUDA), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("is pinned host memory, but the view says cuda:0")) << last_message();
  EXPECT_EQ(wrap(d, kDLCUDAHost), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("is device memory")) << last_message();
  EXPECT_EQ(wrap(d, kDLCUDAManaged), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_EQ(wrap(mg, kDLCUDAHost), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("managed memory")) << last_message();
  EXPECT_EQ(wrap(mg, kDLCUDA), DLB_OK) << last_message();  // managed memory is device memory too
  float host_memory[8];
  EXPECT_EQ(wrap(host_memory, kDLCUDA), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("not memory the CUDA driver knows")) << last_message();
  EXPECT_EQ(wrap(d, kDLCUDA, 1u << 4), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("flags")) << last_message();
  EXPECT_EQ(wrap(d, kDLCPU), DLB_ERR_UNSUPPORTED_DEVICE);
  // The pointer query and the context failing.
  drv().fake_cuda_fail("cuPointerGetAttribute", 3, 1);
  EXPECT_EQ(wrap(d, kDLCUDA), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuPointerGetAttribute")) << last_message();
  drv().fake_cuda_fail("cuCtxPushCurrent_v2", 3, 1);
  EXPECT_EQ(wrap(d, kDLCUDA), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuCtxPushCurrent_v2")) << last_message();
  // Arguments and a backend that is not CUDA's.
  DLTensor v{d, DLDevice{kDLCUDA, 0}, 1, f32(), shape, nullptr, 0};
  EXPECT_EQ(dlb_cuda_buffer_wrap(backend_, &v, 0, 1, nullptr, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_wrap(nullptr, &v, 0, 1, nullptr, nullptr, &w), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_wrap(backend_, nullptr, 0, 1, nullptr, nullptr, &w), DLB_ERR_INVALID_ARGUMENT);
  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "other";
  dlb_backend* other = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &other), DLB_OK);
  EXPECT_EQ(dlb_cuda_buffer_wrap(other, &v, 0, 1, nullptr, nullptr, &w), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("not a CUDA backend")) << last_message();
  dlb_backend_release(other);
  // Streams of buffers that are not the backend's.
  std::int64_t s1[1] = {2};
  dlb_buffer* cpu = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, f32(), 1, s1, &cpu), DLB_OK);
  std::int64_t stream = 0;
  EXPECT_EQ(dlb_cuda_buffer_set_stream(cpu, 1), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_stream(cpu, &stream), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_set_stream(nullptr, 1), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_stream(nullptr, &stream), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_cuda_buffer_stream(dev, nullptr), DLB_ERR_INVALID_ARGUMENT);
  dlb_buffer_release(cpu);
  dlb_buffer_release(man);
  dlb_buffer_release(pin);
  dlb_buffer_release(dev);
}

// Imports routed to the CUDA backend (DLB_IMPORT_CUDA_BACKEND): padded
// sub-byte elements are refused (the backend copies packed ones), CPU
// tensors come in as plain imports, tensors of no deleter are fine.
TEST_F(CudaFaults, RoutedImports) {
  dlb_buffer* dev = alloc(kDLCUDA, {4, 8});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(dev, nullptr, &m), DLB_OK);
  dlb_import_options o;
  dlb_import_options_init(&o);
  o.flags = DLB_IMPORT_CUDA_BACKEND;
  for (DLDataType dt : {DLDataType{kDLUInt, 4, 1}, DLDataType{kDLInt, 4, 2}}) {
    CudaProducer p(m->dl_tensor.data, DLDevice{kDLCUDA, 0}, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    p.versioned.dl_tensor.dtype = dt;
    dlb_buffer* b = nullptr;
    EXPECT_EQ(dlb_import_versioned(&p.versioned, &o, &b), DLB_ERR_UNSUPPORTED_DTYPE);
    EXPECT_TRUE(MessageContains(dt.lanes == 1 ? "packed sub-byte elements only" : "IS_SUBBYTE_TYPE_PADDED"))
        << last_message();
    EXPECT_EQ(p.deleted.load(), 0);
  }
  {
    float x[32] = {};
    CudaProducer p(x, DLDevice{kDLCPU, 0});
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_import_legacy(&p.legacy, &o, &b), DLB_OK) << last_message();
    EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_IMPORTED, DLB_BUFFER_IMPORTED);
    dlb_buffer_release(b);
    EXPECT_EQ(p.deleted.load(), 1);
    o.struct_size = 4;
    EXPECT_EQ(dlb_import_legacy_on_stream(&p.legacy, &o, 1, &b), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(dlb_import_versioned_on_stream(&p.versioned, &o, 1, &b), DLB_ERR_INVALID_ARGUMENT);
    o.struct_size = sizeof o;
  }
  {
    CudaProducer p(m->dl_tensor.data, DLDevice{kDLCUDA, 0});
    p.versioned.deleter = nullptr;
    p.legacy.deleter = nullptr;
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_cuda_import_versioned(backend_, &p.versioned, 1, &b), DLB_OK) << last_message();
    dlb_buffer_release(b);
    ASSERT_EQ(dlb_cuda_import_legacy(nullptr, &p.legacy, 1, &b), DLB_OK) << last_message();
    dlb_buffer_release(b);
    EXPECT_EQ(dlb_cuda_import_versioned(backend_, nullptr, 1, &b), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(dlb_cuda_import_legacy(backend_, nullptr, 1, &b), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(dlb_cuda_import_legacy(backend_, &p.legacy, 1, nullptr), DLB_ERR_INVALID_ARGUMENT);
    p.versioned.version.major = 2;
    EXPECT_EQ(dlb_cuda_import_versioned(backend_, &p.versioned, 1, &b), DLB_ERR_VERSION);
    float x[32] = {};
    CudaProducer c(x, DLDevice{kDLCPU, 0});
    EXPECT_EQ(dlb_cuda_import_legacy(nullptr, &c.legacy, 1, &b), DLB_ERR_UNSUPPORTED_DEVICE);
    EXPECT_TRUE(MessageContains("not CUDA memory")) << last_message();
  }
  m->deleter(m);
  dlb_buffer_release(dev);
}

#if defined(DLB_TEST_SHARE)
struct IpcCounts {
  int opened = 0, closed = 0, open_now = 0;
};
IpcCounts ipc_counts() {
  using Fn = void (*)(int*, int*, int*);
  static Fn fn = reinterpret_cast<Fn>(dlsym(drv().lib, "fake_cuda_ipc_counts"));
  IpcCounts c;
  if (fn != nullptr) fn(&c.opened, &c.closed, &c.open_now);
  return c;
}

// Runs `child` in a forked child; its exit status (0: passed, else the
// number of the check that failed).
int in_child(const std::function<int()>& child) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) child_exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(CudaFaults, SharingFailsAtEachDriverCall) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  dlb_share_descriptor d;
  for (const char* call : {"cuMemGetAddressRange_v2", "cuEventRecord", "cuIpcGetEventHandle", "cuCtxPushCurrent_v2"}) {
    drv().fake_cuda_fail(call, 1, 1);
    EXPECT_EQ(dlb_buffer_share(b, 0, &d), DLB_ERR_BACKEND) << call;
    EXPECT_TRUE(MessageContains(call)) << last_message();
    drv().fake_cuda_fail(call, 0, 0);
  }
  dlb_buffer_release(b);
}

TEST_F(CudaFaults, OpeningASharedBufferFailsAtEachStepAndClosesTheHandle) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  dlb_share_descriptor d;
  ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK) << last_message();
  // Each driver call of the open, failing once: the handle is closed again.
  for (const char* call : {"cuMemGetAddressRange_v2", "cuIpcOpenEventHandle", "cuStreamWaitEvent",
                           "cuPointerGetAttribute", "cuCtxPushCurrent_v2"}) {
    const int status = in_child([&] {
      drv().fake_cuda_fail(call, 1, 1);
      dlb_buffer* x = nullptr;
      const dlb_status s = dlb_buffer_open_shared(-1, d.description, d.size, 0, &x);
      if (s == DLB_OK) return 1;
      if (last_message().find(call) == std::string::npos) return std::fprintf(stderr, "%s\n", last_message().c_str()), 2;
      if (x != nullptr) return 3;
      const IpcCounts c = ipc_counts();
      if (c.open_now != 0) return 4;
      return 0;
    });
    EXPECT_EQ(status, 0) << call << ": the child failed at check " << status;
  }
  // The small object that closes the handle cannot be made; then every
  // allocation of the open fails in turn.
  int status = in_child([&] {
    // A first open makes the device's backend (unless the parent had one),
    // so that the next allocation of this size is the closer's.
    for (const char* words : std::initializer_list<const char*>{nullptr, "opening a CUDA IPC handle"}) {
      dlb_buffer* x = nullptr;
      if (words != nullptr) g_fail_size.store(2 * sizeof(void*));  // {base, context}
      const dlb_status s = dlb_buffer_open_shared(-1, d.description, d.size, 0, &x);
      g_fail_size.store(0);
      if (words == nullptr) {
        if (s != DLB_OK) return 1;
        dlb_buffer_release(x);
      } else if (s != DLB_ERR_OUT_OF_MEMORY || last_message().find(words) == std::string::npos) {
        return std::fprintf(stderr, "%d %s\n", s, last_message().c_str()), 2;
      }
      if (ipc_counts().open_now != 0) return 3;
    }
    return 0;
  });
  EXPECT_EQ(status, 0) << "the child failed at check " << status;
  status = in_child([&] {
    int failures = 0;
    for (std::int64_t n = 1; n < 100; ++n) {
      dlb_buffer* x = nullptr;
      dlb::testing::drop_thread_caches();
      dlb::testing::fail_allocation_after(n);
      const dlb_status s = dlb_buffer_open_shared(-1, d.description, d.size, 0, &x);
      dlb::testing::fail_allocation_after(0);
      if (ipc_counts().open_now != (s == DLB_OK ? 1 : 0)) return 1;
      if (s == DLB_OK) {
        dlb_buffer_release(x);
        return failures > 0 ? 0 : 2;
      }
      if (s != DLB_ERR_OUT_OF_MEMORY) return 3;
      ++failures;
    }
    return 4;
  });
  EXPECT_EQ(status, 0) << "the child failed at check " << status;
  // A successful open in a child; its release closes the handle once.
  status = in_child([&] {
    dlb_buffer* x = nullptr;
    if (dlb_buffer_open_shared(-1, d.description, d.size, DLB_SHARE_READ_ONLY, &x) != DLB_OK) return 1;
    if ((dlb_buffer_flags(x) & DLB_BUFFER_READ_ONLY) == 0) return 2;
    dlb_buffer_release(x);
    const IpcCounts c = ipc_counts();
    return c.opened == 1 && c.closed == 1 && c.open_now == 0 ? 0 : 3;
  });
  EXPECT_EQ(status, 0) << "the child failed at check " << status;
  dlb_buffer_release(b);
}
#endif

}  // namespace
}  // namespace cudatest
