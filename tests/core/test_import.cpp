// The importer: ownership on success and failure, validation, accepted
// corner cases, re-export chains, options, threads.
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

class Import : public DlbTest {};

TEST_F(Import, VersionedImportOwnsTheTensorAndRunsItsDeleterOnceAtTheEnd) {
  ForeignTensor f(f32(), {2, 3}, {3, 1}, 24);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_IMPORTED);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  EXPECT_EQ(t.data, f.data());
  DLManagedTensorVersioned* re = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &re), DLB_OK);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 0);  // the re-export still uses it
  re->deleter(re);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Import, RoundTripKeepsPointerShapeStridesAndReadOnlyAndFoldsTheOffset) {
  // A sliced, transposed float64 view with a byte offset, read-only and
  // marked as a copy by its producer. The re-export points at the same
  // element 0 with the offset folded into data (consumers such as torch
  // ignore byte_offset), and carries no IS_COPIED: it shares the memory.
  ForeignTensor f(f64(), {3, 2}, {1, 4}, 200, 16,
                  DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_IMPORTED | DLB_BUFFER_READ_ONLY | DLB_BUFFER_COPIED);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, static_cast<unsigned char*>(f.data()) + 16);
  EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(m->dl_tensor.shape[0], 3);
  EXPECT_EQ(m->dl_tensor.shape[1], 2);
  EXPECT_EQ(m->dl_tensor.strides[0], 1);
  EXPECT_EQ(m->dl_tensor.strides[1], 4);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  // And once more through an import of our own export.
  dlb_buffer* b2 = nullptr;
  ASSERT_EQ(dlb_import_versioned(m, nullptr, &b2), DLB_OK);
  DLManagedTensorVersioned* m2 = nullptr;
  ASSERT_EQ(dlb_export_versioned(b2, nullptr, &m2), DLB_OK);
  EXPECT_EQ(m2->dl_tensor.data, static_cast<unsigned char*>(f.data()) + 16);
  EXPECT_EQ(m2->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(m2->dl_tensor.strides[1], 4);
  EXPECT_EQ(m2->flags, m->flags);
  dlb_buffer_release(b);
  dlb_buffer_release(b2);
  EXPECT_EQ(f.deleter_calls.load(), 0);
  m2->deleter(m2);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Import, ByteOffsetIsHonouredWhenReadingValues) {
  std::vector<int32_t> values(10);
  for (int i = 0; i < 10; ++i) values[static_cast<std::size_t>(i)] = 100 + i;
  ForeignTensor f(i32(), {4}, {}, 40, 3 * sizeof(int32_t));
  std::memcpy(f.data(), values.data(), 40);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), DLB_OK);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(h, &t), DLB_OK);
  const int32_t* got = static_cast<const int32_t*>(t.data);
  EXPECT_EQ(got[0], 103);
  EXPECT_EQ(got[3], 106);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Import, NullStridesBecomeCompactRowMajor) {
  ForeignTensor f(u8(), {2, 3, 4}, {}, 24);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_legacy(f.as_legacy(), nullptr, &b), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  ASSERT_NE(t.strides, nullptr);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}

