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
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <thread>

using namespace dlbtest;
using namespace sharetest;

namespace {

// ---- the system calls the library makes, as this program sees them ------
//
// The executable's definitions of libc's functions come before libc's for
// the library as well (it calls them through its PLT): each one below
// passes the call on to libc's, unless a test asked for the next call of it
// to fail with an errno (Inject), on the test's own thread or, for calls the
// ticket server makes, on any thread.

enum class Sys {
  none, memfd_create, ftruncate, add_seals, get_seals, dupfd, getfl, mmap, mprotect, open, fstat, getrandom,
  socket, bind, connect, pthread_create, accept4, recvmsg
};

std::atomic<Sys> inject_call{Sys::none};
std::atomic<int> inject_errno{0};
std::atomic<int> inject_skip{0};     // calls to let through first
std::atomic<long> inject_thread{0};  // 0: any thread

// When set: the memory file whose next F_GET_SEALS shrinks it to 0 and
// seals it first, as a sender racing its receiver would.
std::atomic<int> shrink_on_seal_query{-1};

bool injected(Sys call) {
  if (inject_call.load() != call) return false;
  const long tid = inject_thread.load();
  if (tid != 0 && tid != static_cast<long>(syscall(SYS_gettid))) return false;
  if (inject_skip.fetch_sub(1) > 0) return false;
  Sys expected = call;
  if (!inject_call.compare_exchange_strong(expected, Sys::none)) return false;
  errno = inject_errno.load();
  return true;
}

// The next call of `call` (after `skip` of them) fails with `err` (on this
// thread unless any_thread); ~Inject checks that it did.
struct Inject {
  Inject(Sys call, int err, bool any_thread = false, int skip = 0) {
    inject_errno.store(err);
    inject_skip.store(skip);
    inject_thread.store(any_thread ? 0 : static_cast<long>(syscall(SYS_gettid)));
    inject_call.store(call);
  }
  ~Inject() {
    EXPECT_EQ(inject_call.exchange(Sys::none), Sys::none) << "the failure was not reached";
  }
};

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

int real_fcntl(int fd, int cmd, void* arg) {
  static const auto fn = real<int (*)(int, int, ...)>("fcntl64");
  return fn(fd, cmd, arg);
}

int hooked_fcntl(int fd, int cmd, va_list ap) {
  void* arg = va_arg(ap, void*);
  if (cmd == F_GET_SEALS && shrink_on_seal_query.load() == fd) {
    shrink_on_seal_query.store(-1);
    if (ftruncate(fd, 0) != 0 || real_fcntl(fd, F_ADD_SEALS, reinterpret_cast<void*>(F_SEAL_SHRINK)) != 0) _exit(90);
  }
  const Sys call = cmd == F_ADD_SEALS ? Sys::add_seals : cmd == F_GET_SEALS ? Sys::get_seals
                   : cmd == F_DUPFD_CLOEXEC ? Sys::dupfd : cmd == F_GETFL ? Sys::getfl : Sys::none;
  if (call != Sys::none && injected(call)) return -1;
  return real_fcntl(fd, cmd, arg);
}

}  // namespace

// The library is built with 64-bit file offsets (fcntl64, ftruncate64,
// mmap64, open64, fstat64); both names of each are taken.
extern "C" {
int dlbtest_fcntl(int fd, int cmd, ...) __asm__("fcntl");
int dlbtest_fcntl64(int fd, int cmd, ...) __asm__("fcntl64");
int dlbtest_fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const int r = hooked_fcntl(fd, cmd, ap);
  va_end(ap);
  return r;
}
int dlbtest_fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const int r = hooked_fcntl(fd, cmd, ap);
  va_end(ap);
  return r;
}

int dlbtest_memfd_create(const char* name, unsigned flags) __asm__("memfd_create");
int dlbtest_memfd_create(const char* name, unsigned flags) {
  static const auto fn = real<int (*)(const char*, unsigned)>("memfd_create");
  return injected(Sys::memfd_create) ? -1 : fn(name, flags);
}

int dlbtest_ftruncate(int fd, off_t size) __asm__("ftruncate64");
int dlbtest_ftruncate(int fd, off_t size) {
  static const auto fn = real<int (*)(int, off_t)>("ftruncate64");
  return injected(Sys::ftruncate) ? -1 : fn(fd, size);
}

