// dlb_managed_tensor_alloc, the allocator of dlbridge's DLPack exchange
// table: fresh host tensors exported as dlbridge exports, and every bad
// prototype refused through set_error exactly once, allocating nothing.
// Linked with the library's objects to reach the allocation-failure
// injector (src/core/alloc.hpp).
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/alloc.hpp"

namespace {

namespace inj = dlb::testing;

// What set_error received.
struct ErrorLog {
  int calls = 0;
  std::string kind;
  std::string message;
  bool clear_library_error = false;  // call back into the library first
};

void record_error(void* ctx, const char* kind, const char* message) {
  auto* log = static_cast<ErrorLog*>(ctx);
  // The strings must survive a call into the library made by the callback.
  if (log->clear_library_error) dlb_clear_last_error();
  ++log->calls;
  log->kind = kind;
  log->message = message;
}

DLManagedTensorVersioned* const kUntouched = reinterpret_cast<DLManagedTensorVersioned*>(std::uintptr_t{0x5eed});

DLTensor prototype(std::vector<std::int64_t>& shape, DLDataType dtype = {kDLFloat, 32, 1},
                   DLDevice device = {kDLCPU, 0}) {
  DLTensor t;
  std::memset(&t, 0, sizeof t);
  t.device = device;
  t.dtype = dtype;
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.shape = shape.empty() ? nullptr : shape.data();
  return t;
}

class Alloc : public ::testing::Test {
 protected:
  void SetUp() override { live_ = dlb_live_exports(); }
  void TearDown() override {
    inj::fail_allocation_after(0);
    EXPECT_EQ(dlb_live_exports(), live_);
  }

  // A refused prototype: -1, set_error once with `kind` and `message`,
  // out untouched, nothing exported, the same message as the last error.
  void expect_refused(DLTensor* proto, const char* kind, const std::string& message) {
    ErrorLog log;
    DLManagedTensorVersioned* out = kUntouched;
    EXPECT_EQ(dlb_managed_tensor_alloc(proto, &out, &log, record_error), -1);
    EXPECT_EQ(log.calls, 1);
    EXPECT_EQ(log.kind, kind);
    EXPECT_EQ(log.message, message);
    EXPECT_EQ(out, kUntouched);
    EXPECT_EQ(dlb_live_exports(), live_);
    EXPECT_STREQ(dlb_last_error_message(), message.c_str());
  }

  std::int64_t live_ = 0;
};

TEST_F(Alloc, FreshHostTensorOfThePrototypesDtypeAndShape) {
  std::vector<std::int64_t> shape{2, 3};
  std::int64_t junk_strides[2] = {-7, 99};
  DLTensor proto = prototype(shape, DLDataType{kDLInt, 16, 1});
  // Only dtype, ndim, shape and device count.
  proto.data = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  proto.strides = junk_strides;
  proto.byte_offset = 12;
  ErrorLog log;
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_managed_tensor_alloc(&proto, &m, &log, record_error), 0) << dlb_last_error_message();
  EXPECT_EQ(log.calls, 0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(dlb_live_exports(), live_ + 1);
  EXPECT_EQ(m->version.major, 1u);
  EXPECT_EQ(m->version.minor, static_cast<std::uint32_t>(DLB_DLPACK_MINOR));
  EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  ASSERT_NE(m->deleter, nullptr);
  const DLTensor& t = m->dl_tensor;
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.device.device_id, 0);
  EXPECT_EQ(t.dtype.code, kDLInt);
  EXPECT_EQ(t.dtype.bits, 16);
  EXPECT_EQ(t.dtype.lanes, 1);
  ASSERT_EQ(t.ndim, 2);
  EXPECT_NE(t.shape, shape.data());  // its own copy
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[1], 3);
  ASSERT_NE(t.strides, nullptr);
  EXPECT_EQ(t.strides[0], 3);
  EXPECT_EQ(t.strides[1], 1);
  EXPECT_EQ(t.byte_offset, 0u);
  ASSERT_NE(t.data, nullptr);
  EXPECT_NE(t.data, proto.data);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 64, 0u);
  // Zero-filled and writable.
  auto* p = static_cast<std::int16_t*>(t.data);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p[i], 0) << i;
  for (int i = 0; i < 6; ++i) p[i] = static_cast<std::int16_t>(100 + i);
  EXPECT_EQ(p[5], 105);
  // The prototype's shape may change afterwards.
  shape[1] = 1000;
  EXPECT_EQ(t.shape[1], 3);
  m->deleter(m);
  EXPECT_EQ(dlb_live_exports(), live_);
}

