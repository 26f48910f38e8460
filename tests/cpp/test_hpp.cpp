// The C++ layer (include/dlbridge/dlbridge.hpp): owners, their lifetimes,
// both error forms, and views. Built twice, as C++17 and as C++20 (the
// std::span tests), under -Wall -Wextra -Werror.
#include <dlbridge/dlbridge.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace {

const DLDataType f32 = dlbridge::dtype_of<float>();
const DLDataType f64 = dlbridge::dtype_of<double>();

class Hpp : public ::testing::Test {
 protected:
  void SetUp() override { live_ = dlbridge::live_exports(); }
  void TearDown() override { EXPECT_EQ(dlbridge::live_exports(), live_); }
  int64_t live_ = 0;
};

// A managed tensor of our own whose deleter counts its calls, as a foreign
// producer's would.
std::atomic<int> foreign_deletes{0};
struct Foreign {
  DLManagedTensorVersioned m{};
  int64_t shape[1] = {3};
  double data[3] = {1.5, 2.5, 3.5};
};
DLManagedTensorVersioned* make_foreign() {
  auto* f = new Foreign;
  f->m.version = {1, 0};
  f->m.manager_ctx = f;
  f->m.deleter = [](DLManagedTensorVersioned* self) {
    foreign_deletes++;
    delete static_cast<Foreign*>(self->manager_ctx);
  };
  f->m.dl_tensor.data = f->data;
  f->m.dl_tensor.device = {kDLCPU, 0};
  f->m.dl_tensor.ndim = 1;
  f->m.dl_tensor.dtype = f64;
  f->m.dl_tensor.shape = f->shape;
  return &f->m;
}

TEST_F(Hpp, DtypesAreTheLibrarys) {
  EXPECT_EQ(dlbridge::dtype("float32").bits, 32);
  EXPECT_EQ(dlbridge::dtype_name(dlbridge::dtype_of<int16_t>()), "int16");
  EXPECT_EQ(dlbridge::dtype_name(dlbridge::dtype_of<bool>()), "bool");
  EXPECT_EQ(dlbridge::dtype_name(dlbridge::dtype_of<uint64_t>()), "uint64");
  auto r = dlbridge::try_dtype("float33");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_STREQ(r.status().name(), "DLB_ERR_UNSUPPORTED_DTYPE");
  EXPECT_NE(r.status().message().find("float33"), std::string::npos) << r.status().message();
}

TEST_F(Hpp, AllocExportAndTheDeleterInTheDestructor) {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(f32, {2, 3});
  float* x = b.data<float>();
  for (int i = 0; i < 6; ++i) x[i] = static_cast<float>(i);
  EXPECT_EQ(b.numel(), 6u);
  EXPECT_EQ(b.nbytes(), 24u);
  {
    dlbridge::ManagedTensor t = b.export_versioned();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->dl_tensor.data, static_cast<void*>(x));  // zero-copy
    EXPECT_EQ(t.dl_tensor()->shape[1], 3);
    EXPECT_EQ(dlbridge::live_exports(), live_ + 1);
    EXPECT_EQ(b.refcount(), 2);
  }
  EXPECT_EQ(dlbridge::live_exports(), live_);
  EXPECT_EQ(b.refcount(), 1);
}

TEST_F(Hpp, ReleaseHandsTheTensorToACConsumer) {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(f64, {4});
  dlbridge::LegacyManagedTensor t = b.export_legacy();
  DLManagedTensor* raw = t.release();
  EXPECT_FALSE(t);
  EXPECT_EQ(dlbridge::live_exports(), live_ + 1);
  raw->deleter(raw);  // what the consumer does, once
  EXPECT_EQ(dlbridge::live_exports(), live_);
}

