// Shared host memory in one process: allocation, sharing (with and
// without a copy, read-only), opening a description again, the mapping's
// lifetime under exports, and refusals of bad arguments. Descriptions that
// lie are in test_share_descriptions.cpp, other processes and sockets in
// test_share_processes.cpp.
#include "share_fixture.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace dlbtest;
using namespace sharetest;

namespace {

// A 3x2 transposed view (strides 1, 3) of `mem`'s six floats, ordinary
// memory; nullptr if the wrap fails.
dlb_buffer* wrap_transposed_3x2(std::vector<float>& mem) {
  std::int64_t shape[] = {3, 2};
  std::int64_t strides[] = {1, 3};
  DLTensor v;
  std::memset(&v, 0, sizeof v);
  v.data = mem.data();
  v.device = cpu();
  v.dtype = f32();
  v.ndim = 2;
  v.shape = shape;
  v.strides = strides;
  dlb_buffer* b = nullptr;
  return dlb_buffer_wrap(&v, 0, nullptr, nullptr, &b) == DLB_OK ? b : nullptr;
}

TEST_F(Share, AllocatesZeroedPageAlignedSealedMemory) {
  dlb_buffer* b = alloc_shared_f32({3, 5});
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 1);
  EXPECT_EQ(shared_maps(), maps_at_start_ + 1);
  EXPECT_EQ(open_fds(), fds_at_start_ + 1);  // the memory file, kept for sharing
  EXPECT_EQ(dlb_buffer_nbytes(b), 60u);
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_READ_ONLY, 0u);
  float* p = data_of(b);
  EXPECT_EQ(mapping_perms(p), "rw-s");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE)), 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(p[i], 0.0f);
  dlb_share_descriptor d = share_of(b);
  // Not F_SEAL_SEAL: a read-only share adds F_SEAL_FUTURE_WRITE (test_share_faults.cpp).
  EXPECT_EQ(fcntl(d.fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_EQ(fcntl(d.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ(d.size, static_cast<std::uint32_t>(DLB_SHARE_DESCRIPTION_HEADER + 16 * 2));
  dlb_share_descriptor_close(&d);
  EXPECT_EQ(d.fd, -1);
  dlb_share_descriptor_close(&d);  // twice is harmless
  dlb_share_descriptor_close(nullptr);
  dlb_buffer_release(b);
}

TEST_F(Share, AllocRefusals) {
  dlb_buffer* b = nullptr;
  const std::int64_t shape[] = {4};
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), 1, shape, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_alloc_shared(DLDevice{kDLCUDA, 0}, f32(), 1, shape, &b), DLB_ERR_UNSUPPORTED_DEVICE);
  EXPECT_TRUE(MessageContains("host memory only"));
  const std::int64_t negative[] = {-3};
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), 1, negative, &b), DLB_ERR_MALFORMED);
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), DLDataType{99, 32, 1}, 1, shape, &b), DLB_ERR_UNSUPPORTED_DTYPE);
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), 1, nullptr, &b), DLB_ERR_INVALID_ARGUMENT);
  const std::int64_t huge[] = {INT64_MAX / 2};
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), 1, huge, &b), DLB_ERR_OVERFLOW);
  EXPECT_EQ(b, nullptr);
}

TEST_F(Share, EmptyAndScalarTensorsShare) {
  const std::int64_t empty[] = {0, 4};
  dlb_buffer* e = nullptr;
  ASSERT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), 2, empty, &e), DLB_OK);
  dlb_share_descriptor d = share_of(e);
  dlb_buffer* o = open_of(d);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(dlb_buffer_nbytes(o), 0u);
  dlb_buffer_release(o);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(e);

  dlb_buffer* s = nullptr;
  ASSERT_EQ(dlb_buffer_alloc_shared(cpu(), f64(), 0, nullptr, &s), DLB_OK);
  DLTensor t;
  dlb_buffer_dltensor(s, &t);
  *static_cast<double*>(t.data) = 2.5;
  d = share_of(s);
  o = open_of(d);
  ASSERT_NE(o, nullptr);
  dlb_buffer_dltensor(o, &t);
  EXPECT_EQ(t.ndim, 0);
  EXPECT_EQ(*static_cast<double*>(t.data), 2.5);
  dlb_buffer_release(o);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(s);
}

