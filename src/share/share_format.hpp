// The description of a shared buffer (version 1): fixed-width
// little-endian fields, then shape and strides, then for the CUDA kind the
// two IPC handles.
//
//   offset size field
//        0    4 magic "DLBS"
//        4    2 version (DLB_SHARE_DESCRIPTION_VERSION)
//        6    2 reserved, 0
//        8    4 total size in bytes (56 + 16 * ndim, plus 128 for CUDA)
//       12    4 checksum: FNV-1a (32 bits) of all bytes, this field as 0
//       16    8 flags: bit 0 read-only; bits 8-15 the kind, 0 a host
//                 memory file (DLB_SHARE_KIND_HOST), 1 CUDA IPC
//                 (DLB_SHARE_KIND_CUDA_IPC); other bits 0
//       24    8 size of the memory file in bytes (CUDA: of the device
//                 allocation the memory handle names)
//       32    8 byte offset of element [0, ...] from the start of the file
//                 (CUDA: of the allocation)
//       40    4 device type (kDLCPU; CUDA: kDLCUDA)
//       44    4 device id (0; CUDA: the producer's device ordinal)
//       48    1 dtype code, 1 dtype bits, 2 dtype lanes
//       52    4 ndim
//       56      shape[ndim], then strides[ndim] (in elements), 8 bytes each
//   CUDA only, after the strides:
//               64 bytes CUipcMemHandle of the allocation's base, then
//               64 bytes CUipcEventHandle of an event recorded after the
//               producer's last write
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
constexpr std::uint64_t kKindShift = 8;   // the kind's bits in the flags
constexpr std::uint64_t kKindMask = 0xFF00;
constexpr std::size_t kIpcHandle = 64;    // CU_IPC_HANDLE_SIZE
static_assert(kDescHeader == 56);
static_assert(DLB_SHARE_CUDA_HANDLES == 2 * kIpcHandle);

// A parsed, checked description: every byte its layout reaches lies in
// [0, file_size).
struct Description {
  std::uint32_t kind = DLB_SHARE_KIND_HOST;
  DLDevice device{kDLCPU, 0};
  std::uint64_t flags = 0;
  std::uint64_t file_size = 0;
  std::uint64_t byte_offset = 0;
  DLDataType dtype{};
  std::int32_t ndim = 0;
  std::int64_t shape[DLB_MAX_NDIM] = {};
  std::int64_t strides[DLB_MAX_NDIM] = {};
  unsigned char mem_handle[kIpcHandle] = {};    // CUDA only
  unsigned char event_handle[kIpcHandle] = {};  // CUDA only
  std::uint64_t reach_begin = 0;  // bytes [reach_begin, reach_end) of the file the layout reaches
  std::uint64_t reach_end = 0;
};

// The view a parsed description lays over memory starting at `base`, on
// its device (shape and strides point into `d`, which must outlive it).
DLTensor view_of(Description& d, void* base) noexcept;

// Writes the description of host view `t` (byte_offset from the file's
// start, strides never NULL for ndim > 0) over a file of `file_size` bytes
// into `out` (DLB_SHARE_DESCRIPTION_MAX bytes); returns its size.
std::size_t write_description(const DLTensor& t, std::uint64_t file_size, std::uint64_t flags,
                              unsigned char* out) noexcept;

// The CUDA IPC kind: view `t` on kDLCUDA (byte_offset from the allocation's
// base), an allocation of `alloc_size` bytes, and the two handles.
std::size_t write_cuda_description(const DLTensor& t, std::uint64_t alloc_size, std::uint64_t flags,
                                   const unsigned char* mem_handle, const unsigned char* event_handle,
                                   unsigned char* out) noexcept;

// Reads and checks `size` bytes. The file itself is not looked at here
// (the caller compares file_size with it). Sets the error on failure.
dlb_status parse_description(const void* bytes, std::size_t size, Description* out) noexcept;

// The description's size as its prefix declares it, or 0 when the first
// kDescPrefix bytes are not a description's prefix (for the socket
// framing).
std::uint32_t declared_size(const unsigned char* prefix) noexcept;

// The kind `size` bytes of a description declare (unchecked; host when
// they are too few to say), for the socket framing and the fd rule: a CUDA
// description travels without a file descriptor.
std::uint32_t declared_kind(const unsigned char* bytes, std::size_t size) noexcept;

// FNV-1a (32 bits) of `n` bytes with bytes 12-15 (the checksum's own field
// in descriptions and pool tickets) taken as 0.
std::uint32_t checksum(const unsigned char* p, std::size_t n) noexcept;

// A pool ticket (dlb_share_pool_ticket, version 1), in this machine's byte
// order (it never leaves the machine: the slab's file cannot):
//
//   offset size field
//        0    4 magic "DLBP"
//        4    2 version (kTicketVersion), 2 reserved, 0
//        8    4 total size in bytes (64 + the description's)
//       12    4 checksum: FNV-1a (32 bits) of all bytes, this field as 0
//       16    4 pid of the issuing process
//       20    4 the slab's file descriptor number there
//       24    8 the slab file's device, 32 8 its inode (fstat)
//       40    8 the slab's size in bytes
//       48    4 slot, 52 4 ticket cell
//       56    8 the ticket's token (the cell's value until it is opened)
//       64      the tensor's description over the slab's file
constexpr std::size_t kTicketHeader = 64;
constexpr std::uint16_t kTicketVersion = 1;
static_assert(DLB_SHARE_POOL_TICKET_MAX == kTicketHeader + DLB_SHARE_DESCRIPTION_MAX);

struct PoolTicket {
  std::int32_t pid = 0;
  std::int32_t fd = -1;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t slab_size = 0;
  std::uint32_t slot = 0;
  std::uint32_t cell = 0;
  std::uint64_t token = 0;
  const unsigned char* description = nullptr;  // into the parsed bytes
  std::size_t description_size = 0;
};

// Writes the ticket (t's fields, then `dsize` bytes of description) into
// `out` (DLB_SHARE_POOL_TICKET_MAX bytes); returns its size.
std::size_t write_pool_ticket(const PoolTicket& t, const unsigned char* description, std::size_t dsize,
                              unsigned char* out) noexcept;

// Reads and checks a ticket's fixed part (magic, version, size, checksum);
// the description is checked by the caller. Sets the error on failure.
dlb_status parse_pool_ticket(const void* bytes, std::size_t size, PoolTicket* out) noexcept;

}  // namespace dlb::share

#endif
