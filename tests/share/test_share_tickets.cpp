// Tickets (dlb_share_ticket_issue / dlb_share_ticket_open): the file handed
// over by the issuer's server, which decides at the moment of the request,
// so a ticket opens once however fast it is replayed; refused when cut,
// edited or forged (the token is checked on the only route there is), when
// its issuer exited, withdrew it, or belongs to another user (a permission
// refusal, said as one); unopened tickets bounded and waited for.
#include "share_fixture.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace dlbtest;
using namespace sharetest;

namespace {

std::int64_t held_now() {
  std::int64_t held = -1;
  dlb_share_ticket_server(&held, nullptr, nullptr);
  return held;
}

// Waits (up to 10 s) until the server answers no connection (it closes
// its end a moment after the receiver read the answer) and returns what
// it holds.
std::int64_t settle() {
  std::int64_t held = -1, connections = -1;
  for (int i = 0; i < 5000; ++i) {
    dlb_share_ticket_server(&held, &connections, nullptr);
    if (connections == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return connections == 0 ? held : -1;
}

dlb_share_ticket ticket_of(dlb_buffer* b, std::uint64_t flags = 0) {
  dlb_share_ticket t;
  t.size = 0;
  EXPECT_EQ(dlb_share_ticket_issue(b, flags, &t), DLB_OK) << dlb_last_error_message();
  return t;
}

// Offsets of a ticket's source fields (share_format.hpp).
constexpr int kTicketPid = 16, kTicketFd = 20, kTicketDev = 24, kTicketIno = 32, kTicketNonce = 40,
              kTicketToken = 48;

// The ticket server, started before the fixture counts file descriptors:
// its listening socket stays for the process's life.
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
      return settle() == 0;
    }();
    ASSERT_TRUE(warm);
    Share::SetUp();
  }
  void TearDown() override {
    EXPECT_EQ(settle(), 0) << "the server still holds a file, or a connection";
    Share::TearDown();
  }
};

TEST_F(Tickets, OpensOnceOverTheSameMemory) {
  dlb_buffer* b = alloc_shared_f32({1024});
  float* p = data_of(b);
  p[7] = 7.0f;
  dlb_share_ticket t = ticket_of(b);
  EXPECT_EQ(held_now(), 1);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(held_now(), 0);  // handed over before the answer
  float* q = data_of(o);
  EXPECT_NE(q, p);  // another mapping of the same memory
  EXPECT_EQ(q[7], 7.0f);
  q[8] = -8.0f;
  EXPECT_EQ(p[8], -8.0f);
  dlb_buffer* again = nullptr;
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &again), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("opened already"));
  EXPECT_EQ(again, nullptr);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

