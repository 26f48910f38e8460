// Tickets (share.h): a buffer's memory file kept by its issuer's ticket
// server until one receiver takes it. The records are share_format.hpp's.
//
// The server is one thread of the library (no signal), started by the
// first ticket, on a SOCK_SEQPACKET socket in the abstract namespace named
// dlbridge-<pid>-<nonce>, answering only processes of its own user (or
// root). Every open is one connection: the receiver sends the ticket's
// token, and the server, at that moment, either hands the file over and
// forgets the ticket (so a ticket opens once, whoever asks, however fast)
// or says why it holds none. The receiver checks that the server is the
// process the ticket names. No file is taken from the issuer any other way
// (pidfd_getfd, /proc/<pid>/fd): a ticket proves nothing but its token, so
// only the holder of the token gets a file, and only the one it was issued
// for.
//
// Unopened tickets are bounded (the oldest is withdrawn past half the
// process's descriptor limit), can be withdrawn (dlb_share_ticket_withdraw)
// and waited for (dlb_share_ticket_wait, for a process about to exit).
//
// Branches the tests do not reach (tests/share/test_share_faults.cpp makes
// each system call fail in turn otherwise): a receiver's 20 s wait for a
// server that never answers (the fault suite's kill cases come close), an
// interrupted poll or getrandom, listen() failing after bind(), a root
// receiver of another user's issuer, and the exception edges of vector
// growth (out of memory).
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "share_format.hpp"

using dlb::set_error;

namespace dlb::share {
namespace {

constexpr int kRequestMs = 1000;   // the server waits this long for a connection's request
constexpr int kAnswerMs = 20000;   // a receiver waits this long for the server's answer
constexpr std::size_t kEnded = 64;  // tickets whose end the server remembers, for its answers

// Why the server holds no ticket of a token (the argument of kNotHeld).
enum Ended : std::uint32_t { kUnknown = 0, kOpened = 1, kWithdrawn = 2, kWithdrawnOldest = 3 };

socklen_t socket_name(sockaddr_un* a, std::int32_t pid, std::uint64_t nonce) {
  std::memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;  // sun_path[0] == 0: the abstract namespace
  const int n = std::snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "dlbridge-%d-%016llx", static_cast<int>(pid),
                              static_cast<unsigned long long>(nonce));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<std::size_t>(n));
}

bool random_bytes(void* out, std::size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

using Clock = std::chrono::steady_clock;

// Waits up to `ms` for `fd` to be readable (or hung up); false on timeout.
bool readable(int fd, int ms) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const int n = poll(&p, 1, left > 0 ? static_cast<int>(left) : 0);
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// ---- the issuer's server -------------------------------------------------

struct Held {
  unsigned char token[kTokenSize];
  dlb_share_descriptor d;  // its fd is the server's
};

struct EndedTicket {
  unsigned char token[kTokenSize];
  std::uint32_t why;
};

// All under server_mutex.
std::mutex server_mutex;
int running = 0;  // 1: runs; -1: cannot run here
int listener = -1;
int serving = 0;  // connections being answered: 0 or 1
std::uint64_t server_nonce = 0;
std::vector<Held>* held = nullptr;  // oldest first; never destroyed: the thread may outlive static destruction
EndedTicket ended[kEnded];
std::size_t ended_next = 0;

// Remembers why the ticket of `token` ended. Under server_mutex.
void remember_locked(const unsigned char* token, std::uint32_t why) {
  std::memcpy(ended[ended_next].token, token, kTokenSize);
  ended[ended_next].why = why;
  ended_next = (ended_next + 1) % kEnded;
}

// Forgets held[i] (closing its file) and remembers why. Under server_mutex.
void end_locked(std::size_t i, std::uint32_t why) {
  Held& h = (*held)[i];
  remember_locked(h.token, why);
  dlb_share_descriptor_close(&h.d);
  held->erase(held->begin() + static_cast<std::ptrdiff_t>(i));
}

std::ptrdiff_t find_locked(const unsigned char* token) {
  for (std::size_t i = 0; i < held->size(); ++i)
    if (std::memcmp((*held)[i].token, token, kTokenSize) == 0) return static_cast<std::ptrdiff_t>(i);
  return -1;
}

// Why the ticket of `token` ended, the latest record first.
std::uint32_t why_ended_locked(const unsigned char* token) {
  for (std::size_t k = 1; k <= kEnded; ++k) {
    const EndedTicket& e = ended[(ended_next + kEnded - k) % kEnded];
    if (e.why != kUnknown && std::memcmp(e.token, token, kTokenSize) == 0) return e.why;
  }
  return kUnknown;
}

// The most unopened tickets a process keeps: half its descriptor limit, so
// that tickets alone never exhaust it (at least 16). (The limit is finite on
// Linux: at most fs.nr_open.)
std::size_t held_bound() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  return std::max<std::size_t>(16, static_cast<std::size_t>(r.rlim_cur / 2));
}

