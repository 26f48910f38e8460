// Writing and checking shared-buffer descriptions (format in
// share_format.hpp). The parser trusts nothing: every field is checked, and
// the layout's byte extent is computed with overflow checks and compared
// with the declared file size before anyone maps anything.
#include "share_format.hpp"

#include <cinttypes>
#include <cstring>

#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "core/layout.hpp"

namespace dlb::share {
namespace {

constexpr unsigned char kMagic[4] = {'D', 'L', 'B', 'S'};

void put(unsigned char* p, std::uint64_t v, int n) noexcept {
  for (int i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t get(const unsigned char* p, int n) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::uint32_t checksum(const unsigned char* p, std::size_t n) noexcept {
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = (i >= 12 && i < 16) ? 0 : p[i];
    h = (h ^ c) * 16777619u;
  }
  return h;
}

namespace {

// The prefix every record starts with; the checksum is filled by seal().
void write_prefix(unsigned char* out, std::uint16_t record, std::size_t size) noexcept {
  std::memcpy(out, kMagic, 4);
  put(out + 4, DLB_SHARE_DESCRIPTION_VERSION, 2);
  put(out + 6, record, 2);
  put(out + 8, size, 4);
}
void seal(unsigned char* out, std::size_t size) noexcept { put(out + 12, checksum(out, size), 4); }

const char* record_name(std::uint16_t record) noexcept {
  return record == kRecordTicket ? "share ticket" : record == kRecordRequest ? "ticket request" : "share description";
}

// Checks the prefix of `size` bytes of a `record`: magic, version, the size
// it declares, the record type, the checksum. Sets the error on failure.
dlb_status check_prefix(const unsigned char* p, std::size_t size, std::uint16_t record, std::size_t min_size) noexcept {
  const char* what = record_name(record);
  if (size < kDescPrefix)
    return set_error(DLB_ERR_MALFORMED, "the %s is truncated: %zu bytes, its prefix alone has %zu", what, size,
                     kDescPrefix);
  if (std::memcmp(p, kMagic, 4) != 0)
    return set_error(DLB_ERR_MALFORMED,
                     "not a dlbridge %s: it starts with bytes %02x %02x %02x %02x, not \"DLBS\"", what, p[0], p[1],
                     p[2], p[3]);
  const std::uint64_t version = get(p + 4, 2);
  if (version != DLB_SHARE_DESCRIPTION_VERSION)
    return set_error(DLB_ERR_VERSION, "the %s has version %" PRIu64 "; this library reads version %d", what, version,
                     DLB_SHARE_DESCRIPTION_VERSION);
  const std::uint64_t declared = get(p + 8, 4);
  if (declared > size)
    return set_error(DLB_ERR_MALFORMED, "the %s is truncated: %zu of the %" PRIu64 " bytes it declares", what, size,
                     declared);
  if (declared < size)
    return set_error(DLB_ERR_MALFORMED, "the %s declares %" PRIu64 " bytes but %zu were given", what, declared, size);
  if (size < min_size)
    return set_error(DLB_ERR_MALFORMED, "the %s is truncated: %zu bytes, its fixed part has %zu", what, size, min_size);
  const std::uint32_t sum = checksum(p, size);
  if (sum != get(p + 12, 4))
    return set_error(DLB_ERR_MALFORMED, "the %s's checksum is 0x%08" PRIx64 " but its bytes give 0x%08" PRIx32
                     " (corrupted)", what, get(p + 12, 4), sum);
  if (get(p + 6, 2) != record)
    return set_error(DLB_ERR_MALFORMED, "a %s was expected, but the record is a %s (type %" PRIu64 ")", what,
                     record_name(static_cast<std::uint16_t>(get(p + 6, 2))), get(p + 6, 2));
  return DLB_OK;
}

std::size_t write_any(const DLTensor& t, std::uint32_t kind, std::uint64_t file_size, std::uint64_t flags,
                      const unsigned char* mem_handle, const unsigned char* event_handle,
                      unsigned char* out) noexcept {
  const std::size_t ndim = static_cast<std::size_t>(t.ndim);
  const std::size_t tail = kind == DLB_SHARE_KIND_CUDA_IPC ? 2 * kIpcHandle : 0;
  const std::size_t size = kDescHeader + 16 * ndim + tail;
  std::memset(out, 0, size);
  write_prefix(out, kRecordDescription, size);
  put(out + 16, flags | (static_cast<std::uint64_t>(kind) << kKindShift), 8);
  put(out + 24, file_size, 8);
  put(out + 32, t.byte_offset, 8);
  put(out + 40, static_cast<std::uint32_t>(device_type_of(t.device)), 4);
  put(out + 44, static_cast<std::uint32_t>(t.device.device_id), 4);
  out[48] = t.dtype.code;
  out[49] = t.dtype.bits;
  put(out + 50, t.dtype.lanes, 2);
  put(out + 52, static_cast<std::uint32_t>(t.ndim), 4);
  for (std::size_t i = 0; i < ndim; ++i) {
    put(out + kDescHeader + 8 * i, static_cast<std::uint64_t>(t.shape[i]), 8);
    put(out + kDescHeader + 8 * (ndim + i), static_cast<std::uint64_t>(t.strides[i]), 8);
  }
  if (tail != 0) {
    std::memcpy(out + kDescHeader + 16 * ndim, mem_handle, kIpcHandle);
    std::memcpy(out + kDescHeader + 16 * ndim + kIpcHandle, event_handle, kIpcHandle);
  }
  seal(out, size);
  return size;
}

}  // namespace

std::size_t write_description(const DLTensor& t, std::uint64_t file_size, std::uint64_t flags,
                              unsigned char* out) noexcept {
  return write_any(t, DLB_SHARE_KIND_HOST, file_size, flags, nullptr, nullptr, out);
}

std::size_t write_cuda_description(const DLTensor& t, std::uint64_t alloc_size, std::uint64_t flags,
                                   const unsigned char* mem_handle, const unsigned char* event_handle,
                                   unsigned char* out) noexcept {
  return write_any(t, DLB_SHARE_KIND_CUDA_IPC, alloc_size, flags, mem_handle, event_handle, out);
}

std::uint32_t declared_kind(const unsigned char* bytes, std::size_t size) noexcept {
  if (size < 24) return DLB_SHARE_KIND_HOST;
  return static_cast<std::uint32_t>((get(bytes + 16, 8) & kKindMask) >> kKindShift);
}

dlb_status check_fd_for_kind(std::uint32_t kind, std::int64_t fd, dlb_status status, const char* what) noexcept {
  if (kind == DLB_SHARE_KIND_CUDA_IPC && fd != -1)
    return set_error(status, "%s is %" PRId64 " but a CUDA IPC description carries no file (fd must be -1)", what, fd);
  if (kind != DLB_SHARE_KIND_CUDA_IPC && fd < 0)
    return set_error(status, "%s is %" PRId64 ": a host description needs its memory file, and there is none", what,
                     fd);
  return DLB_OK;
}

std::uint32_t declared_size(const unsigned char* prefix) noexcept {
  if (std::memcmp(prefix, kMagic, 4) != 0) return 0;
  return static_cast<std::uint32_t>(get(prefix + 8, 4));
}

dlb_status parse_description(const void* bytes, std::size_t size, Description* out) noexcept {
  const unsigned char* p = static_cast<const unsigned char*>(bytes);
  DLB_TRY(check_prefix(p, size, kRecordDescription, kDescHeader));
  Description d;
  const std::uint64_t raw_flags = get(p + 16, 8);
  d.flags = raw_flags & ~kKindMask;
  if ((d.flags & ~(kDescReadOnly | kDescPadded)) != 0)
    return set_error(DLB_ERR_MALFORMED, "the share description has unknown flag bits 0x%" PRIx64,
                     d.flags & ~(kDescReadOnly | kDescPadded));
  d.kind = static_cast<std::uint32_t>((raw_flags & kKindMask) >> kKindShift);
  if (d.kind != DLB_SHARE_KIND_HOST && d.kind != DLB_SHARE_KIND_CUDA_IPC)
    return set_error(DLB_ERR_MALFORMED,
                     "the share description is of kind %" PRIu32 "; this library knows kinds %d (a host memory "
                     "file) and %d (CUDA IPC)",
                     d.kind, DLB_SHARE_KIND_HOST, DLB_SHARE_KIND_CUDA_IPC);
  const bool cuda = d.kind == DLB_SHARE_KIND_CUDA_IPC;
  d.file_size = get(p + 24, 8);
  d.byte_offset = get(p + 32, 8);
  const std::int32_t device_type = static_cast<std::int32_t>(get(p + 40, 4));
  const std::int32_t device_id = static_cast<std::int32_t>(get(p + 44, 4));
  if (!cuda && (device_type != kDLCPU || device_id != 0))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "the share description is for device %" PRId32 ":%" PRId32
                     "; shared memory is host memory (%d:0)", device_type, device_id, static_cast<int>(kDLCPU));
  if (cuda && (device_type != kDLCUDA || device_id < 0))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "the CUDA IPC share description is for device %" PRId32 ":%" PRId32
                     "; CUDA IPC shares CUDA device memory (%d:N)", device_type, device_id,
                     static_cast<int>(kDLCUDA));
  d.device = DLDevice{static_cast<DLDeviceType>(cuda ? kDLCUDA : kDLCPU), cuda ? device_id : 0};
  d.dtype.code = p[48];
  d.dtype.bits = p[49];
  d.dtype.lanes = static_cast<std::uint16_t>(get(p + 50, 2));
  d.ndim = static_cast<std::int32_t>(get(p + 52, 4));
  if (d.ndim < 0 || d.ndim > DLB_MAX_NDIM)
    return set_error(DLB_ERR_MALFORMED, "the share description's ndim is %" PRId32 " (0 to %d)", d.ndim, DLB_MAX_NDIM);
  const std::size_t ndim = static_cast<std::size_t>(d.ndim);
  const std::size_t tail = cuda ? 2 * kIpcHandle : 0;
  if (size != kDescHeader + 16 * ndim + tail)
    return set_error(DLB_ERR_MALFORMED, "the %s share description has %zu bytes; ndim %" PRId32 " needs %zu",
                     cuda ? "CUDA IPC" : "host", size, d.ndim, kDescHeader + 16 * ndim + tail);
  if (cuda) {
    std::memcpy(d.mem_handle, p + kDescHeader + 16 * ndim, kIpcHandle);
    std::memcpy(d.event_handle, p + kDescHeader + 16 * ndim + kIpcHandle, kIpcHandle);
  }
  for (std::size_t i = 0; i < ndim; ++i) {
    d.shape[i] = static_cast<std::int64_t>(get(p + kDescHeader + 8 * i, 8));
    d.strides[i] = static_cast<std::int64_t>(get(p + kDescHeader + 8 * (ndim + i), 8));
  }
  DLTensor t = view_of(d, nullptr);
  LayoutInfo info;
  const bool padded = (d.flags & kDescPadded) != 0;
  if (padded && !paddable(d.dtype))
    return set_error(DLB_ERR_MALFORMED, "the share description says its elements are padded sub-byte elements, but "
                     "its dtype has %u bits", static_cast<unsigned>(element_bits(d.dtype)));
  DLB_TRY(check_layout(&t, Origin::incoming, false, &info, padded));  // padded: a byte per element
  if (!padded && !byte_addressable(d.dtype) && !info.contiguous && !info.empty)
    return set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                     "the share description lays sub-byte elements (%u bits) out with strides; they must be compact",
                     static_cast<unsigned>(element_bits(d.dtype)));
  // Bytes [byte_offset - below, + span) of the file that the layout reaches
  // (check_layout made sure byte_offset plus the span fits 64 bits).
  if (info.below_bytes > d.byte_offset)
    return set_error(DLB_ERR_MALFORMED, "the share description's layout reaches %" PRIu64
                     " bytes before the start of the file (byte offset %" PRIu64 ")",
                     info.below_bytes - d.byte_offset, d.byte_offset);
  const std::uint64_t end = d.byte_offset - info.below_bytes + info.span_bytes;
  if (end > d.file_size)
    return set_error(DLB_ERR_MALFORMED, "the share description's layout reaches byte %" PRIu64
                     " but the file it declares has %" PRIu64 " bytes", end, d.file_size);
  *out = d;
  return DLB_OK;
}

