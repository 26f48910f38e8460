// Shared host memory across processes: a forked child opening an inherited
// descriptor, descriptors passed over Unix sockets of each type, and the
// socket calls' refusals (no stray file descriptor left open).
#include "share_fixture.hpp"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

using namespace dlbtest;
using namespace sharetest;

namespace {

// ---------------------------------------------------------------------------
// Other processes
// ---------------------------------------------------------------------------

TEST_F(Share, ForkedChildSeesWritesBothWays) {
  dlb_buffer* b = alloc_shared_f32({256});
  float* p = data_of(b);
  for (int i = 0; i < 256; ++i) p[i] = static_cast<float>(i);
  dlb_share_descriptor d = share_of(b);
  // The child opens the inherited descriptor, checks the parent's values,
  // and writes its own.
  const int rc = in_child([&] {
    dlb_buffer* o = nullptr;
    if (dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &o) != DLB_OK) return 10;
    DLTensor t;
    dlb_buffer_dltensor(o, &t);
    float* q = static_cast<float*>(t.data);
    for (int i = 0; i < 256; ++i)
      if (q[i] != static_cast<float>(i)) return 11;
    for (int i = 0; i < 256; ++i) q[i] = -q[i];
    dlb_buffer_release(o);
    return dlb_shared_mappings() == mappings_at_start_ + 1 ? 0 : 12;
  });
  EXPECT_EQ(rc, 0);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(p[i], -static_cast<float>(i));
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

void socket_roundtrip(int type) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
  dlb_buffer* b = alloc_shared_f32({3, 7});
  float* p = data_of(b);
  p[20] = 20.0f;
  const pid_t child = start_child([&] {
    close(sv[0]);
    // The child: receive two descriptors, open them, write into the first,
    // send the second back.
    dlb_share_descriptor r1;
    dlb_share_descriptor r2;
    if (dlb_share_recv(sv[1], &r1) != DLB_OK) return 20;
    if (dlb_share_recv(sv[1], &r2) != DLB_OK) return 21;
    dlb_buffer* o = nullptr;
    if (dlb_buffer_open_shared(r1.fd, r1.description, r1.size, 0, &o) != DLB_OK) return 22;
    dlb_share_descriptor_close(&r1);
    DLTensor t;
    dlb_buffer_dltensor(o, &t);
    float* q = static_cast<float*>(t.data);
    if (q[20] != 20.0f || t.shape[1] != 7) return 23;
    q[0] = 1.5f;
    dlb_buffer_release(o);
    if (dlb_share_send(sv[1], &r2) != DLB_OK) return 24;
    dlb_share_descriptor_close(&r2);
    return 0;
  });
  close(sv[1]);
  dlb_share_descriptor d = share_of(b);
  ASSERT_EQ(dlb_share_send(sv[0], &d), DLB_OK) << dlb_last_error_message();
  ASSERT_EQ(dlb_share_send(sv[0], &d), DLB_OK);
  dlb_share_descriptor_close(&d);
  dlb_share_descriptor back;
  ASSERT_EQ(dlb_share_recv(sv[0], &back), DLB_OK) << dlb_last_error_message();
  EXPECT_GE(back.fd, 0);
  dlb_buffer* o = open_of(back);
  dlb_share_descriptor_close(&back);
  EXPECT_EQ(data_of(o)[0], 1.5f);
  dlb_buffer_release(o);
  // The child closes its end: the stream's end (nothing, for datagrams).
  if (type != SOCK_DGRAM) {
    dlb_share_descriptor end;
    ASSERT_EQ(dlb_share_recv(sv[0], &end), DLB_OK);
    EXPECT_EQ(end.fd, -1);
    EXPECT_EQ(end.size, 0u);
  }
  close(sv[0]);
  EXPECT_EQ(wait_child(child), 0);
  EXPECT_EQ(p[0], 1.5f);
  dlb_buffer_release(b);
}

TEST_F(Share, OverAStreamSocket) { socket_roundtrip(SOCK_STREAM); }
TEST_F(Share, OverASeqpacketSocket) { socket_roundtrip(SOCK_SEQPACKET); }
TEST_F(Share, OverADatagramSocket) { socket_roundtrip(SOCK_DGRAM); }

TEST_F(Share, SocketRefusals) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  dlb_share_descriptor d;
  std::memset(&d, 0, sizeof d);
  d.fd = -1;
  d.size = 56;
  EXPECT_EQ(dlb_share_send(sv[0], &d), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("descriptor->fd is -1: a host description needs its memory file"));
  d.fd = 0;
  d.size = 3;
  EXPECT_EQ(dlb_share_send(sv[0], &d), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_send(sv[0], nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_recv(sv[0], nullptr), DLB_ERR_INVALID_ARGUMENT);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  dlb_share_descriptor r;
  r.fd = 77;
  EXPECT_EQ(dlb_share_recv(p[0], &r), DLB_ERR_INVALID_ARGUMENT);  // not a socket
  EXPECT_TRUE(MessageContains("SO_TYPE"));
  close(p[0]);
  close(p[1]);
  // Bytes that are not a description (the stream is out of step after
  // them: a new connection for the next case).
  ASSERT_EQ(write(sv[1], "hello, this is not a description", 32), 32);
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("does not carry a share description"));
  EXPECT_EQ(r.fd, 77);
  close(sv[0]);
  close(sv[1]);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  // A description without its file descriptor, then cut short.
  dlb_buffer* b = alloc_shared_f32({2});
  dlb_share_descriptor good = share_of(b);
  ASSERT_EQ(write(sv[1], good.description, good.size), static_cast<ssize_t>(good.size));
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("arrived with the share description is -1: a host description needs its memory"));
  ASSERT_EQ(dlb_share_send(sv[1], &good), DLB_OK);
  dlb_share_descriptor_close(&good);
  dlb_buffer_release(b);
  close(sv[1]);  // nothing more: the received one is whole
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_OK);
  EXPECT_GE(r.fd, 0);
  dlb_share_descriptor_close(&r);
  close(sv[0]);
  // A message cut short by the peer's close.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(write(sv[1], "DLBS\x01\x00\x00\x00\x58\x00\x00\x00\x00\x00\x00\x00\x00", 17), 17);
  close(sv[1]);
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("closed after 17 of 88 bytes"));
  close(sv[0]);
  // On a seqpacket socket one message is one description: longer than the
  // largest, or of another size than it declares.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  unsigned char big[DLB_SHARE_DESCRIPTION_MAX + 8] = {'D', 'L', 'B', 'S'};
  ASSERT_EQ(send(sv[1], big, sizeof big, 0), static_cast<ssize_t>(sizeof big));
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("longer than the largest description"));
  ASSERT_EQ(send(sv[1], "short", 5, 0), 5);
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("the message of 5 bytes is not one share description"));
  close(sv[0]);
  close(sv[1]);
}

TEST_F(Share, ExtraFileDescriptorsAreClosed) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  dlb_buffer* b = alloc_shared_f32({2});
  dlb_share_descriptor good = share_of(b);
  iovec iov{good.description, good.size};
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int two[2] = {good.fd, good.fd};
  std::memcpy(CMSG_DATA(c), two, sizeof two);
  ASSERT_EQ(sendmsg(sv[1], &msg, 0), static_cast<ssize_t>(good.size));
  const int before = open_fds();
  dlb_share_descriptor r;
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("more than one file descriptor"));
  EXPECT_EQ(open_fds(), before);
  dlb_share_descriptor_close(&good);
  dlb_buffer_release(b);
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