// ---- connections ---------------------------------------------------------

// The connections open in this process (the server's, receivers'), so that
// a child forked meanwhile closes its copies (stored as fd + 1; 0 is a free
// slot). More than kTracked at once would stay open in such a child.
constexpr int kTracked = 64;
std::mutex connection_mutex;
int tracked[kTracked];

void track_locked(int fd) {
  for (int& slot : tracked) {
    if (slot == 0) {
      slot = fd + 1;
      return;
    }
  }
}

void close_tracked(int fd) {
  std::lock_guard<std::mutex> lock(connection_mutex);
  for (int& slot : tracked)
    if (slot == fd + 1) slot = 0;
  close(fd);
}

void send_answer(int c, std::uint32_t op, std::uint32_t arg, const unsigned char* token) {
  unsigned char m[kRequestSize];
  write_request(op, arg, token, m);
  (void)!send(c, m, sizeof m, MSG_NOSIGNAL);
}

// Answers the one request of connection `c`.
void answer(int c) {
  ucred peer{0, static_cast<uid_t>(-1), static_cast<gid_t>(-1)};  // unknown (it cannot fail on a socket) is refused
  socklen_t len = sizeof peer;
  const uid_t me = geteuid();
  getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &len);
  // The request is read before any answer: a connection closed with
  // unread data would be reset under the answer.
  unsigned char m[kRequestSize + 1];
  ssize_t n = recv(c, m, sizeof m, MSG_DONTWAIT);  // mostly there already: the receiver sends as it connects
  if (n < 0 && errno == EAGAIN && readable(c, kRequestMs)) n = recv(c, m, sizeof m, MSG_DONTWAIT);
  const unsigned char none[kTokenSize] = {};
  if (peer.uid != me && peer.uid != 0) return send_answer(c, kRefused, static_cast<std::uint32_t>(me), none);
  std::uint32_t op = 0;
  std::uint32_t arg = 0;
  unsigned char token[kTokenSize];
  if (n <= 0 || parse_request(m, static_cast<std::size_t>(n), &op, &arg, token) != DLB_OK || op != kTake) {
    dlb_clear_last_error();
    return;  // not ours
  }
  Held h;
  bool found = false;
  std::uint32_t why = kUnknown;
  {
    // The decision: the first request with the token takes the ticket.
    std::lock_guard<std::mutex> lock(server_mutex);
    const std::ptrdiff_t i = find_locked(token);
    found = i >= 0;
    if (found) {
      h = (*held)[static_cast<std::size_t>(i)];
      held->erase(held->begin() + i);
      remember_locked(token, kOpened);
    } else {
      why = why_ended_locked(token);
    }
  }
  if (!found) return send_answer(c, kNotHeld, why, token);
  const bool sent = dlb_share_send(c, &h.d) == DLB_OK;
  dlb_clear_last_error();
  std::lock_guard<std::mutex> lock(server_mutex);
  if (!sent) {
    // Never delivered (the receiver went away): the ticket stays unopened.
    try {
      held->insert(held->begin(), h);
      return;
    } catch (...) {
    }
  }
  dlb_share_descriptor_close(&h.d);
}

// The server's thread: `arg` is the listening socket, which this process
// keeps open as long as it runs (a forked child has no such thread).
void* serve(void* arg) {
  const int l = static_cast<int>(reinterpret_cast<std::intptr_t>(arg));
  for (;;) {
    const int c = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      const timespec pause{0, 10 * 1000 * 1000};  // out of descriptors or memory: the request waits
      nanosleep(&pause, nullptr);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(connection_mutex);
      track_locked(c);
    }
    {
      std::lock_guard<std::mutex> lock(server_mutex);
      serving = 1;
    }
    answer(c);
    {
      std::lock_guard<std::mutex> lock(server_mutex);
      serving = 0;
    }
    close_tracked(c);
  }
}

