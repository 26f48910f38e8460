// Shared helpers of the core test suites: a counting foreign producer, and a
// fixture that checks every test leaves no export alive.
#ifndef DLBRIDGE_TESTS_SUPPORT_HPP_
#define DLBRIDGE_TESTS_SUPPORT_HPP_

#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace dlbtest {

inline DLDevice cpu() { return DLDevice{kDLCPU, 0}; }
inline DLDataType f32() { return DLDataType{kDLFloat, 32, 1}; }
inline DLDataType f64() { return DLDataType{kDLFloat, 64, 1}; }
inline DLDataType i32() { return DLDataType{kDLInt, 32, 1}; }
inline DLDataType u8() { return DLDataType{kDLUInt, 8, 1}; }

// Export options with the given copy policy and flags, the rest defaults.
inline dlb_export_options opts(std::int32_t copy, std::uint64_t flags = 0) {
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.copy = copy;
  o.flags = flags;
  return o;
}

// A tensor from "another library": owns its data, shape and strides, and
// counts how often its deleter ran.
struct ForeignTensor {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // empty: NULL strides
  std::vector<unsigned char> storage;
  std::atomic<int> deleter_calls{0};
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};

  // A tensor of `dtype` over `storage_bytes` bytes of storage (filled with
  // 0, 1, 2, ... as bytes), with the given layout.
  ForeignTensor(DLDataType dtype, std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_,
                std::size_t storage_bytes, std::uint64_t byte_offset = 0, std::uint64_t flags = 0);
  ForeignTensor(const ForeignTensor&) = delete;
  ForeignTensor& operator=(const ForeignTensor&) = delete;

  DLTensor& tensor() { return versioned.dl_tensor; }
  DLManagedTensorVersioned* as_versioned() { return &versioned; }
  DLManagedTensor* as_legacy();
  void* data() { return storage.data(); }
};

// Every test derives from this: it checks that dlb_live_exports() comes back
// to where it started and clears the thread's last error.
class DlbTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::int64_t live_at_start_ = 0;
};

// The last error's message, for EXPECT_THAT-free substring checks.
std::string last_message();
::testing::AssertionResult MessageContains(const char* needle);

// Environment knob for long loops (valgrind runs set it lower).
long iterations(long fallback);

// Counter for release callbacks.
struct ReleaseCounter {
  std::atomic<int> calls{0};
  static void release(void* ctx) { static_cast<ReleaseCounter*>(ctx)->calls.fetch_add(1); }
};

}  // namespace dlbtest

#endif