void* dlbtest_mmap(void* at, size_t size, int prot, int flags, int fd, off_t off) __asm__("mmap64");
void* dlbtest_mmap(void* at, size_t size, int prot, int flags, int fd, off_t off) {
  static const auto fn = real<void* (*)(void*, size_t, int, int, int, off_t)>("mmap64");
  return injected(Sys::mmap) ? MAP_FAILED : fn(at, size, prot, flags, fd, off);
}

int dlbtest_mprotect(void* at, size_t size, int prot) __asm__("mprotect");
int dlbtest_mprotect(void* at, size_t size, int prot) {
  static const auto fn = real<int (*)(void*, size_t, int)>("mprotect");
  return injected(Sys::mprotect) ? -1 : fn(at, size, prot);
}

int dlbtest_open(const char* path, int flags, ...) __asm__("open64");
int dlbtest_open(const char* path, int flags, ...) {
  static const auto fn = real<int (*)(const char*, int, ...)>("open64");
  va_list ap;
  va_start(ap, flags);
  const unsigned mode = (flags & O_CREAT) != 0 ? va_arg(ap, unsigned) : 0;
  va_end(ap);
  return injected(Sys::open) ? -1 : fn(path, flags, mode);
}

int dlbtest_fstat(int fd, struct stat* st) __asm__("fstat64");
int dlbtest_fstat(int fd, struct stat* st) {
  static const auto fn = real<int (*)(int, struct stat*)>("fstat64");
  return injected(Sys::fstat) ? -1 : fn(fd, st);
}

ssize_t dlbtest_getrandom(void* out, size_t n, unsigned flags) __asm__("getrandom");
ssize_t dlbtest_getrandom(void* out, size_t n, unsigned flags) {
  static const auto fn = real<ssize_t (*)(void*, size_t, unsigned)>("getrandom");
  return injected(Sys::getrandom) ? -1 : fn(out, n, flags);
}

int dlbtest_socket(int domain, int type, int protocol) __asm__("socket");
int dlbtest_socket(int domain, int type, int protocol) {
  static const auto fn = real<int (*)(int, int, int)>("socket");
  return injected(Sys::socket) ? -1 : fn(domain, type, protocol);
}

int dlbtest_bind(int fd, const sockaddr* a, socklen_t len) __asm__("bind");
int dlbtest_bind(int fd, const sockaddr* a, socklen_t len) {
  static const auto fn = real<int (*)(int, const sockaddr*, socklen_t)>("bind");
  return injected(Sys::bind) ? -1 : fn(fd, a, len);
}

int dlbtest_connect(int fd, const sockaddr* a, socklen_t len) __asm__("connect");
int dlbtest_connect(int fd, const sockaddr* a, socklen_t len) {
  static const auto fn = real<int (*)(int, const sockaddr*, socklen_t)>("connect");
  return injected(Sys::connect) ? -1 : fn(fd, a, len);
}

int dlbtest_accept4(int fd, sockaddr* a, socklen_t* len, int flags) __asm__("accept4");
int dlbtest_accept4(int fd, sockaddr* a, socklen_t* len, int flags) {
  static const auto fn = real<int (*)(int, sockaddr*, socklen_t*, int)>("accept4");
  return injected(Sys::accept4) ? -1 : fn(fd, a, len, flags);
}

ssize_t dlbtest_recvmsg(int fd, msghdr* m, int flags) __asm__("recvmsg");
ssize_t dlbtest_recvmsg(int fd, msghdr* m, int flags) {
  static const auto fn = real<ssize_t (*)(int, msghdr*, int)>("recvmsg");
  return injected(Sys::recvmsg) ? -1 : fn(fd, m, flags);
}

int dlbtest_pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* arg) __asm__(
    "pthread_create");
int dlbtest_pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* arg) {
  static const auto fn = real<int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*)>("pthread_create");
  if (injected(Sys::pthread_create)) return EAGAIN;
  return fn(t, a, f, arg);
}
}  // extern "C"

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