TEST_F(Import, AcceptedCornerCases) {
  struct Case {
    const char* name;
    std::function<ForeignTensor*()> make;
  };
  const Case cases[] = {
      {"negative strides", [] { return new ForeignTensor(f32(), {3, 2}, {-2, -1}, 64, 5 * sizeof(float)); }},
      {"arbitrary strides on size-1 dims", [] { return new ForeignTensor(f32(), {1, 4, 1}, {-1000, 1, 12345}, 64); }},
      {"zero-size with NULL data and odd strides", [] { return new ForeignTensor(f32(), {0, 5}, {-7, 99}, 0); }},
      {"0-d with NULL shape", [] { return new ForeignTensor(f64(), {}, {}, 8); }},
      {"broadcast stride 0", [] { return new ForeignTensor(f32(), {1000, 3}, {0, 1}, 12); }},
      {"unaligned data", [] { return new ForeignTensor(f32(), {2}, {1}, 16, 1); }},
      {"float4 packed pair", [] { return new ForeignTensor(DLDataType{17, 4, 2}, {3}, {1}, 3); }},
      {"float4 single lane", [] { return new ForeignTensor(DLDataType{17, 4, 1}, {5}, {}, 3); }},
      {"bool", [] { return new ForeignTensor(DLDataType{kDLBool, 8, 1}, {5}, {}, 5); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ForeignTensor* f = c.make();
    dlb_buffer* b = nullptr;
    ASSERT_EQ(dlb_validate(&f->tensor(), 0), DLB_OK) << dlb_last_error_message();
    ASSERT_EQ(dlb_import_versioned(f->as_versioned(), nullptr, &b), DLB_OK) << dlb_last_error_message();
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
    if (f->tensor().data != nullptr) {
      EXPECT_EQ(m->dl_tensor.data, static_cast<unsigned char*>(f->tensor().data) + f->tensor().byte_offset);
    }
    EXPECT_NE(m->dl_tensor.data, nullptr);
    EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
    for (int i = 0; i < f->tensor().ndim && !f->strides.empty(); ++i)
      EXPECT_EQ(m->dl_tensor.strides[i], f->strides[static_cast<std::size_t>(i)]);
    m->deleter(m);
    dlb_buffer_release(b);
    EXPECT_EQ(f->deleter_calls.load(), 1);
    delete f;
  }
}

TEST_F(Import, UnknownMajorVersionIsRefusedAndOnlyThePrefixIsTouched) {
  // A "version 2" struct: everything after flags is garbage we must not read.
  struct Future {
    DLManagedTensorVersioned prefix;
  } fut;
  std::memset(&fut, 0xAB, sizeof fut);
  static int calls = 0;
  calls = 0;
  fut.prefix.version = DLPackVersion{2, 0};
  fut.prefix.manager_ctx = nullptr;
  fut.prefix.deleter = [](DLManagedTensorVersioned*) { ++calls; };
  fut.prefix.flags = 0;
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_import_versioned(&fut.prefix, nullptr, &b), DLB_ERR_VERSION);
  EXPECT_TRUE(MessageContains("major version 2"));
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(calls, 0);  // still the caller's
  dlb_managed_free_versioned(&fut.prefix);
  EXPECT_EQ(calls, 1);
  fut.prefix.version = DLPackVersion{0, 9};
  EXPECT_EQ(dlb_import_versioned(&fut.prefix, nullptr, &b), DLB_ERR_VERSION);
}

TEST_F(Import, MalformedTensorsAreRefusedAndStayTheCallers) {
  struct Case {
    const char* name;
    std::function<void(DLTensor&)> spoil;
    dlb_status expected;
    const char* message;
  };
  static int64_t neg[2] = {3, -2};
  static int64_t huge[2] = {INT64_MAX, 4};
  static int64_t over[2] = {INT64_MAX / 2, 2};
  const Case cases[] = {
      {"ndim -3", [](DLTensor& t) { t.ndim = -3; }, DLB_ERR_INVALID_ARGUMENT, "ndim is -3"},
      {"ndim 65", [](DLTensor& t) { t.ndim = 65; }, DLB_ERR_INVALID_ARGUMENT, "ndim is 65"},
      {"NULL shape", [](DLTensor& t) { t.shape = nullptr; }, DLB_ERR_MALFORMED, "shape is NULL"},
      {"negative extent", [](DLTensor& t) { t.shape = neg; }, DLB_ERR_MALFORMED, "shape[1] is -2"},
      {"unknown type code", [](DLTensor& t) { t.dtype = DLDataType{200, 8, 1}; }, DLB_ERR_UNSUPPORTED_DTYPE, "code 200"},
      {"illegal bits", [](DLTensor& t) { t.dtype = DLDataType{kDLFloat, 12, 1}; }, DLB_ERR_UNSUPPORTED_DTYPE, "bits 12"},
      {"zero lanes", [](DLTensor& t) { t.dtype.lanes = 0; }, DLB_ERR_UNSUPPORTED_DTYPE, "lanes"},
      {"unknown device", [](DLTensor& t) { t.device.device_type = static_cast<DLDeviceType>(42); },
       DLB_ERR_UNSUPPORTED_DEVICE, "device type 42"},
      {"NULL data", [](DLTensor& t) { t.data = nullptr; }, DLB_ERR_MALFORMED, "data is NULL"},
      {"element count overflow", [](DLTensor& t) { t.shape = huge; t.strides = nullptr; }, DLB_ERR_OVERFLOW, "element count"},
      {"byte size overflow", [](DLTensor& t) { t.shape = over; t.strides = nullptr; }, DLB_ERR_OVERFLOW, "overflows"},
      {"stride overflow", [](DLTensor& t) { t.strides[0] = INT64_MAX / 2; }, DLB_ERR_OVERFLOW, "overflows 64 bits"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ForeignTensor f(f32(), {3, 2}, {2, 1}, 24);
    c.spoil(f.tensor());
    dlb_clear_last_error();
    EXPECT_EQ(dlb_validate(&f.tensor(), 0), c.expected);
    EXPECT_TRUE(MessageContains(c.message));
    dlb_buffer* b = nullptr;
    EXPECT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), c.expected);
    EXPECT_TRUE(MessageContains(c.message));
    EXPECT_EQ(dlb_import_legacy(f.as_legacy(), nullptr, &b), c.expected);
    EXPECT_EQ(b, nullptr);
    EXPECT_EQ(f.deleter_calls.load(), 0);
    dlb_managed_free_versioned(f.as_versioned());
    EXPECT_EQ(f.deleter_calls.load(), 1);
  }
}