// ---- the receiver's connection ---------------------------------------------

// A receiver's connection to an issuer's server, closed when it goes.
struct Client {
  int fd = -1;
  ~Client() {
    if (fd >= 0) close_tracked(fd);
  }
};

// The step of connect_to that failed.
enum class Connect { ok, no_socket, refused };

Connect connect_to(Client* c, std::int32_t pid, std::uint64_t nonce) {
  {
    std::lock_guard<std::mutex> lock(connection_mutex);
    c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return Connect::no_socket;
    track_locked(c->fd);
  }
  sockaddr_un a;
  const socklen_t len = socket_name(&a, pid, nonce);
  while (connect(c->fd, reinterpret_cast<sockaddr*>(&a), len) != 0)
    if (errno != EINTR) return Connect::refused;
  return Connect::ok;
}

// ---- fork ------------------------------------------------------------------

void fork_prepare() {
  connection_mutex.lock();
  server_mutex.lock();
}
void fork_parent() {
  server_mutex.unlock();
  connection_mutex.unlock();
}
void fork_child() {
  // The child has no server: the parent's tickets stay the parent's.
  if (listener >= 0) close(listener);
  listener = -1;
  serving = 0;
  for (Held& h : *held) dlb_share_descriptor_close(&h.d);
  held->clear();
  std::memset(ended, 0, sizeof ended);
  running = 0;
  server_nonce = 0;
  for (int& slot : tracked) {
    if (slot != 0) close(slot - 1);
    slot = 0;
  }
  server_mutex.unlock();
  connection_mutex.unlock();
}

// The table and the fork handlers, once per process.
void init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    held = new std::vector<Held>;
    pthread_atfork(fork_prepare, fork_parent, fork_child);
  });
}

// Starts this process's server; DLB_OK, or the error. Under server_mutex.
dlb_status start_locked() {
  if (running != 0)
    return running > 0 ? DLB_OK : set_error(DLB_ERR_OUT_OF_MEMORY, "the ticket server cannot run in this process");
  running = -1;
  std::uint64_t nonce = 0;
  if (!random_bytes(&nonce, sizeof nonce))
    return set_error(DLB_ERR_OUT_OF_MEMORY, "the ticket server: getrandom failed: %s", std::strerror(errno));
  const int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a;
  const socklen_t len = socket_name(&a, static_cast<std::int32_t>(getpid()), nonce);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(l, SOMAXCONN) != 0) {
    const int e = errno;
    if (l >= 0) close(l);
    return set_error(DLB_ERR_OUT_OF_MEMORY, "the ticket server could not listen: %s", std::strerror(e));
  }
  listener = l;
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread takes no signal
  pthread_t thread;
  const int made = pthread_create(&thread, nullptr, serve, reinterpret_cast<void*>(static_cast<std::intptr_t>(l)));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (made != 0) {
    close(l);
    listener = -1;
    return set_error(DLB_ERR_OUT_OF_MEMORY, "the ticket server's thread could not start: %s", std::strerror(made));
  }
  pthread_detach(thread);
  server_nonce = nonce;
  running = 1;
  return DLB_OK;
}

dlb_status issue_impl(dlb_buffer* buffer, std::uint64_t flags, dlb_share_ticket* out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLB_TRY(check_flags(flags, DLB_SHARE_COPY_IF_NEEDED | DLB_SHARE_READ_ONLY, "dlb_share_ticket_issue"));
  Held h;
  DLB_TRY(dlb_buffer_share(buffer, flags, &h.d));
  Ticket t;
  if (h.d.fd >= 0) {
    struct stat st;
    if (fstat(h.d.fd, &st) != 0 || !random_bytes(h.token, kTokenSize)) {
      const int e = errno;
      dlb_share_descriptor_close(&h.d);
      return set_error(DLB_ERR_OUT_OF_MEMORY, "making a ticket failed: %s", std::strerror(e));
    }
    t.pid = static_cast<std::int32_t>(getpid());
    t.fd = h.d.fd;
    t.dev = static_cast<std::uint64_t>(st.st_dev);
    t.ino = static_cast<std::uint64_t>(st.st_ino);
    std::memcpy(t.token, h.token, kTokenSize);
    init_once();
    const std::size_t bound = held_bound();
    std::lock_guard<std::mutex> lock(server_mutex);
    dlb_status s = start_locked();
    if (s == DLB_OK) {
      try {
        held->push_back(h);
      } catch (...) {
        s = set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory recording a ticket");
      }
    }
    if (s != DLB_OK) {
      dlb_share_descriptor_close(&h.d);
      return s;
    }
    while (held->size() > bound) end_locked(0, kWithdrawnOldest);
    t.nonce = server_nonce;
  }
  out->size = static_cast<std::uint32_t>(write_ticket(t, h.d.description, h.d.size, out->bytes));
  return DLB_OK;
}