// A kernel without F_SEAL_FUTURE_WRITE (before Linux 5.1) refuses it as
// unknown: a read-only share is then read-only by its mapping alone. A file
// whose seals cannot be read is taken as not sealed against writing.
TEST_F(Share, AKernelWithoutTheSealSharesReadOnlyAsBefore) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_descriptor d;
  {
    Inject fail(Sys::add_seals, EINVAL);
    ASSERT_EQ(dlb_buffer_share(b, DLB_SHARE_READ_ONLY, &d), DLB_OK) << dlb_last_error_message();
  }
  EXPECT_EQ(fcntl(d.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(fcntl(d.fd, F_GET_SEALS) & F_SEAL_FUTURE_WRITE, 0);
  dlb_share_descriptor_close(&d);
  {
    Inject fail(Sys::get_seals, EBADF);
    ASSERT_EQ(dlb_buffer_share(b, 0, &d), DLB_OK) << dlb_last_error_message();
  }
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
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


// The ticket server started before the fixture counts file descriptors:
// its listening socket stays for the process's life.
class Faults : public Share {
 protected:
  void SetUp() override {
    dlb_buffer* b = alloc_shared_f32({4});
    dlb_share_ticket t;
    ASSERT_EQ(dlb_share_ticket_issue(b, 0, &t), DLB_OK) << dlb_last_error_message();
    ASSERT_EQ(dlb_share_ticket_withdraw(t.bytes, t.size, nullptr), DLB_OK);
    dlb_buffer_release(b);
    Share::SetUp();
  }
  void TearDown() override {
    // The server closes its end of a connection a moment after answering.
    for (int i = 0; i < 5000; ++i) {
      std::int64_t connections = 1;
      dlb_share_ticket_server(nullptr, &connections, nullptr);
      if (connections == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Share::TearDown();
  }
};

// ---- every system call the library makes failing, one at a time: a
// precise status and message, and nothing left open or mapped (the
// fixture counts file descriptors and mappings) -------------------------

TEST_F(Share, AllocationFailuresAreOutOfMemoryWithTheSystemsReason) {
  const std::int64_t shape[] = {16};
  dlb_buffer* b = nullptr;
  const struct {
    Sys call;
    const char* message;
  } cases[] = {
      {Sys::memfd_create, "memfd_create failed"},
      {Sys::ftruncate, "sizing shared memory to 4096 bytes failed"},
      {Sys::add_seals, "sealing shared memory failed"},
      {Sys::mmap, "mapping 4096 bytes of shared memory failed"},
  };
  for (const auto& c : cases) {
    {
      Inject fail(c.call, ENOMEM);
      EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), 1, shape, &b), DLB_ERR_OUT_OF_MEMORY);
    }
    EXPECT_TRUE(MessageContains(c.message));
    EXPECT_TRUE(MessageContains("Cannot allocate memory"));
    EXPECT_EQ(b, nullptr);
  }
  const std::int64_t huge[] = {std::int64_t{1} << 50};  // more than the system gives
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), DLDataType{kDLInt, 8, 1}, 1, huge, &b), DLB_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(b, nullptr);
  const std::int64_t impossible[] = {std::int64_t{1} << 59};  // more than any address space
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), DLDataType{kDLInt, 8, 1}, 1, impossible, &b), DLB_ERR_OVERFLOW);
  EXPECT_EQ(b, nullptr);
}