// A replay at once, and threads racing for one ticket: the server decides
// when asked, so exactly one open gets the file.
TEST_F(Tickets, AReplayAtOnceIsRefused) {
  dlb_buffer* b = alloc_shared_f32({16});
  for (int round = 0; round < 50; ++round) {
    dlb_share_ticket t = ticket_of(b);
    dlb_buffer* o = nullptr;
    ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
    dlb_buffer* again = nullptr;
    EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &again), DLB_ERR_DELETED) << "round " << round;
    dlb_buffer_release(again);
    dlb_buffer_release(o);
  }
  for (int round = 0; round < 20; ++round) {
    dlb_share_ticket t = ticket_of(b);
    std::atomic<int> opened{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k)
      threads.emplace_back([&] {
        dlb_buffer* o = nullptr;
        const dlb_status s = dlb_share_ticket_open(t.bytes, t.size, 0, &o);
        (s == DLB_OK ? opened : refused).fetch_add(s == DLB_OK || s == DLB_ERR_DELETED ? 1 : 100);
        dlb_buffer_release(o);
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(opened.load(), 1) << "round " << round;
    EXPECT_EQ(refused.load(), 3) << "round " << round;
  }
  dlb_buffer_release(b);
}

TEST_F(Tickets, TheViaServerFlagIsAccepted) {
  dlb_buffer* b = alloc_shared_f32({16});
  data_of(b)[3] = 3.0f;
  dlb_share_ticket t = ticket_of(b, DLB_SHARE_READ_ONLY);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, DLB_SHARE_VIA_SERVER, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(held_now(), 0);
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
  EXPECT_EQ(held_now(), 0);
  data_of(plain)[4] = 4.0f;
  t = ticket_of(plain, DLB_SHARE_COPY_IF_NEEDED);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(data_of(o)[4], 4.0f);
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
  bad.bytes[kTicketFd] ^= 1;  // under the checksum
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("checksum"));
  put_le(bad.bytes + kTicketFd, 0xFFFFFFFFu, 4);  // no file for a host description, the checksum redone
  reseal(bad.bytes, bad.size);
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("ticket's file descriptor is -1: a host description needs its memory file"));
  bad = t;
  put_le(bad.bytes + kTicketPid, 0, 4);
  reseal(bad.bytes, bad.size);
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("names process 0"));
  bad = t;
  put_le(bad.bytes + 4, 2, 2);
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_VERSION);
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 1u << 9, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_ticket_open(nullptr, 0, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_ticket_issue(b, DLB_SHARE_TAKE_FD, &t), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_ticket_issue(b, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(o, nullptr);
  // Another inode than the file the server holds for the token: the token
  // was the ticket's, so the server handed the file over (the ticket is
  // spent), and the receiver refuses it as not the one named.
  bad = t;
  put_le(bad.bytes + kTicketIno, get_le(bad.bytes + kTicketIno, 8) + 1, 8);
  reseal(bad.bytes, bad.size);
  EXPECT_EQ(dlb_share_ticket_open(bad.bytes, bad.size, 0, &o), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("sent another file or description than its ticket names"));
  EXPECT_EQ(o, nullptr);
  EXPECT_EQ(held_now(), 0);
  dlb_buffer_release(b);
}

// The token is what a ticket proves, on the only route there is: a ticket
// edited to another token or another server (the checksum recomputed, as
// anyone can) opens nothing, and the real ticket still opens once.
TEST_F(Tickets, ForgedTokensAndServersOpenNothing) {
  dlb_buffer* b = alloc_shared_f32({8});
  data_of(b)[5] = 5.0f;
  dlb_share_ticket t = ticket_of(b);
  dlb_buffer* o = nullptr;
  dlb_share_ticket forged = t;
  forged.bytes[kTicketToken] ^= 0x5a;
  reseal(forged.bytes, forged.size);
  EXPECT_EQ(dlb_share_ticket_open(forged.bytes, forged.size, 0, &o), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("holds no such ticket"));
  forged = t;
  for (int i = 0; i < 16; ++i) forged.bytes[kTicketToken + i] = static_cast<unsigned char>(i * 37 + 11);
  reseal(forged.bytes, forged.size);
  EXPECT_EQ(dlb_share_ticket_open(forged.bytes, forged.size, 0, &o), DLB_ERR_DELETED);
  forged = t;
  put_le(forged.bytes + kTicketNonce, get_le(forged.bytes + kTicketNonce, 8) + 1, 8);
  reseal(forged.bytes, forged.size);
  EXPECT_EQ(dlb_share_ticket_open(forged.bytes, forged.size, 0, &o), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("no longer serves it"));
  EXPECT_EQ(o, nullptr);
  EXPECT_EQ(held_now(), 1);  // still the real ticket's
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(data_of(o)[5], 5.0f);
  EXPECT_EQ(held_now(), 0);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

// A receiver that may reach other processes' files (this test may trace
// its children; root may trace anyone) given a ticket that names another
// process's memory file by pid, descriptor number, device and inode, with a
// made-up token: nothing opens, whether that process serves tickets or not.
TEST_F(Tickets, AForgedTicketCannotPointAtAnotherProcesssFile) {
  dlb_buffer* b = alloc_shared_f32({4});  // a description to forge with
  dlb_share_ticket model = ticket_of(b);
  ASSERT_EQ(dlb_share_ticket_withdraw(model.bytes, model.size, nullptr), DLB_OK);
  int to_parent[2];
  int to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t victim = start_child([&] {
    // A memory file of its own (sealed, the model's size), and a ticket of
    // another buffer so that its ticket server runs.
    const int fd = memfd_create("victim", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, 4096) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) return 1;
    static_cast<unsigned char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))[0] = 0x42;
    dlb_buffer* mine = alloc_shared_f32({4});
    dlb_share_ticket own = ticket_of(mine);
    struct stat st;
    fstat(fd, &st);
    const std::uint64_t report[3] = {static_cast<std::uint64_t>(fd), static_cast<std::uint64_t>(st.st_ino),
                                     get_le(own.bytes + kTicketNonce, 8)};
    if (write(to_parent[1], report, sizeof report) != static_cast<ssize_t>(sizeof report)) return 2;
    char done;
    return read(to_child[0], &done, 1) == 1 ? 0 : 3;
  });
  std::uint64_t report[3];
  ASSERT_EQ(read(to_parent[0], report, sizeof report), static_cast<ssize_t>(sizeof report));
  struct stat st;  // the device of memory files
  dlb_share_descriptor d = share_of(b);
  ASSERT_EQ(fstat(d.fd, &st), 0);
  dlb_share_descriptor_close(&d);
  for (const std::uint64_t nonce : {report[2], report[2] ^ 1}) {
    dlb_share_ticket forged = model;
    put_le(forged.bytes + kTicketPid, static_cast<std::uint64_t>(victim), 4);
    put_le(forged.bytes + kTicketFd, report[0], 4);
    put_le(forged.bytes + kTicketDev, static_cast<std::uint64_t>(st.st_dev), 8);
    put_le(forged.bytes + kTicketIno, report[1], 8);
    put_le(forged.bytes + kTicketNonce, nonce, 8);
    reseal(forged.bytes, forged.size);
    dlb_buffer* o = nullptr;
    EXPECT_EQ(dlb_share_ticket_open(forged.bytes, forged.size, 0, &o), DLB_ERR_DELETED) << dlb_last_error_message();
    EXPECT_EQ(o, nullptr);
  }
  EXPECT_EQ(write(to_child[1], "x", 1), 1);
  EXPECT_EQ(wait_child(victim), 0);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) close(fd);
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

