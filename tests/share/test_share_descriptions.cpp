// Opening descriptions that lie: each field edited (with the checksum
// recomputed where the test aims past it), refused with its own status and
// message, and nothing mapped or left open.
#include "share_fixture.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

using namespace dlbtest;
using namespace sharetest;

namespace {

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

// dlb_share_description_kind: the core's answer, after the same checks.
TEST_F(BadDescription, KindIsAskedOfTheCoreAfterTheSameChecks) {
  std::uint32_t kind = 77;
  ASSERT_EQ(dlb_share_description_kind(bytes_, size_, &kind), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(kind, static_cast<std::uint32_t>(DLB_SHARE_KIND_HOST));
  kind = 77;
  EXPECT_EQ(dlb_share_description_kind(nullptr, size_, &kind), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("description is NULL"));
  EXPECT_EQ(dlb_share_description_kind(bytes_, size_, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageContains("kind is NULL"));
  EXPECT_EQ(dlb_share_description_kind(bytes_, size_ - 1, &kind), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("truncated: 87 of the 88 bytes"));
  bytes_[kShape] ^= 1;  // the checksum no longer holds
  EXPECT_EQ(dlb_share_description_kind(bytes_, size_, &kind), DLB_ERR_MALFORMED);
  EXPECT_TRUE(MessageContains("checksum"));
  bytes_[kShape] ^= 1;
  put_le(bytes_ + kVersion, 2, 2);
  reseal(bytes_, size_);
  EXPECT_EQ(dlb_share_description_kind(bytes_, size_, &kind), DLB_ERR_VERSION);
  EXPECT_EQ(kind, 77u) << "kind written on failure";
}

TEST_F(BadDescription, Arguments) {
  dlb_buffer* out = nullptr;
  EXPECT_EQ(dlb_buffer_open_shared(d_.fd, nullptr, size_, 0, &out), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_open_shared(d_.fd, bytes_, size_, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_open_shared(d_.fd, bytes_, size_, 8, &out), DLB_ERR_INVALID_ARGUMENT);  // an unknown bit
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

TEST_F(BadDescription, RecordTypeAndFlags) {
  put_le(bytes_ + kReserved, 1, 2);  // a ticket's record type
  expect(DLB_ERR_MALFORMED, "a share description was expected, but the record is a share ticket (type 1)");
  put_le(bytes_ + kReserved, 0, 2);
  put_le(bytes_ + kFlags, 5, 8);
  expect(DLB_ERR_MALFORMED, "unknown flag bits 0x4");
  // bit 1, padded sub-byte elements, on float32 elements: no such layout
  put_le(bytes_ + kFlags, 2, 8);
  expect(DLB_ERR_MALFORMED, "says its elements are padded sub-byte elements, but its dtype has 32 bits");
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

TEST_F(BadDescription, KindsDevicesAndFixedPartsThatDoNotExist) {
  put_le(bytes_ + kFlags, std::uint64_t{2} << 8, 8);  // kind 2
  expect(DLB_ERR_MALFORMED, "is of kind 2; this library knows kinds 0");
  put_le(bytes_ + kFlags, std::uint64_t{1} << 8, 8);  // CUDA IPC, on the CPU
  expect(DLB_ERR_UNSUPPORTED_DEVICE, "the CUDA IPC share description is for device 1:0", true, -1);
  // A record shorter than the fixed part that declares its own size.
  put_le(bytes_ + kFlags, 0, 8);
  size_ = 40;
  put_le(bytes_ + kSize, 40, 4);
  expect(DLB_ERR_MALFORMED, "truncated: 40 bytes, its fixed part has 56");
}

// An empty file: an empty tensor's layout fits it, but nothing can be
// mapped.
TEST_F(BadDescription, AnEmptyFileIsRefused) {
  const int fd = memfd_create("empty", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  put_le(bytes_ + kFileSize, 0, 8);
  put_le(bytes_ + kShape, 0, 8);  // 0 x 8
  expect(DLB_ERR_MALFORMED, "file size 0 cannot be mapped", true, fd);
  close(fd);
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
  expect(DLB_ERR_INVALID_ARGUMENT, "not a memory file sealed against shrinking", true, p[0]);
  close(p[0]);
  close(p[1]);
  expect(DLB_ERR_INVALID_ARGUMENT, "fd 1000 is not open", true, 1000);
}

}  // namespace
