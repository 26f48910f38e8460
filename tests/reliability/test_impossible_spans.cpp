// Tensors whose memory cannot exist: a span or byte_offset past any address
// space (2^57 bytes), and their neighbours (negative extents against huge
// strides, ndim 0 with stray pointers, sub-byte elements with lanes, NULL
// data). Every entry point that takes a layout in (import, validate, wrap,
// alloc, a backend's layout, the strided copy, the layout description) goes
// through the one rule in src/core/layout.cpp and refuses them with a named
// status before anything reads the memory; a caller's tensor stays the
// caller's. The first test is the reproducer of a crash: a producer's
// uint8 [2] with stride 2^62 was accepted, and copying it read 2^62 bytes
// past its data (fuzz/corpus/import_*/regress-stride-2-62).
#include <dlbridge/dlbridge.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::uint64_t kBound = std::uint64_t{1} << 57;

// A managed tensor of "another library", versioned and legacy, over
// storage the test owns; counts its deleter.
struct Producer {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  unsigned char storage[64] = {};
  int deleted = 0;
  DLManagedTensorVersioned v{};
  DLManagedTensor l{};

  Producer(std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_, DLDataType dtype,
           std::uint64_t byte_offset = 0)
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    for (int i = 0; i < 64; ++i) storage[i] = static_cast<unsigned char>(i + 1);
    DLTensor t{};
    t.data = storage + 32;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
    v.version = DLPackVersion{1, 3};
    v.manager_ctx = this;
    v.deleter = [](DLManagedTensorVersioned* m) { ++static_cast<Producer*>(m->manager_ctx)->deleted; };
    v.dl_tensor = t;
    l.manager_ctx = this;
    l.deleter = [](DLManagedTensor* m) { ++static_cast<Producer*>(m->manager_ctx)->deleted; };
    l.dl_tensor = t;
  }
  DLTensor& tensor() { return v.dl_tensor; }
};

DLDataType u8() { return DLDataType{kDLUInt, 8, 1}; }

std::string message() { return dlb_last_error_message(); }

// Both imports refuse with `status` and a message containing `words`; the
// producer's deleter is not called, and the tensor is still the caller's.
void expect_imports_refused(Producer& p, dlb_status status, const char* words) {
  dlb_buffer* const sentinel = reinterpret_cast<dlb_buffer*>(0x5eed);
  dlb_buffer* out = sentinel;
  EXPECT_EQ(dlb_import_versioned(&p.v, nullptr, &out), status) << message();
  EXPECT_NE(message().find(words), std::string::npos) << message();
  EXPECT_EQ(out, sentinel);
  EXPECT_EQ(dlb_import_legacy(&p.l, nullptr, &out), status) << message();
  EXPECT_NE(message().find(words), std::string::npos) << message();
  EXPECT_EQ(out, sentinel);
  EXPECT_EQ(p.deleted, 0);
  dlb_managed_free_versioned(&p.v);
  dlb_managed_free_legacy(&p.l);
  EXPECT_EQ(p.deleted, 2);
}

// Every way in for a layout: validate, copy, describe, wrap, a backend
// layout (all refuse alike; alloc has no strides). The layout description
// does not read byte_offset (`describe_reads_offset` false: it accepts).
void expect_layout_refused(DLTensor t, dlb_status status, const char* words, bool describe_reads_offset = true) {
  SCOPED_TRACE(words);
  EXPECT_EQ(dlb_validate(&t, 0), status) << message();
  EXPECT_NE(message().find(words), std::string::npos) << message();
  unsigned char dst[64];
  EXPECT_EQ(dlb_copy_to_contiguous(&t, dst, sizeof dst), status) << message();
  dlb_layout_info info;
  info.struct_size = sizeof info;
  EXPECT_EQ(dlb_layout_describe(&t, &info), describe_reads_offset ? status : DLB_OK) << message();
  int released = 0;
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_wrap(
                &t, 0, [](void* c) { ++*static_cast<int*>(c); }, &released, &b),
            status)
      << message();
  EXPECT_NE(message().find(words), std::string::npos) << message();
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(released, 0);

  dlb_backend_vtable vt;
  std::memset(&vt, 0, sizeof vt);
  vt.struct_size = sizeof vt;
  vt.name = "remote";
  vt.copy_to_host = [](void*, void*, void*, uint64_t) -> int32_t { return 0; };
  dlb_backend* be = nullptr;
  ASSERT_EQ(dlb_backend_create(&vt, nullptr, &be), DLB_OK) << message();
  EXPECT_EQ(dlb_buffer_from_backend(be, &released, &t, 0, &b), status) << message();
  EXPECT_EQ(b, nullptr);
  dlb_backend_release(be);
}

