// The description of a shared buffer (version 1): fixed-width
// little-endian fields, then shape and strides.
//
//   offset size field
//        0    4 magic "DLBS"
//        4    2 version (DLB_SHARE_DESCRIPTION_VERSION)
//        6    2 reserved, 0
//        8    4 total size in bytes (56 + 16 * ndim)
//       12    4 checksum: FNV-1a (32 bits) of all bytes, this field as 0
//       16    8 flags (bit 0: read-only)
//       24    8 size of the memory file in bytes
//       32    8 byte offset of element [0, ...] from the start of the file
//       40    4 device type (kDLCPU)
//       44    4 device id (0)
//       48    1 dtype code, 1 dtype bits, 2 dtype lanes
//       52    4 ndim
//       56      shape[ndim], then strides[ndim] (in elements), 8 bytes each
#ifndef DLBRIDGE_SRC_SHARE_FORMAT_HPP_
#define DLBRIDGE_SRC_SHARE_FORMAT_HPP_

#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <cstddef>
#include <cstdint>

namespace dlb::share {

constexpr std::uint64_t kDescReadOnly = 1;
constexpr std::size_t kDescHeader = DLB_SHARE_DESCRIPTION_HEADER;
constexpr std::size_t kDescPrefix = 16;  // magic, version, reserved, size, checksum
static_assert(kDescHeader == 56);

// A parsed, checked description: every byte its layout reaches lies in
// [0, file_size).
struct Description {
  std::uint64_t flags = 0;
  std::uint64_t file_size = 0;
  std::uint64_t byte_offset = 0;
  DLDataType dtype{};
  std::int32_t ndim = 0;
  std::int64_t shape[DLB_MAX_NDIM] = {};
  std::int64_t strides[DLB_MAX_NDIM] = {};
};

// Writes the description of host view `t` (byte_offset from the file's
// start, strides never NULL for ndim > 0) over a file of `file_size` bytes
// into `out` (DLB_SHARE_DESCRIPTION_MAX bytes); returns its size.
std::size_t write_description(const DLTensor& t, std::uint64_t file_size, std::uint64_t flags,
                              unsigned char* out) noexcept;

// Reads and checks `size` bytes. The file itself is not looked at here
// (the caller compares file_size with it). Sets the error on failure.
dlb_status parse_description(const void* bytes, std::size_t size, Description* out) noexcept;

// The description's size as its prefix declares it, or 0 when the first
// kDescPrefix bytes are not a description's prefix (for the socket
// framing).
std::uint32_t declared_size(const unsigned char* prefix) noexcept;

}  // namespace dlb::share

#endif
