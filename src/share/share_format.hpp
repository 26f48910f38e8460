// The one wire format of sharing (version 1): everything that crosses a
// process boundary is a record of fixed-width little-endian fields that
// starts with the same 16-byte prefix, and is read by the one parser of
// share_format.cpp.
//
//   offset size field
//        0    4 magic "DLBS"
//        4    2 version (DLB_SHARE_DESCRIPTION_VERSION)
//        6    2 record type: 0 a description, 1 a ticket, 2 a request to a
//               ticket server
//        8    4 total size in bytes
//       12    4 checksum: FNV-1a (32 bits) of all bytes, this field as 0
//
// A description (type 0) of a shared buffer: 56 + 16 * ndim bytes, plus
// 128 for CUDA:
//       16    8 flags: bit 0 read-only; bit 1 sub-byte elements padded to
//                 a byte each (DLPack 1.1's IS_SUBBYTE_TYPE_PADDED; else
//                 sub-byte elements are packed); bits 8-15 the kind, 0 a host
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
//
// A ticket (type 1, dlb_share_ticket_issue()): 64 bytes, then a whole
// description (with its own prefix)
//       16    4 pid of the issuing process (0 without a file)
//       20    4 the file's descriptor number there (-1: none, CUDA IPC)
//       24    8 the file's device, 32 8 its inode (fstat)
//       40    8 the nonce naming the issuer's ticket server
//       48   16 the ticket's random token
//       64      the description of the tensor over the file
//
// A request (type 2) to a ticket server, and its answers, 40 bytes:
//       16    4 operation: 2 take the ticket's file (a receiver's request);
//               3 refused: the receiver is not of the server's user (an
//               answer); 4 not held (an answer)
//       20    4 0 in a request; in an answer the server's user id (3) or
//               why it holds no such ticket (4: 1 opened already, 2
//               withdrawn by its issuer, 3 withdrawn as the oldest past the
//               bound on unopened tickets, 0 unknown to it)
//       24   16 the ticket's token (0 in answer 3)
// The server answers a request to take with the description
// (dlb_share_send(), the file attached), or with answer 3 or 4. (Operation
// 1, a release sent after taking the file directly, is no longer read.)
#ifndef DLBRIDGE_SRC_SHARE_FORMAT_HPP_
#define DLBRIDGE_SRC_SHARE_FORMAT_HPP_

#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <cstddef>
#include <cstdint>

#include <sys/stat.h>

namespace dlb::share {

constexpr std::uint64_t kDescReadOnly = 1;
constexpr std::uint64_t kDescPadded = 2;  // sub-byte elements padded to a byte each
constexpr std::size_t kDescHeader = DLB_SHARE_DESCRIPTION_HEADER;
constexpr std::size_t kDescPrefix = 16;  // magic, version, reserved, size, checksum
constexpr std::uint64_t kKindShift = 8;   // the kind's bits in the flags
constexpr std::uint64_t kKindMask = 0xFF00;
constexpr std::size_t kIpcHandle = 64;    // CU_IPC_HANDLE_SIZE
constexpr std::uint16_t kRecordDescription = 0;
constexpr std::uint16_t kRecordTicket = 1;
constexpr std::uint16_t kRecordRequest = 2;
constexpr std::size_t kTicketHeader = 64;
constexpr std::size_t kTokenSize = 16;
constexpr std::size_t kRequestSize = 40;
constexpr std::uint32_t kTake = 2;
constexpr std::uint32_t kRefused = 3;
constexpr std::uint32_t kNotHeld = 4;
static_assert(DLB_SHARE_TICKET_MAX == kTicketHeader + DLB_SHARE_DESCRIPTION_MAX);
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

// The one read-only rule: what a call makes (a descriptor, a ticket, a
// copy, a mapping) is read-only when DLB_SHARE_READ_ONLY asks for it or its
// source (a buffer, a description) is read-only.
inline bool read_only_of(std::uint64_t flags, bool source_read_only) noexcept {
  return (flags & DLB_SHARE_READ_ONLY) != 0 || source_read_only;
}

// The rule of a descriptor's file: a host description comes with its
// memory file (fd >= 0), a CUDA IPC description with none (fd -1).
// DLB_OK, or `status` with a message naming `what` (where the fd is).
dlb_status check_fd_for_kind(std::uint32_t kind, std::int64_t fd, dlb_status status, const char* what) noexcept;

// The kind `size` bytes of a description declare (unchecked; host when
// they are too few to say), for the socket framing and the fd rule: a CUDA
// description travels without a file descriptor.
std::uint32_t declared_kind(const unsigned char* bytes, std::size_t size) noexcept;

// FNV-1a (32 bits) of `n` bytes with bytes 12-15 (the checksum's own field)
// taken as 0.
std::uint32_t checksum(const unsigned char* p, std::size_t n) noexcept;

// A ticket's fields (the description points into the parsed bytes).
struct Ticket {
  std::int32_t pid = 0;
  std::int32_t fd = -1;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t nonce = 0;
  unsigned char token[kTokenSize] = {};
  const unsigned char* description = nullptr;
  std::size_t description_size = 0;
};

// Writes the ticket (t's fields, then `dsize` bytes of description) into
// `out` (DLB_SHARE_TICKET_MAX bytes); returns its size.
std::size_t write_ticket(const Ticket& t, const unsigned char* description, std::size_t dsize,
                         unsigned char* out) noexcept;

// Reads and checks a ticket and the description it holds (`d`). Sets the
// error on failure.
dlb_status parse_ticket(const void* bytes, std::size_t size, Ticket* out, Description* d) noexcept;

// A request to a ticket server or its answer (kRequestSize bytes into
// `out`), and its check: a known operation, `arg` 0 in a request.
void write_request(std::uint32_t op, std::uint32_t arg, const unsigned char* token, unsigned char* out) noexcept;
dlb_status parse_request(const unsigned char* p, std::size_t size, std::uint32_t* op, std::uint32_t* arg,
                         unsigned char* token) noexcept;

// A file descriptor given with DLB_SHARE_TAKE_FD (else -1), closed on
// every return unless released to its new owner.
struct TakenFd {
  int fd;
  explicit TakenFd(int taken) noexcept : fd(taken) {}
  TakenFd(const TakenFd&) = delete;
  TakenFd& operator=(const TakenFd&) = delete;
  ~TakenFd();
  void release() noexcept { fd = -1; }
};

// DLB_ERR_INVALID_ARGUMENT naming the bits of `flags` outside `known`
// that `who` does not take; DLB_OK when there are none.
dlb_status check_flags(std::uint64_t flags, std::uint64_t known, const char* who) noexcept;

// Checks that `fd` is a memory file sealed against shrinking (so that its
// pages cannot vanish under a mapping): the seals first, then the size, so
// that a sender cannot shrink it between the two; `st` receives its fstat
// and `seals` its seals. Sets the error on failure.
dlb_status check_memory_file(int fd, struct stat* st, int* seals) noexcept;

}  // namespace dlb::share

#endif