TEST_F(Import, OptionsAlignmentContiguityWritability) {
  dlb_import_options o;
  dlb_import_options_init(&o);
  dlb_buffer* b = nullptr;
  {
    ForeignTensor f(f32(), {4}, {1}, 64, 4);  // storage is 16-aligned at least; +4 breaks 8
    o.require_alignment = 8;
    EXPECT_EQ(dlb_import_versioned(f.as_versioned(), &o, &b), DLB_ERR_ALIGNMENT);
    EXPECT_TRUE(MessageContains("not aligned to 8"));
    o.require_alignment = 4;
    ASSERT_EQ(dlb_import_versioned(f.as_versioned(), &o, &b), DLB_OK);
    dlb_buffer_release(b);
    EXPECT_EQ(f.deleter_calls.load(), 1);
    o.require_alignment = 3;
    EXPECT_EQ(dlb_import_versioned(f.as_versioned(), &o, &b), DLB_ERR_INVALID_ARGUMENT);
    o.require_alignment = 0;
  }
  {
    ForeignTensor f(f32(), {3, 2}, {1, 3}, 24);  // transposed
    o.require_contiguous = 1;
    EXPECT_EQ(dlb_import_versioned(f.as_versioned(), &o, &b), DLB_ERR_UNSUPPORTED_LAYOUT);
    EXPECT_TRUE(MessageContains("require_contiguous"));
    EXPECT_EQ(dlb_validate(&f.tensor(), DLB_VALIDATE_CONTIGUOUS), DLB_ERR_UNSUPPORTED_LAYOUT);
    EXPECT_EQ(f.deleter_calls.load(), 0);
    o.require_contiguous = 0;
  }
  {
    ForeignTensor f(f32(), {3, 1}, {1, 77}, 12, 0, DLPACK_FLAG_BITMASK_READ_ONLY);  // contiguous: size-1 stride ignored
    o.require_contiguous = 1;
    o.require_writable = 1;
    EXPECT_EQ(dlb_import_versioned(f.as_versioned(), &o, &b), DLB_ERR_READ_ONLY);
    EXPECT_TRUE(MessageContains("READ_ONLY"));
    // A legacy tensor has no flag: writable unless the caller says otherwise.
    ASSERT_EQ(dlb_import_legacy(f.as_legacy(), &o, &b), DLB_OK);
    EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_READ_ONLY, 0u);
    dlb_buffer_release(b);
    o.require_writable = 0;
    o.flags = DLB_IMPORT_LEGACY_READ_ONLY;
    ASSERT_EQ(dlb_import_legacy(f.as_legacy(), &o, &b), DLB_OK);
    EXPECT_NE(dlb_buffer_flags(b) & DLB_BUFFER_READ_ONLY, 0u);
    // Read-only now: its legacy export, which cannot say so, is a copy,
    // refused when copying is not allowed.
    DLManagedTensor* l = nullptr;
    const dlb_export_options never = opts(DLB_COPY_NEVER);
    EXPECT_EQ(dlb_export_legacy(b, &never, &l), DLB_ERR_READ_ONLY);
    ASSERT_EQ(dlb_export_legacy(b, nullptr, &l), DLB_OK);
    EXPECT_NE(l->dl_tensor.data, f.data());
    l->deleter(l);
    dlb_buffer_release(b);
    EXPECT_EQ(f.deleter_calls.load(), 2);
  }
}

