// libFuzzer target: the sharing wire format. dlb_buffer_open_shared on
// arbitrary descriptions over real memory files, or with bit 0x04 of the
// first byte dlb_share_ticket_open on a ticket (of this process, naming
// the file) around them. The first byte picks the file (sealed, 8 KiB;
// sealed, one page; unsealed) and whether the harness rewrites the
// checksums so that the input reaches the checks behind them; the rest is
// the description or ticket (or, with bit 0x40, edits applied to a valid
// one of a random layout, a description of the CUDA IPC kind with bit 0x08:
// its two handles come from the input).
// Bit 0x10 passes fd -1, as a CUDA IPC description wants; there is no CUDA
// driver here, so such a description that passes every check is refused
// with DLB_ERR_UNSUPPORTED_DEVICE when the driver is asked for.
//
// When the library accepts a description, every byte the buffer's layout
// reaches (computed here, independently) must lie inside the mapping: the
// harness reads the first and last of them, which would fault outside it.
// Every call leaves no mapping behind, a failure has a known status and a
// message, and a success exports and releases cleanly.
#include <dlbridge/share.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.hpp"

namespace {

struct Files {
  int big = -1;       // 8 KiB, sealed
  int page = -1;      // 4 KiB, sealed
  int unsealed = -1;  // 8 KiB, no seals
  Files() {
    big = make(8192, true);
    page = make(4096, true);
    unsealed = make(8192, false);
  }
  static int make(off_t size, bool seal) {
    const int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    FUZZ_CHECK(fd >= 0 && ftruncate(fd, size) == 0, "memfd setup failed");
    if (seal) FUZZ_CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0, "sealing failed");
    return fd;
  }
};

void put(unsigned char* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

void reseal(unsigned char* p, std::size_t n) {
  if (n < 16) return;
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ ((i >= 12 && i < 16) ? 0 : p[i])) * 16777619u;
  put(p + 12, h, 4);
}

// A valid description of a random small layout over an 8 KiB file (or a
// CUDA allocation of 8 KiB).
std::size_t valid_description(fuzz::Reader& r, unsigned char* out, bool cuda) {
  const std::int32_t ndim = r.u8() % 5;
  std::int64_t shape[4];
  std::int64_t strides[4];
  std::int64_t step = 1;
  for (std::int32_t i = ndim - 1; i >= 0; --i) {
    shape[i] = 1 + r.u8() % 6;
    strides[i] = step;
    step *= shape[i];
  }
  const std::size_t size =
      DLB_SHARE_DESCRIPTION_HEADER + 16 * static_cast<std::size_t>(ndim) + (cuda ? DLB_SHARE_CUDA_HANDLES : 0);
  std::memset(out, 0, size);
  std::memcpy(out, "DLBS", 4);
  put(out + 4, 1, 2);
  put(out + 8, size, 4);
  put(out + 24, 8192, 8);
  put(out + 32, 64 * (r.u8() % 8), 8);
  put(out + 17, cuda ? DLB_SHARE_KIND_CUDA_IPC : DLB_SHARE_KIND_HOST, 1);
  put(out + 40, cuda ? kDLCUDA : kDLCPU, 4);
  out[48] = kDLFloat;
  out[49] = 32;
  put(out + 50, 1, 2);
  put(out + 52, static_cast<std::uint32_t>(ndim), 4);
  for (std::int32_t i = 0; i < ndim; ++i) {
    put(out + DLB_SHARE_DESCRIPTION_HEADER + 8 * i, static_cast<std::uint64_t>(shape[i]), 8);
    put(out + DLB_SHARE_DESCRIPTION_HEADER + 8 * (ndim + i), static_cast<std::uint64_t>(strides[i]), 8);
  }
  if (cuda)
    for (std::size_t i = size - DLB_SHARE_CUDA_HANDLES; i < size; ++i) out[i] = r.u8();
  return size;
}