dlb_status not_held(const Ticket& t, std::uint32_t why) {
  const int pid = static_cast<int>(t.pid);
  switch (why) {
    case kOpened:
      return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) no longer holds it: it was opened "
                       "already (a ticket opens once)", pid);
    case kWithdrawn:
      return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) withdrew its ticket", pid);
    case kWithdrawnOldest:
      return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) withdrew its ticket: it held as many "
                       "unopened tickets as it may (half its file descriptor limit), and this was the oldest", pid);
    default:
      return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) holds no such ticket: it was opened, "
                       "or withdrawn, or never issued there", pid);
  }
}

// Takes the ticket's file from its issuer's server; DLB_OK with `d`
// filled, else the status with the error set.
dlb_status take(const Ticket& t, dlb_share_descriptor* d) {
  const int pid = static_cast<int>(t.pid);
  Client c;
  const Connect how = connect_to(&c, t.pid, t.nonce);
  if (how == Connect::no_socket)
    return set_error(DLB_ERR_OUT_OF_MEMORY, "opening a ticket needs a socket: %s", std::strerror(errno));
  if (how == Connect::refused)
    return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) no longer serves it: it has exited "
                     "(connecting: %s)", pid, std::strerror(errno));
  // The request goes at once (the server, woken by the connection, finds
  // it there), before the server is checked: another process at the
  // server's name learns only a token of a ticket whose issuer is gone.
  unsigned char m[kRequestSize];
  write_request(kTake, 0, t.token, m);
  (void)!send(c.fd, m, sizeof m, MSG_NOSIGNAL);  // a failure shows as no answer
  ucred server{};  // pid 0 (it cannot fail on a socket) is not the issuer
  socklen_t len = sizeof server;
  getsockopt(c.fd, SOL_SOCKET, SO_PEERCRED, &server, &len);
  if (server.pid != t.pid)
    return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) no longer serves it: another process "
                     "(pid %d) listens at its server's name", pid, static_cast<int>(server.pid));
  if (!readable(c.fd, kAnswerMs))
    return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) did not answer within %d s", pid,
                     kAnswerMs / 1000);
  // An answer record, or the description with the file.
  unsigned char prefix[kDescPrefix];
  const ssize_t n = recv(c.fd, prefix, sizeof prefix, MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0)
    return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) closed the connection unanswered: it "
                     "is exiting, or does not take this kind of request", pid);
  if (n == static_cast<ssize_t>(kDescPrefix) && prefix[6] == kRecordRequest && prefix[7] == 0) {
    unsigned char a[kRequestSize + 1];
    const ssize_t got = recv(c.fd, a, sizeof a, MSG_DONTWAIT);
    std::uint32_t op = 0;
    std::uint32_t arg = 0;
    unsigned char token[kTokenSize];
    DLB_TRY(parse_request(a, got > 0 ? static_cast<std::size_t>(got) : 0, &op, &arg, token));
    if (op == kRefused)
      return set_error(DLB_ERR_INVALID_ARGUMENT, "permission denied: the tensor's sending process (pid %d) belongs to "
                       "user %" PRIu32 ", and its ticket server hands files only to that user's processes (or "
                       "root's); this process runs as user %u", pid, arg, static_cast<unsigned>(geteuid()));
    return not_held(t, op == kNotHeld ? arg : kUnknown);
  }
  DLB_TRY(dlb_share_recv(c.fd, d));
  struct stat st;
  if (d->size != t.description_size || std::memcmp(d->description, t.description, d->size) != 0 || d->fd < 0 ||
      fstat(d->fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != t.dev ||
      static_cast<std::uint64_t>(st.st_ino) != t.ino) {
    dlb_share_descriptor_close(d);
    return set_error(DLB_ERR_MALFORMED, "the tensor's sending process (pid %d) sent another file or description "
                     "than its ticket names", pid);
  }
  return DLB_OK;
}