TEST_F(Hpp, ImportRoundTripIsZeroCopyAndEmptiesTheOwner) {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(f32, {5});
  dlbridge::ManagedTensor t = b.export_versioned();
  void* data = t->dl_tensor.data;
  dlbridge::Buffer back = dlbridge::Buffer::import(std::move(t));
  EXPECT_FALSE(t);  // NOLINT(bugprone-use-after-move): import empties it
  EXPECT_EQ(back.dltensor().data, data);
  EXPECT_EQ(back.data<const float>(), b.data<float>());
  EXPECT_TRUE(back.flags() & DLB_BUFFER_IMPORTED);
  // Imported twice: the owner is empty, the library refuses NULL.
  auto again = dlbridge::Buffer::try_import(std::move(t));
  EXPECT_EQ(again.status().code(), DLB_ERR_INVALID_ARGUMENT);
  back = dlbridge::Buffer();
  EXPECT_EQ(dlbridge::live_exports(), live_);
}

TEST_F(Hpp, ForeignDeleterRunsOnceWhenTheLastOwnerGoes) {
  foreign_deletes = 0;
  dlbridge::ManagedTensor t(make_foreign());
  dlbridge::Buffer b = dlbridge::Buffer::import(std::move(t));
  dlbridge::Buffer c = b.retain();
  EXPECT_EQ(b.refcount(), 2);
  EXPECT_DOUBLE_EQ(c.data<double>()[2], 3.5);
  b.reset();
  EXPECT_EQ(foreign_deletes, 0);
  c = dlbridge::Buffer();
  EXPECT_EQ(foreign_deletes, 1);
}

TEST_F(Hpp, FailedImportLeavesTheTensorWithItsOwner) {
  foreign_deletes = 0;
  {
    dlbridge::ManagedTensor t(make_foreign());
    t->dl_tensor.shape[0] = -3;
    auto r = dlbridge::Buffer::try_import(std::move(t));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), DLB_ERR_MALFORMED);
    EXPECT_NE(r.status().message().find("-3"), std::string::npos) << r.status().message();
    EXPECT_TRUE(t);  // NOLINT(bugprone-use-after-move): still ours
    EXPECT_EQ(foreign_deletes, 0);
  }
  EXPECT_EQ(foreign_deletes, 1);  // the destructor gave it back once
  // The throwing form, same refusal, same ownership.
  dlbridge::ManagedTensor t(make_foreign());
  dlbridge::ImportOptions opt;
  opt.alignment(1 << 20);
  try {
    (void)dlbridge::Buffer::import(std::move(t), &opt);
    FAIL() << "import of a misaligned tensor succeeded";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), DLB_ERR_ALIGNMENT);
    EXPECT_STREQ(e.name(), "DLB_ERR_ALIGNMENT");
    EXPECT_EQ(std::string(e.what()).rfind("DLB_ERR_ALIGNMENT: ", 0), 0u) << e.what();
  }
  EXPECT_TRUE(t);  // NOLINT(bugprone-use-after-move)
  t.reset();
  EXPECT_EQ(foreign_deletes, 2);
}

TEST_F(Hpp, ErrorsAsExceptionsAndAsValues) {
  try {
    (void)dlbridge::Buffer::alloc(f32, {2, -3});
    FAIL() << "a negative extent was accepted";
  } catch (const dlbridge::Error& e) {
    EXPECT_EQ(e.code(), DLB_ERR_MALFORMED);
    EXPECT_NE(e.message().find("-3"), std::string::npos) << e.message();
  }
  auto r = dlbridge::Buffer::try_alloc(f32, {2, -3});
  EXPECT_FALSE(r);
  EXPECT_EQ(r.status().code(), DLB_ERR_MALFORMED);
  EXPECT_THROW((void)r.value(), dlbridge::Error);
  EXPECT_EQ(dlbridge::Buffer::try_alloc(DLDataType{kDLFloat, 13, 1}, {1}).status().code(), DLB_ERR_UNSUPPORTED_DTYPE);
}

TEST_F(Hpp, DeletedAndReleasedBuffersAreRefused) {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(f32, {3});
  dlbridge::ManagedTensor before = b.export_versioned();
  b.mark_deleted();
  EXPECT_TRUE(b.flags() & DLB_BUFFER_DELETED);
  auto r = b.try_export_versioned();
  EXPECT_EQ(r.status().code(), DLB_ERR_DELETED);
  EXPECT_EQ(b.try_data<float>().status().code(), DLB_ERR_DELETED);
  EXPECT_TRUE(before);  // exports made before stay valid
  before.reset();
  // Released (here: moved from): the library is handed NULL and says so.
  dlbridge::Buffer c = std::move(b);
  EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move)
  auto e = b.try_export_legacy();  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(e.status().code(), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(e.status().message().find("NULL"), std::string::npos) << e.status().message();
  EXPECT_EQ(b.try_mark_deleted().code(), DLB_ERR_INVALID_ARGUMENT);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.refcount(), 0);  // NOLINT(bugprone-use-after-move)
}