TEST_F(Alloc, ZeroDimensionalEmptyAndEveryKindOfDtype) {
  struct Case {
    std::vector<std::int64_t> shape;
    DLDataType dtype;
    std::int64_t strides_last;
  };
  std::vector<Case> cases = {
      {{}, {kDLFloat, 64, 1}, 0},
      {{0, 4}, {kDLFloat, 32, 1}, 1},
      {{5}, {kDLBool, 8, 1}, 1},
      {{3, 2}, {kDLBfloat, 16, 1}, 1},
      {{2, 2}, {kDLComplex, 128, 1}, 1},
      {{7}, {kDLFloat4_e2m1fn, 4, 1}, 1},
      {{4}, {kDLFloat, 32, 4}, 1},
      {{1, 1, 1}, {kDLUInt, 8, 1}, 1},
  };
  for (auto& c : cases) {
    DLTensor proto = prototype(c.shape, c.dtype);
    DLManagedTensorVersioned* m = nullptr;
    ErrorLog log;
    ASSERT_EQ(dlb_managed_tensor_alloc(&proto, &m, &log, record_error), 0) << dlb_last_error_message();
    EXPECT_EQ(log.calls, 0);
    EXPECT_NE(m->dl_tensor.data, nullptr);  // never NULL, even when empty
    EXPECT_EQ(m->dl_tensor.ndim, proto.ndim);
    EXPECT_EQ(std::memcmp(&m->dl_tensor.dtype, &c.dtype, sizeof c.dtype), 0);
    for (std::size_t i = 0; i < c.shape.size(); ++i) EXPECT_EQ(m->dl_tensor.shape[i], c.shape[i]);
    if (!c.shape.empty()) {
      EXPECT_EQ(m->dl_tensor.strides[c.shape.size() - 1], c.strides_last);
    }
    EXPECT_EQ(dlb_live_exports(), live_ + 1);
    m->deleter(m);
  }
}

TEST_F(Alloc, ImportsBackAsABufferAndTheDeleterMayRunOnAnotherThread) {
  std::vector<std::int64_t> shape{4, 4};
  DLTensor proto = prototype(shape);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_managed_tensor_alloc(&proto, &m, nullptr, nullptr), 0);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(m, nullptr, &b), DLB_OK) << dlb_last_error_message();
  DLTensor v;
  ASSERT_EQ(dlb_buffer_dltensor(b, &v), DLB_OK);
  EXPECT_EQ(v.data, m->dl_tensor.data);
  EXPECT_EQ(dlb_live_exports(), live_ + 1);
  std::thread([b] { dlb_buffer_release(b); }).join();  // runs m's deleter there
  EXPECT_EQ(dlb_live_exports(), live_);
}