TEST_F(Share, OpenedBufferIsTheSameMemory) {
  dlb_buffer* b = alloc_shared_f32({4, 4});
  float* p = data_of(b);
  for (int i = 0; i < 16; ++i) p[i] = static_cast<float>(i);
  dlb_share_descriptor d = share_of(b);
  dlb_buffer* o = open_of(d);
  dlb_share_descriptor_close(&d);  // the buffer keeps its own duplicate
  ASSERT_NE(o, nullptr);
  float* q = data_of(o);
  EXPECT_NE(p, q);  // a second mapping of the same file
  for (int i = 0; i < 16; ++i) EXPECT_EQ(q[i], static_cast<float>(i));
  q[5] = -1.0f;
  EXPECT_EQ(p[5], -1.0f);
  p[6] = -2.0f;
  EXPECT_EQ(q[6], -2.0f);
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(o, &t), DLB_OK);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape[0], 4);
  EXPECT_EQ(t.strides[0], 4);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(dlb_buffer_flags(o) & DLB_BUFFER_READ_ONLY, 0u);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Share, MappingOutlivesTheBufferWhileAnExportLives) {
  dlb_buffer* b = alloc_shared_f32({8});
  dlb_share_descriptor d = share_of(b);
  dlb_buffer* o = open_of(d);
  dlb_share_descriptor_close(&d);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(o, nullptr, &m), DLB_OK);
  EXPECT_EQ(m->dl_tensor.data, static_cast<void*>(data_of(o)));  // zero-copy export
  EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  dlb_buffer_release(o);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 2);  // the export holds the opened mapping
  static_cast<float*>(m->dl_tensor.data)[3] = 7.0f;
  EXPECT_EQ(data_of(b)[3], 7.0f);
  m->deleter(m);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 1);
  dlb_buffer_release(b);
}

TEST_F(Share, OrdinaryMemoryIsRefusedUnlessACopyIsAllowed) {
  const std::int64_t shape[] = {2, 3};
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_alloc(cpu(), f32(), 2, shape, &b), DLB_OK);
  float* p = data_of(b);
  for (int i = 0; i < 6; ++i) p[i] = static_cast<float>(10 + i);
  dlb_share_descriptor d;
  d.fd = 12345;
  EXPECT_EQ(dlb_buffer_share(b, 0, &d), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_TRUE(MessageContains("not shared memory"));
  EXPECT_EQ(d.fd, 12345);  // untouched
  EXPECT_EQ(open_fds(), fds_at_start_);
  d = share_of(b, DLB_SHARE_COPY_IF_NEEDED);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);  // the copy lives in the file only
  dlb_buffer* o = open_of(d);
  dlb_share_descriptor_close(&d);
  ASSERT_NE(o, nullptr);
  float* q = data_of(o);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], static_cast<float>(10 + i));
  p[0] = 99.0f;  // a copy: the original is not the shared memory
  EXPECT_EQ(q[0], 10.0f);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Share, StridedCopyIsCompact) {
  // A transposed view of ordinary memory is copied compact.
  std::vector<float> mem = {0, 1, 2, 3, 4, 5};
  dlb_buffer* b = wrap_transposed_3x2(mem);
  ASSERT_NE(b, nullptr);
  dlb_share_descriptor d = share_of(b, DLB_SHARE_COPY_IF_NEEDED);
  dlb_buffer* o = open_of(d);
  dlb_share_descriptor_close(&d);
  float* q = data_of(o);
  const float want[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], want[i]);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Share, AViewIntoSharedMemorySharesWithoutACopy) {
  // A reversed, offset view (negative stride) over part of a shared buffer,
  // as a framework's slice imported back would be.
  dlb_buffer* b = alloc_shared_f32({10});
  float* p = data_of(b);
  for (int i = 0; i < 10; ++i) p[i] = static_cast<float>(i);
  std::int64_t shape[] = {4};
  std::int64_t strides[] = {-2};
  DLTensor v;
  std::memset(&v, 0, sizeof v);
  v.data = p;
  v.byte_offset = 8 * sizeof(float);  // element [0] is p[8]: 8, 6, 4, 2
  v.device = cpu();
  v.dtype = f32();
  v.ndim = 1;
  v.shape = shape;
  v.strides = strides;
  dlb_buffer* w = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&v, 0, nullptr, nullptr, &w), DLB_OK);
  dlb_share_descriptor d = share_of(w);  // no copy flag needed
  EXPECT_EQ(get_le(d.description + kByteOffset, 8), 32u);
  dlb_buffer* o = open_of(d);
  dlb_share_descriptor_close(&d);
  ASSERT_NE(o, nullptr);
  DLTensor t;
  dlb_buffer_dltensor(o, &t);
  const float* origin = reinterpret_cast<const float*>(static_cast<unsigned char*>(t.data) + t.byte_offset);
  EXPECT_EQ(t.strides[0], -2);
  EXPECT_EQ(origin[0], 8.0f);
  EXPECT_EQ(origin[-6], 2.0f);
  p[4] = 40.0f;
  EXPECT_EQ(origin[-4], 40.0f);
  dlb_buffer_release(o);
  dlb_buffer_release(w);
  dlb_buffer_release(b);
}