TEST_F(Tickets, WithdrawnTicketsOpenNothing) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_ticket t = ticket_of(b);
  std::int64_t n = -1;
  ASSERT_EQ(dlb_share_ticket_withdraw(t.bytes, t.size, &n), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(n, 1);
  EXPECT_EQ(held_now(), 0);
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("withdrew its ticket"));
  EXPECT_EQ(dlb_share_ticket_withdraw(t.bytes, t.size, &n), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("withdrawn already"));
  dlb_share_ticket opened = ticket_of(b);
  ASSERT_EQ(dlb_share_ticket_open(opened.bytes, opened.size, 0, &o), DLB_OK);
  dlb_buffer_release(o);
  EXPECT_EQ(dlb_share_ticket_withdraw(opened.bytes, opened.size, nullptr), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("it was opened"));
  // Every unopened ticket at once.
  for (int i = 0; i < 5; ++i) ticket_of(b);
  EXPECT_EQ(held_now(), 5);
  n = -1;
  EXPECT_EQ(dlb_share_ticket_withdraw(nullptr, 0, &n), DLB_OK);
  EXPECT_EQ(n, 5);
  EXPECT_EQ(held_now(), 0);
  EXPECT_EQ(dlb_share_ticket_withdraw(nullptr, 0, &n), DLB_OK);
  EXPECT_EQ(n, 0);
  // Not this process's ticket; not a ticket.
  dlb_share_ticket other = ticket_of(b);
  put_le(other.bytes + kTicketNonce, get_le(other.bytes + kTicketNonce, 8) + 1, 8);
  reseal(other.bytes, other.size);
  EXPECT_EQ(dlb_share_ticket_withdraw(other.bytes, other.size, &n), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("not issued by this process"));
  EXPECT_EQ(dlb_share_ticket_withdraw(other.bytes, other.size - 1, &n), DLB_ERR_MALFORMED);
  EXPECT_EQ(held_now(), 1);
  EXPECT_EQ(dlb_share_ticket_withdraw(nullptr, 0, nullptr), DLB_OK);
  dlb_buffer_release(b);
}

