// What the environment sets for the copy engine, read once per process:
// DLB_COPY_ISA caps the instruction-set level (scalar, sse2, avx2; other
// values are ignored) and DLB_COPY_THREADS the copy threads (a number 0..64,
// larger ones capped at 64; anything else means 0, one per core). meson
// runs this program once per setting, with DLB_TEST_WANT_ISA (the highest
// level the cap allows, or "best": the CPU's own) and DLB_TEST_WANT_THREADS
// (the threads expected, or "cores").
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "copy/copy_engine.hpp"

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

TEST(CopyEnvironment, TheCapOnTheInstructionSet) {
  const std::string want = env("DLB_TEST_WANT_ISA");
  if (want.empty()) GTEST_SKIP() << "run by meson with DLB_TEST_WANT_ISA";
  const int level = dlb::testing::set_copy_isa(-1);  // the level the process started with
#if defined(__x86_64__)
  const int cpu_best = __builtin_cpu_supports("avx2") ? dlb::kCopyIsaAvx2 : dlb::kCopyIsaSse2;
#else
  const int cpu_best = dlb::kCopyIsaScalar;
#endif
  const int expected = want == "best" ? cpu_best : std::min(cpu_best, std::atoi(want.c_str()));
  EXPECT_EQ(level, expected) << "DLB_COPY_ISA=" << env("DLB_COPY_ISA");
  // A copy at that level is still right.
  std::int32_t src[12];
  for (int i = 0; i < 12; ++i) src[i] = i;
  std::int64_t shape[2] = {4, 3};
  std::int64_t strides[2] = {1, 4};
  DLTensor t{};
  t.data = src;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 2;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  t.strides = strides;
  std::int32_t dst[12];
  ASSERT_EQ(dlb_copy_to_contiguous(&t, dst, sizeof dst), DLB_OK);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(dst[i * 3 + j], i + 4 * j);
}

TEST(CopyEnvironment, TheCopyThreads) {
  const std::string want = env("DLB_TEST_WANT_THREADS");
  if (want.empty()) GTEST_SKIP() << "run by meson with DLB_TEST_WANT_THREADS";
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const int expected = want == "cores" ? static_cast<int>(cores < 64 ? cores : 64) : std::atoi(want.c_str());
  EXPECT_EQ(dlb_copy_threads(), expected) << "DLB_COPY_THREADS=" << env("DLB_COPY_THREADS");
}

}  // namespace
