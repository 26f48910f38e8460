#include "support.hpp"

#include <cstdlib>
#include <cstring>

namespace dlbtest {
namespace {

void versioned_deleter(DLManagedTensorVersioned* m) {
  static_cast<ForeignTensor*>(m->manager_ctx)->deleter_calls.fetch_add(1);
}
void legacy_deleter(DLManagedTensor* m) { static_cast<ForeignTensor*>(m->manager_ctx)->deleter_calls.fetch_add(1); }

}  // namespace

ForeignTensor::ForeignTensor(DLDataType dtype, std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_,
                             std::size_t storage_bytes, std::uint64_t byte_offset, std::uint64_t flags)
    : shape(std::move(shape_)), strides(std::move(strides_)), storage(storage_bytes) {
  for (std::size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<unsigned char>(i);
  versioned.version = DLPackVersion{1, 3};
  versioned.manager_ctx = this;
  versioned.deleter = versioned_deleter;
  versioned.flags = flags;
  DLTensor& t = versioned.dl_tensor;
  t.data = storage.empty() ? nullptr : storage.data();
  t.device = cpu();
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.empty() ? nullptr : shape.data();
  t.strides = strides.empty() ? nullptr : strides.data();
  t.byte_offset = byte_offset;
}

DLManagedTensor* ForeignTensor::as_legacy() {
  legacy.dl_tensor = versioned.dl_tensor;
  legacy.manager_ctx = this;
  legacy.deleter = legacy_deleter;
  return &legacy;
}

void DlbTest::SetUp() {
  dlb_clear_last_error();
  live_at_start_ = dlb_live_exports();
}

void DlbTest::TearDown() { EXPECT_EQ(dlb_live_exports(), live_at_start_) << "an export was not released"; }

std::string last_message() { return dlb_last_error_message(); }

::testing::AssertionResult MessageContains(const char* needle) {
  const std::string msg = dlb_last_error_message();
  if (msg.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "last error message \"" << msg << "\" does not contain \"" << needle << "\"";
}

long iterations(long fallback) {
  const char* env = std::getenv("DLB_TEST_ITERATIONS");
  if (env == nullptr || *env == '\0') return fallback;
  const long n = std::strtol(env, nullptr, 10);
  return n > 0 ? n : fallback;
}

}  // namespace dlbtest
