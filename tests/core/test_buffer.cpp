// Buffers: alloc, wrap, retain/release, delete, views, to_host.
#include <cstring>
#include <numeric>
#include <vector>

#include "support.hpp"

using namespace dlbtest;

class Buffer : public DlbTest {};

TEST_F(Buffer, AllocIsRowMajorAlignedAndZeroFilled) {
  const int64_t shape[3] = {2, 3, 5};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f64(), 3, shape, &b), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[2], 5);
  ASSERT_NE(t.strides, nullptr);
  EXPECT_EQ(t.strides[0], 15);
  EXPECT_EQ(t.strides[1], 5);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(t.byte_offset, 0u);
  EXPECT_EQ(dlb_buffer_nbytes(b), 2u * 3 * 5 * 8);
  const double* d = static_cast<const double*>(t.data);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(d[i], 0.0);
  EXPECT_EQ(dlb_buffer_flags(b), 0u);
  dlb_buffer_release(b);
}

TEST_F(Buffer, ZeroSizeAndZeroDimensionalAllocs) {
  const int64_t empty[2] = {4, 0};
  dlb_buffer* z = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 2, empty, &z), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(z), 0u);
  dlb_buffer_release(z);

  dlb_buffer* s = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), i32(), 0, nullptr, &s), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(s), 4u);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(s, &t), DLB_OK);
  EXPECT_EQ(t.ndim, 0);
  *static_cast<int32_t*>(t.data) = 7;
  dlb_buffer_release(s);
}

TEST_F(Buffer, SubByteSizesRoundUpToWholeBytes) {
  const int64_t shape[1] = {3};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), DLDataType{kDLFloat4_e2m1fn, 4, 1}, 1, shape, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(b), 2u);  // 12 bits
  dlb_buffer_release(b);
  ASSERT_EQ(dlb_buffer_alloc(cpu(), DLDataType{kDLFloat6_e3m2fn, 6, 1}, 1, shape, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_nbytes(b), 3u);  // 18 bits
  dlb_buffer_release(b);
}

TEST_F(Buffer, WrapRunsReleaseExactlyOnceAfterTheLastReference) {
  std::vector<float> data(6);
  int64_t shape[2] = {2, 3};
  DLTensor view{data.data(), cpu(), 2, f32(), shape, nullptr, 0};
  ReleaseCounter rc;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, ReleaseCounter::release, &rc, &b), DLB_OK);
  shape[0] = 99;  // the shape was copied
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  EXPECT_EQ(t.data, data.data());
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.strides[0], 3);  // NULL strides became compact ones
  EXPECT_EQ(t.strides[1], 1);
  EXPECT_EQ(dlb_buffer_retain(b), b);
  EXPECT_EQ(dlb_buffer_refcount(b), 2);
  dlb_buffer_release(b);
  EXPECT_EQ(rc.calls.load(), 0);
  dlb_buffer_release(b);
  EXPECT_EQ(rc.calls.load(), 1);
}

TEST_F(Buffer, WrapWithNullReleaseAndReadOnlyFlag) {
  const uint8_t bytes[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLTensor view{const_cast<uint8_t*>(bytes), cpu(), 1, u8(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &b), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(b), DLB_BUFFER_READ_ONLY);
  dlb_buffer_release(b);
}

TEST_F(Buffer, ReleaseAndRetainAreNullSafe) {
  dlb_buffer_release(nullptr);
  EXPECT_EQ(dlb_buffer_retain(nullptr), nullptr);
  EXPECT_EQ(dlb_buffer_flags(nullptr), 0u);
  EXPECT_EQ(dlb_buffer_nbytes(nullptr), 0u);
}

TEST_F(Buffer, DeleteKeepsMemoryWhileReferencedAndRefusesNewUse) {
  std::vector<int32_t> data = {1, 2, 3};
  int64_t shape[1] = {3};
  DLTensor view{data.data(), cpu(), 1, i32(), shape, nullptr, 0};
  ReleaseCounter rc;
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, ReleaseCounter::release, &rc, &b), DLB_OK);
  DLManagedTensorVersioned* before = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &before), DLB_OK);
  ASSERT_EQ(dlb_buffer_delete(b), DLB_OK);
  EXPECT_EQ(dlb_buffer_delete(b), DLB_OK);  // twice is harmless
  EXPECT_NE(dlb_buffer_flags(b) & DLB_BUFFER_DELETED, 0u);
  DLManagedTensorVersioned* after = nullptr;
  EXPECT_EQ(dlb_export_versioned(b, nullptr, &after), DLB_ERR_DELETED);
  EXPECT_TRUE(MessageContains("deleted"));
  EXPECT_EQ(after, nullptr);
  DLTensor t;
  EXPECT_EQ(dlb_buffer_dltensor(b, &t), DLB_ERR_DELETED);
  dlb_buffer* copy = nullptr;
  EXPECT_EQ(dlb_buffer_to_host(b, &copy), DLB_ERR_DELETED);
  dlb_buffer_release(b);
  // The export made before the delete still reads the memory.
  EXPECT_EQ(rc.calls.load(), 0);
  EXPECT_EQ(static_cast<int32_t*>(before->dl_tensor.data)[2], 3);
  before->deleter(before);
  EXPECT_EQ(rc.calls.load(), 1);
}

