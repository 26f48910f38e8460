// Passing share descriptors over Unix sockets: the description's bytes as
// they are, the file descriptor attached to the first byte (SCM_RIGHTS).
// On a stream socket the receiver reads the description's 16-byte prefix,
// which declares its size, then the rest; on a seqpacket or datagram socket
// one message is one description.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstring>

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "share_format.hpp"

using dlb::set_error;

namespace dlb::share {
namespace {

constexpr int kMaxFds = 4;  // room to notice (and close) extra descriptors

dlb_status socket_error(const char* what, int socket_fd, int e) {
  return set_error(DLB_ERR_INVALID_ARGUMENT, "socket %d: %s failed: %s", socket_fd, what, std::strerror(e));
}

dlb_status send_impl(std::int32_t socket_fd, const dlb_share_descriptor* d) {
  if (d == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "descriptor is NULL");
  if (d->size < kDescPrefix || d->size > DLB_SHARE_DESCRIPTION_MAX)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "descriptor->size is %" PRIu32 " (%zu to %d)", d->size, kDescPrefix,
                     DLB_SHARE_DESCRIPTION_MAX);
  // A CUDA IPC description names its memory by handle and travels alone.
  const bool cuda = declared_kind(d->description, d->size) == DLB_SHARE_KIND_CUDA_IPC;
  DLB_TRY(check_fd_for_kind(declared_kind(d->description, d->size), d->fd, DLB_ERR_INVALID_ARGUMENT,
                            "descriptor->fd"));
  std::size_t sent = 0;
  while (sent < d->size) {
    iovec iov;
    iov.iov_base = const_cast<unsigned char*>(d->description + sent);
    iov.iov_len = d->size - sent;
    msghdr msg;
    std::memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int))];
    if (sent == 0 && !cuda) {
      std::memset(control, 0, sizeof control);
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      const int fd = d->fd;
      std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    const ssize_t n = sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return socket_error("sendmsg", socket_fd, errno);
    }
    sent += static_cast<std::size_t>(n);
  }
  return DLB_OK;
}

// Closes every descriptor in the control data of `msg`; returns how many
// there were, and the first in *first (which is not closed when keep).
int take_fds(msghdr* msg, int* first, bool keep) {
  int count = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (count == 0 && keep) {
        *first = fd;
      } else {
        close(fd);
      }
      ++count;
    }
  }
  return count;
}

struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) close(fd);
  }
};

// One recvmsg into buf[0, want); collects the file descriptor into *fd.
dlb_status recv_some(int socket_fd, unsigned char* buf, std::size_t want, FdGuard* fd, std::size_t* got,
                     bool* truncated) {
  for (;;) {
    iovec iov;
    iov.iov_base = buf;
    iov.iov_len = want;
    msghdr msg;
    std::memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) unsigned char control[CMSG_SPACE(kMaxFds * sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return socket_error("recvmsg", socket_fd, errno);
    }
    int first = -1;
    const int count = take_fds(&msg, &first, fd->fd < 0);
    if (first >= 0) fd->fd = first;
    if ((msg.msg_flags & MSG_CTRUNC) != 0 || count > 1 || (count == 1 && first < 0))
      return set_error(DLB_ERR_MALFORMED, "the message carried more than one file descriptor (all closed)");
    *truncated = (msg.msg_flags & MSG_TRUNC) != 0;
    *got = static_cast<std::size_t>(n);
    return DLB_OK;
  }
}

dlb_status recv_impl(std::int32_t socket_fd, dlb_share_descriptor* out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(socket_fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    return socket_error("getsockopt(SO_TYPE)", socket_fd, errno);
  unsigned char buf[DLB_SHARE_DESCRIPTION_MAX];
  FdGuard fd;
  std::size_t have = 0;
  bool truncated = false;
  if (type != SOCK_STREAM) {
    DLB_TRY(recv_some(socket_fd, buf, sizeof buf, &fd, &have, &truncated));
    if (truncated)
      return set_error(DLB_ERR_MALFORMED, "the message is longer than the largest description (%d bytes)",
                       DLB_SHARE_DESCRIPTION_MAX);
    if (have == 0 && fd.fd < 0) {
      out->fd = -1;
      out->size = 0;
      return DLB_OK;
    }
    if (have < kDescPrefix || declared_size(buf) != have)
      return set_error(DLB_ERR_MALFORMED, "the message of %zu bytes is not one share description", have);
  } else {
    std::size_t want = kDescPrefix;
    while (have < want) {
      std::size_t got = 0;
      DLB_TRY(recv_some(socket_fd, buf + have, want - have, &fd, &got, &truncated));
      if (got == 0) {
        if (have == 0 && fd.fd < 0) {
          out->fd = -1;
          out->size = 0;
          return DLB_OK;
        }
        return set_error(DLB_ERR_MALFORMED, "the connection closed after %zu of %zu bytes of a share description",
                         have, want);
      }
      have += got;
      if (want == kDescPrefix && have >= kDescPrefix) {
        const std::uint32_t declared = declared_size(buf);
        if (declared < kDescPrefix || declared > DLB_SHARE_DESCRIPTION_MAX)
          return set_error(DLB_ERR_MALFORMED,
                           "the stream does not carry a share description here (declared size %" PRIu32 ")",
                           declared);
        want = declared;
      }
    }
  }
  DLB_TRY(check_fd_for_kind(declared_kind(buf, have), fd.fd, DLB_ERR_MALFORMED,
                            "the file descriptor that arrived with the share description"));
  out->fd = fd.fd;
  fd.fd = -1;
  out->size = static_cast<std::uint32_t>(have);
  std::memcpy(out->description, buf, have);
  return DLB_OK;
}

}  // namespace
}  // namespace dlb::share

extern "C" {

DLB_API dlb_status dlb_share_send(int32_t socket_fd, const dlb_share_descriptor* descriptor) {
  return dlb::firewall(__func__, [&] { return dlb::share::send_impl(socket_fd, descriptor); });
}

DLB_API dlb_status dlb_share_recv(int32_t socket_fd, dlb_share_descriptor* out) {
  return dlb::firewall(__func__, [&] { return dlb::share::recv_impl(socket_fd, out); });
}

}  // extern "C"
