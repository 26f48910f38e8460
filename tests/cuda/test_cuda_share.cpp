// CUDA IPC through dlb_buffer_share() / dlb_buffer_open_shared(): the
// descriptor of device memory, its refusals, and a consumer in another
// process that waits for the producer's event, reads the values, writes
// one back, and closes its handle once.
//
// CUDA opens a handle only in another process. With the fake driver the
// consumer is a fork() of the test (the fake's device memory and event
// counters are shared with it); with a real driver (scripts/gpu-check) a
// forked child may not use CUDA, so the child execs this program again to
// run CudaShareConsumer.FromSocket on the inherited socket.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda_fixture.hpp"

namespace cudatest {
namespace {

constexpr int kCount = 32;  // floats in the shared tensor, 4 x 8

// ThreadSanitizer does not follow a fork of a process with threads (the
// fake driver's stream workers): the forked halves of the FakeCudaTest
// tests, which the TSan stage runs, are left out there.
#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kUnderTsan = true;
#else
constexpr bool kUnderTsan = false;
#endif
#else
constexpr bool kUnderTsan = false;
#endif

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

// Where a CUDA buffer's element 0 is (dlb_buffer_dltensor gives no address
// for backend memory: an export does).
CUdeviceptr origin_of(dlb_buffer* b) {
  DLManagedTensorVersioned* m = nullptr;
  if (dlb_export_versioned(b, nullptr, &m) != DLB_OK) return 0;
  const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(m->dl_tensor.data) + m->dl_tensor.byte_offset;
  m->deleter(m);
  return p;
}

void put(unsigned char* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
// Rewrites a description's checksum after an edit (FNV-1a, as the format says).
void reseal(dlb_share_descriptor* d) {
  std::uint32_t h = 2166136261u;
  for (std::uint32_t i = 0; i < d->size; ++i) h = (h ^ ((i >= 12 && i < 16) ? 0 : d->description[i])) * 16777619u;
  put(d->description + 12, h, 4);
}

// The consumer's side; returns 0 or the number of the check that failed
// (and says which on stderr). Expects values 1..kCount, writes 42 into
// element 0 through the driver, and releases everything it opened.
int consume(int sock) {
  const int64_t live = dlb_live_exports();
  dlb_share_descriptor d;
  if (dlb_share_recv(sock, &d) != DLB_OK || d.fd != -1) return std::fprintf(stderr, "recv: %s\n", last_message().c_str()), 1;
  dlb_buffer* b = nullptr;
  if (dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &b) != DLB_OK)
    return std::fprintf(stderr, "open: %s\n", last_message().c_str()), 2;
  DLTensor t;
  dlb_buffer_dltensor(b, &t);
  if (t.device.device_type != kDLCUDA || t.ndim != 2 || t.shape[0] != 4 || t.shape[1] != 8) return 3;
  int64_t stream = 0;
  if (dlb_cuda_buffer_stream(b, &stream) != DLB_OK || stream != 1) return 4;
  // Ordered after the producer's event: the delayed write's values.
  dlb_buffer* host = nullptr;
  if (dlb_buffer_to_host(b, &host) != DLB_OK) return std::fprintf(stderr, "to_host: %s\n", last_message().c_str()), 5;
  DLTensor h;
  dlb_buffer_dltensor(host, &h);
  const float* v = static_cast<const float*>(h.data);
  for (int i = 0; i < kCount; ++i)
    if (v[i] != static_cast<float>(i + 1)) return std::fprintf(stderr, "value %d is %g\n", i, v[i]), 6;
  dlb_buffer_release(host);
  // A write the producer must see: the same memory.
  void* ctx = nullptr;
  if (drv().cuDevicePrimaryCtxRetain(&ctx, 0) != 0 || drv().cuCtxPushCurrent_v2(ctx) != 0) return 7;
  const float answer = 42.0f;
  const CUdeviceptr origin = origin_of(b);
  if (drv().cuMemcpyHtoDAsync_v2(origin, &answer, sizeof answer, reinterpret_cast<CUstream>(1)) != 0 ||
      drv().cuStreamSynchronize(reinterpret_cast<CUstream>(1)) != 0)
    return 8;
  dlb_buffer_release(b);
  const IpcCounts c = ipc_counts();
  if (drv().fake_cuda_fail != nullptr && (c.opened != 1 || c.closed != 1 || c.open_now != 0))
    return std::fprintf(stderr, "ipc opened %d closed %d open %d\n", c.opened, c.closed, c.open_now), 9;
  if (dlb_live_exports() != live) return 10;
  return 0;
}

// Runs `child(sock)` in another process (a fork with the fake driver, a
// fresh exec of this program with a real one); returns its exit status.
template <class F>
int run_child(int sock, F child) {
  const bool fake = drv().fake_cuda_fail != nullptr;
  // Set before fork: a forked child of a threaded process should only exec.
  char fd_text[16];
  std::snprintf(fd_text, sizeof fd_text, "%d", sock);
  if (!fake) setenv("DLB_TEST_SHARE_SOCKET", fd_text, 1);
  const pid_t pid = fork();
  if (pid == 0) {
    if (fake) child_exit(child(sock));
    execl("/proc/self/exe", "test_cuda", "--gtest_filter=CudaShareConsumer.FromSocket", static_cast<char*>(nullptr));
    _exit(127);
  }
  if (!fake) unsetenv("DLB_TEST_SHARE_SOCKET");
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(CudaTest, ShareForkedConsumerWaitsForEventReadsValuesWritesBack) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  ASSERT_NE(b, nullptr);
  const CUdeviceptr origin = origin_of(b);
  CUstream producer = new_stream();
  float* src = pinned<float>(kCount);
  const std::vector<float> values = iota(kCount);
  std::copy(values.begin(), values.end(), src);
  Delay delay;
  delay.ms = 300;
  delayed_write(producer, &delay, origin, src, kCount);
  ASSERT_EQ(dlb_cuda_buffer_set_stream(b, value_of(producer)), DLB_OK);

  dlb_share_descriptor d;
  ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK) << last_message();
  EXPECT_EQ(d.fd, -1);
  EXPECT_EQ(d.size, DLB_SHARE_DESCRIPTION_HEADER + 16 * 2 + DLB_SHARE_CUDA_HANDLES);
  EXPECT_EQ(d.description[17], DLB_SHARE_KIND_CUDA_IPC);
  std::uint32_t kind = 77;
  EXPECT_EQ(dlb_share_description_kind(d.description, d.size, &kind), DLB_OK) << last_message();
  EXPECT_EQ(kind, static_cast<std::uint32_t>(DLB_SHARE_KIND_CUDA_IPC));
  EXPECT_FALSE(delay.done.load()) << "the share waited on the host";

  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_EQ(dlb_share_send(sv[0], &d), DLB_OK) << last_message();
  const int status = run_child(sv[1], consume);
  close(sv[0]);
  close(sv[1]);
  EXPECT_EQ(status, 0) << "the consumer failed at check " << status;
  std::vector<float> back = read_on(reinterpret_cast<CUstream>(1), reinterpret_cast<const void*>(origin), kCount);
  EXPECT_EQ(back[0], 42.0f) << "the consumer's write is not in the producer's memory";
  EXPECT_EQ(back[1], 2.0f);
  dlb_buffer_release(b);
}

// Run only as the exec'd consumer of the test above (a real driver).
TEST(CudaShareConsumer, FromSocket) {
  const char* fd = std::getenv("DLB_TEST_SHARE_SOCKET");
  if (fd == nullptr) GTEST_SKIP() << "the consumer half of CudaTest.ShareForkedConsumerWaitsForEventReadsValuesWritesBack";
  ASSERT_TRUE(drv().ok);
  EXPECT_EQ(consume(std::atoi(fd)), 0);
}

TEST_F(FakeCudaTest, ShareSameProcessOpenIsRefusedAsOnHardware) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  dlb_share_descriptor d;
  ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK) << last_message();
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(-1, d.description, d.size, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("CUDA_ERROR_INVALID_CONTEXT"));
  EXPECT_TRUE(MessageContains("process that made it"));
  EXPECT_EQ(o, nullptr);
  EXPECT_EQ(ipc_counts().open_now, 0);
  // A CUDA description with a file descriptor is refused before the driver.
  EXPECT_EQ(dlb_buffer_open_shared(0, d.description, d.size, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("fd must be -1"));
  dlb_buffer_release(b);
}

