// libFuzzer target: small-tensor pool tickets (dlb_share_pool_ticket_source,
// dlb_share_pool_open). The first byte picks the mode:
//
//   bit 0x40 clear: the rest of the input is the ticket's bytes (its size
//                   theirs), the checksum rewritten with bit 0x80;
//   bit 0x40 set:   a valid ticket, just issued for a pooled tensor of this
//                   process, with (position, value) edits from the input
//                   and maybe a new size; bit 0x20 rewrites the
//                   description's checksum, 0x80 the ticket's;
//   bit 0x10:       (with 0x40) the ticket names a "foreign" slab instead: a
//                   sealed memory file of a slab's size whose header (a
//                   valid one, with the ticket's token in its cell, then
//                   edits from the input) the harness writes, opened with
//                   that file (bit 0x08: DLB_SHARE_TAKE_FD of a duplicate),
//                   so that the checks of a slab's file and header run.
//
// Otherwise the ticket is opened with fd -1 (bit 0x04: DLB_SHARE_READ_ONLY).
// A failure has a known status and a message and leaves the outputs alone;
// DLB_OK with no buffer only comes with fd -1; an opened buffer's layout
// lies inside the slab (its first and last byte are read) and its release
// gives the slot's reference back. After each input the issued ticket is
// opened (or found opened), idle slabs are trimmed, and no shared mapping,
// pool reference or memory file descriptor is left.
#include <dlbridge/share.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.hpp"

namespace {

constexpr std::size_t kSlab = 4096 + 64 * 4096;  // 4 KiB slots

void put(unsigned char* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t get(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

void reseal(unsigned char* p, std::size_t n) {
  if (n < 16) return;
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ ((i >= 12 && i < 16) ? 0 : p[i])) * 16777619u;
  put(p + 12, h, 4);
}

// Open descriptors of memory files (libFuzzer's own files come and go).
int open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[64];
    char target[256];
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    const ssize_t len = readlink(path, target, sizeof target - 1);
    if (len > 0 && std::strncmp(target, "/memfd:", 7) == 0) ++n;
  }
  closedir(d);
  return n;
}

