/* Handing the memory file of a pickled tensor to the process that unpickles
 * it (dlbridge._share's multiprocessing reducer), without a connection per
 * tensor.
 *
 * Pickling (share_serve): the sending process keeps the file descriptor in
 * its table under a random 16-byte token, and the pickle carries a ticket:
 * the sender's pid, the descriptor's number there, the file's device and
 * inode, the token, and the nonce that names the sender's server socket.
 *
 * Unpickling (share_fetch): the receiver takes the file from the sender
 * with pidfd_getfd (a process of the same user allowed to trace it), or
 * else opens /proc/<pid>/fd/<number> (allowed to inspect it), checks that
 * it is the file the ticket names (device, inode), maps it, and tells the
 * sender's server that the token is taken ('R'), without waiting. Where
 * neither is allowed, it asks the server for the descriptor ('F') on a
 * connection of its own, and the server sends it with the description
 * through dlb_share_send (SCM_RIGHTS).
 *
 * The server is a thread of the library's own (no Python, no GIL, no
 * signal), started by the first share_serve, on a SOCK_SEQPACKET socket in
 * the abstract namespace (nothing on disk), named dlbridge-<pid>-<nonce>,
 * accepting only peers of its own user (or root). A receiver keeps one
 * connection to each sender it met, for its releases only; once a
 * connection has carried a release the server polls it for its hang-up
 * only, so that a release wakes no thread, and reads the releases every
 * DRAIN_MS while it holds tickets (a released file is closed that much
 * later at most); a second after its last ticket it sleeps until a new
 * one wakes it.
 *
 * Messages to the server: 17 bytes, 'R' (taken) or 'F' (fetch) and the
 * token, or 'P' and the device and inode of a pool slab (a receiver that
 * cannot take the slab's file itself). The answer to 'F' and 'P' is one
 * dlb_share_send message, or an empty message for a token the server does
 * not hold (taken already, or never served) or a slab this process no
 * longer maps.
 *
 * Pooled tensors (share_pool_ticket, share_pool_fetch): the pickle holds
 * the server's nonce and the library's pool ticket. The receiver opens it
 * from the slab it keeps mapped (no system call); only the first ticket
 * of a slab needs the slab's file, taken as above (pidfd_getfd, /proc, or
 * 'P'), and nothing is sent back: the slot's reference count lives in the
 * slab itself. A ticket that is never unpickled keeps its descriptor in the
 * sender until that process exits, as multiprocessing's resource sharer
 * does.
 *
 * After fork() the child has no server thread: its copies of the server's
 * descriptors and of the receiver's connections are closed, and it starts a
 * server of its own when it first pickles a tensor. */
#define _GNU_SOURCE /* struct ucred, accept4 */
#include "_glue.h"

#include <dlbridge/share.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define TOKEN_SIZE 16
#define MESSAGE_SIZE (1 + TOKEN_SIZE)
#define TICKET_VERSION 1u

/* The ticket's bytes, in this machine's byte order (it never leaves the
 * machine: the file descriptor cannot). */
typedef struct ticket {
  char magic[4]; /* "DLBT" */
  uint32_t version;
  int32_t pid;
  int32_t fd;
  uint64_t dev;
  uint64_t ino;
  uint64_t nonce; /* names the server's socket with pid */
  unsigned char token[TOKEN_SIZE];
} ticket;