TEST_F(Faults, ReadOnlyCopyAndShareFailures) {
  dlb_buffer* plain = nullptr;
  const std::int64_t shape[] = {8};
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &plain), DLB_OK);
  dlb_buffer* copy = nullptr;
  {
    Inject fail(Sys::mprotect, EACCES);
    EXPECT_EQ(dlb_buffer_copy_shared(plain, DLB_SHARE_READ_ONLY, &copy), DLB_ERR_OUT_OF_MEMORY);
  }
  EXPECT_TRUE(MessageContains("making the shared mapping read-only failed: Permission denied"));
  {
    Inject fail(Sys::open, EMFILE);
    EXPECT_EQ(dlb_buffer_copy_shared(plain, DLB_SHARE_READ_ONLY, &copy), DLB_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(MessageContains("reopening the shared memory read-only (/proc/self/fd/"));
  EXPECT_EQ(copy, nullptr);
  dlb_buffer* b = alloc_shared_f32({8});
  dlb_share_descriptor d;
  {
    Inject fail(Sys::dupfd, EMFILE);
    EXPECT_EQ(dlb_buffer_share(b, 0, &d), DLB_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(MessageContains("duplicating the shared memory's file descriptor failed: Too many open files"));
  // A ticket: the file's identity, then its token.
  dlb_share_ticket t;
  {
    Inject fail(Sys::fstat, EIO);
    EXPECT_EQ(dlb_share_ticket_issue(b, 0, &t), DLB_ERR_OUT_OF_MEMORY);
  }
  EXPECT_TRUE(MessageContains("making a ticket failed"));
  {
    Inject fail(Sys::getrandom, ENOSYS);
    EXPECT_EQ(dlb_share_ticket_issue(b, 0, &t), DLB_ERR_OUT_OF_MEMORY);
  }
  EXPECT_TRUE(MessageContains("making a ticket failed: Function not implemented"));
  dlb_buffer_release(b);
  dlb_buffer_release(plain);
}

TEST_F(Share, OpeningFailuresNameTheCall) {
  dlb_buffer* b = alloc_shared_f32({8});
  dlb_share_descriptor d = share_of(b);
  dlb_buffer* o = nullptr;
  {
    Inject fail(Sys::getfl, EBADF);
    EXPECT_EQ(dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(MessageContains("F_GETFL failed"));
  {
    Inject fail(Sys::dupfd, EMFILE);
    EXPECT_EQ(dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(MessageContains("duplicating fd"));
  {
    Inject fail(Sys::fstat, EIO);
    EXPECT_EQ(dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(MessageContains("fstat failed: Input/output error"));
  {
    Inject fail(Sys::mmap, ENOMEM);
    const int mine = fcntl(d.fd, F_DUPFD_CLOEXEC, 0);  // taken, and closed on the failure
    EXPECT_EQ(dlb_buffer_open_shared(mine, d.description, d.size, DLB_SHARE_TAKE_FD, &o), DLB_ERR_OUT_OF_MEMORY);
  }
  EXPECT_TRUE(MessageContains("mapping 4096 bytes of shared memory failed"));
  EXPECT_EQ(o, nullptr);
  // A receiving socket that fails, and one interrupted (tried again).
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(dlb_share_send(sv[0], &d), DLB_OK);
  dlb_share_descriptor got;
  {
    Inject fail(Sys::recvmsg, ECONNRESET);
    EXPECT_EQ(dlb_share_recv(sv[1], &got), DLB_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(MessageContains("recvmsg failed: Connection reset by peer"));
  {
    Inject fail(Sys::recvmsg, EINTR);
    ASSERT_EQ(dlb_share_recv(sv[1], &got), DLB_OK);
  }
  dlb_share_descriptor_close(&got);
  close(sv[0]);
  close(sv[1]);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

// The ticket server's own failures, in a fresh process (the server starts
// once per process): no server, a precise refusal, and it never starts
// there afterwards.
TEST_F(Share, ATicketServerThatCannotStart) {
  const struct {
    Sys call;
    const char* message;
  } cases[] = {
      {Sys::getrandom, "the ticket server: getrandom failed"},  // after the ticket's token
      {Sys::socket, "the ticket server could not listen: Too many open files"},
      {Sys::bind, "the ticket server could not listen: Too many open files"},
      {Sys::pthread_create, "the ticket server's thread could not start"},
  };
  for (const auto& c : cases) {
    const int rc = in_child([&] {
      dlb_buffer* b = alloc_shared_f32({4});
      const int fds = open_fds();
      dlb_share_ticket t;
      {
        Inject fail(c.call, EMFILE, false, c.call == Sys::getrandom ? 1 : 0);
        if (dlb_share_ticket_issue(b, 0, &t) != DLB_ERR_OUT_OF_MEMORY) return 2;
      }
      if (std::strstr(dlb_last_error_message(), c.message) == nullptr) return 3;
      if (open_fds() != fds || dlb_share_ticket_server(nullptr, nullptr, nullptr) != 0) return 4;
      if (dlb_share_ticket_issue(b, 0, &t) != DLB_ERR_OUT_OF_MEMORY) return 5;
      if (std::strstr(dlb_last_error_message(), "cannot run in this process") == nullptr) return 6;
      dlb_buffer_release(b);
      return 0;
    });
    EXPECT_EQ(rc, 0) << c.message;
  }
}

// The server out of descriptors when it accepts a receiver: it pauses, and
// answers once it can. (It waits in accept4 already when the failure is
// asked for: the call after the first open's is the one that fails.)
TEST_F(Faults, TheTicketServerOutOfDescriptorsAnswersLater) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_ticket first;
  dlb_share_ticket second;
  ASSERT_EQ(dlb_share_ticket_issue(b, 0, &first), DLB_OK) << dlb_last_error_message();
  ASSERT_EQ(dlb_share_ticket_issue(b, 0, &second), DLB_OK);
  dlb_buffer* o = nullptr;
  {
    Inject fail(Sys::accept4, EMFILE, true);
    ASSERT_EQ(dlb_share_ticket_open(first.bytes, first.size, 0, &o), DLB_OK) << dlb_last_error_message();
    dlb_buffer_release(o);
    for (int i = 0; i < 5000 && inject_call.load() != Sys::none; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(dlb_share_ticket_open(second.bytes, second.size, 0, &o), DLB_OK) << dlb_last_error_message();
  std::int64_t held = -1;
  dlb_share_ticket_server(&held, nullptr, nullptr);
  EXPECT_EQ(held, 0);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

// The abstract socket address of the ticket server (pid, nonce).
socklen_t server_address(sockaddr_un* a, std::int32_t pid, std::uint64_t nonce) {
  std::memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  const int n = std::snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "dlbridge-%d-%016llx", static_cast<int>(pid),
                              static_cast<unsigned long long>(nonce));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

// A connection of this test to the ticket server a ticket names.
int connect_to_server(const dlb_share_ticket& t) {
  const int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a;
  const socklen_t len = server_address(&a, static_cast<std::int32_t>(get_le(t.bytes + 16, 4)), get_le(t.bytes + 40, 8));
  EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), len), 0);
  return c;
}

// A request to a ticket server, as a receiver writes it (share_format.hpp).
void request(unsigned char* m, std::uint32_t op, const unsigned char* token) {
  std::memset(m, 0, 40);
  std::memcpy(m, "DLBS", 4);
  put_le(m + 4, 1, 2);
  put_le(m + 6, 2, 2);
  put_le(m + 8, 40, 4);
  put_le(m + 16, op, 4);
  std::memcpy(m + 24, token, 16);
  reseal(m, 40);
}

// Connections that are no receiver's: closed at once, garbled, another
// operation, silent past the server's second; then a receiver that stopped
// reading before it asked (the file cannot reach it: the ticket stays).
// The server answers the next receiver all the same.
TEST_F(Faults, TheServerOutlastsConnectionsThatAreNoReceivers) {
  dlb_buffer* b = alloc_shared_f32({4});
  data_of(b)[1] = 1.0f;
  dlb_share_ticket t;
  ASSERT_EQ(dlb_share_ticket_issue(b, 0, &t), DLB_OK) << dlb_last_error_message();
  unsigned char m[48];
  for (int k = 0; k < 6; ++k) {
    const int c = connect_to_server(t);
    if (k == 1) {
      ASSERT_EQ(send(c, "garbage", 7, 0), 7);
    }
    if (k == 2) {
      request(m, 4, t.bytes + 48);  // an answer's operation, not a request
      ASSERT_EQ(send(c, m, 40, 0), 40);
    }
    if (k == 4) {  // a request with its reserved field set
      request(m, 2, t.bytes + 48);
      put_le(m + 20, 1, 4);
      reseal(m, 40);
      ASSERT_EQ(send(c, m, 40, 0), 40);
    }
    if (k == 5) {  // a longer record
      request(m, 2, t.bytes + 48);
      std::memset(m + 40, 0, 8);
      put_le(m + 8, 48, 4);
      reseal(m, 48);
      ASSERT_EQ(send(c, m, 48, 0), 48);
    }
    if (k == 3) {  // nothing: the server gives up after a second
      pollfd p{c, POLLIN, 0};
      EXPECT_EQ(poll(&p, 1, 5000), 1);
    }
    close(c);
  }
  const int c = connect_to_server(t);
  ASSERT_EQ(shutdown(c, SHUT_RD), 0);
  request(m, 2, t.bytes + 48);
  ASSERT_EQ(send(c, m, 40, 0), 40);
  pollfd p{c, POLLHUP, 0};
  poll(&p, 1, 5000);  // the server closed it, unable to answer
  close(c);
  std::int64_t held = -1;
  for (int i = 0; i < 5000; ++i) {
    std::int64_t connections = 1;
    dlb_share_ticket_server(&held, &connections, nullptr);
    if (connections == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(held, 1);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(data_of(o)[1], 1.0f);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Faults, AReceiverWithoutASocket) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_ticket t;
  ASSERT_EQ(dlb_share_ticket_issue(b, 0, &t), DLB_OK) << dlb_last_error_message();
  dlb_buffer* o = nullptr;
  {
    Inject fail(Sys::socket, EMFILE);
    EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_ERR_OUT_OF_MEMORY);
  }
  EXPECT_TRUE(MessageContains("opening a ticket needs a socket: Too many open files"));
  {
    Inject fail(Sys::connect, EINTR);  // interrupted: tried again
    ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  }
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

// Servers that are not what the ticket names, or do not answer as one: a
// listener of this test at the name a forged ticket gives.
TEST_F(Faults, ServersThatAreNotTheIssuer) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_ticket t;
  ASSERT_EQ(dlb_share_ticket_issue(b, 0, &t), DLB_OK) << dlb_last_error_message();
  dlb_share_ticket_withdraw(t.bytes, t.size, nullptr);
  const std::uint64_t nonce = get_le(t.bytes + 40, 8) ^ 0x5555;
  auto listen_as = [&](std::int32_t pid) {
    const int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a;
    const socklen_t len = server_address(&a, pid, nonce);
    EXPECT_EQ(bind(l, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(listen(l, 4), 0);
    return l;
  };
  auto forged_for = [&](std::int32_t pid) {
    dlb_share_ticket f = t;
    put_le(f.bytes + 16, static_cast<std::uint64_t>(pid), 4);
    put_le(f.bytes + 40, nonce, 8);
    reseal(f.bytes, f.size);
    return f;
  };
  dlb_buffer* o = nullptr;
  // Another process's name, taken by this one.
  const pid_t other = start_child([] {
    pause();
    return 0;
  });
  int l = listen_as(other);
  dlb_share_ticket f = forged_for(other);
  EXPECT_EQ(dlb_share_ticket_open(f.bytes, f.size, 0, &o), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("listens at its server's name"));
  close(l);
  kill(other, SIGKILL);
  wait_child(other);
  // This process's name: answers that are not answers.
  l = listen_as(getpid());
  f = forged_for(getpid());
  std::atomic<int> asked{0};
  std::atomic<bool> answer{false};
  dlb_buffer* another = alloc_shared_f32({2});
  dlb_share_descriptor another_d = share_of(another);
  for (int k = 0; k < 7; ++k) {
    asked = 0;
    answer = k != 3;
    std::thread server([&] {
      const int c = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
      unsigned char m[64];
      (void)!recv(c, m, sizeof m, 0);
      asked = 1;
      while (!answer) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (k == 1) {  // a record of the request kind, but garbled
        std::memcpy(m + 16, "\x07\x00\x00\x00", 4);
        (void)!send(c, m, 40, MSG_NOSIGNAL);
      } else if (k == 2 || k == 3 || k == 4) {  // "not held" for a reason unknown here, or a request for an answer
        put_le(m + 16, k == 4 ? 2 : 4, 4);
        put_le(m + 20, k == 4 ? 0 : 99, 4);
        reseal(m, 40);
        (void)!send(c, m, 40, MSG_NOSIGNAL);
      } else if (k == 5) {  // another tensor's description and file
        (void)dlb_share_send(c, &another_d);
      } else if (k == 6) {  // bytes that are neither
        (void)!send(c, "short", 5, MSG_NOSIGNAL);
      }
      close(c);  // k == 0: no answer at all
    });
    if (k == 3) {
      // A child forked while a receiver waits for its answer closes its
      // copies of the receiver's connection and of the ticket server's
      // socket: two descriptors fewer than this process.
      std::thread receiver([&] { EXPECT_EQ(dlb_share_ticket_open(f.bytes, f.size, 0, &o), DLB_ERR_DELETED); });
      while (asked == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const int parent_fds = open_fds();
      EXPECT_EQ(in_child([&] { return open_fds() == parent_fds - 2 ? 0 : 1; }), 0);
      answer = true;
      receiver.join();
      server.join();
      continue;
    }
    const dlb_status s = dlb_share_ticket_open(f.bytes, f.size, 0, &o);
    server.join();
    if (k == 0) {
      EXPECT_EQ(s, DLB_ERR_DELETED);
      EXPECT_TRUE(MessageContains("closed the connection unanswered"));
    } else if (k == 1) {
      EXPECT_EQ(s, DLB_ERR_MALFORMED);
      EXPECT_TRUE(MessageContains("checksum"));
    } else if (k == 5) {
      EXPECT_EQ(s, DLB_ERR_MALFORMED);
      EXPECT_TRUE(MessageContains("sent another file or description than its ticket names"));
    } else if (k == 6) {
      EXPECT_EQ(s, DLB_ERR_MALFORMED);
      EXPECT_TRUE(MessageContains("the message of 5 bytes is not one share description"));
    } else {
      EXPECT_EQ(s, DLB_ERR_DELETED);
      EXPECT_TRUE(MessageContains("holds no such ticket"));
    }
  }
  close(l);
  EXPECT_EQ(o, nullptr);
  dlb_share_descriptor_close(&another_d);
  dlb_buffer_release(another);
  dlb_buffer_release(b);
}

}  // namespace