// Bytes [lo, hi) of the origin-relative range the view reaches, or false
// for an empty view.
bool reach(const DLTensor& t, std::int64_t* lo, std::int64_t* hi) {
  for (std::int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] == 0) return false;
  std::int64_t mn = 0, mx = 0;
  for (std::int32_t i = 0; i < t.ndim; ++i) {
    const std::int64_t r = (t.shape[i] - 1) * t.strides[i];
    if (r < 0) mn += r; else mx += r;
  }
  const std::uint64_t bits = static_cast<std::uint64_t>(t.dtype.bits) * t.dtype.lanes;
  if (bits % 8 != 0) {
    std::int64_t numel = 1;
    for (std::int32_t i = 0; i < t.ndim; ++i) numel *= t.shape[i];
    *lo = 0;
    *hi = static_cast<std::int64_t>((static_cast<std::uint64_t>(numel) * bits + 7) / 8);
    return true;
  }
  const std::int64_t e = static_cast<std::int64_t>(bits / 8);
  *lo = mn * e;
  *hi = (mx + 1) * e;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Files files;
  static const std::int64_t mappings_at_start = dlb_shared_mappings();
  fuzz::Reader r(data, size);
  const uint8_t ctl = r.u8();
  const int fd = (ctl & 0x10) != 0 ? -1 : (ctl & 3) == 0 ? files.page : (ctl & 3) == 3 ? files.unsealed : files.big;
  const bool ticket = (ctl & 0x04) != 0;
  unsigned char record[DLB_SHARE_TICKET_MAX + 64];
  unsigned char* desc = ticket ? record + 64 : record;  // a ticket's description follows its 64 bytes
  const std::size_t room = ticket ? sizeof record - 64 : sizeof record;
  std::size_t n = 0;
  if ((ctl & 0x40) != 0) {
    n = valid_description(r, desc, (ctl & 0x08) != 0);
    if ((ctl & 0x80) != 0) reseal(desc, n);
    if (ticket) {  // this process, the chosen file, a nonce and token from the input
      struct stat st;
      FUZZ_CHECK(fd < 0 || fstat(fd, &st) == 0, "fstat failed");
      std::memset(record, 0, 64);
      std::memcpy(record, "DLBS", 4);
      put(record + 4, 1, 2);
      put(record + 6, 1, 2);
      put(record + 16, fd < 0 ? 0 : static_cast<std::uint64_t>(getpid()), 4);
      put(record + 20, static_cast<std::uint32_t>(fd), 4);
      put(record + 24, fd < 0 ? 0 : static_cast<std::uint64_t>(st.st_dev), 8);
      put(record + 32, fd < 0 ? 0 : static_cast<std::uint64_t>(st.st_ino), 8);
      for (int i = 40; i < 64; ++i) record[i] = r.u8();
      n += 64;
      put(record + 8, n, 4);
      desc = record;
    }
    // Edits: (position, value) pairs, then maybe a new length.
    const int edits = r.u8() % 8;
    for (int i = 0; i < edits; ++i) {
      const std::size_t at = r.u8() % (n + 8);
      const uint8_t v = r.u8();
      if (at < room) desc[at] = v;
      if (at >= n) n = at + 1;
    }
  } else {
    desc = record;
    n = size <= 1 ? 0 : size - 1 < room ? size - 1 : room;  // the input after its first byte
    if (n > 0) std::memcpy(desc, data + 1, n);
  }
  if ((ctl & 0x80) != 0) reseal(desc, n);

  dlb_buffer* b = nullptr;
  const std::uint64_t flags = (ctl & 0x20) != 0 ? DLB_SHARE_READ_ONLY : 0;
  const dlb_status s =
      ticket ? dlb_share_ticket_open(desc, n, flags, &b) : dlb_buffer_open_shared(fd, desc, n, flags, &b);
  if (s != DLB_OK) {
    fuzz::check_failure(s, ticket ? "dlb_share_ticket_open" : "dlb_buffer_open_shared");
    FUZZ_CHECK(b == nullptr, "out written on failure");
    FUZZ_CHECK(dlb_shared_mappings() == mappings_at_start, "a failed open left a mapping");
    return 0;
  }
  if (!ticket) {  // a ticket's file is the one it names, which the input may choose
    FUZZ_CHECK(fd != files.unsealed, "an unsealed file was mapped");
    FUZZ_CHECK(fd != -1, "a description without a file was opened (there is no CUDA driver here)");
  }
  FUZZ_CHECK(dlb_shared_mappings() == mappings_at_start + 1, "no mapping counted");
  DLTensor t;
  FUZZ_CHECK(dlb_buffer_dltensor(b, &t) == DLB_OK, "dltensor of an opened buffer failed");
  std::int64_t file_size = fd == files.page ? 4096 : 8192;
  if (ticket) {  // the size of the file the ticket named, asked of the buffer's own
    dlb_share_descriptor own;
    struct stat st;
    FUZZ_CHECK(dlb_buffer_share(b, 0, &own) == DLB_OK && fstat(own.fd, &st) == 0, "an opened ticket has no file");
    file_size = st.st_size;
    dlb_share_descriptor_close(&own);
  }
  std::int64_t lo = 0, hi = 0;
  if (reach(t, &lo, &hi)) {
    const std::int64_t first = static_cast<std::int64_t>(t.byte_offset) + lo;
    const std::int64_t end = static_cast<std::int64_t>(t.byte_offset) + hi;
    FUZZ_CHECK(first >= 0 && end <= file_size && first < end, "layout reaches [%lld, %lld) of a %lld-byte file",
               static_cast<long long>(first), static_cast<long long>(end), static_cast<long long>(file_size));
    const volatile unsigned char* base = static_cast<const unsigned char*>(t.data);
    (void)base[first];
    (void)base[end - 1];
  }
  DLManagedTensorVersioned* m = nullptr;
  if (dlb_export_versioned(b, nullptr, &m) == DLB_OK) dlb_managed_free_versioned(m);
  dlb_share_descriptor again;
  if (dlb_buffer_share(b, 0, &again) == DLB_OK) dlb_share_descriptor_close(&again);
  dlb_buffer_release(b);
  FUZZ_CHECK(dlb_shared_mappings() == mappings_at_start, "a released buffer left its mapping");
  return 0;
}