static socklen_t socket_name(struct sockaddr_un* a, int32_t pid, uint64_t nonce) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  /* sun_path[0] == 0: the abstract namespace */
  const int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "dlbridge-%d-%016llx", (int)pid,
                         (unsigned long long)nonce);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int random_bytes(void* out, size_t n) {
  unsigned char* p = out;
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += got;
    n -= (size_t)got;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The sender's server                                                      */
/* ------------------------------------------------------------------------ */

typedef struct served {
  unsigned char token[TOKEN_SIZE];
  int fd;
  uint32_t size;
  unsigned char* description; /* malloc'd copy */
} served;

/* Everything below is under srv_mutex, except that the server thread reads
 * srv_polls without it (only it and the fork child handler change it, and
 * the handler runs in a child where the thread does not exist). */
static pthread_mutex_t srv_mutex = PTHREAD_MUTEX_INITIALIZER;
static int srv_running;      /* 1: a server of this process runs; -1: it cannot */
static uint64_t srv_nonce;
static served* srv_items;
static size_t srv_count, srv_cap;
static struct pollfd* srv_polls; /* [0]: the listening socket, [1]: the wake-up eventfd; then connections */
static size_t srv_npolls, srv_polls_cap;
static int srv_sleeping; /* the thread waits without a timeout: a new ticket wakes it */
#define FIRST_CONNECTION 2

static void served_free(served* s) {
  if (s->fd >= 0) close(s->fd);
  free(s->description);
  s->fd = -1;
  s->description = NULL;
}

/* Takes the entry of `token` out of the table into *out; 0 if absent. */
static int srv_take(const unsigned char* token, served* out) {
  int found = 0;
  pthread_mutex_lock(&srv_mutex);
  for (size_t i = 0; i < srv_count; ++i) {
    if (memcmp(srv_items[i].token, token, TOKEN_SIZE) == 0) {
      *out = srv_items[i];
      srv_items[i] = srv_items[--srv_count];
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&srv_mutex);
  return found;
}

static void srv_accept(int listener) {
  const int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
  if (c < 0) return;
  struct ucred peer;
  socklen_t len = sizeof peer;
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || (peer.uid != geteuid() && peer.uid != 0)) {
    close(c);
    return;
  }
  pthread_mutex_lock(&srv_mutex);
  if (srv_npolls == srv_polls_cap) {
    const size_t cap = srv_polls_cap * 2;
    struct pollfd* grown = realloc(srv_polls, cap * sizeof *grown);
    if (grown == NULL) {
      pthread_mutex_unlock(&srv_mutex);
      close(c);
      return;
    }
    srv_polls = grown;
    srv_polls_cap = cap;
  }
  srv_polls[srv_npolls].fd = c;
  srv_polls[srv_npolls].events = POLLIN;
  srv_polls[srv_npolls].revents = 0;
  ++srv_npolls;
  pthread_mutex_unlock(&srv_mutex);
}

/* Every message waiting on a connection (none waits: MSG_DONTWAIT); -1
 * when the connection is to be closed. A connection that has carried a
 * release is a receiver's kept link: from then on it is polled for its
 * hang-up only, so that a release wakes nobody, and drained on the timer. */
static int srv_answer(struct pollfd* p) {
  for (;;) {
    unsigned char m[MESSAGE_SIZE + 1];
    const ssize_t n = recv(p->fd, m, sizeof m, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n != MESSAGE_SIZE || (m[0] != 'R' && m[0] != 'F' && m[0] != 'P')) return -1; /* closed, or not ours */
    if (m[0] == 'P') { /* a pool slab's file, named by device and inode */
      uint64_t dev, ino;
      memcpy(&dev, m + 1, 8);
      memcpy(&ino, m + 9, 8);
      dlb_share_descriptor d;
      int status = 0;
      if (dlb_share_pool_file(dev, ino, &d) == DLB_OK) {
        if (dlb_share_send(p->fd, &d) != DLB_OK) status = -1;
        dlb_share_descriptor_close(&d);
      } else if (send(p->fd, "", 0, MSG_NOSIGNAL) < 0) {
        status = -1;
      }
      if (status != 0) return status;
      continue;
    }
    served s;
    const int found = srv_take(m + 1, &s);
    if (m[0] == 'R') {
      if (found) served_free(&s);
      p->events = POLLRDHUP;
      continue;
    }
    int status = 0;
    if (found) {
      dlb_share_descriptor d;
      d.fd = s.fd;
      d.size = s.size;
      memcpy(d.description, s.description, s.size);
      if (dlb_share_send(p->fd, &d) != DLB_OK) status = -1;
      served_free(&s);
    } else if (send(p->fd, "", 0, MSG_NOSIGNAL) < 0) {
      status = -1;
    }
    if (status != 0) return status;
  }
}

/* How often kept links are drained of their releases while tickets are
 * held: a released file is closed this much later at most. */
#define DRAIN_MS 5

/* Kept links stop being drained this long after the last ticket was held
 * (the thread then sleeps until a new ticket wakes it). */
#define IDLE_MS 1000

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void* srv_loop(void* unused) {
  (void)unused;
  long long active = now_ms();
  for (;;) {
    int lazy = 0;
    for (size_t i = FIRST_CONNECTION; i < srv_npolls; ++i) lazy |= srv_polls[i].events == POLLRDHUP;
    pthread_mutex_lock(&srv_mutex);
    const long long now = now_ms();
    if (srv_count > 0) active = now;
    const int timeout = lazy && now - active < IDLE_MS ? DRAIN_MS : -1;
    srv_sleeping = timeout < 0;
    pthread_mutex_unlock(&srv_mutex);
    const int n = poll(srv_polls, (nfds_t)srv_npolls, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    if (srv_polls[1].revents & POLLIN) {
      uint64_t count;
      (void)!read(srv_polls[1].fd, &count, sizeof count);
      active = now_ms();
    }
    if (srv_polls[0].revents & POLLIN) srv_accept(srv_polls[0].fd);
    for (size_t i = srv_npolls; i-- > FIRST_CONNECTION;) {
      struct pollfd* p = &srv_polls[i];
      const short r = p->revents;
      if (r == 0 && p->events != POLLRDHUP) continue; /* kept links are drained every time */
      const int hung = (r & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0;
      if (srv_answer(p) != 0 || hung) {
        pthread_mutex_lock(&srv_mutex);
        close(p->fd);
        srv_polls[i] = srv_polls[--srv_npolls];
        pthread_mutex_unlock(&srv_mutex);
      }
    }
  }
}

/* Starts this process's server; 0, or -1 when it cannot run here. Called
 * under srv_mutex. */
static int srv_start_locked(void) {
  if (srv_running != 0) return srv_running > 0 ? 0 : -1;
  srv_running = -1;
  uint64_t nonce;
  if (random_bytes(&nonce, sizeof nonce) != 0) return -1;
  const int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listener < 0) return -1;
  struct sockaddr_un a;
  const socklen_t len = socket_name(&a, (int32_t)getpid(), nonce);
  if (bind(listener, (struct sockaddr*)&a, len) != 0 || listen(listener, 64) != 0) {
    close(listener);
    return -1;
  }
  srv_polls_cap = 8;
  srv_polls = malloc(srv_polls_cap * sizeof *srv_polls);
  if (srv_polls == NULL) {
    close(listener);
    return -1;
  }
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(listener);
    free(srv_polls);
    srv_polls = NULL;
    return -1;
  }
  srv_polls[0].fd = listener;
  srv_polls[0].events = POLLIN;
  srv_polls[0].revents = 0;
  srv_polls[1].fd = wake;
  srv_polls[1].events = POLLIN;
  srv_polls[1].revents = 0;
  srv_npolls = 2;
  /* The thread takes no signal: they stay the interpreter's. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const int made = pthread_create(&thread, NULL, srv_loop, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (made != 0) {
    close(listener);
    close(wake);
    free(srv_polls);
    srv_polls = NULL;
    srv_npolls = srv_polls_cap = 0;
    return -1;
  }
  pthread_detach(thread);
  srv_nonce = nonce;
  srv_running = 1;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* The receiver's connections                                               */
/* ------------------------------------------------------------------------ */

typedef struct peer_link {
  int32_t pid;
  uint64_t nonce;
  int fd;    /* the kept connection: releases only, sent without waiting */
  int pidfd; /* the sender's pidfd for pidfd_getfd, or -1 (not allowed here) */
} peer_link;

/* Under cli_mutex, which is never held across a call that waits. */
static pthread_mutex_t cli_mutex = PTHREAD_MUTEX_INITIALIZER;
static peer_link* cli_links;
static size_t cli_count, cli_cap;

static int link_connect(int32_t pid, uint64_t nonce) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  const socklen_t len = socket_name(&a, pid, nonce);
  while (connect(fd, (struct sockaddr*)&a, len) != 0) {
    if (errno == EINTR) continue;
    const int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static void link_close(peer_link* l) {
  close(l->fd);
  if (l->pidfd >= 0) close(l->pidfd);
}

/* Whether the other end of a connection has closed it. */
static int hung_up(int fd) {
  struct pollfd p = {fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* The kept link to the server of (pid, nonce), made on first contact
 * (closing the links whose server has gone meanwhile); NULL with errno set
 * when the server cannot be reached. Under cli_mutex. */
static peer_link* cli_link_locked(int32_t pid, uint64_t nonce) {
  for (size_t i = 0; i < cli_count; ++i)
    if (cli_links[i].pid == pid && cli_links[i].nonce == nonce) return &cli_links[i];
  for (size_t i = cli_count; i-- > 0;) {
    if (hung_up(cli_links[i].fd)) {
      link_close(&cli_links[i]);
      cli_links[i] = cli_links[--cli_count];
    }
  }
  if (cli_count == cli_cap) {
    const size_t cap = cli_cap ? cli_cap * 2 : 8;
    peer_link* grown = realloc(cli_links, cap * sizeof *grown);
    if (grown == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    cli_links = grown;
    cli_cap = cap;
  }
  const int fd = link_connect(pid, nonce);
  if (fd < 0) return NULL;
#ifdef SYS_pidfd_open
  const int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
  const int pidfd = -1;
#endif
  cli_links[cli_count] = (peer_link){pid, nonce, fd, pidfd};
  return &cli_links[cli_count++];
}

/* The ticket's file as a descriptor of this process, or -1: taken from the
 * sender with pidfd_getfd (same user and allowed to trace it), else opened
 * through /proc/<pid>/fd/<n> (same user and allowed to inspect it); either
 * way checked to be the file the ticket names. Under cli_mutex. */
static int take_file_locked(peer_link* l, const struct ticket* t, int read_only) {
  int fd = -1;
#ifdef SYS_pidfd_getfd
  if (l != NULL && l->pidfd >= 0 && !read_only) {
    fd = (int)syscall(SYS_pidfd_getfd, l->pidfd, (int)t->fd, 0);
    if (fd < 0 && errno == EPERM) { /* not allowed here: /proc from now on */
      close(l->pidfd);
      l->pidfd = -1;
    }
  }
#else
  (void)l;
#endif
  if (fd < 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)t->pid, (int)t->fd);
    fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != t->dev || (uint64_t)st.st_ino != t->ino) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Asks the server of (pid, nonce) for a file ('F' with a token, 'P' with a
 * slab's device and inode: message m) on a connection of its own, and
 * receives its answer into *d. DLB_OK with d->fd a new descriptor (or -1
 * for a description without a file); otherwise the status, with `text`
 * saying why when the server no longer holds it or the connection broke
 * (`what` names the file in that sentence). Waits for the answer: call it
 * without the GIL. */
static dlb_status ask_server(int32_t pid, uint64_t nonce, const unsigned char* m, dlb_share_descriptor* d,
                             const char* what, char* text, size_t text_size) {
  dlb_status s = DLB_OK;
  const int c = link_connect(pid, nonce);
  int broken = c < 0 || send(c, m, MESSAGE_SIZE, MSG_NOSIGNAL) != (ssize_t)MESSAGE_SIZE;
  if (!broken) {
    s = dlb_share_recv(c, d);
    /* An empty message is the server's "not held"; the end of the stream
     * looks the same to dlb_share_recv, and hangs up the socket. */
    broken = s != DLB_OK || (d->fd < 0 && d->size == 0 && hung_up(c));
  }
  if (c >= 0) close(c);
  if (broken && s != DLB_ERR_MALFORMED) { /* hung up or reset; a garbled answer keeps its status */
    snprintf(text, text_size,
             "the tensor's sending process (pid %d) closed the connection: it has exited, or it serves no "
             "process of this user", (int)pid);
    return DLB_ERR_DELETED;
  }
  if (s == DLB_OK && d->fd < 0 && d->size == 0) {
    snprintf(text, text_size, "the tensor's sending process (pid %d) no longer holds %s", (int)pid, what);
    return DLB_ERR_DELETED;
  }
  return s;
}

/* ------------------------------------------------------------------------ */
/* fork()                                                                   */
/* ------------------------------------------------------------------------ */

static void fork_prepare(void) {
  pthread_mutex_lock(&cli_mutex);
  pthread_mutex_lock(&srv_mutex);
}

static void fork_parent(void) {
  pthread_mutex_unlock(&srv_mutex);
  pthread_mutex_unlock(&cli_mutex);
}

static void fork_child(void) {
  for (size_t i = 0; i < srv_npolls; ++i) close(srv_polls[i].fd);
  srv_npolls = 0;
  for (size_t i = 0; i < srv_count; ++i) served_free(&srv_items[i]);
  srv_count = 0;
  srv_running = 0;
  srv_sleeping = 0;
  free(srv_polls);
  srv_polls = NULL;
  srv_polls_cap = 0;
  for (size_t i = 0; i < cli_count; ++i) link_close(&cli_links[i]);
  cli_count = 0;
  pthread_mutex_unlock(&srv_mutex);
  pthread_mutex_unlock(&cli_mutex);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* ------------------------------------------------------------------------ */
/* Python                                                                   */
/* ------------------------------------------------------------------------ */

PyObject* dlbpy_share_serve(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  (void)module;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "share_serve() takes a file descriptor and a description");
    return NULL;
  }
  const long fd = PyLong_AsLong(args[0]);
  if (fd == -1 && PyErr_Occurred()) return NULL;
  char* bytes = NULL;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(args[1], &bytes, &size) != 0) return NULL;
  if (fd < 0 || fd > INT32_MAX) return dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, "share_serve: fd is not a file descriptor");
  if (size <= 0 || size > DLB_SHARE_DESCRIPTION_MAX)
    return dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, "share_serve: the description's size is out of range");
  struct stat st;
  if (fstat((int)fd, &st) != 0) return dlbpy_raise_error(DLB_ERR_INVALID_ARGUMENT, "share_serve: fstat of fd failed");
  ticket t;
  memset(&t, 0, sizeof t);
  memcpy(t.magic, "DLBT", 4);
  t.version = TICKET_VERSION;
  t.pid = (int32_t)getpid();
  t.fd = (int32_t)fd;
  t.dev = (uint64_t)st.st_dev;
  t.ino = (uint64_t)st.st_ino;
  served s;
  s.fd = (int)fd;
  s.size = (uint32_t)size;
  s.description = malloc((size_t)size);
  if (s.description == NULL || random_bytes(s.token, TOKEN_SIZE) != 0) {
    free(s.description);
    return PyErr_NoMemory();
  }
  memcpy(s.description, bytes, (size_t)size);
  memcpy(t.token, s.token, TOKEN_SIZE);
  pthread_once(&fork_once, fork_register);
  pthread_mutex_lock(&srv_mutex);
  int ok = srv_start_locked() == 0;
  if (ok && srv_count == srv_cap) {
    const size_t cap = srv_cap ? srv_cap * 2 : 16;
    served* grown = realloc(srv_items, cap * sizeof *grown);
    if (grown != NULL) {
      srv_items = grown;
      srv_cap = cap;
    }
    ok = srv_count < srv_cap;
  }
  if (ok) {
    srv_items[srv_count++] = s;
    t.nonce = srv_nonce;
    if (srv_sleeping) { /* its receiver's release would wait for the next wake otherwise */
      const uint64_t one = 1;
      (void)!write(srv_polls[1].fd, &one, sizeof one);
      srv_sleeping = 0;
    }
  }
  pthread_mutex_unlock(&srv_mutex);
  if (!ok) {
    free(s.description);
    Py_RETURN_NONE; /* the caller keeps fd and passes it another way */
  }
  return PyBytes_FromStringAndSize((const char*)&t, sizeof t);
}
const char dlbpy_share_serve_doc[] =
    "share_serve(fd, description, /) -> bytes | None\n--\n\n"
    "Keeps fd (a shared tensor's memory file) for the process that will unpickle\n"
    "the ticket returned; fd is the server's from now on. None when this process\n"
    "cannot run the server (no abstract Unix sockets here): fd stays the caller's.";

PyObject* dlbpy_share_fetch(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const names[] = {"read_only", "via_proc"};
  PyObject* values[2];
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "share_fetch() takes a ticket and a description");
    return NULL;
  }
  if (dlbpy_keyword_only("share_fetch", args + 2, 0, kwnames, names, 2, values) != 0) return NULL;
  const int read_only = values[0] != NULL ? PyObject_IsTrue(values[0]) : 0;
  const int via_proc = values[1] != NULL ? PyObject_IsTrue(values[1]) : 1;
  if (read_only < 0 || via_proc < 0) return NULL;
  char* tb = NULL;
  Py_ssize_t tsize = 0;
  char* db = NULL;
  Py_ssize_t dsize = 0;
  if (PyBytes_AsStringAndSize(args[0], &tb, &tsize) != 0 || PyBytes_AsStringAndSize(args[1], &db, &dsize) != 0)
    return NULL;
  ticket t;
  if (tsize != (Py_ssize_t)sizeof t) return dlbpy_raise_error(DLB_ERR_MALFORMED, "share_fetch: not a share ticket (wrong size)");
  memcpy(&t, tb, sizeof t);
  if (memcmp(t.magic, "DLBT", 4) != 0 || t.version != TICKET_VERSION)
    return dlbpy_raise_error(DLB_ERR_MALFORMED, "share_fetch: not a share ticket of this dlbridge (magic or version)");
  const uint64_t flags = read_only ? DLB_SHARE_READ_ONLY : 0;
  dlb_buffer* buffer = NULL;
  dlb_status s = DLB_OK;
  char text[192];
  text[0] = 0;
  Py_BEGIN_ALLOW_THREADS
  unsigned char m[MESSAGE_SIZE];
  memcpy(m + 1, t.token, TOKEN_SIZE);
  int reached = 1, e = 0, released = 1;
  pthread_mutex_lock(&cli_mutex);
  peer_link* l = cli_link_locked(t.pid, t.nonce);
  if (l == NULL) {
    reached = 0;
    e = errno;
  }
  const int fd = via_proc ? take_file_locked(l, &t, read_only) : -1;
  if (fd >= 0 && l != NULL) {
    /* Taken: the server may close its descriptor. Sent without waiting,
     * and the server reads it on its timer, so nothing wakes up for it. */
    m[0] = 'R';
    released = send(l->fd, m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof m;
  }
  pthread_mutex_unlock(&cli_mutex);
  if (fd >= 0) {
    if (!released) { /* the kept link is full (or broken): a connection of its own, read at once */
      const int c = link_connect(t.pid, t.nonce);
      if (c >= 0) {
        (void)!send(c, m, sizeof m, MSG_NOSIGNAL);
        close(c);
      }
    }
    s = dlb_buffer_open_shared(fd, db, (size_t)dsize, flags | DLB_SHARE_TAKE_FD, &buffer); /* fd is its now */
  } else if (!reached) {
    s = DLB_ERR_DELETED;
    snprintf(text, sizeof text,
             "the tensor's sending process (pid %d) no longer serves it: it has exited (connecting: %s)", (int)t.pid,
             strerror(e));
  } else {
    /* Handed over by the server, on a connection of its own. */
    m[0] = 'F';
    dlb_share_descriptor d;
    s = ask_server(t.pid, t.nonce, m, &d, "it: it was received already", text, sizeof text);
    if (s == DLB_OK)
      s = dlb_buffer_open_shared(d.fd, d.description, d.size, flags | (d.fd >= 0 ? DLB_SHARE_TAKE_FD : 0), &buffer);
  }
  Py_END_ALLOW_THREADS
  if (text[0] != 0) return dlbpy_raise_error(s, text);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  return dlbpy_tensor_new_in((dlbpy_state*)PyModule_GetState(module), buffer);
}
const char dlbpy_share_fetch_doc[] =
    "share_fetch(ticket, description, /, *, read_only=False, via_proc=True) -> Tensor\n--\n\n"
    "The tensor a ticket of share_serve() names, mapped in this process: its file\n"
    "opened through /proc/<pid>/fd/<n> (via_proc, where allowed) or handed over\n"
    "by the sender's server. Raises dlbridge.Error DLB_ERR_DELETED when the\n"
    "sender no longer holds it, DLB_ERR_MALFORMED for bytes that are no ticket.";

PyObject* dlbpy_share_server_state(PyObject* module, PyObject* unused) {
  (void)module;
  (void)unused;
  pthread_mutex_lock(&srv_mutex);
  const long long pending = (long long)srv_count;
  const long long connections = srv_npolls > FIRST_CONNECTION ? (long long)(srv_npolls - FIRST_CONNECTION) : 0;
  const int running = srv_running > 0;
  pthread_mutex_unlock(&srv_mutex);
  pthread_mutex_lock(&cli_mutex);
  const long long links = (long long)cli_count;
  pthread_mutex_unlock(&cli_mutex);
  return Py_BuildValue("(LLLO)", pending, connections, links, running ? Py_True : Py_False);
}
const char dlbpy_share_server_state_doc[] =
    "share_server_state() -> (pending, connections, links, running)\n--\n\n"
    "Tickets whose descriptor the server still holds, connections it serves,\n"
    "connections this process keeps to other senders, whether it runs (for tests).";

/* ------------------------------------------------------------------------ */
/* Pooled tensors                                                           */
/* ------------------------------------------------------------------------ */

#define POOL_PREFIX 8 /* the server's nonce, before the library's pool ticket */

PyObject* dlbpy_share_pool_ticket(PyObject* module, PyObject* tensor) {
  (void)module;
  dlb_buffer* buffer = dlbpy_tensor_buffer(tensor);
  if (buffer == NULL) return NULL;
  dlb_share_pool_ticket t;
  const dlb_status s = dlb_share_pool_issue(buffer, &t);
  if (s == DLB_ERR_NOT_ZERO_COPY || s == DLB_ERR_OUT_OF_MEMORY) {
    dlb_clear_last_error();
    Py_RETURN_NONE; /* not pooled, or its slab's ticket cells are all held */
  }
  if (s != DLB_OK) return dlbpy_raise_status(s);
  /* The server hands the slab's file to a receiver that cannot take it
   * itself; where none can run (nonce 0) such a receiver is refused. */
  pthread_once(&fork_once, fork_register);
  pthread_mutex_lock(&srv_mutex);
  const uint64_t nonce = srv_start_locked() == 0 ? srv_nonce : 0;
  pthread_mutex_unlock(&srv_mutex);
  char bytes[POOL_PREFIX + DLB_SHARE_POOL_TICKET_MAX];
  memcpy(bytes, &nonce, POOL_PREFIX);
  memcpy(bytes + POOL_PREFIX, t.bytes, t.size);
  /* On failure the ticket's reference stays taken, as a ticket never opened. */
  return PyBytes_FromStringAndSize(bytes, (Py_ssize_t)(POOL_PREFIX + t.size));
}
const char dlbpy_share_pool_ticket_doc[] =
    "share_pool_ticket(tensor, /) -> bytes | None\n--\n\n"
    "A ticket for a tensor in the small-tensor pool (dlb_share_pool_issue), with\n"
    "this process's server named for a receiver that needs the slab's file;\n"
    "None when the tensor is not pooled or every ticket cell of its slab is held.";

PyObject* dlbpy_share_pool_fetch(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static const char* const names[] = {"read_only", "via_proc"};
  PyObject* values[2];
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "share_pool_fetch() takes a ticket");
    return NULL;
  }
  if (dlbpy_keyword_only("share_pool_fetch", args + 1, 0, kwnames, names, 2, values) != 0) return NULL;
  const int read_only = values[0] != NULL ? PyObject_IsTrue(values[0]) : 0;
  const int via_proc = values[1] != NULL ? PyObject_IsTrue(values[1]) : 1;
  if (read_only < 0 || via_proc < 0) return NULL;
  char* tb = NULL;
  Py_ssize_t tsize = 0;
  if (PyBytes_AsStringAndSize(args[0], &tb, &tsize) != 0) return NULL;
  if (tsize <= POOL_PREFIX || tsize - POOL_PREFIX > DLB_SHARE_POOL_TICKET_MAX)
    return dlbpy_raise_error(DLB_ERR_MALFORMED, "share_pool_fetch: not a pool ticket (wrong size)");
  uint64_t nonce;
  memcpy(&nonce, tb, POOL_PREFIX);
  dlb_share_pool_ticket t;
  t.size = (uint32_t)(tsize - POOL_PREFIX);
  memcpy(t.bytes, tb + POOL_PREFIX, t.size);
  const uint64_t flags = read_only ? DLB_SHARE_READ_ONLY : 0;
  dlbpy_state* state = (dlbpy_state*)PyModule_GetState(module);
  dlb_buffer* buffer = NULL;
  /* A slab kept from an earlier ticket: no system call, no wait. */
  dlb_status s = dlb_share_pool_open(&t, -1, flags, &buffer);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  if (buffer != NULL) return dlbpy_tensor_new_in(state, buffer);
  ticket source;
  memset(&source, 0, sizeof source);
  s = dlb_share_pool_ticket_source(&t, &source.pid, &source.fd, &source.dev, &source.ino);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  char text[192];
  text[0] = 0;
  Py_BEGIN_ALLOW_THREADS
  int reached = 1, e = 0;
  pthread_mutex_lock(&cli_mutex);
  peer_link* l = cli_link_locked(source.pid, nonce);
  if (l == NULL) {
    reached = 0;
    e = errno;
  }
  const int fd = via_proc ? take_file_locked(l, &source, 0) : -1;
  pthread_mutex_unlock(&cli_mutex);
  if (fd >= 0) {
    s = dlb_share_pool_open(&t, fd, flags | DLB_SHARE_TAKE_FD, &buffer); /* fd is its now */
  } else if (!reached) {
    s = DLB_ERR_DELETED;
    snprintf(text, sizeof text,
             "the tensor's sending process (pid %d) no longer serves it: it has exited (connecting: %s)",
             (int)source.pid, strerror(e));
  } else {
    unsigned char m[MESSAGE_SIZE];
    m[0] = 'P';
    memcpy(m + 1, &source.dev, 8);
    memcpy(m + 9, &source.ino, 8);
    dlb_share_descriptor d;
    s = ask_server(source.pid, nonce, m, &d, "its slab: it unmapped it", text, sizeof text);
    if (s == DLB_OK) s = dlb_share_pool_open(&t, d.fd, flags | DLB_SHARE_TAKE_FD, &buffer); /* d.fd is its now */
  }
  Py_END_ALLOW_THREADS
  if (text[0] != 0) return dlbpy_raise_error(s, text);
  if (s != DLB_OK) return dlbpy_raise_status(s);
  if (buffer == NULL) return dlbpy_raise_error(DLB_ERR_INTERNAL, "share_pool_fetch: the slab's file gave no buffer");
  return dlbpy_tensor_new_in(state, buffer);
}
const char dlbpy_share_pool_fetch_doc[] =
    "share_pool_fetch(ticket, /, *, read_only=False, via_proc=True) -> Tensor\n--\n\n"
    "The tensor a pool ticket of share_pool_ticket() names (dlb_share_pool_open):\n"
    "from a slab this process keeps, else after taking the slab's file from the\n"
    "sender (pidfd_getfd or /proc/<pid>/fd/<n> where via_proc allows, else its\n"
    "server). Raises dlbridge.Error DLB_ERR_DELETED for a ticket opened already\n"
    "or a sender that has exited, DLB_ERR_MALFORMED for bytes that are no ticket.";
