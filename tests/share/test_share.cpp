// Shared host memory: allocation, descriptors, opening them (in this
// process and in forked children), refusals of bad descriptions, passing
// descriptors over Unix sockets, and that nothing is left open or mapped.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "share_testing.hpp"
#include "support.hpp"

using namespace dlbtest;
using namespace sharetest;

namespace {

class Share : public DlbTest {
 protected:
  void SetUp() override {
    DlbTest::SetUp();
    fds_at_start_ = open_fds();
    mappings_at_start_ = dlb_shared_mappings();
    maps_at_start_ = shared_maps();
  }
  void TearDown() override {
    EXPECT_EQ(open_fds(), fds_at_start_) << "a file descriptor was left open";
    EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_) << "a shared mapping was left";
    EXPECT_EQ(shared_maps(), maps_at_start_) << "/proc/self/maps still lists a dlbridge memory file";
    DlbTest::TearDown();
  }
  int fds_at_start_ = 0;
  std::int64_t mappings_at_start_ = 0;
  int maps_at_start_ = 0;
};

dlb_buffer* alloc_shared_f32(std::vector<std::int64_t> shape) {
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_alloc_shared(cpu(), f32(), static_cast<int32_t>(shape.size()), shape.data(), &b), DLB_OK)
      << dlb_last_error_message();
  return b;
}

float* data_of(dlb_buffer* b) {
  DLTensor t;
  EXPECT_EQ(dlb_buffer_dltensor(b, &t), DLB_OK);
  return reinterpret_cast<float*>(static_cast<unsigned char*>(t.data) + t.byte_offset);
}

dlb_share_descriptor share_of(dlb_buffer* b, std::uint64_t flags = 0) {
  dlb_share_descriptor d;
  std::memset(&d, 0, sizeof d);
  d.fd = -7;
  EXPECT_EQ(dlb_buffer_share(b, flags, &d), DLB_OK) << dlb_last_error_message();
  return d;
}

dlb_buffer* open_of(const dlb_share_descriptor& d, std::uint64_t flags = 0) {
  dlb_buffer* b = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(d.fd, d.description, d.size, flags, &b), DLB_OK) << dlb_last_error_message();
  return b;
}