dlb_status open_impl(const void* bytes, std::size_t size, std::uint64_t flags, dlb_buffer** out) {
  if (bytes == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "ticket is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLB_TRY(check_flags(flags, DLB_SHARE_READ_ONLY | DLB_SHARE_VIA_SERVER, "dlb_share_ticket_open"));
  Ticket t;
  Description d;
  DLB_TRY(parse_ticket(bytes, size, &t, &d));
  const std::uint64_t open_flags = flags & DLB_SHARE_READ_ONLY;
  if (t.fd < 0) return dlb_buffer_open_shared(-1, t.description, t.description_size, open_flags, out);
  init_once();
  dlb_share_descriptor got;
  DLB_TRY(take(t, &got));
  return dlb_buffer_open_shared(got.fd, t.description, t.description_size, open_flags | DLB_SHARE_TAKE_FD, out);
}

dlb_status withdraw_impl(const void* bytes, std::size_t size, std::int64_t* withdrawn) {
  init_once();
  if (bytes == nullptr) {
    std::lock_guard<std::mutex> lock(server_mutex);
    const std::int64_t n = static_cast<std::int64_t>(held->size());
    while (!held->empty()) end_locked(held->size() - 1, kWithdrawn);
    if (withdrawn != nullptr) *withdrawn = n;
    return DLB_OK;
  }
  Ticket t;
  Description d;
  DLB_TRY(parse_ticket(bytes, size, &t, &d));
  std::lock_guard<std::mutex> lock(server_mutex);
  if (t.pid != static_cast<std::int32_t>(getpid()) || t.nonce != server_nonce)  // a CUDA IPC ticket names pid 0
    return set_error(DLB_ERR_INVALID_ARGUMENT, "the ticket was not issued by this process (pid %d)",
                     static_cast<int>(getpid()));
  const std::ptrdiff_t i = find_locked(t.token);
  if (i < 0) {
    const std::uint32_t why = why_ended_locked(t.token);
    return set_error(DLB_ERR_DELETED, "the ticket is no longer held: %s",
                     why == kOpened ? "it was opened" : "it was withdrawn already");
  }
  end_locked(static_cast<std::size_t>(i), kWithdrawn);
  if (withdrawn != nullptr) *withdrawn = 1;
  return DLB_OK;
}

std::int64_t wait_impl(std::int64_t timeout_ms) {
  init_once();
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(std::max<std::int64_t>(timeout_ms, 0));
  for (;;) {
    std::int64_t n;
    {
      std::lock_guard<std::mutex> lock(server_mutex);
      n = static_cast<std::int64_t>(held->size());
    }
    if (n == 0 || Clock::now() >= deadline) return n;
    const timespec pause{0, 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
}

std::int32_t server_impl(std::int64_t* held_out, std::int64_t* connections, std::int64_t* links_out) {
  init_once();
  std::lock_guard<std::mutex> lock(server_mutex);
  if (held_out != nullptr) *held_out = static_cast<std::int64_t>(held->size());
  if (connections != nullptr) *connections = serving;
  if (links_out != nullptr) *links_out = 0;
  return running > 0 ? 1 : 0;
}

}  // namespace
}  // namespace dlb::share

extern "C" {

DLB_API dlb_status dlb_share_ticket_issue(dlb_buffer* buffer, uint64_t flags, dlb_share_ticket* out) {
  return dlb::firewall(__func__, [&] { return dlb::share::issue_impl(buffer, flags, out); });
}

DLB_API dlb_status dlb_share_ticket_open(const void* ticket, size_t size, uint64_t flags, dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::share::open_impl(ticket, size, flags, out); });
}

DLB_API int32_t dlb_share_ticket_server(int64_t* held, int64_t* connections, int64_t* links) {
  return dlb::firewall_value(__func__, int32_t{0},
                             [&] { return dlb::share::server_impl(held, connections, links); });
}

DLB_API dlb_status dlb_share_ticket_withdraw(const void* ticket, size_t size, int64_t* withdrawn) {
  return dlb::firewall(__func__, [&] { return dlb::share::withdraw_impl(ticket, size, withdrawn); });
}

DLB_API int64_t dlb_share_ticket_wait(int64_t timeout_ms) {
  return dlb::firewall_value(__func__, int64_t{-1}, [&] { return dlb::share::wait_impl(timeout_ms); });
}

}  // extern "C"
