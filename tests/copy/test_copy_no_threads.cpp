// A copy that would be split among copy threads when no thread can be
// started (the address space is capped below one thread stack): the copy
// is made on the caller's thread, still right. In a forked child, so the
// cap stays there.
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "copy/copy_engine.hpp"

// A coverage build's counters are written at exit(); a child that leaves
// with _exit() writes them first (meson defines DLB_TEST_GCOV_DUMP in
// builds with -Db_coverage=true, whose libgcov has the call).
#if defined(DLB_TEST_GCOV_DUMP)
extern "C" void __gcov_dump(void);
#endif

namespace {

[[noreturn]] void child_exit(int code) {
#if defined(DLB_TEST_GCOV_DUMP)
  __gcov_dump();
#endif
  _exit(code);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
// valgrind preloads its own library into the process it runs.
const bool kSanitized =
    std::getenv("LD_PRELOAD") != nullptr && std::strstr(std::getenv("LD_PRELOAD"), "vgpreload") != nullptr;
#endif

TEST(CopyWithoutThreads, ASplitCopyRunsOnTheCallerWhenNoThreadStarts) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's or valgrind's own memory needs more address space than the cap leaves";
  const int rows = 64, cols = 48;
  std::vector<std::int32_t> src(rows * cols), dst(rows * cols, -1);
  for (int i = 0; i < rows * cols; ++i) src[i] = i;
  std::int64_t shape[2] = {cols, rows};
  std::int64_t strides[2] = {1, cols};  // transposed
  DLTensor t{};
  t.data = src.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 2;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  t.strides = strides;
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dlb::testing::set_copy_thresholds(1, 1);  // split even this small copy
    if (dlb_set_copy_threads(4) != DLB_OK) child_exit(1);
    long pages = 0, resident = 0;
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr || std::fscanf(f, "%ld %ld", &pages, &resident) != 2) child_exit(2);
    std::fclose(f);
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{2} << 20);
    const rlimit lim{cap, cap};
    if (setrlimit(RLIMIT_AS, &lim) != 0) child_exit(3);
    if (dlb_copy_to_contiguous(&t, dst.data(), dst.size() * sizeof dst[0]) != DLB_OK) child_exit(4);
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < rows; ++i)
        if (dst[j * rows + i] != src[i * cols + j]) child_exit(5);
    child_exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child failed at step " << WEXITSTATUS(status);
}

}  // namespace