TEST_F(Alloc, BadPrototypesAreRefusedWithAPreciseMessage) {
  ErrorLog log;
  DLManagedTensorVersioned* out = kUntouched;
  EXPECT_EQ(dlb_managed_tensor_alloc(nullptr, &out, &log, record_error), -1);
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.kind, "ValueError");
  EXPECT_EQ(log.message, "prototype is NULL");
  EXPECT_EQ(out, kUntouched);

  std::vector<std::int64_t> shape{2, 3};
  DLTensor proto = prototype(shape);
  log = ErrorLog{};
  EXPECT_EQ(dlb_managed_tensor_alloc(&proto, nullptr, &log, record_error), -1);
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.kind, "ValueError");
  EXPECT_EQ(log.message, "out is NULL");

  proto.ndim = -1;
  expect_refused(&proto, "ValueError", "prototype ndim is -1 (must be 0..64)");
  proto.ndim = 65;
  expect_refused(&proto, "ValueError", "prototype ndim is 65 (must be 0..64)");
  proto.ndim = 2;
  proto.shape = nullptr;
  expect_refused(&proto, "ValueError", "prototype shape is NULL with ndim 2");

  std::vector<std::int64_t> negative{2, -3};
  DLTensor neg = prototype(negative);
  expect_refused(&neg, "ValueError", "prototype shape[1] is -3 (extents must be >= 0)");

  std::vector<std::int64_t> huge{INT64_C(1) << 40, INT64_C(1) << 40};
  DLTensor over = prototype(huge);
  expect_refused(&over, "ValueError", "prototype element count of the shape overflows 64 bits");

  DLTensor cuda = prototype(shape, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCUDA, 0});
  expect_refused(&cuda, "ValueError",
                 "prototype device is cuda:0; dlb_managed_tensor_alloc allocates host memory only (cpu:0)");
  DLTensor cpu1 = prototype(shape, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 1});
  expect_refused(&cpu1, "ValueError",
                 "prototype device is cpu:1; dlb_managed_tensor_alloc allocates host memory only (cpu:0)");
}

TEST_F(Alloc, UnknownDtypesAreTypeErrorsNamingTheValue) {
  std::vector<std::int64_t> shape{3};
  const DLDataType bad[] = {{99, 32, 1}, {kDLFloat, 7, 1}, {kDLInt, 32, 0}};
  for (const DLDataType& dt : bad) {
    DLTensor proto = prototype(shape, dt);
    ErrorLog log;
    DLManagedTensorVersioned* out = kUntouched;
    EXPECT_EQ(dlb_managed_tensor_alloc(&proto, &out, &log, record_error), -1);
    EXPECT_EQ(log.calls, 1);
    EXPECT_EQ(log.kind, "TypeError");
    EXPECT_EQ(log.message.rfind("prototype ", 0), 0u) << log.message;
    EXPECT_EQ(out, kUntouched);
    EXPECT_EQ(dlb_last_error_code(), DLB_ERR_UNSUPPORTED_DTYPE);
  }
  DLTensor code99 = prototype(shape, DLDataType{99, 32, 1});
  ErrorLog log;
  DLManagedTensorVersioned* out = kUntouched;
  EXPECT_EQ(dlb_managed_tensor_alloc(&code99, &out, &log, record_error), -1);
  EXPECT_NE(log.message.find("99"), std::string::npos) << log.message;
}

TEST_F(Alloc, UnknownDeviceTypeNamesTheValue) {
  std::vector<std::int64_t> shape{3};
  DLDevice dev;
  const std::int32_t type = 99;
  std::memcpy(&dev.device_type, &type, sizeof type);
  dev.device_id = 0;
  DLTensor proto = prototype(shape, DLDataType{kDLFloat, 32, 1}, dev);
  ErrorLog log;
  DLManagedTensorVersioned* out = kUntouched;
  EXPECT_EQ(dlb_managed_tensor_alloc(&proto, &out, &log, record_error), -1);
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.kind, "ValueError");
  EXPECT_EQ(log.message, "prototype device type 99 is not a DLPack device type");
  EXPECT_EQ(out, kUntouched);
}

TEST_F(Alloc, MoreThanMemoryHoldsIsAMemoryError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan aborts on a 2^58-byte request instead of returning NULL";
#endif
  // 2^56 bytes: within the largest address space there is (2^57), more
  // than any machine allocates.
  std::vector<std::int64_t> shape{INT64_C(1) << 56};
  DLTensor proto = prototype(shape, DLDataType{kDLUInt, 8, 1});
  ErrorLog log;
  DLManagedTensorVersioned* out = kUntouched;
  EXPECT_EQ(dlb_managed_tensor_alloc(&proto, &out, &log, record_error), -1);
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.kind, "MemoryError");
  EXPECT_FALSE(log.message.empty());
  EXPECT_EQ(out, kUntouched);
  EXPECT_EQ(dlb_last_error_code(), DLB_ERR_OUT_OF_MEMORY);
}