class ImpossibleSpans : public ::testing::Test {
 protected:
  void SetUp() override { live_ = dlb_live_exports(); }
  void TearDown() override { EXPECT_EQ(dlb_live_exports(), live_); }
  std::int64_t live_ = 0;
};

// The reproducer: [2] uint8 with stride 2^62 spans 2^62 + 1 bytes.
TEST_F(ImpossibleSpans, StrideTwoToThe62IsRefusedBeforeAnythingReadsIt) {
  Producer p({2}, {std::int64_t{1} << 62}, u8());
  expect_imports_refused(p, DLB_ERR_OVERFLOW, "spans 4611686018427387905 bytes");
  expect_layout_refused(p.tensor(), DLB_ERR_OVERFLOW, "more than any address space holds (2^57 bytes)");
}

TEST_F(ImpossibleSpans, ByteOffsetTwoToThe63IsRefused) {
  Producer p({2}, {1}, u8(), std::uint64_t{1} << 63);
  expect_imports_refused(p, DLB_ERR_OVERFLOW, "byte_offset 9223372036854775808 is past the end of any address space");
  expect_layout_refused(p.tensor(), DLB_ERR_OVERFLOW, "byte_offset", false);
}

TEST_F(ImpossibleSpans, NegativeStridesReachingPastTheBoundAreRefused) {
  Producer p({2, 3}, {-(std::int64_t{1} << 60), 1}, DLDataType{kDLFloat, 32, 1});
  expect_imports_refused(p, DLB_ERR_OVERFLOW, "spans");
  expect_layout_refused(p.tensor(), DLB_ERR_OVERFLOW, "spans");
}

// The bound itself: a span of exactly 2^57 bytes and a byte_offset of
// exactly 2^57 are possible (accepted; validation reads nothing); one
// byte more is not.
TEST_F(ImpossibleSpans, TheBoundIsTwoToThe57BytesInclusive) {
  std::int64_t shape[1] = {2};
  std::int64_t strides[1] = {static_cast<std::int64_t>(kBound) - 1};  // bytes 0 and 2^57 - 1: 2^57 of them
  DLTensor t{};
  t.data = reinterpret_cast<void*>(std::uintptr_t{1} << 40);
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = u8();
  t.shape = shape;
  t.strides = strides;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << message();
  strides[0] = static_cast<std::int64_t>(kBound);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_NE(message().find("spans 144115188075855873 bytes"), std::string::npos) << message();
  strides[0] = 1;
  t.byte_offset = kBound;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << message();
  t.byte_offset = kBound + 1;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  // float64: elements of 8 bytes, the bound in bytes, not elements.
  t.dtype = DLDataType{kDLFloat, 64, 1};
  t.byte_offset = 0;
  strides[0] = static_cast<std::int64_t>(kBound / 8) - 1;  // 2^57 - 8 + 8 bytes
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << message();
  strides[0] = static_cast<std::int64_t>(kBound / 8);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  // Downwards alike.
  t.data = reinterpret_cast<void*>(std::uintptr_t{1} << 58);
  strides[0] = -(static_cast<std::int64_t>(kBound / 8) - 1);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << message();
  strides[0] = -static_cast<std::int64_t>(kBound / 8);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
}

