// Tickets (dlb_share_ticket_issue / dlb_share_ticket_open): the file taken
// from the issuer by pidfd_getfd or /proc, or sent by its ticket server;
// opened once; refused when cut, edited, or its issuer has exited; a forked
// child that opens its parent's ticket, writes, and the parent sees it.
#include "share_fixture.hpp"

#include <chrono>
#include <thread>

using namespace dlbtest;
using namespace sharetest;

namespace {

struct ServerState {
  std::int64_t held = -1, connections = -1, links = -1;
  bool operator==(const ServerState& o) const {
    return held == o.held && connections == o.connections && links == o.links;
  }
};

ServerState server_state() {
  ServerState s;
  dlb_share_ticket_server(&s.held, &s.connections, &s.links);
  return s;
}

// Waits (up to 10 s) until the server holds `held` files and serves one
// connection (this process's own link): it closes a file on its own
// thread, up to 5 ms after the receiver released it, and a connection
// when its peer hangs up.
std::int64_t settle(std::int64_t held) {
  for (int i = 0; i < 5000 && !(server_state() == ServerState{held, 1, server_state().links}); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return server_state().connections == 1 ? server_state().held : -1;
}

dlb_share_ticket ticket_of(dlb_buffer* b, std::uint64_t flags = 0) {
  dlb_share_ticket t;
  t.size = 0;
  EXPECT_EQ(dlb_share_ticket_issue(b, flags, &t), DLB_OK) << dlb_last_error_message();
  return t;
}

// The ticket server and this process's link to itself, started before the
// fixture counts file descriptors: they stay for the process's life.
class Tickets : public Share {
 protected:
  void SetUp() override {
    static bool warm = [] {
      dlb_buffer* b = alloc_shared_f32({4});
      dlb_share_ticket t = ticket_of(b);
      dlb_buffer* o = nullptr;
      EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
      dlb_buffer_release(o);
      dlb_buffer_release(b);
      return settle(0) == 0;
    }();
    ASSERT_TRUE(warm);
    Share::SetUp();
  }
  void TearDown() override {
    EXPECT_EQ(settle(0), 0) << "the server still holds a file, or serves a connection that has gone";
    Share::TearDown();
  }
};

TEST_F(Tickets, OpensOnceOverTheSameMemory) {
  dlb_buffer* b = alloc_shared_f32({1024});
  float* p = data_of(b);
  p[7] = 7.0f;
  dlb_share_ticket t = ticket_of(b);
  EXPECT_EQ(server_state().held, 1);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  float* q = data_of(o);
  EXPECT_NE(q, p);  // another mapping of the same memory
  EXPECT_EQ(q[7], 7.0f);
  q[8] = -8.0f;
  EXPECT_EQ(p[8], -8.0f);
  EXPECT_EQ(settle(0), 0);  // taken: the server closed its descriptor
  dlb_buffer* again = nullptr;
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &again), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("received already"));
  EXPECT_EQ(again, nullptr);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Tickets, TheServerSendsTheFileWhenAsked) {
  dlb_buffer* b = alloc_shared_f32({16});
  data_of(b)[3] = 3.0f;
  dlb_share_ticket t = ticket_of(b, DLB_SHARE_READ_ONLY);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, DLB_SHARE_VIA_SERVER, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(server_state().held, 0);  // handed over before the answer
  EXPECT_EQ(data_of(o)[3], 3.0f);
  EXPECT_NE(dlb_buffer_flags(o) & DLB_BUFFER_READ_ONLY, 0u);  // the ticket's read-only description
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, DLB_SHARE_VIA_SERVER, &o), DLB_ERR_DELETED);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Tickets, ACopyForMemoryNotShared) {
  dlb_buffer* plain = nullptr;
  const std::int64_t shape[] = {5};
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, shape, &plain), DLB_OK);
  dlb_share_ticket t;
  EXPECT_EQ(dlb_share_ticket_issue(plain, 0, &t), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_EQ(server_state().held, 0);
  data_of(plain)[4] = 4.0f;
  t = ticket_of(plain, DLB_SHARE_COPY_IF_NEEDED);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(data_of(o)[4], 4.0f);
  EXPECT_EQ(settle(0), 0);
  dlb_buffer_release(o);
  dlb_buffer_release(plain);
}

TEST_F(Tickets, RefusesWhatIsNoTicket) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_ticket t = ticket_of(b);
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size - 1, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("share ticket is truncated"));
  EXPECT_EQ(dlb_share_ticket_open(t.bytes + 64, t.size - 64, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("a share ticket was expected, but the record is a share description"));
  dlb_share_ticket bad = t;
  bad.bytes[20] ^= 1;  // the descriptor number, under the checksum
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("checksum"));
  put_le(bad.bytes + 20, 0xFFFFFFFFu, 4);  // no file for a host description, the checksum redone
  reseal(bad.bytes, bad.size);
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("ticket's file descriptor is -1: a host description needs its memory file"));
  bad = t;
  put_le(bad.bytes + 4, 2, 2);
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_VERSION);
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 1u << 9, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_ticket_open(nullptr, 0, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_ticket_issue(b, DLB_SHARE_TAKE_FD, &t), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(o, nullptr);
  // Another inode: the file at the ticket's descriptor number is not the
  // one it names, so the server, which holds the file by token, sends it.
  bad = t;
  put_le(bad.bytes + 32, get_le(bad.bytes + 32, 8) + 1, 8);
  reseal(bad.bytes, bad.size);
  ASSERT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(server_state().held, 0);
  data_of(o)[1] = 1.0f;
  EXPECT_EQ(data_of(b)[1], 1.0f);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Tickets, AForkedChildOpensItsParentsTicket) {
  dlb_buffer* b = alloc_shared_f32({64});
  data_of(b)[63] = 63.0f;
  dlb_share_ticket t = ticket_of(b);
  const int rc = in_child([&] {
    if (dlb_share_ticket_server(nullptr, nullptr, nullptr) != 0) return 9;  // the parent's stayed there
    dlb_buffer* o = nullptr;
    if (dlb_share_ticket_open(t.bytes, t.size, 0, &o) != DLB_OK) return 10;
    float* q = data_of(o);
    if (q[63] != 63.0f) return 11;
    q[0] = -1.0f;
    dlb_buffer_release(o);
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(data_of(b)[0], -1.0f);
  EXPECT_EQ(settle(0), 0);
  dlb_buffer_release(b);
}

TEST_F(Tickets, ATicketWhoseIssuerExitedIsRefused) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int rc = in_child([&] {
    dlb_buffer* b = alloc_shared_f32({4});
    dlb_share_ticket t = ticket_of(b);
    return write(fds[1], &t, sizeof t) == static_cast<ssize_t>(sizeof t) ? 0 : 1;
  });
  ASSERT_EQ(rc, 0);
  dlb_share_ticket t;
  ASSERT_EQ(read(fds[0], &t, sizeof t), static_cast<ssize_t>(sizeof t));
  close(fds[0]);
  close(fds[1]);
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("exited"));
}

}  // namespace
