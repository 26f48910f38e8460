// The fixture and helpers of the host-memory sharing tests
// (test_share*.cpp): a fixture that checks no file descriptor, shared
// mapping or /proc/self/maps entry is left behind, shorthands for
// allocating, sharing and opening, and forked children.
#ifndef DLBRIDGE_TESTS_SHARE_SHARE_FIXTURE_HPP_
#define DLBRIDGE_TESTS_SHARE_SHARE_FIXTURE_HPP_

#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>
#include <gtest/gtest.h>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "share_testing.hpp"
#include "support.hpp"

namespace sharetest {

using dlbtest::cpu;
using dlbtest::f32;

class Share : public dlbtest::DlbTest {
 protected:
  void SetUp() override {
    DlbTest::SetUp();
    fds_at_start_ = open_fds();
    mappings_at_start_ = dlb_shared_mappings();
    maps_at_start_ = shared_maps();
  }
  void TearDown() override {
    EXPECT_EQ(open_fds(), fds_at_start_) << "a file descriptor was left open";
    EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_) << "a shared mapping was left";
    EXPECT_EQ(shared_maps(), maps_at_start_) << "/proc/self/maps still lists a dlbridge memory file";
    DlbTest::TearDown();
  }
  int fds_at_start_ = 0;
  std::int64_t mappings_at_start_ = 0;
  int maps_at_start_ = 0;
};

inline dlb_buffer* alloc_shared_f32(std::vector<std::int64_t> shape) {
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), static_cast<int32_t>(shape.size()), shape.data(), &b), DLB_OK)
      << dlb_last_error_message();
  return b;
}

inline float* data_of(dlb_buffer* b) {
  DLTensor t;
  EXPECT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  return reinterpret_cast<float*>(static_cast<unsigned char*>(t.data) + t.byte_offset);
}

inline dlb_share_descriptor share_of(dlb_buffer* b, std::uint64_t flags = 0) {
  dlb_share_descriptor d;
  std::memset(&d, 0, sizeof d);
  d.fd = -7;
  EXPECT_EQ(dlb_buffer_share(b, flags, &d), DLB_OK) << dlb_last_error_message();
  return d;
}

inline dlb_buffer* open_of(const dlb_share_descriptor& d, std::uint64_t flags = 0) {
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(d.fd, d.description, d.size, flags, &b), DLB_OK) << dlb_last_error_message();
  return b;
}

// How a forked child ends: _exit, except in a coverage build, where exit
// writes the child's counts too (DLB_TEST_COVERAGE, tests/share/meson.build).
[[noreturn]] inline void end_child(int code) {
#ifdef DLB_TEST_COVERAGE
  std::exit(code);
#else
  _exit(code);
#endif
}

// Runs `child` in a forked process; returns its exit status (or 128 +
// signal).
template <class F>
inline int in_child(F child) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) end_child(child());
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// Starts `child` in a forked process and returns at once; wait_child()
// collects its exit status.
template <class F>
inline pid_t start_child(F child) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) end_child(child());
  return pid;
}
inline int wait_child(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The permissions column of the /proc/self/maps line holding `p`.
inline std::string mapping_perms(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {0};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) == 3 && at >= lo && at < hi) return perms;
  }
  return "";
}

}  // namespace sharetest

#endif  // DLBRIDGE_TESTS_SHARE_SHARE_FIXTURE_HPP_