// Packed sub-byte elements sit at bit offsets: an int4 view's span is half
// a byte per element step, rounded out to whole bytes, not its compact size.
TEST_F(ImpossibleSpans, PackedSubByteSpansCountBits) {
  std::int64_t shape[1] = {2};
  std::int64_t strides[1] = {(std::int64_t{1} << 58) - 1};  // elements 0 and 2^58 - 1: 2^58 nibbles, 2^57 bytes
  DLTensor t{};
  t.data = reinterpret_cast<void*>(std::uintptr_t{1} << 40);
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 4, 1};
  t.shape = shape;
  t.strides = strides;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << message();
  strides[0] = std::int64_t{1} << 58;  // 2^58 + 1 nibbles: one byte more
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_NE(message().find("spans 144115188075855873 bytes"), std::string::npos) << message();
  // Lanes: int4 x 3 (12-bit elements) backwards; 2^54 elements of 12 bits
  // reach 1.5 * 2^54 bytes below element 0, inside the bound.
  t.dtype = DLDataType{kDLInt, 4, 3};
  t.data = reinterpret_cast<void*>(std::uintptr_t{1} << 58);
  strides[0] = -(std::int64_t{1} << 54);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << message();
  strides[0] = -(std::int64_t{1} << 57);
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  // A bit count past 64 bits: elements of 65535 x 2 bits.
  t.dtype = DLDataType{kDLUInt, 2, 65535};
  strides[0] = std::int64_t{1} << 50;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_NE(message().find("bit extent"), std::string::npos) << message();
}

// A strided view of packed sub-byte elements with lanes is accepted as a
// layout, and copying it is a named refusal: its elements do not start on
// byte boundaries. Compact, it copies its bytes.
TEST_F(ImpossibleSpans, SubByteElementsWithLanesCopyOnlyCompact) {
  Producer p({2}, {-1}, DLDataType{kDLInt, 4, 3});  // 12-bit elements, reversed
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(&p.v, nullptr, &b), DLB_OK) << message();
  dlb_buffer* h = nullptr;
  EXPECT_EQ(dlb_buffer_to_host(b, &h), DLB_ERR_UNSUPPORTED_LAYOUT);
  EXPECT_NE(message().find("packed sub-byte"), std::string::npos) << message();
  dlb_buffer_release(b);
  EXPECT_EQ(p.deleted, 1);

  Producer q({3}, {}, DLDataType{kDLInt, 4, 3});  // 36 bits: 5 bytes
  ASSERT_EQ(dlb_import_legacy(&q.l, nullptr, &b), DLB_OK) << message();
  EXPECT_EQ(dlb_buffer_nbytes(b), 5u);
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << message();
  DLTensor v;
  ASSERT_EQ(dlb_buffer_dltensor(h, &v), DLB_OK);
  EXPECT_EQ(std::memcmp(v.data, q.storage + 32, 5), 0);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  EXPECT_EQ(q.deleted, 1);

  // The padded flag on elements of a byte or more (int4 x 2) means nothing
  // DLPack defines: refused as the dtype's fault.
  Producer r({2}, {1}, DLDataType{kDLInt, 4, 2});
  r.v.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  EXPECT_EQ(dlb_import_versioned(&r.v, nullptr, &b), DLB_ERR_UNSUPPORTED_DTYPE);
  dlb_managed_free_versioned(&r.v);
  EXPECT_EQ(r.deleted, 1);
}

// A negative extent is refused before any stride is multiplied by it.
TEST_F(ImpossibleSpans, NegativeExtentAgainstAHugeStride) {
  Producer p({3, -1}, {1, std::int64_t{1} << 62}, u8());
  expect_imports_refused(p, DLB_ERR_MALFORMED, "shape[1] is -1");
  Producer q({-(std::int64_t{1} << 62)}, {INT64_MIN}, u8());
  expect_imports_refused(q, DLB_ERR_MALFORMED, "shape[0] is -4611686018427387904");
}

// ndim 0 is one element: the shape and strides pointers are never read
// (torch sends non-NULL ones for 0-d tensors), so stray ones are harmless.
TEST_F(ImpossibleSpans, NdimZeroNeverReadsShapeOrStrides) {
  Producer p({}, {}, DLDataType{kDLFloat, 32, 1});
  auto* stray = reinterpret_cast<std::int64_t*>(std::uintptr_t{8});  // reading it would fault
  p.v.dl_tensor.shape = stray;
  p.v.dl_tensor.strides = stray;
  EXPECT_EQ(dlb_validate(&p.v.dl_tensor, DLB_VALIDATE_STRIDES_REQUIRED | DLB_VALIDATE_CONTIGUOUS), DLB_OK)
      << message();
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(&p.v, nullptr, &b), DLB_OK) << message();
  EXPECT_EQ(dlb_buffer_nbytes(b), 4u);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK) << message();
  DLTensor v;
  ASSERT_EQ(dlb_buffer_dltensor(h, &v), DLB_OK);
  EXPECT_EQ(std::memcmp(v.data, p.storage + 32, 4), 0);
  dlb_buffer_release(h);
  dlb_buffer_release(b);
  EXPECT_EQ(p.deleted, 1);
}