struct State {
  dlb_buffer* pooled = nullptr;  // 1024 float32 in a slot, kept for the whole run
  int foreign = -1;              // a slab-sized sealed memory file
  std::uint64_t foreign_dev = 0;
  std::uint64_t foreign_ino = 0;
  std::int64_t mappings = 0;
  std::int64_t references = 0;
  int fds = 0;
  State() {
    std::int64_t n = 1024;
    dlb_buffer* src = nullptr;
    FUZZ_CHECK(dlb_buffer_alloc(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 32, 1}, 1, &n, &src) == DLB_OK, "alloc");
    FUZZ_CHECK(dlb_buffer_copy_shared(src, DLB_SHARE_POOLED, &pooled) == DLB_OK, "pooled copy");
    dlb_buffer_release(src);
    foreign = memfd_create("fuzz-slab", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    FUZZ_CHECK(foreign >= 0 && ftruncate(foreign, static_cast<off_t>(kSlab)) == 0, "memfd setup failed");
    FUZZ_CHECK(fcntl(foreign, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0, "sealing failed");
    struct stat st;
    FUZZ_CHECK(fstat(foreign, &st) == 0, "fstat");
    foreign_dev = static_cast<std::uint64_t>(st.st_dev);
    foreign_ino = static_cast<std::uint64_t>(st.st_ino);
    mappings = dlb_shared_mappings();
    dlb_share_pool_state s;
    FUZZ_CHECK(dlb_share_pool_stats(&s) == DLB_OK, "stats");
    references = s.references;
    fds = open_fds();
  }
};

// The header of a valid slab of 4 KiB slots, with `token` in cell `cell`.
void write_foreign_header(const State& st, std::uint32_t cell, std::uint64_t token, fuzz::Reader& r) {
  unsigned char h[4096];
  std::memset(h, 0, sizeof h);
  std::memcpy(h, "DLBQ", 4);
  put(h + 4, 1, 4);
  put(h + 8, 4096, 8);
  put(h + 16, 64, 4);
  put(h + 20, 256, 4);
  if (cell < 256) put(h + 512 + 8 * cell, token, 8);
  const int edits = r.u8() % 6;
  for (int i = 0; i < edits; ++i) {
    const std::size_t at = r.u16() % sizeof h;
    h[at] = r.u8();
  }
  FUZZ_CHECK(pwrite(st.foreign, h, sizeof h, 0) == static_cast<ssize_t>(sizeof h), "pwrite");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static State st;
  fuzz::Reader r(data, size);
  const uint8_t ctl = r.u8();
  const bool edit = (ctl & 0x40) != 0;
  const bool foreign = edit && (ctl & 0x10) != 0;

  dlb_share_pool_ticket issued;
  bool have_issued = false;
  dlb_share_pool_ticket t;
  std::memset(&t, 0, sizeof t);
  if (edit) {
    FUZZ_CHECK(dlb_share_pool_issue(st.pooled, &issued) == DLB_OK, "issue failed");
    have_issued = true;
    t = issued;
    if (foreign) {
      put(t.bytes + 24, st.foreign_dev, 8);
      put(t.bytes + 32, st.foreign_ino, 8);
      write_foreign_header(st, static_cast<std::uint32_t>(get(t.bytes + 52, 4)), get(t.bytes + 56, 8), r);
    }
    const int edits = r.u8() % 8;
    for (int i = 0; i < edits; ++i) {
      const std::size_t at = r.u16() % (t.size + 8);
      const uint8_t v = r.u8();
      if (at < sizeof t.bytes) t.bytes[at] = v;
    }
    const uint8_t resize = r.u8();
    if (resize >= 0xF0) t.size = r.u32();
    else if (resize >= 0xE0) t.size = static_cast<std::uint32_t>(r.u16() % (DLB_SHARE_POOL_TICKET_MAX + 1));
    if ((ctl & 0x20) != 0 && t.size > 64 && t.size <= DLB_SHARE_POOL_TICKET_MAX) reseal(t.bytes + 64, t.size - 64);
  } else {
    const std::size_t n = size <= 1 ? 0 : size - 1 < sizeof t.bytes ? size - 1 : sizeof t.bytes;
    if (n > 0) std::memcpy(t.bytes, data + 1, n);
    t.size = static_cast<std::uint32_t>(n);
  }
  if ((ctl & 0x80) != 0 && t.size <= DLB_SHARE_POOL_TICKET_MAX) reseal(t.bytes, t.size);

  // The ticket's source.
  std::int32_t pid = -77, fd = -77;
  std::uint64_t dev = 77, ino = 77;
  const dlb_status ss = dlb_share_pool_ticket_source(&t, &pid, &fd, &dev, &ino);
  if (ss != DLB_OK) {
    fuzz::check_failure(ss, "dlb_share_pool_ticket_source");
    FUZZ_CHECK(pid == -77 && fd == -77 && dev == 77 && ino == 77, "outputs written on failure");
  }

  // Open it.
  int open_fd = -1;
  std::uint64_t flags = (ctl & 0x04) != 0 ? DLB_SHARE_READ_ONLY : 0;
  if (foreign) {
    if ((ctl & 0x08) != 0) {
      open_fd = fcntl(st.foreign, F_DUPFD_CLOEXEC, 0);
      FUZZ_CHECK(open_fd >= 0, "dup");
      flags |= DLB_SHARE_TAKE_FD;
    } else {
      open_fd = st.foreign;
    }
  }
  dlb_buffer* const sentinel = reinterpret_cast<dlb_buffer*>(0x10);
  dlb_buffer* b = sentinel;
  const dlb_status s = dlb_share_pool_open(&t, open_fd, flags, &b);
  if (s != DLB_OK) {
    fuzz::check_failure(s, "dlb_share_pool_open");
    FUZZ_CHECK(b == sentinel, "out written on failure");
  } else if (b == nullptr) {
    FUZZ_CHECK(open_fd == -1, "DLB_OK without a buffer although a file was given");
  } else {
    FUZZ_CHECK(ss == DLB_OK, "a ticket whose source was refused opened");
    FUZZ_CHECK(b != sentinel, "DLB_OK with out untouched");
    DLTensor v;
    FUZZ_CHECK(dlb_buffer_dltensor(b, &v) == DLB_OK, "dltensor of an opened buffer failed");
    FUZZ_CHECK(v.device.device_type == kDLCPU, "not host memory");
    if ((flags & DLB_SHARE_READ_ONLY) != 0)
      FUZZ_CHECK((dlb_buffer_flags(b) & DLB_BUFFER_READ_ONLY) != 0, "DLB_SHARE_READ_ONLY not honoured");
    const fuzz::Extent e = fuzz::compute_extent(v.ndim, v.shape, v.strides, v.dtype);
    FUZZ_CHECK(e.fits, "an opened layout does not fit");
    if (e.numel > 0 && e.hi > e.lo) {
      const std::int64_t first = static_cast<std::int64_t>(v.byte_offset) + e.lo;
      const std::int64_t end = static_cast<std::int64_t>(v.byte_offset) + e.hi;
      FUZZ_CHECK(first >= 4096 && end <= static_cast<std::int64_t>(kSlab) &&
                     (first - 4096) / 4096 == (end - 1 - 4096) / 4096,
                 "layout reaches [%lld, %lld) of the slab, not one slot", static_cast<long long>(first),
                 static_cast<long long>(end));
      const volatile unsigned char* base = static_cast<const unsigned char*>(v.data);
      (void)base[first];
      (void)base[end - 1];
    }
    DLManagedTensorVersioned* m = nullptr;
    if (dlb_export_versioned(b, nullptr, &m) == DLB_OK) dlb_managed_free_versioned(m);
    dlb_buffer_release(b);
  }
  if ((flags & DLB_SHARE_TAKE_FD) != 0) FUZZ_CHECK(fcntl(open_fd, F_GETFD) == -1, "a taken fd was left open");
  if (foreign) {
    // No cell of the foreign slab may keep it from the trim below.
    static const unsigned char zeros[8 * 256] = {};
    FUZZ_CHECK(pwrite(st.foreign, zeros, sizeof zeros, 512) == static_cast<ssize_t>(sizeof zeros), "pwrite");
  }

  // The issued ticket opens now unless the edited one was it.
  if (have_issued) {
    dlb_buffer* o = nullptr;
    const dlb_status os = dlb_share_pool_open(&issued, -1, 0, &o);
    FUZZ_CHECK(os == DLB_OK || os == DLB_ERR_DELETED, "the issued ticket gave %d", os);
    FUZZ_CHECK(os != DLB_OK || o != nullptr, "the issued ticket's slab is not mapped");
    if (o != nullptr) dlb_buffer_release(o);
  }
  dlb_share_pool_trim();
  dlb_share_pool_state now;
  FUZZ_CHECK(dlb_share_pool_stats(&now) == DLB_OK, "stats");
  FUZZ_CHECK(now.references == st.references, "pool references %lld, %lld at start",
             static_cast<long long>(now.references), static_cast<long long>(st.references));
  FUZZ_CHECK(now.slabs == 1, "%lld slabs after a trim", static_cast<long long>(now.slabs));
  FUZZ_CHECK(dlb_shared_mappings() == st.mappings, "a shared mapping was left");
  FUZZ_CHECK(open_fds() == st.fds, "a file descriptor was left open");
  return 0;
}
