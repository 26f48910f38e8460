// Senders that change a file under its receiver, and receivers that try to
// write where they may only read:
// - a memory file shrunk (then sealed) between the receiver's checks must
//   be refused, not mapped at its old size (whose first read past the new
//   end would kill the receiver with SIGBUS). This program's own fcntl()
//   stands in for libc's (the library's calls reach it: the executable's
//   definition comes first), so the sender's move happens at an exact
//   point of the receiver's checks, every run.
// - a read-only share seals its memory against new writable mappings
//   (F_SEAL_FUTURE_WRITE): a receiver that reopens its descriptor for
//   writing can neither map it writable nor write() to it, while the
//   issuer's own mapping keeps writing.
#include "share_fixture.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdarg>

using namespace dlbtest;
using namespace sharetest;

namespace {

using FcntlFn = int (*)(int, int, ...);

// When set: the memory file whose next F_GET_SEALS shrinks it to 0 and
// seals it first, as a sender racing its receiver would.
std::atomic<int> shrink_on_seal_query{-1};

int real_fcntl(int fd, int cmd, void* arg) {
  static const FcntlFn real = reinterpret_cast<FcntlFn>(dlsym(RTLD_NEXT, "fcntl64"));
  return real(fd, cmd, arg);
}

int hooked_fcntl(int fd, int cmd, va_list ap) {
  void* arg = va_arg(ap, void*);
  if (cmd == F_GET_SEALS && shrink_on_seal_query.load() == fd) {
    shrink_on_seal_query.store(-1);
    if (ftruncate(fd, 0) != 0 || real_fcntl(fd, F_ADD_SEALS, reinterpret_cast<void*>(F_SEAL_SHRINK)) != 0) _exit(90);
  }
  return real_fcntl(fd, cmd, arg);
}

}  // namespace

// The library calls fcntl64 (built with 64-bit file offsets), others fcntl.
extern "C" int dlbtest_fcntl(int fd, int cmd, ...) __asm__("fcntl");
extern "C" int dlbtest_fcntl64(int fd, int cmd, ...) __asm__("fcntl64");
extern "C" int dlbtest_fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const int r = hooked_fcntl(fd, cmd, ap);
  va_end(ap);
  return r;
}
extern "C" int dlbtest_fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const int r = hooked_fcntl(fd, cmd, ap);
  va_end(ap);
  return r;
}

namespace {

TEST_F(Share, AFileShrunkDuringTheChecksIsRefusedNotMapped) {
  dlb_buffer* b = alloc_shared_f32({4096});  // a description of 16 KiB
  dlb_share_descriptor d = share_of(b);
  const int rc = in_child([&] {
    // The sender's file: unsealed, the described size, shrunk and sealed
    // while the receiver checks it.
    const int fd = memfd_create("shrinking", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, 16384) != 0) return 2;
    shrink_on_seal_query.store(fd);
    dlb_buffer* o = nullptr;
    const dlb_status s = dlb_buffer_open_shared(fd, d.description, d.size, 0, &o);
    if (s == DLB_OK) {
      volatile float sum = 0;
      for (int i = 0; i < 4096; i += 1024) sum = sum + data_of(o)[i];  // SIGBUS: the pages are gone
      return 3;
    }
    if (s != DLB_ERR_MALFORMED) return 4;
    if (std::strstr(dlb_last_error_message(), "says the file has 16384 bytes; it has 0") == nullptr) return 5;
    return shrink_on_seal_query.load() == -1 ? 0 : 6;  // the sender did move
  });
  EXPECT_EQ(rc, 0) << (rc == 128 + SIGBUS ? "the receiver died of SIGBUS" : "");
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

// The memory file a descriptor names, opened anew for reading and writing
// through /proc/self/fd, as a receiver may.
int reopen_writable(int fd) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return open(path, O_RDWR | O_CLOEXEC);
}

TEST_F(Share, AReadOnlyShareCannotBeMadeWritable) {
  dlb_buffer* b = alloc_shared_f32({1024});
  float* p = data_of(b);
  dlb_share_descriptor d = share_of(b, DLB_SHARE_READ_ONLY);
  EXPECT_NE(fcntl(d.fd, F_GET_SEALS) & F_SEAL_FUTURE_WRITE, 0);
  dlb_buffer* o = open_of(d);
  const float* q = data_of(o);
  const int rw = reopen_writable(d.fd);  // allowed: the seal is on writing, not on opening
  ASSERT_GE(rw, 0);
  errno = 0;
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0), MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  const float one = 1.0f;
  EXPECT_EQ(pwrite(rw, &one, sizeof one, 0), -1);
  EXPECT_EQ(errno, EPERM);
  // The receiver's read-only mapping cannot become writable either.
  EXPECT_NE(mprotect(const_cast<float*>(q), 4096, PROT_READ | PROT_WRITE), 0);
  close(rw);
  // The issuer's own mapping keeps writing, and the receiver sees it.
  p[5] = 5.0f;
  EXPECT_EQ(q[5], 5.0f);
  EXPECT_EQ(p[0], 0.0f);
  // A writable description over that file: refused before mapping.
  dlb_share_descriptor w = d;
  put_le(w.description + kFlags, 0, 8);
  reseal(w.description, w.size);
  w.fd = reopen_writable(d.fd);
  dlb_buffer* x = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(w.fd, w.description, w.size, 0, &x), DLB_ERR_READ_ONLY);
  EXPECT_TRUE(MessageContains("sealed against writing"));
  dlb_share_descriptor_close(&w);
  dlb_buffer_release(o);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

TEST_F(Share, AReadOnlyCopyIsSealedAgainstWriting) {
  dlb_buffer* plain = nullptr;
  const std::int64_t shape[] = {8};
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &plain), DLB_OK);
  dlb_buffer* copy = nullptr;
  ASSERT_EQ(dlb_buffer_copy_shared(plain, DLB_SHARE_READ_ONLY, &copy), DLB_OK) << dlb_last_error_message();
  dlb_share_descriptor d = share_of(copy);
  EXPECT_NE(fcntl(d.fd, F_GET_SEALS) & F_SEAL_FUTURE_WRITE, 0);
  const int rw = reopen_writable(d.fd);
  ASSERT_GE(rw, 0);
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0), MAP_FAILED);
  close(rw);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(copy);
  dlb_buffer_release(plain);
}

// A file whose seals were frozen (F_SEAL_SEAL, which a writable receiver
// could add) cannot be sealed against writing: a read-only share of it is
// refused rather than made advisory.
TEST_F(Share, AReadOnlyShareThatCannotBeSealedIsRefused) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_descriptor d = share_of(b);
  ASSERT_EQ(fcntl(d.fd, F_ADD_SEALS, F_SEAL_SEAL), 0);
  dlb_share_descriptor r;
  EXPECT_EQ(dlb_buffer_share(b, DLB_SHARE_READ_ONLY, &r), DLB_ERR_READ_ONLY);
  EXPECT_TRUE(MessageContains("cannot be sealed against writing"));
  dlb_share_descriptor_close(&d);
  d = share_of(b);  // writable shares still work
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

}  // namespace