// NULL data is legal only without elements.
TEST_F(ImpossibleSpans, NullDataWithElementsIsMalformed) {
  Producer p({2, 3}, {3, 1}, u8());
  p.v.dl_tensor.data = nullptr;
  p.l.dl_tensor.data = nullptr;
  expect_imports_refused(p, DLB_ERR_MALFORMED, "data is NULL but the tensor has 6 elements");
  Producer q({2, 0}, {3, 1}, u8(), std::uint64_t{1} << 63);  // no elements: nothing is addressed
  q.v.dl_tensor.data = nullptr;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_import_versioned(&q.v, nullptr, &b), DLB_OK) << message();
  dlb_buffer_release(b);
  EXPECT_EQ(q.deleted, 1);
}

// data + byte_offset past 2^64, or extent reaching below address 0.
TEST_F(ImpossibleSpans, DataPlusExtentOutsideTheAddressSpace) {
  Producer p({2}, {-4}, u8());
  p.v.dl_tensor.data = reinterpret_cast<void*>(std::uintptr_t{2});  // reaches address -2
  p.l.dl_tensor.data = p.v.dl_tensor.data;
  expect_imports_refused(p, DLB_ERR_OVERFLOW, "leaves the address space");
  Producer q({2}, {1}, u8(), std::uint64_t{1} << 56);
  q.v.dl_tensor.data = reinterpret_cast<void*>(~std::uintptr_t{0} - (std::uintptr_t{1} << 55));
  q.l.dl_tensor.data = q.v.dl_tensor.data;
  expect_imports_refused(q, DLB_ERR_OVERFLOW, "leaves the address space");
}

// The lowest byte may be address 0 itself (one more is below the address
// space); an element count of exactly INT64_MAX is counted (then refused
// for its span, not its count).
TEST_F(ImpossibleSpans, TheEdgesOfTheAddressSpaceAndTheElementCount) {
  std::int64_t shape[1] = {9};
  std::int64_t strides[1] = {-1};
  DLTensor t{};
  t.data = reinterpret_cast<void*>(std::uintptr_t{8});
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = u8();
  t.shape = shape;
  t.strides = strides;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_OK) << message();  // bytes 0..8
  shape[0] = 10;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);  // bytes -1..8
  EXPECT_NE(message().find("leaves the address space"), std::string::npos) << message();
  shape[0] = INT64_MAX;
  t.strides = nullptr;
  t.dtype = DLDataType{kDLInt, 2, 1};  // 2^64 - 2 bits: the count and the bits fit
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_NE(message().find("spans"), std::string::npos) << message();
}

// Messages say "tensor" for a tensor from another producer, not for an
// argument of the library's own calls.
TEST_F(ImpossibleSpans, MessagesNameWhoseTensorItIs) {
  std::int64_t shape[1] = {2};
  std::int64_t strides[1] = {std::int64_t{1} << 62};
  DLTensor t{};
  t.data = reinterpret_cast<void*>(std::uintptr_t{1} << 40);
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = u8();
  t.shape = shape;
  t.strides = strides;
  EXPECT_EQ(dlb_validate(&t, 0), DLB_ERR_OVERFLOW);
  EXPECT_EQ(message().rfind("tensor strided view spans", 0), 0u) << message();
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_wrap(&t, 0, nullptr, nullptr, &b), DLB_ERR_OVERFLOW);
  EXPECT_EQ(message().rfind("strided view spans", 0), 0u) << message();
}

// An allocation larger than any address space is an overflow, not an
// attempt that fails for want of memory.
TEST_F(ImpossibleSpans, AllocPastTheBoundIsAnOverflow) {
  std::int64_t shape[2] = {std::int64_t{1} << 30, std::int64_t{1} << 25};  // 2^55 float64: 2^58 bytes
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 64, 1}, 2, shape, &b), DLB_ERR_OVERFLOW);
  EXPECT_NE(message().find("2^57"), std::string::npos) << message();
  EXPECT_EQ(b, nullptr);
}

}  // namespace