TEST_F(Share, ReadOnlySharingMapsReadOnly) {
  dlb_buffer* b = alloc_shared_f32({1024});
  data_of(b)[0] = 1.0f;
  dlb_share_descriptor d = share_of(b, DLB_SHARE_READ_ONLY);
  EXPECT_EQ(fcntl(d.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(get_le(d.description + kFlags, 8), 1u);
  // The receiver cannot map the file writable through this descriptor.
  void* w = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd, 0);
  EXPECT_EQ(w, MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  dlb_buffer* o = open_of(d);
  ASSERT_NE(o, nullptr);
  EXPECT_NE(dlb_buffer_flags(o) & DLB_BUFFER_READ_ONLY, 0u);
  const float* q = data_of(o);
  EXPECT_EQ(q[0], 1.0f);
  // The mapping is PROT_READ (/proc/self/maps says r--s), so a write faults
  // (SIGSEGV; a sanitizer's own handler exits with its code instead).
  EXPECT_EQ(mapping_perms(q), "r--s");
  const int rc = in_child([q] {
    const_cast<volatile float*>(q)[0] = 2.0f;
    return 0;
  });
  EXPECT_NE(rc, 0);
  EXPECT_EQ(data_of(b)[0], 1.0f);
  // Its legacy export without a copy is refused as for any read-only buffer.
  DLManagedTensor* legacy = nullptr;
  const dlb_export_options never = opts(DLB_COPY_NEVER);
  EXPECT_EQ(dlb_export_legacy(o, &never, &legacy), DLB_ERR_READ_ONLY);
  // Shared on, it stays read-only.
  dlb_share_descriptor again = share_of(o);
  EXPECT_EQ(get_le(again.description + kFlags, 8), 1u);
  EXPECT_EQ(fcntl(again.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  dlb_share_descriptor_close(&again);
  // A writable description over that read-only fd is refused precisely.
  dlb_share_descriptor lie = d;
  put_le(lie.description + kFlags, 0, 8);
  reseal(lie.description, lie.size);
  dlb_buffer* x = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(lie.fd, lie.description, lie.size, 0, &x), DLB_ERR_READ_ONLY);
  EXPECT_TRUE(MessageContains("opened read-only"));
  EXPECT_EQ(dlb_buffer_open_shared(lie.fd, lie.description, lie.size, DLB_SHARE_READ_ONLY, &x), DLB_OK);
  dlb_buffer_release(x);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Share, ReadOnlyBuffersShareReadOnlyAndOpenFlagMapsReadOnly) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_descriptor d = share_of(b);
  EXPECT_EQ(fcntl(d.fd, F_GETFL) & O_ACCMODE, O_RDWR);
  dlb_buffer* o = open_of(d, DLB_SHARE_READ_ONLY);
  EXPECT_NE(dlb_buffer_flags(o) & DLB_BUFFER_READ_ONLY, 0u);
  dlb_buffer_release(o);
  dlb_share_descriptor_close(&d);
  DLTensor t;
  dlb_buffer_dltensor(b, &t);
  dlb_buffer* ro = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &ro), DLB_OK);
  d = share_of(ro);
  EXPECT_EQ(fcntl(d.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(ro);
  // Shared read-only once, the memory is sealed against new writable
  // mappings: a writable share of it is refused, a read-only one is not.
  EXPECT_EQ(dlb_buffer_share(b, 0, &d), DLB_ERR_READ_ONLY);
  EXPECT_TRUE(MessageContains("shared read-only before"));
  d = share_of(b, DLB_SHARE_READ_ONLY);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

TEST_F(Share, ShareRefusals) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_share_descriptor d;
  EXPECT_EQ(dlb_buffer_share(nullptr, 0, &d), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_share(b, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_share(b, 1u << 7, &d), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("0x80"));
  ASSERT_EQ(dlb_buffer_delete(b), DLB_OK);
  EXPECT_EQ(dlb_buffer_share(b, DLB_SHARE_COPY_IF_NEEDED, &d), DLB_ERR_DELETED);
  dlb_buffer_release(b);
}

// Padded sub-byte elements (one int4 a byte, DLB_BUFFER_SUBBYTE_PADDED)
// are shared as what they are: the description says padded, and the
// receiver's buffer is padded too, over the same bytes.
TEST_F(Share, PaddedSubByteElementsKeepTheirLayout) {
  std::vector<std::int8_t> mem(100000);
  for (std::size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<std::int8_t>(static_cast<int>(i * 7 % 16) - 8);
  const std::int64_t shape[1] = {static_cast<std::int64_t>(mem.size())};
  DLTensor v{};
  v.data = mem.data();
  v.device = DLDevice{kDLCPU, 0};
  v.ndim = 1;
  v.dtype = DLDataType{kDLInt, 4, 1};
  v.shape = const_cast<std::int64_t*>(shape);
  dlb_buffer* b = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&v, DLB_BUFFER_SUBBYTE_PADDED, nullptr, nullptr, &b), DLB_OK);
  dlb_share_descriptor d{};
  ASSERT_EQ(dlb_buffer_share(b, DLB_SHARE_COPY_IF_NEEDED, &d), DLB_OK) << dlb_last_error_message();
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_NE(dlb_buffer_flags(o) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  EXPECT_EQ(dlb_buffer_nbytes(o), mem.size());
  DLTensor t;
  ASSERT_EQ(dlb_buffer_dltensor(o, &t), DLB_OK);
  EXPECT_EQ(t.dtype.bits, 4);
  EXPECT_EQ(std::memcmp(static_cast<const char*>(t.data) + t.byte_offset, mem.data(), mem.size()), 0);
  // Shared again from the receiver's buffer: the same memory, still padded.
  dlb_share_descriptor again{};
  ASSERT_EQ(dlb_buffer_share(o, 0, &again), DLB_OK) << dlb_last_error_message();
  dlb_buffer* o2 = nullptr;
  ASSERT_EQ(dlb_buffer_open_shared(again.fd, again.description, again.size, 0, &o2), DLB_OK);
  EXPECT_NE(dlb_buffer_flags(o2) & DLB_BUFFER_SUBBYTE_PADDED, 0u);
  dlb_share_descriptor_close(&again);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(o2);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
  EXPECT_EQ(open_fds(), fds_at_start_);
}

TEST_F(Share, CopySharedKeepsTheCopysMappingAndSharesWithoutACopy) {
  // A transposed view of ordinary memory, copied compact into one new
  // shared mapping that is the result's own.
  std::vector<float> mem = {0, 1, 2, 3, 4, 5};
  dlb_buffer* b = wrap_transposed_3x2(mem);
  ASSERT_NE(b, nullptr);
  dlb_buffer* c = nullptr;
  ASSERT_EQ(dlb_buffer_copy_shared(b, 0, &c), DLB_OK);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 1);  // one mapping, none reopened
  EXPECT_EQ(shared_maps(), maps_at_start_ + 1);
  EXPECT_EQ(open_fds(), fds_at_start_ + 1);
  EXPECT_EQ(dlb_buffer_flags(c) & DLB_BUFFER_READ_ONLY, 0u);
  float* q = data_of(c);
  EXPECT_EQ(mapping_perms(q), "rw-s");
  const float want[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], want[i]);
  DLTensor ct;
  dlb_buffer_dltensor(c, &ct);
  EXPECT_EQ(ct.shape[0], 3);
  EXPECT_EQ(ct.shape[1], 2);
  // Shared without a further copy: the receiver sees this memory.
  dlb_share_descriptor d = share_of(c);
  dlb_buffer* o = open_of(d);
  dlb_share_descriptor_close(&d);
  data_of(o)[5] = 50.0f;
  EXPECT_EQ(q[5], 50.0f);
  EXPECT_EQ(mem[5], 5.0f);  // the source untouched
  dlb_buffer_release(o);
  dlb_buffer_release(c);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
  EXPECT_EQ(open_fds(), fds_at_start_);
  dlb_buffer_release(b);
}

TEST_F(Share, ReadOnlyCopySharedIsMappedAndFiledReadOnly) {
  dlb_buffer* src = alloc_shared_f32({1024});
  data_of(src)[7] = 7.0f;
  for (const bool by_flag : {true, false}) {
    dlb_buffer* from = src;
    dlb_buffer* ro = nullptr;
    if (!by_flag) {  // a read-only source gives a read-only copy
      DLTensor t;
      dlb_buffer_dltensor(src, &t);
      ASSERT_EQ(dlb_buffer_wrap(&t, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &ro), DLB_OK);
      from = ro;
    }
    dlb_buffer* c = nullptr;
    ASSERT_EQ(dlb_buffer_copy_shared(from, by_flag ? DLB_SHARE_READ_ONLY : 0, &c), DLB_OK);
    EXPECT_NE(dlb_buffer_flags(c) & DLB_BUFFER_READ_ONLY, 0u);
    const float* q = data_of(c);
    EXPECT_EQ(q[7], 7.0f);
    EXPECT_EQ(mapping_perms(q), "r--s");
    const int rc = in_child([q] {
      const_cast<volatile float*>(q)[0] = 2.0f;
      return 0;
    });
    EXPECT_NE(rc, 0);
    // Its descriptors cannot write: the file is held open read-only.
    dlb_share_descriptor d = share_of(c);
    EXPECT_EQ(fcntl(d.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
    EXPECT_EQ(get_le(d.description + kFlags, 8), 1u);
    dlb_share_descriptor_close(&d);
    dlb_buffer_release(c);
    dlb_buffer_release(ro);
  }
  dlb_buffer_release(src);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
  EXPECT_EQ(open_fds(), fds_at_start_);
}

TEST_F(Share, CopySharedRefusals) {
  dlb_buffer* b = alloc_shared_f32({4});
  dlb_buffer* c = nullptr;
  EXPECT_EQ(dlb_buffer_copy_shared(nullptr, 0, &c), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_copy_shared(b, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_copy_shared(b, DLB_SHARE_COPY_IF_NEEDED, &c), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("dlb_buffer_copy_shared does not take"));
  ASSERT_EQ(dlb_buffer_delete(b), DLB_OK);
  EXPECT_EQ(dlb_buffer_copy_shared(b, 0, &c), DLB_ERR_DELETED);
  EXPECT_EQ(c, nullptr);
  dlb_buffer_release(b);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
}

}  // namespace

// DLB_SHARE_TAKE_FD: on success the buffer keeps the caller's descriptor
// (no duplicate: the process holds one descriptor fewer than without the
// flag) and closes it at release; on every failure it is closed, whatever
// the check that failed; flag bits beyond the known ones are still refused
// (and a taken descriptor closed).
TEST_F(Share, TakeFdKeepsTheDescriptorOnSuccessAndClosesItOnFailure) {
  dlb_buffer* b = alloc_shared_f32({8});
  data_of(b)[3] = 7.0f;
  dlb_share_descriptor d = share_of(b);
  const int with_descriptor = open_fds();
  dlb_buffer* o = nullptr;
  ASSERT_EQ(dlb_buffer_open_shared(d.fd, d.description, d.size, DLB_SHARE_TAKE_FD, &o), DLB_OK);
  EXPECT_EQ(open_fds(), with_descriptor);  // the buffer holds d.fd itself
  EXPECT_GE(fcntl(d.fd, F_GETFD), 0);
  EXPECT_EQ(data_of(o)[3], 7.0f);
  dlb_buffer_release(o);
  EXPECT_EQ(open_fds(), with_descriptor - 1);  // closed with the mapping
  EXPECT_EQ(dlb_shared_mappings(), 1);

  struct Case {
    const char* what;
    int (*make_bad)(dlb_share_descriptor* d);  // spoils *d; returns the flags to add
    dlb_status want;
  };
  const Case cases[] = {
      {"a truncated description", [](dlb_share_descriptor* x) { x->size = 10; return 0; }, DLB_ERR_MALFORMED},
      {"a changed byte (checksum)", [](dlb_share_descriptor* x) { x->description[30] ^= 1; return 0; }, DLB_ERR_MALFORMED},
      {"an unknown flag bit", [](dlb_share_descriptor*) { return 1 << 3; }, DLB_ERR_INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    dlb_share_descriptor e = share_of(b);
    const int before = open_fds();
    const int extra = c.make_bad(&e);
    o = nullptr;
    EXPECT_EQ(dlb_buffer_open_shared(e.fd, e.description, e.size, DLB_SHARE_TAKE_FD | static_cast<std::uint64_t>(extra), &o),
              c.want);
    EXPECT_EQ(o, nullptr);
    EXPECT_EQ(open_fds(), before - 1);
    errno = 0;
    EXPECT_EQ(fcntl(e.fd, F_GETFD), -1);
    EXPECT_EQ(errno, EBADF);
  }
  // A file that is no sealed memory file: refused, and closed.
  const int plain = open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_GE(plain, 0);
  const int before = open_fds();
  EXPECT_EQ(dlb_buffer_open_shared(plain, d.description, d.size, DLB_SHARE_TAKE_FD, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(open_fds(), before - 1);
  dlb_buffer_release(b);
  EXPECT_EQ(dlb_shared_mappings(), 0);
  EXPECT_EQ(open_fds(), fds_at_start_);
}