TEST_F(Alloc, MoreThanAnyAddressSpaceIsAValueError) {
  // 2^58 bytes: past 2^57, no address space holds it: an overflow (numpy
  // says ValueError for an array too big to address), nothing attempted.
  std::vector<std::int64_t> shape{INT64_C(1) << 58};
  DLTensor proto = prototype(shape, DLDataType{kDLUInt, 8, 1});
  ErrorLog log;
  DLManagedTensorVersioned* out = kUntouched;
  EXPECT_EQ(dlb_managed_tensor_alloc(&proto, &out, &log, record_error), -1);
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.kind, "ValueError");
  EXPECT_NE(log.message.find("2^57"), std::string::npos) << log.message;
  EXPECT_EQ(out, kUntouched);
  EXPECT_EQ(dlb_last_error_code(), DLB_ERR_OVERFLOW);
}

TEST_F(Alloc, TheMessageSurvivesACallbackThatCallsTheLibrary) {
  std::vector<std::int64_t> shape{-1};
  DLTensor proto = prototype(shape);
  ErrorLog log;
  log.clear_library_error = true;
  DLManagedTensorVersioned* out = kUntouched;
  EXPECT_EQ(dlb_managed_tensor_alloc(&proto, &out, &log, record_error), -1);
  EXPECT_EQ(log.message, "prototype shape[0] is -1 (extents must be >= 0)");
}

TEST_F(Alloc, NoSetErrorMeansTheStatusAndLastErrorOnly) {
  std::vector<std::int64_t> shape{-1};
  DLTensor proto = prototype(shape);
  DLManagedTensorVersioned* out = kUntouched;
  EXPECT_EQ(dlb_managed_tensor_alloc(&proto, &out, nullptr, nullptr), -1);
  EXPECT_EQ(out, kUntouched);
  EXPECT_EQ(dlb_last_error_code(), DLB_ERR_MALFORMED);
}

// Every allocation a successful call makes, failed in turn: -1, one
// MemoryError, out untouched, nothing left exported (leaks: ASan, valgrind).
TEST_F(Alloc, EachAllocationFailingInTurnIsAMemoryError) {
  std::vector<std::int64_t> shape{3, 5};
  DLTensor proto = prototype(shape);
  inj::drop_thread_caches();
  inj::fail_allocation_after(-1);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_managed_tensor_alloc(&proto, &m, nullptr, nullptr), 0);
  const std::int64_t count = inj::allocations_attempted();
  inj::fail_allocation_after(0);
  m->deleter(m);
  ASSERT_GE(count, 2);  // the buffer's memory and the export's block at least
  for (std::int64_t n = 1; n <= count + 1; ++n) {
    inj::drop_thread_caches();
    ErrorLog log;
    DLManagedTensorVersioned* out = kUntouched;
    inj::fail_allocation_after(n);
    const int rc = dlb_managed_tensor_alloc(&proto, &out, &log, record_error);
    inj::fail_allocation_after(0);
    if (n <= count) {
      EXPECT_EQ(rc, -1) << "allocation " << n << " of " << count;
      EXPECT_EQ(log.calls, 1) << n;
      EXPECT_EQ(log.kind, "MemoryError") << n;
      EXPECT_FALSE(log.message.empty()) << n;
      EXPECT_EQ(out, kUntouched) << n;
      EXPECT_EQ(dlb_live_exports(), live_) << n;
    } else {
      ASSERT_EQ(rc, 0) << "with " << n << " allowed";
      EXPECT_EQ(log.calls, 0);
      out->deleter(out);
    }
  }
}

TEST_F(Alloc, ConcurrentCallersEachGetTheirOwnTensor) {
  constexpr int kThreads = 4;
  constexpr int kEach = 200;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([i, &failures] {
      std::vector<std::int64_t> shape{i + 1, 3};
      DLTensor proto = prototype(shape);
      for (int k = 0; k < kEach; ++k) {
        DLManagedTensorVersioned* m = nullptr;
        if (dlb_managed_tensor_alloc(&proto, &m, nullptr, nullptr) != 0 || m->dl_tensor.shape[0] != i + 1) {
          ++failures[i];
          continue;
        }
        static_cast<float*>(m->dl_tensor.data)[0] = static_cast<float>(k);
        m->deleter(m);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(failures[i], 0) << i;
}

}  // namespace