TEST_F(Buffer, ToHostCopiesAStridedViewRowMajor) {
  // A 3x4 int32 matrix viewed transposed (4x3) with a byte offset of one row.
  std::vector<int32_t> data(16);
  std::iota(data.begin(), data.end(), 0);
  int64_t shape[2] = {4, 3};
  int64_t strides[2] = {1, 4};
  DLTensor view{data.data(), cpu(), 2, i32(), shape, strides, 4 * sizeof(int32_t)};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &b), DLB_OK);
  dlb_buffer* h = nullptr;
  ASSERT_EQ(dlb_buffer_to_host(b, &h), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(h, &t), DLB_OK);
  EXPECT_EQ(dlb_buffer_flags(h), 0u);  // the copy is writable
  const int32_t* got = static_cast<const int32_t*>(t.data);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], 4 + i + 4 * j) << i << "," << j;
  dlb_buffer_release(h);
  dlb_buffer_release(b);
}

TEST_F(Buffer, ToHostRefusesDeviceMemoryWithoutABackend) {
  int64_t shape[1] = {4};
  DLTensor view{reinterpret_cast<void*>(0x1000), DLDevice{kDLCUDA, 0}, 1, f32(), shape, nullptr, 0};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&view, 0, nullptr, nullptr, &b), DLB_OK);
  dlb_buffer* h = reinterpret_cast<dlb_buffer*>(0x1);
  EXPECT_EQ(dlb_buffer_to_host(b, &h), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("cuda:0"));
  EXPECT_EQ(h, reinterpret_cast<dlb_buffer*>(0x1));
  dlb_buffer_release(b);
}

// dlb_buffer_host_view: the one host-view rule every binding asks.
TEST_F(Buffer, HostViewGivesCompactHostMemoryAndRefusesTheRest) {
  const int64_t shape[2] = {2, 3};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 2, shape, &b), DLB_OK);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  dlb_host_view v{};
  v.struct_size = sizeof v;
  ASSERT_EQ(dlb_buffer_host_view(b, DLB_HOST_VIEW_WRITE, &v), DLB_OK);
  EXPECT_EQ(v.data, t.data);
  EXPECT_EQ(v.nbytes, 24u);
  EXPECT_EQ(v.numel, 6u);
  EXPECT_EQ(v.dtype.bits, 32);
  EXPECT_EQ(v.writable, 1);

  // Bad arguments.
  EXPECT_EQ(dlb_buffer_host_view(nullptr, 0, &v), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_host_view(b, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_host_view(b, 2, &v), DLB_ERR_INVALID_ARGUMENT);
  dlb_host_view small{};
  small.struct_size = 8;
  EXPECT_EQ(dlb_buffer_host_view(b, 0, &small), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(dlb_last_error_message(), "struct_size"), nullptr);

  // byte_offset is applied; read-only memory gives read views only.
  float mem[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const int64_t four[1] = {4};
  DLTensor w{};
  w.data = mem;
  w.byte_offset = 2 * sizeof(float);
  w.device = cpu();
  w.ndim = 1;
  w.dtype = f32();
  w.shape = const_cast<int64_t*>(four);
  dlb_buffer* ro = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&w, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &ro), DLB_OK);
  EXPECT_EQ(dlb_buffer_host_view(ro, DLB_HOST_VIEW_WRITE, &v), DLB_ERR_READ_ONLY);
  ASSERT_EQ(dlb_buffer_host_view(ro, DLB_HOST_VIEW_READ, &v), DLB_OK);
  EXPECT_EQ(v.data, mem + 2);
  EXPECT_EQ(v.writable, 0);
  dlb_buffer_release(ro);

  // A strided view.
  const int64_t strides[1] = {2};
  w.byte_offset = 0;
  w.strides = const_cast<int64_t*>(strides);
  dlb_buffer* st = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&w, 0, nullptr, nullptr, &st), DLB_OK);
  EXPECT_EQ(dlb_buffer_host_view(st, DLB_HOST_VIEW_READ, &v), DLB_ERR_UNSUPPORTED_LAYOUT);
  EXPECT_NE(std::strstr(dlb_last_error_message(), "dlb_copy_to_contiguous"), nullptr);
  dlb_buffer_release(st);

  // Memory the CPU cannot read.
  w.strides = nullptr;
  w.device = DLDevice{kDLOpenCL, 0};
  dlb_buffer* dev = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&w, 0, nullptr, nullptr, &dev), DLB_OK);
  EXPECT_EQ(dlb_buffer_host_view(dev, DLB_HOST_VIEW_READ, &v), DLB_ERR_UNSUPPORTED_DEVICE);
  dlb_buffer_release(dev);

  // An empty tensor: no elements, no address needed.
  const int64_t none[1] = {0};
  w.device = cpu();
  w.data = nullptr;
  w.shape = const_cast<int64_t*>(none);
  dlb_buffer* empty = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&w, 0, nullptr, nullptr, &empty), DLB_OK);
  ASSERT_EQ(dlb_buffer_host_view(empty, DLB_HOST_VIEW_WRITE, &v), DLB_OK);
  EXPECT_EQ(v.nbytes, 0u);
  EXPECT_EQ(v.numel, 0u);
  EXPECT_EQ(v.data, nullptr);
  dlb_buffer_release(empty);

  // Deleted.
  ASSERT_EQ(dlb_buffer_delete(b), DLB_OK);
  EXPECT_EQ(dlb_buffer_host_view(b, DLB_HOST_VIEW_READ, &v), DLB_ERR_DELETED);
  dlb_buffer_release(b);
}