TEST_F(Import, ValidateStridesRequiredFlag) {
  ForeignTensor f(f32(), {2, 2}, {}, 16);
  EXPECT_EQ(dlb_validate(&f.tensor(), 0), DLB_OK);
  EXPECT_EQ(dlb_validate(&f.tensor(), DLB_VALIDATE_STRIDES_REQUIRED), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("strides is NULL"));
  EXPECT_EQ(dlb_validate(&f.tensor(), 1u << 7), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_validate(nullptr, 0), DLB_ERR_INVALID_ARGUMENT);
  dlb_managed_free_versioned(f.as_versioned());
}

TEST_F(Import, NullArgumentsLeaveOwnershipWithTheCaller) {
  ForeignTensor f(f32(), {2}, {}, 8);
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_import_versioned(nullptr, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_import_legacy(f.as_legacy(), nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  dlb_import_options o;
  dlb_import_options_init(&o);
  o.struct_size = 1;
  EXPECT_EQ(dlb_import_versioned(f.as_versioned(), &o, &b), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(f.deleter_calls.load(), 0);
  dlb_managed_free_versioned(f.as_versioned());
}

TEST_F(Import, ConcurrentImportsAndReleases) {
  const int per_thread = static_cast<int>(iterations(2000) / 4 + 1);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        ForeignTensor f(f32(), {4, 4}, {}, 64);
        dlb_buffer* b = nullptr;
        if (dlb_import_versioned(f.as_versioned(), nullptr, &b) != DLB_OK) ++failures;
        DLManagedTensor* m = nullptr;
        if (dlb_export_legacy(b, nullptr, &m) != DLB_OK) ++failures;
        dlb_buffer_release(b);
        std::thread([m] { m->deleter(m); }).join();
        if (f.deleter_calls.load() != 1) ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(Import, EmptyTensorWithAHugeByteOffsetIsCopiedWithoutPointerArithmetic) {
  // Found by fuzz_import_*: the offset of an empty tensor is never checked
  // (nothing is read), so it must never be added to the data pointer.
  ForeignTensor f(f32(), {0, 3}, {3, 1}, 16, UINT64_MAX - 7);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(f.as_versioned(), nullptr, &b), DLB_OK);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  dlb_export_options o;
  dlb_export_options_init(&o);
  o.copy = DLB_COPY_ALWAYS;
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, &o, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
  m->deleter(m);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  EXPECT_EQ(f.deleter_calls.load(), 1);
}