TEST_F(Hpp, ViewsCheckDtypeLayoutAndWritability) {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(f32, {2, 2});
  EXPECT_EQ(b.try_data<double>().status().code(), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_NE(b.try_data<double>().status().message().find("float32"), std::string::npos);
  // A transposed view over our own memory: not compact.
  float mem[4] = {0, 1, 2, 3};
  int64_t shape[2] = {2, 2}, strides[2] = {1, 2};
  DLTensor v{};
  v.data = mem;
  v.device = {kDLCPU, 0};
  v.ndim = 2;
  v.dtype = f32;
  v.shape = shape;
  v.strides = strides;
  dlbridge::Buffer t = dlbridge::Buffer::wrap(v);
  EXPECT_EQ(t.try_data<float>().status().code(), DLB_ERR_UNSUPPORTED_LAYOUT);
  dlbridge::Buffer host = t.to_host();
  EXPECT_EQ(host.data<float>()[1], 2.0f);
  // Read-only: only const access.
  v.strides = nullptr;
  dlbridge::Buffer ro = dlbridge::Buffer::wrap(v, DLB_BUFFER_READ_ONLY);
  EXPECT_EQ(ro.try_data<float>().status().code(), DLB_ERR_READ_ONLY);
  EXPECT_EQ(ro.data<const float>(), mem);
  EXPECT_TRUE(ro.read_only());
}

// A copy-only backend (copy_to_host, no zero-copy access) over host memory.
int32_t copy_only_copy(void*, void* storage, void* dst, uint64_t size) {
  std::memcpy(dst, storage, size);
  return 0;
}

TEST_F(Hpp, TryViewsOfCopyOnlyBackendsAreRefusedNotNull) {
  dlb_backend_vtable vt{};
  vt.struct_size = sizeof vt;
  vt.name = "copy-only";
  vt.copy_to_host = copy_only_copy;
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_OK);
  float mem[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  DLTensor layout{};
  layout.device = {kDLCPU, 0};
  layout.ndim = 1;
  layout.dtype = f32;
  layout.shape = shape;
  dlb_buffer* raw = nullptr;
  ASSERT_EQ(dlb_buffer_from_backend(be, mem, &layout, 0, &raw), DLB_OK);
  dlb_backend_release(be);
  dlbridge::Buffer b = dlbridge::Buffer::adopt(raw);
  auto r = b.try_data<float>();
  EXPECT_FALSE(r.ok());  // before: ok() with a NULL pointer
  EXPECT_EQ(r.status().code(), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_NE(r.status().message().find("dlb_buffer_to_host"), std::string::npos) << r.status().message();
  EXPECT_EQ(b.try_data<const float>().status().code(), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_EQ(b.to_host().data<float>()[2], 3.0f);
}

TEST_F(Hpp, LongDoubleIsNoElementType) {
  // dtype_of<long double> named float128, which the library refuses, and
  // try_data<long double>() threw; now it does not compile at all.
  static_assert(!dlbridge::is_element_v<long double>);
  static_assert(dlbridge::is_element_v<const double> && dlbridge::is_element_v<bool>);
  // A dtype the library cannot name is shown by its fields, never thrown.
  int64_t shape[1] = {1};
  alignas(16) unsigned char mem[16] = {};
  DLTensor v{};
  v.data = mem;
  v.device = {kDLCPU, 0};
  v.ndim = 1;
  v.dtype = DLDataType{kDLFloat, 16, 1};
  v.shape = shape;
  dlbridge::Buffer b = dlbridge::Buffer::wrap(v);
  auto r = b.try_data<double>();
  EXPECT_EQ(r.status().code(), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_NE(r.status().message().find("float16"), std::string::npos) << r.status().message();
}

TEST_F(Hpp, WrapRunsTheReleaseOnceAfterTheLastExport) {
  std::vector<double> mem{1, 2, 3};
  int64_t shape[1] = {3};
  DLTensor v{};
  v.data = mem.data();
  v.device = {kDLCPU, 0};
  v.ndim = 1;
  v.dtype = f64;
  v.shape = shape;
  int released = 0;
  dlbridge::ManagedTensor t;
  {
    dlbridge::Buffer b = dlbridge::Buffer::wrap(v, 0, [&released] { ++released; });
    t = b.export_versioned();
    EXPECT_EQ(t->dl_tensor.data, static_cast<void*>(mem.data()));
  }
  EXPECT_EQ(released, 0);  // the export still uses the memory
  std::thread([&t] { t.reset(); }).join();  // a deleter may run on any thread
  EXPECT_EQ(released, 1);
  // Refused: the callable is destroyed without being called.
  auto counted = std::make_shared<int>(0);
  v.shape = nullptr;
  auto r = dlbridge::Buffer::try_wrap(v, 0, [counted] { ++*counted; });
  EXPECT_EQ(r.status().code(), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(*counted, 0);
  EXPECT_EQ(counted.use_count(), 1);
}

TEST_F(Hpp, MovesTransferOwnershipWithoutExtraDeletes) {
  dlbridge::Buffer a = dlbridge::Buffer::alloc(f32, {1});
  dlbridge::ManagedTensor t1 = a.export_versioned();
  dlbridge::ManagedTensor t2 = a.export_versioned();
  EXPECT_EQ(dlbridge::live_exports(), live_ + 2);
  t1 = std::move(t2);  // t1's first tensor is deleted, t2's moves over
  EXPECT_EQ(dlbridge::live_exports(), live_ + 1);
  dlbridge::ManagedTensor t3(std::move(t1));
  EXPECT_FALSE(t1);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(dlbridge::live_exports(), live_ + 1);
  dlbridge::Buffer owner = dlbridge::Buffer::adopt(dlb_buffer_retain(a.get()));
  EXPECT_EQ(a.refcount(), 3);  // a, owner, the export
  dlb_buffer* raw = owner.release();
  dlb_buffer_release(raw);
  t3.reset();
  EXPECT_EQ(a.refcount(), 1);
}

TEST_F(Hpp, ExportOptionsReachTheLibrary) {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(f32, {2});
  dlbridge::ExportOptions copy;
  copy.copy_policy(DLB_COPY_ALWAYS);
  dlbridge::ManagedTensor t = b.export_versioned(&copy);
  EXPECT_NE(t->dl_tensor.data, static_cast<void*>(b.data<float>()));
  EXPECT_TRUE(t->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
  dlbridge::ExportOptions ro;
  ro.add_flags(DLB_EXPORT_READ_ONLY);
  EXPECT_TRUE(b.export_versioned(&ro)->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  EXPECT_EQ(b.try_export_legacy(&ro).status().code(), DLB_ERR_READ_ONLY);
}

#ifdef DLBRIDGE_HPP_HAS_SPAN
TEST_F(Hpp, SpansInCxx20) {
  dlbridge::Buffer b = dlbridge::Buffer::alloc(dlbridge::dtype("int32"), {2, 3});
  std::span<int32_t> s = b.span<int32_t>();
  ASSERT_EQ(s.size(), 6u);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<int32_t>(i * 10);
  std::span<const int32_t> c = b.span<const int32_t>();
  EXPECT_EQ(c.data(), s.data());
  EXPECT_EQ(c[5], 50);
  EXPECT_EQ(b.try_span<float>().status().code(), DLB_ERR_UNSUPPORTED_DTYPE);
  dlbridge::Buffer empty = dlbridge::Buffer::alloc(f32, {0, 4});
  EXPECT_EQ(empty.span<float>().size(), 0u);
}
#else
TEST_F(Hpp, NoSpanBeforeCxx20) { EXPECT_LT(__cplusplus, 202002L); }
#endif

}  // namespace
