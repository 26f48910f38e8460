// Tickets (share.h): a buffer's memory file kept by its issuer's ticket
// server until a receiver takes it with pidfd_getfd, through /proc, or
// from the server itself. The records are share_format.hpp's.
//
// The server is one thread of the library (no signal), started by the
// first ticket, on a SOCK_SEQPACKET socket in the abstract namespace
// named dlbridge-<pid>-<nonce>, accepting only peers of its own user (or
// root). A receiver keeps one connection to each issuer it met, for its
// releases; once a connection has carried a release the server polls it
// for its hang-up only, so that a release wakes no thread, and reads the
// releases every kDrainMs while it holds files; a second after its last
// one it sleeps until a new ticket wakes it.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <algorithm>
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
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "share_format.hpp"

using dlb::set_error;

namespace dlb::share {
namespace {

constexpr int kDrainMs = 5;     // kept links are drained this often while files are held
constexpr int kIdleMs = 1000;   // and stop being drained this long after the last one
constexpr std::size_t kFirstConnection = 2;  // polls[0]: the listener, [1]: the wake-up eventfd

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

long long now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int connect_to(std::int32_t pid, std::uint64_t nonce) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a;
  const socklen_t len = socket_name(&a, pid, nonce);
  while (connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    if (errno == EINTR) continue;
    const int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

bool hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// ---- the issuer's server -------------------------------------------------

struct Held {
  unsigned char token[kTokenSize];
  dlb_share_descriptor d;  // its fd is the server's
};

// All under server_mutex, except that the thread reads `polls` without it
// (only the thread and the fork child handler change it, and the handler
// runs in a child where the thread does not exist).
std::mutex server_mutex;
int running = 0;  // 1: runs; -1: cannot run here
std::uint64_t server_nonce = 0;
std::vector<Held>* held = nullptr;   // never destroyed: the thread may outlive static destruction
std::vector<pollfd>* polls = nullptr;
bool sleeping = false;  // the thread waits without a timeout: a new ticket wakes it

bool take_held(const unsigned char* token, Held* out) {
  std::lock_guard<std::mutex> lock(server_mutex);
  for (auto it = held->begin(); it != held->end(); ++it) {
    if (std::memcmp(it->token, token, kTokenSize) == 0) {
      *out = *it;
      *it = held->back();
      held->pop_back();
      return true;
    }
  }
  return false;
}

void accept_one(int listener) {
  const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (c < 0) return;
  ucred peer;
  socklen_t len = sizeof peer;
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || (peer.uid != geteuid() && peer.uid != 0)) {
    close(c);
    return;
  }
  std::lock_guard<std::mutex> lock(server_mutex);
  try {
    polls->push_back(pollfd{c, POLLIN, 0});
  } catch (...) {
    close(c);
  }
}

// Answers every request waiting on a connection (none waits); false when
// the connection is to be closed. A connection that has carried a release
// is a receiver's kept link: from then on it is polled for its hang-up
// only, and drained on the timer.
bool answer(pollfd* p) {
  for (;;) {
    unsigned char m[kRequestSize + 1];
    const ssize_t n = recv(p->fd, m, sizeof m, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    std::uint32_t op = 0;
    unsigned char token[kTokenSize];
    if (n <= 0 || parse_request(m, static_cast<std::size_t>(n), &op, token) != DLB_OK) {
      dlb_clear_last_error();
      return false;  // closed, or not ours
    }
    Held h;
    const bool found = take_held(token, &h);
    if (op == kRelease) {
      if (found) dlb_share_descriptor_close(&h.d);
      p->events = POLLRDHUP;
      continue;
    }
    const bool sent = found ? dlb_share_send(p->fd, &h.d) == DLB_OK : send(p->fd, "", 0, MSG_NOSIGNAL) == 0;
    if (found) dlb_share_descriptor_close(&h.d);
    if (!sent) return false;
  }
}

void* serve(void*) {
  long long active = now_ms();
  for (;;) {
    bool lazy = false;
    for (std::size_t i = kFirstConnection; i < polls->size(); ++i) lazy |= (*polls)[i].events == POLLRDHUP;
    int timeout;
    {
      std::lock_guard<std::mutex> lock(server_mutex);
      const long long now = now_ms();
      if (!held->empty()) active = now;
      timeout = lazy && now - active < kIdleMs ? kDrainMs : -1;
      sleeping = timeout < 0;
    }
    if (poll(polls->data(), static_cast<nfds_t>(polls->size()), timeout) < 0) {
      if (errno == EINTR) continue;
      return nullptr;
    }
    if (((*polls)[1].revents & POLLIN) != 0) {
      std::uint64_t count;
      (void)!read((*polls)[1].fd, &count, sizeof count);
      active = now_ms();
    }
    if (((*polls)[0].revents & POLLIN) != 0) accept_one((*polls)[0].fd);
    for (std::size_t i = polls->size(); i-- > kFirstConnection;) {
      pollfd* p = &(*polls)[i];
      const short r = p->revents;
      if (r == 0 && p->events != POLLRDHUP) continue;  // kept links are drained every time
      const bool hung = (r & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0;
      if (!answer(p) || hung) {
        std::lock_guard<std::mutex> lock(server_mutex);
        close(p->fd);
        (*polls)[i] = polls->back();
        polls->pop_back();
      }
    }
  }
}

// ---- the receiver's links -------------------------------------------------

struct Link {
  std::int32_t pid;
  std::uint64_t nonce;
  int fd;     // the kept connection: releases only, sent without waiting
  int pidfd;  // the issuer's pidfd for pidfd_getfd, or -1 (not allowed here)
};

std::mutex link_mutex;  // never held across a call that waits
std::vector<Link>* links = nullptr;

void close_link(const Link& l) {
  close(l.fd);
  if (l.pidfd >= 0) close(l.pidfd);
}

// The kept link to the server of (pid, nonce), made on first contact
// (closing those whose server has gone meanwhile); nullptr with errno set
// when the server cannot be reached. Under link_mutex.
Link* link_to(std::int32_t pid, std::uint64_t nonce) {
  for (Link& l : *links)
    if (l.pid == pid && l.nonce == nonce) return &l;
  links->erase(std::remove_if(links->begin(), links->end(),
                              [](const Link& l) {
                                if (!hung_up(l.fd)) return false;
                                close_link(l);
                                return true;
                              }),
               links->end());
  const int fd = connect_to(pid, nonce);
  if (fd < 0) return nullptr;
#ifdef SYS_pidfd_open
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
  const int pidfd = -1;
#endif
  try {
    links->push_back(Link{pid, nonce, fd, pidfd});
  } catch (...) {
    close_link(Link{pid, nonce, fd, pidfd});
    errno = ENOMEM;
    return nullptr;
  }
  return &links->back();
}

// The ticket's file as a descriptor of this process, or -1: taken with
// pidfd_getfd (a writable open only: the issuer's descriptor may be), else
// opened through /proc/<pid>/fd/<n>; either way checked to be the file
// the ticket names. Under link_mutex.
int take_file(Link* l, const Ticket& t, bool read_only) {
  int fd = -1;
#ifdef SYS_pidfd_getfd
  if (l != nullptr && l->pidfd >= 0 && !read_only) {
    fd = static_cast<int>(syscall(SYS_pidfd_getfd, l->pidfd, static_cast<int>(t.fd), 0));
    if (fd < 0 && errno == EPERM) {  // not allowed here: /proc from now on
      close(l->pidfd);
      l->pidfd = -1;
    }
  }
#endif
  if (fd < 0) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(t.pid), static_cast<int>(t.fd));
    fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != t.dev ||
      static_cast<std::uint64_t>(st.st_ino) != t.ino) {
    close(fd);
    return -1;
  }
  return fd;
}

// ---- fork ------------------------------------------------------------------

void fork_prepare() {
  link_mutex.lock();
  server_mutex.lock();
}
void fork_parent() {
  server_mutex.unlock();
  link_mutex.unlock();
}
void fork_child() {
  for (const pollfd& p : *polls) close(p.fd);
  polls->clear();
  for (Held& h : *held) dlb_share_descriptor_close(&h.d);
  held->clear();
  running = 0;
  sleeping = false;
  for (const Link& l : *links) close_link(l);
  links->clear();
  server_mutex.unlock();
  link_mutex.unlock();
}

// The tables and the fork handlers, once per process.
void init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    held = new std::vector<Held>;
    polls = new std::vector<pollfd>;
    links = new std::vector<Link>;
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
  const int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  sockaddr_un a;
  const socklen_t len = socket_name(&a, static_cast<std::int32_t>(getpid()), nonce);
  if (listener < 0 || wake < 0 || bind(listener, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      listen(listener, 64) != 0) {
    const int e = errno;
    if (listener >= 0) close(listener);
    if (wake >= 0) close(wake);
    return set_error(DLB_ERR_OUT_OF_MEMORY, "the ticket server could not listen: %s", std::strerror(e));
  }
  polls->assign({pollfd{listener, POLLIN, 0}, pollfd{wake, POLLIN, 0}});
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the thread takes no signal
  pthread_t thread;
  const int made = pthread_create(&thread, nullptr, serve, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (made != 0) {
    close(listener);
    close(wake);
    polls->clear();
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
    t.nonce = server_nonce;
    if (sleeping) {  // its receiver's release would wait for the next wake otherwise
      const std::uint64_t one = 1;
      (void)!write((*polls)[1].fd, &one, sizeof one);
      sleeping = false;
    }
  }
  out->size = static_cast<std::uint32_t>(write_ticket(t, h.d.description, h.d.size, out->bytes));
  return DLB_OK;
}

// Asks the server of the ticket's issuer for its file on a connection of
// its own; DLB_OK with `d` filled, else the status with the error set.
dlb_status ask_server(const Ticket& t, dlb_share_descriptor* d) {
  unsigned char m[kRequestSize];
  write_request(kFetch, t.token, m);
  const int c = connect_to(t.pid, t.nonce);
  dlb_status s = DLB_OK;
  bool broken = c < 0 || send(c, m, sizeof m, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof m);
  if (!broken) {
    s = dlb_share_recv(c, d);
    // An empty message is the server's "not held"; the end of the stream
    // looks the same to dlb_share_recv, and hangs up the socket.
    broken = s != DLB_OK || (d->fd < 0 && d->size == 0 && hung_up(c));
  }
  if (c >= 0) close(c);
  if (broken && s != DLB_ERR_MALFORMED)  // hung up or reset; a garbled answer keeps its status
    return set_error(DLB_ERR_DELETED,
                     "the tensor's sending process (pid %d) closed the connection: it has exited, or it serves no "
                     "process of this user",
                     static_cast<int>(t.pid));
  if (s == DLB_OK && d->fd < 0 && d->size == 0)
    return set_error(DLB_ERR_DELETED, "the tensor's sending process (pid %d) no longer holds it: it was received already",
                     static_cast<int>(t.pid));
  return s;
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
  const bool read_only = read_only_of(flags, (d.flags & kDescReadOnly) != 0);
  init_once();
  unsigned char m[kRequestSize];
  write_request(kRelease, t.token, m);
  int e = 0;
  int fd = -1;
  bool reached = true;
  bool released = true;
  {
    std::lock_guard<std::mutex> lock(link_mutex);
    Link* l = link_to(t.pid, t.nonce);
    if (l == nullptr) {
      reached = false;
      e = errno;
    }
    if ((flags & DLB_SHARE_VIA_SERVER) == 0) fd = take_file(l, t, read_only);
    // Taken: the server may close its descriptor. Sent without waiting; the
    // server reads it on its timer, so nothing wakes up for it.
    if (fd >= 0 && l != nullptr)
      released = send(l->fd, m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof m);
  }
  if (fd >= 0) {
    if (!released) {  // the kept link is full (or broken): a connection of its own, read at once
      const int c = connect_to(t.pid, t.nonce);
      if (c >= 0) {
        (void)!send(c, m, sizeof m, MSG_NOSIGNAL);
        close(c);
      }
    }
    return dlb_buffer_open_shared(fd, t.description, t.description_size, open_flags | DLB_SHARE_TAKE_FD, out);
  }
  if (!reached)
    return set_error(DLB_ERR_DELETED,
                     "the tensor's sending process (pid %d) no longer serves it: it has exited (connecting: %s)",
                     static_cast<int>(t.pid), std::strerror(e));
  dlb_share_descriptor got;
  DLB_TRY(ask_server(t, &got));
  return dlb_buffer_open_shared(got.fd, got.description, got.size, open_flags | DLB_SHARE_TAKE_FD, out);
}

std::int32_t server_impl(std::int64_t* held_out, std::int64_t* connections, std::int64_t* links_out) {
  init_once();
  std::int32_t runs = 0;
  {
    std::lock_guard<std::mutex> lock(server_mutex);
    if (held_out != nullptr) *held_out = static_cast<std::int64_t>(held->size());
    if (connections != nullptr)
      *connections = polls->size() > kFirstConnection ? static_cast<std::int64_t>(polls->size() - kFirstConnection) : 0;
    runs = running > 0 ? 1 : 0;
  }
  std::lock_guard<std::mutex> lock(link_mutex);
  if (links_out != nullptr) *links_out = static_cast<std::int64_t>(links->size());
  return runs;
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

}  // extern "C"