DLTensor view_of(Description& d, void* base) noexcept {
  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.data = base;
  view.device = d.device;
  view.dtype = d.dtype;
  view.ndim = d.ndim;
  view.shape = d.shape;
  view.strides = d.strides;
  view.byte_offset = d.byte_offset;
  return view;
}

std::size_t write_ticket(const Ticket& t, const unsigned char* description, std::size_t dsize,
                         unsigned char* out) noexcept {
  const std::size_t size = kTicketHeader + dsize;
  std::memset(out, 0, kTicketHeader);
  write_prefix(out, kRecordTicket, size);
  put(out + 16, static_cast<std::uint32_t>(t.pid), 4);
  put(out + 20, static_cast<std::uint32_t>(t.fd), 4);
  put(out + 24, t.dev, 8);
  put(out + 32, t.ino, 8);
  put(out + 40, t.nonce, 8);
  std::memcpy(out + 48, t.token, kTokenSize);
  std::memcpy(out + kTicketHeader, description, dsize);
  seal(out, size);
  return size;
}

dlb_status parse_ticket(const void* bytes, std::size_t size, Ticket* out, Description* d) noexcept {
  const auto* p = static_cast<const unsigned char*>(bytes);
  DLB_TRY(check_prefix(p, size, kRecordTicket, kTicketHeader));
  Ticket t;
  t.pid = static_cast<std::int32_t>(get(p + 16, 4));
  t.fd = static_cast<std::int32_t>(get(p + 20, 4));
  t.dev = get(p + 24, 8);
  t.ino = get(p + 32, 8);
  t.nonce = get(p + 40, 8);
  std::memcpy(t.token, p + 48, kTokenSize);
  t.description = p + kTicketHeader;
  t.description_size = size - kTicketHeader;
  DLB_TRY(parse_description(t.description, t.description_size, d));
  DLB_TRY(check_fd_for_kind(d->kind, t.fd, DLB_ERR_MALFORMED, "the share ticket's file descriptor"));
  if (t.fd >= 0 && t.pid <= 0)
    return set_error(DLB_ERR_MALFORMED, "the share ticket names process %" PRId32, t.pid);
  *out = t;
  return DLB_OK;
}

void write_request(std::uint32_t op, std::uint32_t arg, const unsigned char* token, unsigned char* out) noexcept {
  std::memset(out, 0, kRequestSize);
  write_prefix(out, kRecordRequest, kRequestSize);
  put(out + 16, op, 4);
  put(out + 20, arg, 4);
  std::memcpy(out + 24, token, kTokenSize);
  seal(out, kRequestSize);
}

dlb_status parse_request(const unsigned char* p, std::size_t size, std::uint32_t* op, std::uint32_t* arg,
                         unsigned char* token) noexcept {
  DLB_TRY(check_prefix(p, size, kRecordRequest, kRequestSize));
  const std::uint32_t o = static_cast<std::uint32_t>(get(p + 16, 4));
  const std::uint32_t a = static_cast<std::uint32_t>(get(p + 20, 4));
  if (size != kRequestSize || (o != kTake && o != kRefused && o != kNotHeld) || (o == kTake && a != 0))
    return set_error(DLB_ERR_MALFORMED, "not a ticket request or answer (operation %" PRIu32 ", %zu bytes)", o, size);
  *op = o;
  *arg = a;
  std::memcpy(token, p + 24, kTokenSize);
  return DLB_OK;
}

}  // namespace dlb::share