TEST_F(FakeCudaTest, ShareLyingDescriptionsAreRefused) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  dlb_share_descriptor d;
  ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK) << last_message();
  dlb_buffer* o = nullptr;
  // A declared allocation too small for the layout: the parser refuses.
  dlb_share_descriptor small = d;
  put(small.description + 24, 64, 8);
  reseal(&small);
  EXPECT_EQ(dlb_buffer_open_shared(-1, small.description, small.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("it declares has 64 bytes"));
  // Without the handles (a host-sized description of the CUDA kind).
  dlb_share_descriptor cut = d;
  cut.size -= DLB_SHARE_CUDA_HANDLES;
  put(cut.description + 8, cut.size, 4);
  reseal(&cut);
  EXPECT_EQ(dlb_buffer_open_shared(-1, cut.description, cut.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("CUDA IPC share description has"));
  // Edited handle bytes without a new checksum.
  dlb_share_descriptor bent = d;
  bent.description[d.size - 1] ^= 1;
  EXPECT_EQ(dlb_buffer_open_shared(-1, bent.description, bent.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("checksum"));
  // A CUDA description of host memory.
  dlb_share_descriptor host = d;
  put(host.description + 40, kDLCPU, 4);
  reseal(&host);
  EXPECT_EQ(dlb_buffer_open_shared(-1, host.description, host.size, 0, &o), DLB_ERR_UNSUPPORTED_DEVICE);
  // An unknown kind.
  dlb_share_descriptor kind = d;
  put(kind.description + 17, 7, 1);
  reseal(&kind);
  EXPECT_EQ(dlb_buffer_open_shared(0, kind.description, kind.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("of kind 7"));
  std::uint32_t k = 77;
  EXPECT_EQ(dlb_share_description_kind(kind.description, kind.size, &k), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("of kind 7"));
  EXPECT_EQ(k, 77u);
  EXPECT_EQ(o, nullptr);

  // In another process: a larger allocation than the handle's is a lie too,
  // and the opened handle is closed again.
  if (kUnderTsan) {
    dlb_buffer_release(b);
    return;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dlb_share_descriptor big = d;
    put(big.description + 24, 4096, 8);
    reseal(&big);
    dlb_buffer* x = nullptr;
    const dlb_status s = dlb_buffer_open_shared(-1, big.description, big.size, 0, &x);
    const IpcCounts c = ipc_counts();
    if (s != DLB_ERR_MALFORMED) child_exit(1);
    if (last_message().find("has 128") == std::string::npos) child_exit(2);
    if (c.opened != 1 || c.closed != 1 || c.open_now != 0) child_exit(3);
    child_exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  dlb_buffer_release(b);
}

TEST_F(FakeCudaTest, ShareHandleOfFreedAllocationIsRefusedInTheChild) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  dlb_share_descriptor d;
  ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK) << last_message();
  dlb_buffer_release(b);  // the producer frees the memory before anyone opens it
  if (kUnderTsan) GTEST_SKIP() << "fork of a process with threads under ThreadSanitizer";
  const pid_t pid = fork();
  if (pid == 0) {
    dlb_buffer* x = nullptr;
    const dlb_status s = dlb_buffer_open_shared(-1, d.description, d.size, 0, &x);
    if (s != DLB_ERR_BACKEND) child_exit(1);
    if (last_message().find("cuIpcOpenMemHandle_v2 failed with CUDA_ERROR_INVALID_HANDLE") == std::string::npos)
      child_exit(2);
    if (x != nullptr || ipc_counts().open_now != 0) child_exit(3);
    child_exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST_F(FakeCudaTest, ShareDriverFailuresOfTheShareNameTheCall) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  dlb_share_descriptor d;
  d.fd = 77;
  drv().fake_cuda_fail("cuIpcGetMemHandle", 1 /* CUDA_ERROR_INVALID_VALUE */, 1);
  EXPECT_EQ(dlb_buffer_share(b, 0, &d), DLB_ERR_BACKEND);
  EXPECT_TRUE(MessageContains("cuIpcGetMemHandle failed with CUDA_ERROR_INVALID_VALUE"));
  EXPECT_EQ(d.fd, 77) << "out written on failure";
  drv().fake_cuda_fail("cuEventCreate", 2 /* CUDA_ERROR_OUT_OF_MEMORY */, 1);
  EXPECT_EQ(dlb_buffer_share(b, 0, &d), DLB_ERR_OUT_OF_MEMORY);
  EXPECT_TRUE(MessageContains("cuEventCreate"));
  ASSERT_EQ(dlb_buffer_share(b, DLB_SHARE_READ_ONLY, &d), DLB_OK) << last_message();
  EXPECT_EQ(d.description[16] & 1, 1) << "read-only flag";
  dlb_buffer_release(b);
}

TEST_F(CudaTest, ShareDescriptorTravelsOverASocketWithoutAFile) {
  dlb_buffer* b = alloc(kDLCUDA, {4, 8});
  dlb_share_descriptor d;
  ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK) << last_message();
  for (int type : {SOCK_STREAM, SOCK_SEQPACKET}) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
    ASSERT_EQ(dlb_share_send(sv[0], &d), DLB_OK) << last_message();
    dlb_share_descriptor r;
    ASSERT_EQ(dlb_share_recv(sv[1], &r), DLB_OK) << last_message();
    EXPECT_EQ(r.fd, -1);
    ASSERT_EQ(r.size, d.size);
    EXPECT_EQ(std::memcmp(r.description, d.description, d.size), 0);
    // A CUDA description with a file attached is refused on both ends.
    dlb_share_descriptor with_fd = d;
    with_fd.fd = sv[0];
    EXPECT_EQ(dlb_share_send(sv[0], &with_fd), DLB_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(MessageContains("carries no file"));
    close(sv[0]);
    close(sv[1]);
  }
  dlb_buffer_release(b);
}

TEST_F(CudaTest, SharePinnedHostMemoryIsNotIpcShared) {
  dlb_buffer* b = alloc(kDLCUDAHost, {4, 8});
  dlb_share_descriptor d;
  EXPECT_EQ(dlb_buffer_share(b, 0, &d), DLB_ERR_NOT_ZERO_COPY);
  ASSERT_EQ(dlb_buffer_share(b, DLB_SHARE_COPY_IF_NEEDED, &d), DLB_OK) << last_message();
  EXPECT_GE(d.fd, 0);
  EXPECT_EQ(d.description[17], DLB_SHARE_KIND_HOST);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

// A CUDA IPC description as bytes (the fake's handles need not be real
// for a refusal before the driver).
dlb_share_descriptor made_up_cuda_description() {
  dlb_share_descriptor d;
  std::memset(&d, 0, sizeof d);
  d.fd = -1;
  d.size = DLB_SHARE_DESCRIPTION_HEADER + 16 + DLB_SHARE_CUDA_HANDLES;
  unsigned char* p = d.description;
  std::memcpy(p, "DLBS", 4);
  put(p + 4, DLB_SHARE_DESCRIPTION_VERSION, 2);
  put(p + 17, DLB_SHARE_KIND_CUDA_IPC, 1);
  put(p + 8, d.size, 4);
  put(p + 24, 1024, 8);
  put(p + 40, kDLCUDA, 4);
  p[48] = kDLFloat;
  p[49] = 32;
  put(p + 50, 1, 2);
  put(p + 52, 1, 4);
  put(p + 56, 16, 8);
  put(p + 64, 1, 8);
  reseal(&d);
  return d;
}

using NoDriverShare = NoDriver;  // its own suite name, for the no-driver test's filter
class DisabledShare : public DlbTest {};

TEST_F(NoDriverShare, CudaIpcDescriptionIsRefusedNamingTheDriver) {
  const dlb_share_descriptor d = made_up_cuda_description();
  std::uint32_t kind = 77;  // the kind needs no driver
  EXPECT_EQ(dlb_share_description_kind(d.description, d.size, &kind), DLB_OK) << last_message();
  EXPECT_EQ(kind, static_cast<std::uint32_t>(DLB_SHARE_KIND_CUDA_IPC));
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(-1, d.description, d.size, 0, &o), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("the CUDA driver was not found"));
  EXPECT_EQ(o, nullptr);
}

TEST_F(DisabledShare, CudaIpcDescriptionIsRefusedNamingTheBuild) {
  const dlb_share_descriptor d = made_up_cuda_description();
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(-1, d.description, d.size, 0, &o), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("built without CUDA"));
}

}  // namespace
}  // namespace cudatest