// Runs `child` in a forked process; returns its exit status (or 128 +
// signal).
template <class F>
int in_child(F child) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// Starts `child` in a forked process and returns at once; wait_child()
// collects its exit status.
template <class F>
pid_t start_child(F child) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  return pid;
}
int wait_child(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The permissions column of the /proc/self/maps line holding `p`.
std::string mapping_perms(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {0};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) == 3 && at >= lo && at < hi) return perms;
  }
  return "";
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
  EXPECT_EQ(fcntl(d.fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
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
  ASSERT_EQ(dlb_buffer_wrap(&v, 0, nullptr, nullptr, &b), DLB_OK);
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
  DLTensor t;
  dlb_buffer_dltensor(b, &t);
  dlb_buffer* ro = nullptr;
  ASSERT_EQ(dlb_buffer_wrap(&t, DLB_BUFFER_READ_ONLY, nullptr, nullptr, &ro), DLB_OK);
  dlb_share_descriptor d = share_of(ro);
  EXPECT_EQ(fcntl(d.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(ro);
  d = share_of(b);
  EXPECT_EQ(fcntl(d.fd, F_GETFL) & O_ACCMODE, O_RDWR);
  dlb_buffer* o = open_of(d, DLB_SHARE_READ_ONLY);
  EXPECT_NE(dlb_buffer_flags(o) & DLB_BUFFER_READ_ONLY, 0u);
  dlb_buffer_release(o);
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

// ---------------------------------------------------------------------------
// Descriptions that lie
// ---------------------------------------------------------------------------

class BadDescription : public Share {
 protected:
  void SetUp() override {
    Share::SetUp();
    buffer_ = alloc_shared_f32({4, 8});  // 128 bytes in a page
    d_ = share_of(buffer_);
    std::memcpy(bytes_, d_.description, d_.size);
    size_ = d_.size;
  }
  void TearDown() override {
    dlb_share_descriptor_close(&d_);
    dlb_buffer_release(buffer_);
    Share::TearDown();
  }
  // Opens the edited bytes; expects `status` and a message containing
  // `words`, and nothing mapped.
  void expect(dlb_status status, const char* words, bool reseal_first = true, int fd = -2) {
    if (reseal_first && size_ >= 16) reseal(bytes_, size_);
    dlb_buffer* out = nullptr;
    const std::int64_t before = dlb_shared_mappings();
    EXPECT_EQ(dlb_buffer_open_shared(fd == -2 ? d_.fd : fd, bytes_, size_, 0, &out), status)
        << dlb_last_error_message();
    EXPECT_TRUE(MessageContains(words));
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(dlb_shared_mappings(), before);
  }
  dlb_buffer* buffer_ = nullptr;
  dlb_share_descriptor d_{};
  unsigned char bytes_[DLB_SHARE_DESCRIPTION_MAX + 16] = {};
  std::size_t size_ = 0;
};

TEST_F(BadDescription, TheUneditedOneOpens) {
  dlb_buffer* out = nullptr;
  ASSERT_EQ(dlb_buffer_open_shared(d_.fd, bytes_, size_, 0, &out), DLB_OK);
  dlb_buffer_release(out);
}

TEST_F(BadDescription, Arguments) {
  dlb_buffer* out = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(d_.fd, nullptr, size_, 0, &out), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_open_shared(d_.fd, bytes_, size_, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_open_shared(d_.fd, bytes_, size_, 4, &out), DLB_ERR_INVALID_ARGUMENT);
  expect(DLB_ERR_INVALID_ARGUMENT, "fd is -1", false, -1);
}

TEST_F(BadDescription, Truncated) {
  size_ = 10;
  expect(DLB_ERR_MALFORMED, "truncated: 10 bytes", false);
  size_ = 0;
  expect(DLB_ERR_MALFORMED, "truncated: 0 bytes", false);
  size_ = d_.size - 1;
  expect(DLB_ERR_MALFORMED, "truncated: 87 of the 88 bytes", false);
}

TEST_F(BadDescription, TrailingBytes) {
  size_ = d_.size + 8;
  expect(DLB_ERR_MALFORMED, "declares 88 bytes but 96 were given", false);
}

TEST_F(BadDescription, NotADescription) {
  bytes_[0] = 'X';
  expect(DLB_ERR_MALFORMED, "not a dlbridge share description");
}

TEST_F(BadDescription, OtherVersion) {
  put_le(bytes_ + kVersion, 2, 2);
  expect(DLB_ERR_VERSION, "version 2; this library reads version 1");
}

TEST_F(BadDescription, Corrupted) {
  bytes_[kShape] ^= 1;
  expect(DLB_ERR_MALFORMED, "checksum", false);
  bytes_[kShape] ^= 1;
  bytes_[kChecksum] ^= 0x10;
  expect(DLB_ERR_MALFORMED, "checksum", false);
}

TEST_F(BadDescription, ReservedAndFlags) {
  put_le(bytes_ + kReserved, 1, 2);
  expect(DLB_ERR_MALFORMED, "reserved field is 1");
  put_le(bytes_ + kReserved, 0, 2);
  put_le(bytes_ + kFlags, 6, 8);
  expect(DLB_ERR_MALFORMED, "unknown flag bits 0x6");
}

TEST_F(BadDescription, FileSizeOtherThanTheFiles) {
  put_le(bytes_ + kFileSize, 2 * 4096, 8);
  expect(DLB_ERR_MALFORMED, "it has 4096");
}

TEST_F(BadDescription, LayoutPastTheEndOfTheFile) {
  put_le(bytes_ + kShape, 40, 8);  // 40 x 8 floats: 1280 bytes: fits a page
  reseal(bytes_, size_);
  dlb_buffer* out = nullptr;
  ASSERT_EQ(dlb_buffer_open_shared(d_.fd, bytes_, size_, 0, &out), DLB_OK) << dlb_last_error_message();
  dlb_buffer_release(out);
  put_le(bytes_ + kShape, 129, 8);  // 129 x 8 floats: 4128 bytes, the file has 4096
  expect(DLB_ERR_MALFORMED, "reaches byte 4128 but the file it declares has 4096 bytes");
  put_le(bytes_ + kShape, 4, 8);
  put_le(bytes_ + kByteOffset, 4096 - 64, 8);
  expect(DLB_ERR_MALFORMED, "reaches byte 4160");
  // A stride that reaches far past the file.
  put_le(bytes_ + kByteOffset, 0, 8);
  put_le(bytes_ + kShape + 16, static_cast<std::uint64_t>(1) << 20, 8);  // strides[0]
  expect(DLB_ERR_MALFORMED, "reaches byte");
}

TEST_F(BadDescription, LayoutBeforeTheStartOfTheFile) {
  put_le(bytes_ + kShape + 16, static_cast<std::uint64_t>(-8), 8);  // strides[0] = -8: rows go backwards
  expect(DLB_ERR_MALFORMED, "96 bytes before the start of the file");
}

TEST_F(BadDescription, Overflow) {
  put_le(bytes_ + kShape, static_cast<std::uint64_t>(1) << 62, 8);
  expect(DLB_ERR_OVERFLOW, "");
  put_le(bytes_ + kShape, 4, 8);
  put_le(bytes_ + kByteOffset, UINT64_MAX - 8, 8);
  expect(DLB_ERR_OVERFLOW, "64 bits");
}

TEST_F(BadDescription, EmptyWithHugeStridesOpensAndSharesOn) {
  // Found by fuzz_share: an empty layout's strides are never multiplied.
  put_le(bytes_ + kShape, static_cast<std::uint64_t>(1) << 61, 8);
  put_le(bytes_ + kShape + 8, 0, 8);
  put_le(bytes_ + kShape + 16, static_cast<std::uint64_t>(1) << 61, 8);
  reseal(bytes_, size_);
  dlb_buffer* out = nullptr;
  ASSERT_EQ(dlb_buffer_open_shared(d_.fd, bytes_, size_, 0, &out), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(dlb_buffer_nbytes(out), 0u);
  dlb_share_descriptor again = share_of(out);
  dlb_share_descriptor_close(&again);
  dlb_buffer_release(out);
}

TEST_F(BadDescription, NegativeExtent) {
  put_le(bytes_ + kShape + 8, static_cast<std::uint64_t>(-1), 8);
  expect(DLB_ERR_MALFORMED, "shape[1]");
}

TEST_F(BadDescription, NdimOutOfRangeOrInconsistent) {
  put_le(bytes_ + kNdim, 65, 4);
  expect(DLB_ERR_MALFORMED, "ndim is 65");
  put_le(bytes_ + kNdim, 3, 4);
  expect(DLB_ERR_MALFORMED, "ndim 3 needs 104");
  put_le(bytes_ + kNdim, static_cast<std::uint32_t>(-1), 4);
  expect(DLB_ERR_MALFORMED, "ndim is -1");
}

TEST_F(BadDescription, DeviceAndDtype) {
  put_le(bytes_ + kDeviceType, kDLCUDA, 4);
  expect(DLB_ERR_UNSUPPORTED_DEVICE, "device 2:0");
  put_le(bytes_ + kDeviceType, kDLCPU, 4);
  put_le(bytes_ + kDeviceId, 1, 4);
  expect(DLB_ERR_UNSUPPORTED_DEVICE, "device 1:1");
  put_le(bytes_ + kDeviceId, 0, 4);
  bytes_[kDtypeCode] = 77;
  expect(DLB_ERR_UNSUPPORTED_DTYPE, "");
  bytes_[kDtypeCode] = 17;  // kDLFloat4_e2m1fn
  bytes_[kDtypeBits] = 4;  // sub-byte with strides {8, 1}: compact, accepted
  reseal(bytes_, size_);
  dlb_buffer* out = nullptr;
  EXPECT_NE(dlb_buffer_open_shared(d_.fd, bytes_, size_, 0, &out), DLB_ERR_UNSUPPORTED_LAYOUT);
  dlb_buffer_release(out);
  put_le(bytes_ + kShape + 16, 16, 8);  // strided sub-byte rows
  expect(DLB_ERR_UNSUPPORTED_LAYOUT, "");
}

TEST_F(BadDescription, FilesThatAreNotSealedMemory) {
  // A memory file without seals could shrink under the mapping.
  const int plain = memfd_create("plain", MFD_CLOEXEC);
  ASSERT_GE(plain, 0);
  ASSERT_EQ(ftruncate(plain, 4096), 0);
  expect(DLB_ERR_INVALID_ARGUMENT, "not a memory file sealed against shrinking", true, plain);
  close(plain);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  expect(DLB_ERR_INVALID_ARGUMENT, "not a regular file", true, p[0]);
  close(p[0]);
  close(p[1]);
  expect(DLB_ERR_INVALID_ARGUMENT, "fstat failed", true, 1000);
}

// ---------------------------------------------------------------------------
// Other processes
// ---------------------------------------------------------------------------

TEST_F(Share, ForkedChildSeesWritesBothWays) {
  dlb_buffer* b = alloc_shared_f32({256});
  float* p = data_of(b);
  for (int i = 0; i < 256; ++i) p[i] = static_cast<float>(i);
  dlb_share_descriptor d = share_of(b);
  // The child opens the inherited descriptor, checks the parent's values,
  // and writes its own.
  const int rc = in_child([&] {
    dlb_buffer* o = nullptr;
    if (dlb_buffer_open_shared(d.fd, d.description, d.size, 0, &o) != DLB_OK) return 10;
    DLTensor t;
    dlb_buffer_dltensor(o, &t);
    float* q = static_cast<float*>(t.data);
    for (int i = 0; i < 256; ++i)
      if (q[i] != static_cast<float>(i)) return 11;
    for (int i = 0; i < 256; ++i) q[i] = -q[i];
    dlb_buffer_release(o);
    return dlb_shared_mappings() == mappings_at_start_ + 1 ? 0 : 12;
  });
  EXPECT_EQ(rc, 0);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(p[i], -static_cast<float>(i));
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
}

void socket_roundtrip(int type) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
  dlb_buffer* b = alloc_shared_f32({3, 7});
  float* p = data_of(b);
  p[20] = 20.0f;
  const pid_t child = start_child([&] {
    close(sv[0]);
    // The child: receive two descriptors, open them, write into the first,
    // send the second back.
    dlb_share_descriptor r1;
    dlb_share_descriptor r2;
    if (dlb_share_recv(sv[1], &r1) != DLB_OK) return 20;
    if (dlb_share_recv(sv[1], &r2) != DLB_OK) return 21;
    dlb_buffer* o = nullptr;
    if (dlb_buffer_open_shared(r1.fd, r1.description, r1.size, 0, &o) != DLB_OK) return 22;
    dlb_share_descriptor_close(&r1);
    DLTensor t;
    dlb_buffer_dltensor(o, &t);
    float* q = static_cast<float*>(t.data);
    if (q[20] != 20.0f || t.shape[1] != 7) return 23;
    q[0] = 1.5f;
    dlb_buffer_release(o);
    if (dlb_share_send(sv[1], &r2) != DLB_OK) return 24;
    dlb_share_descriptor_close(&r2);
    return 0;
  });
  close(sv[1]);
  dlb_share_descriptor d = share_of(b);
  ASSERT_EQ(dlb_share_send(sv[0], &d), DLB_OK) << dlb_last_error_message();
  ASSERT_EQ(dlb_share_send(sv[0], &d), DLB_OK);
  dlb_share_descriptor_close(&d);
  dlb_share_descriptor back;
  ASSERT_EQ(dlb_share_recv(sv[0], &back), DLB_OK) << dlb_last_error_message();
  EXPECT_GE(back.fd, 0);
  dlb_buffer* o = open_of(back);
  dlb_share_descriptor_close(&back);
  EXPECT_EQ(data_of(o)[0], 1.5f);
  dlb_buffer_release(o);
  // The child closes its end: the stream's end (nothing, for datagrams).
  if (type != SOCK_DGRAM) {
    dlb_share_descriptor end;
    ASSERT_EQ(dlb_share_recv(sv[0], &end), DLB_OK);
    EXPECT_EQ(end.fd, -1);
    EXPECT_EQ(end.size, 0u);
  }
  close(sv[0]);
  EXPECT_EQ(wait_child(child), 0);
  EXPECT_EQ(p[0], 1.5f);
  dlb_buffer_release(b);
}

TEST_F(Share, OverAStreamSocket) { socket_roundtrip(SOCK_STREAM); }
TEST_F(Share, OverASeqpacketSocket) { socket_roundtrip(SOCK_SEQPACKET); }
TEST_F(Share, OverADatagramSocket) { socket_roundtrip(SOCK_DGRAM); }

TEST_F(Share, SocketRefusals) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  dlb_share_descriptor d;
  std::memset(&d, 0, sizeof d);
  d.fd = -1;
  d.size = 56;
  EXPECT_EQ(dlb_share_send(sv[0], &d), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("no file to send"));
  d.fd = 0;
  d.size = 3;
  EXPECT_EQ(dlb_share_send(sv[0], &d), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_send(sv[0], nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_recv(sv[0], nullptr), DLB_ERR_INVALID_ARGUMENT);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  dlb_share_descriptor r;
  r.fd = 77;
  EXPECT_EQ(dlb_share_recv(p[0], &r), DLB_ERR_INVALID_ARGUMENT);  // not a socket
  EXPECT_TRUE(MessageContains("SO_TYPE"));
  close(p[0]);
  close(p[1]);
  // Bytes that are not a description (the stream is out of step after
  // them: a new connection for the next case).
  ASSERT_EQ(write(sv[1], "hello, this is not a description", 32), 32);
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("does not carry a share description"));
  EXPECT_EQ(r.fd, 77);
  close(sv[0]);
  close(sv[1]);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  // A description without its file descriptor, then cut short.
  dlb_buffer* b = alloc_shared_f32({2});
  dlb_share_descriptor good = share_of(b);
  ASSERT_EQ(write(sv[1], good.description, good.size), static_cast<ssize_t>(good.size));
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("without a file descriptor"));
  ASSERT_EQ(dlb_share_send(sv[1], &good), DLB_OK);
  dlb_share_descriptor_close(&good);
  dlb_buffer_release(b);
  close(sv[1]);  // nothing more: the received one is whole
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_OK);
  EXPECT_GE(r.fd, 0);
  dlb_share_descriptor_close(&r);
  close(sv[0]);
  // A message cut short by the peer's close.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(write(sv[1], "DLBS\x01\x00\x00\x00\x58\x00\x00\x00\x00\x00\x00\x00\x00", 17), 17);
  close(sv[1]);
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("closed after 17 of 88 bytes"));
  close(sv[0]);
}

TEST_F(Share, ExtraFileDescriptorsAreClosed) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  dlb_buffer* b = alloc_shared_f32({2});
  dlb_share_descriptor good = share_of(b);
  iovec iov{good.description, good.size};
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int two[2] = {good.fd, good.fd};
  std::memcpy(CMSG_DATA(c), two, sizeof two);
  ASSERT_EQ(sendmsg(sv[1], &msg, 0), static_cast<ssize_t>(good.size));
  const int before = open_fds();
  dlb_share_descriptor r;
  EXPECT_EQ(dlb_share_recv(sv[0], &r), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("more than one file descriptor"));
  EXPECT_EQ(open_fds(), before);
  dlb_share_descriptor_close(&good);
  dlb_buffer_release(b);
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