// Files cannot pile up: past half the descriptor limit in unopened
// tickets, the oldest is withdrawn.
TEST_F(Tickets, TheOldestUnopenedTicketsGoPastTheBound) {
  dlb_buffer* b = alloc_shared_f32({4});
  const int rc = in_child([&] {
    rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = 64;  // bound: 32 unopened tickets
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) return 2;
    const int fds = open_fds();
    std::vector<dlb_share_ticket> tickets;
    for (int i = 0; i < 100; ++i) {
      dlb_share_ticket t;
      if (dlb_share_ticket_issue(b, 0, &t) != DLB_OK) return 3;  // never out of descriptors
      tickets.push_back(t);
    }
    if (held_now() != 32) return 4;
    if (open_fds() > fds + 32 + 1) return 5;  // the tickets' files and the server's socket
    dlb_buffer* o = nullptr;
    // The oldest 68 were withdrawn; the server remembers why for the last 64.
    if (dlb_share_ticket_open(tickets[67].bytes, tickets[67].size, 0, &o) != DLB_ERR_DELETED) return 6;
    if (std::strstr(dlb_last_error_message(), "this was the oldest") == nullptr) return 7;
    if (dlb_share_ticket_open(tickets[99].bytes, tickets[99].size, 0, &o) != DLB_OK) return 8;
    dlb_buffer_release(o);
    return held_now() == 31 ? 0 : 9;
  });
  EXPECT_EQ(rc, 0);
  dlb_buffer_release(b);
}

// An issuer about to exit waits for its receiver (dlb_share_ticket_wait),
// which opens after the issuer has asked to exit; without a receiver the
// wait ends at its bound.
TEST_F(Tickets, AnExitingIssuerWaitsForItsReceiver) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t issuer = start_child([&] {
    dlb_buffer* b = alloc_shared_f32({4});
    data_of(b)[2] = 2.0f;
    dlb_share_ticket t = ticket_of(b);
    dlb_buffer_release(b);  // the ticket keeps the file
    if (write(fds[1], &t, sizeof t) != static_cast<ssize_t>(sizeof t)) return 1;
    return static_cast<int>(dlb_share_ticket_wait(20000));  // 0: opened
  });
  dlb_share_ticket t;
  ASSERT_EQ(read(fds[0], &t, sizeof t), static_cast<ssize_t>(sizeof t));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the issuer is waiting to exit
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(data_of(o)[2], 2.0f);
  EXPECT_EQ(wait_child(issuer), 0);
  dlb_buffer_release(o);
  close(fds[0]);
  close(fds[1]);

  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_ticket unopened = ticket_of(b);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(dlb_share_ticket_wait(100), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_EQ(dlb_share_ticket_wait(0), 1);
  EXPECT_EQ(dlb_share_ticket_withdraw(unopened.bytes, unopened.size, nullptr), DLB_OK);
  EXPECT_EQ(dlb_share_ticket_wait(100000), 0);  // at once
  dlb_buffer_release(b);
}

// Another user's receiver: the server refuses it, and says it is a
// permission refusal; the ticket stays for a receiver that may open it.
TEST_F(Tickets, AnotherUserIsRefusedPermission) {
  if (geteuid() != 0) GTEST_SKIP() << "becoming another user needs root";
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_ticket t = ticket_of(b);
  const int rc = in_child([&] {
    if (setgid(65534) != 0 || setuid(65534) != 0) return 2;
    dlb_buffer* o = nullptr;
    if (dlb_share_ticket_open(t.bytes, t.size, 0, &o) != DLB_ERR_INVALID_ARGUMENT) {
      std::fprintf(stderr, "another user's open: %s\n", dlb_last_error_message());
      return 3;
    }
    if (std::strstr(dlb_last_error_message(), "permission denied") == nullptr) return 4;
    if (std::strstr(dlb_last_error_message(), "belongs to user 0") == nullptr) return 5;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(held_now(), 1);
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_share_ticket_open(t.bytes, t.size, 0, &o), DLB_OK);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

}  // namespace
