// Shared host memory: sealed memory files, their descriptions, and buffers
// over their mappings (include/dlbridge/share.h).
//
// A mapping this library made is recorded in a process-wide table keyed by
// address, so that any buffer whose elements lie inside one (the buffer
// itself, or a buffer imported back from a framework's view of it) is
// shared without a copy. The buffers are wrapped buffers whose release
// callback unmaps, closes and forgets the mapping.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buffer.hpp"
#include "cuda/cuda_backend.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "core/layout.hpp"
#include "share_format.hpp"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1; an older kernel refuses it (EINVAL)
#endif

using dlb::set_error;

namespace dlb::share {
namespace {

struct Mapping {
  unsigned char* base;
  std::size_t size;
  int fd;          // the memory file, kept for sharing the buffer on
  bool read_only;  // mapped PROT_READ
};

std::mutex table_mutex;  // guards the table

std::map<std::uintptr_t, Mapping*>& table() {
  static std::map<std::uintptr_t, Mapping*>* t = new std::map<std::uintptr_t, Mapping*>;  // never destroyed
  return *t;
}
std::atomic<std::int64_t> mapping_count{0};

// The mapping holding bytes [lo, hi), or nullptr. Called under table_mutex.
Mapping* find_locked(std::uintptr_t lo, std::uintptr_t hi) {
  auto& t = table();
  auto it = t.upper_bound(lo);
  if (it == t.begin()) return nullptr;
  --it;
  Mapping* m = it->second;
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(m->base);
  if (lo < base || hi > base + m->size) return nullptr;
  return m;
}

// Forgets, unmaps and closes a mapping map_file() made.
void unmap(Mapping* m) noexcept {
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    table().erase(reinterpret_cast<std::uintptr_t>(m->base));
  }
  munmap(m->base, m->size);
  close(m->fd);
  mapping_count.fetch_sub(1, std::memory_order_relaxed);
  delete m;
}

void release_mapping(void* ctx) { unmap(static_cast<Mapping*>(ctx)); }

// Received files of up to this size are mapped with their pages in: a
// receiver reads the tensor it was sent, and one mmap call that maps the
// pages costs less than a fault per page afterwards (docs/sharing.md).
constexpr std::size_t kPopulateBytes = std::size_t{64} << 10;

// Maps `size` bytes of `fd` (owned by the mapping from now on, also on
// failure) and records it; a file of at most `populate` bytes is mapped
// with its pages in. nullptr with the error set on failure.
Mapping* map_file(int fd, std::size_t size, bool read_only, std::size_t populate) noexcept {
  const int how = MAP_SHARED | (size <= populate ? MAP_POPULATE : 0);
  void* base = mmap(nullptr, size, read_only ? PROT_READ : PROT_READ | PROT_WRITE, how, fd, 0);
  if (base == MAP_FAILED) {
    const int e = errno;
    close(fd);
    set_error(DLB_ERR_OUT_OF_MEMORY, "mapping %zu bytes of shared memory failed: %s", size, std::strerror(e));
    return nullptr;
  }
  Mapping* m = nullptr;
  try {
    m = new Mapping{static_cast<unsigned char*>(base), size, fd, read_only};
    std::lock_guard<std::mutex> lock(table_mutex);
    table().emplace(reinterpret_cast<std::uintptr_t>(m->base), m);
  } catch (...) {
    munmap(base, size);
    close(fd);
    delete m;
    set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory recording a shared mapping");
    return nullptr;
  }
  mapping_count.fetch_add(1, std::memory_order_relaxed);
  return m;
}

// A buffer over a recorded mapping; the mapping goes with the buffer (also
// when this fails).
dlb_status wrap_mapping(Mapping* m, const DLTensor& view, bool read_only, dlb_buffer** out,
                        std::uint64_t padded = 0) noexcept {
  DLTensor v = view;
  v.data = m->base;
  const dlb_status s = dlb_buffer_wrap(&v, (read_only ? DLB_BUFFER_READ_ONLY : 0) | padded, release_mapping, m, out);
  if (s != DLB_OK) unmap(m);  // keeps wrap's message: unmap sets none
  return s;
}

std::size_t page_size() noexcept { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }  // never fails on Linux

// Seals the writable file descriptor `fd`'s memory file against new
// writable openings (F_SEAL_FUTURE_WRITE): writable mappings that exist
// (this process's own) keep writing, but nobody can map it writable again
// or write() to it, whatever descriptor they open. A kernel without the
// seal (before Linux 5.1) leaves read-only as the mapping's protection only.
dlb_status seal_future_write(int fd) noexcept {
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0 && errno != EINVAL)
    return set_error(DLB_ERR_READ_ONLY,
                     "the shared memory cannot be sealed against writing (F_SEAL_FUTURE_WRITE: %s), so a read-only "
                     "receiver could map it writable; it cannot be shared read-only",
                     std::strerror(errno));
  return DLB_OK;
}

// Whether `fd`'s memory file is sealed against new writable mappings.
bool sealed_against_writing(int fd) noexcept {
  const int seals = fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & (F_SEAL_FUTURE_WRITE | F_SEAL_WRITE)) != 0;
}

// A new close-on-exec file descriptor for `m`'s file, read-only if asked.
// A read-only one of a file this process maps writable seals the file
// against new writable openings first: the receiver could otherwise open
// /proc/self/fd/N for writing.
dlb_status file_for(const Mapping& m, bool read_only, int* out) noexcept {
  int fd;
  if (read_only && !m.read_only) {
    DLB_TRY(seal_future_write(m.fd));
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", m.fd);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return set_error(DLB_ERR_INVALID_ARGUMENT, "reopening the shared memory read-only (%s) failed: %s", path,
                       std::strerror(errno));
  } else {
    fd = fcntl(m.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
      return set_error(DLB_ERR_INVALID_ARGUMENT, "duplicating the shared memory's file descriptor failed: %s",
                       std::strerror(errno));
  }
  *out = fd;
  return DLB_OK;
}

}  // namespace

TakenFd::~TakenFd() {
  if (fd >= 0) close(fd);
}

dlb_status check_flags(std::uint64_t flags, std::uint64_t known, const char* who) noexcept {
  if ((flags & ~known) == 0) return DLB_OK;
  return set_error(DLB_ERR_INVALID_ARGUMENT, "flags has bits 0x%" PRIx64 " that %s does not take", flags & ~known,
                   who);
}

dlb_status check_memory_file(int fd, struct stat* st, int* seals) noexcept {
  // The seals before the size: once shrinking is sealed the size cannot
  // fall, so the size read next is the least the file will ever have. In
  // the other order a sender could shrink the file (and then seal it)
  // between the two reads, and the mapping of the old size would fault
  // (SIGBUS) on its first read past the new end.
  const int sealed = fcntl(fd, F_GET_SEALS);
  if (sealed < 0 || (sealed & F_SEAL_SHRINK) == 0) {
    if (sealed < 0 && errno == EBADF) return set_error(DLB_ERR_INVALID_ARGUMENT, "fd %d is not open", fd);
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "fd %d is not a memory file sealed against shrinking, so its pages could vanish under the mapping",
                     fd);
  }
  if (fstat(fd, st) != 0) return set_error(DLB_ERR_INVALID_ARGUMENT, "fd %d: fstat failed: %s", fd, std::strerror(errno));
  *seals = sealed;
  return DLB_OK;
}

static int new_sealed_file(std::size_t size) noexcept {
  const int fd = memfd_create("dlbridge-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    set_error(DLB_ERR_OUT_OF_MEMORY, "memfd_create failed: %s", std::strerror(errno));
    return -1;
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int e = errno;
    close(fd);
    set_error(DLB_ERR_OUT_OF_MEMORY, "sizing shared memory to %zu bytes failed: %s", size, std::strerror(e));
    return -1;
  }
  // Not F_SEAL_SEAL: a read-only share adds F_SEAL_FUTURE_WRITE later
  // (seal_future_write).
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    const int e = errno;
    close(fd);
    set_error(DLB_ERR_OUT_OF_MEMORY, "sealing shared memory failed: %s", std::strerror(e));
    return -1;
  }
  return fd;
}

namespace {

// A new sealed memory file of at least `nbytes` bytes (at least a page),
// mapped read-write and recorded; nullptr with the error set on failure.
Mapping* new_shared_mapping(std::uint64_t nbytes) noexcept {
  // check_layout keeps a tensor's bits within 64 bits (nbytes < 2^61), so
  // rounding up to a page cannot overflow.
  const std::size_t page = page_size();
  std::size_t size = static_cast<std::size_t>(nbytes);
  size = size == 0 ? page : (size + page - 1) / page * page;  // an empty tensor has a mapping too
  const int fd = new_sealed_file(size);
  if (fd < 0) return nullptr;
  return map_file(fd, size, false, 0);
}

// The compact view of a new buffer of `dtype` and `shape` on the host,
// checked; `info` receives its size.
dlb_status new_view(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape, DLTensor* view,
                    LayoutInfo* info, const char* who, bool padded = false) noexcept {
  std::memset(view, 0, sizeof *view);
  view->device = device;
  view->dtype = dtype;
  view->ndim = ndim;
  view->shape = const_cast<std::int64_t*>(shape);
  DLB_TRY(check_layout(view, Origin::argument, false, info, padded));  // padded: the core's byte size rule
  if (device_type_of(device) != kDLCPU || device.device_id != 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "%s allocates host memory only; device %s:%d was asked for", who,
                     device_type_name(device_type_of(device)), static_cast<int>(device.device_id));
  return DLB_OK;
}

dlb_status alloc_impl(DLDevice device, DLDataType dtype, std::int32_t ndim, const std::int64_t* shape,
                      dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLTensor view;
  LayoutInfo info;
  DLB_TRY(new_view(device, dtype, ndim, shape, &view, &info, "dlb_buffer_alloc_shared"));
  Mapping* m = new_shared_mapping(info.nbytes);
  if (m == nullptr) return last_error_code();
  return wrap_mapping(m, view, false, out);
}

// Makes a writable mapping read-only for good: the mapping PROT_READ and
// its file descriptor one opened read-only, so that nothing shared from it
// can write. False with the error set on failure (the mapping unchanged).
bool seal_read_only(Mapping* m) noexcept {
  int ro = -1;
  if (file_for(*m, true, &ro) != DLB_OK) return false;  // also seals the file against writing
  if (mprotect(m->base, m->size, PROT_READ) != 0) {
    const int e = errno;
    close(ro);
    set_error(DLB_ERR_OUT_OF_MEMORY, "making the shared mapping read-only failed: %s", std::strerror(e));
    return false;
  }
  close(m->fd);
  m->fd = ro;
  m->read_only = true;
  return true;
}

// A new shared buffer with `buffer`'s elements, compact; `*mapping_out`
// (optional) receives its mapping.
dlb_status copy_into_shared(dlb_buffer* buffer, std::uint64_t flags, dlb_buffer** out, Mapping** mapping_out) noexcept {
  DLTensor t;
  DLB_TRY(dlb_buffer_dltensor(buffer, &t));  // DLB_ERR_DELETED
  const bool read_only = read_only_of(flags, (dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0);
  DLTensor view;
  LayoutInfo info;
  const std::uint64_t padded = dlb_buffer_flags(buffer) & DLB_BUFFER_SUBBYTE_PADDED;  // a padded copy
  DLB_TRY(new_view(DLDevice{kDLCPU, 0}, t.dtype, t.ndim, t.shape, &view, &info, "dlb_buffer_copy_shared", padded != 0));
  Mapping* m = new_shared_mapping(info.nbytes);
  if (m == nullptr) return last_error_code();
  const dlb_status s = buffer_copy_out(buffer, m->base, info.nbytes, DLB_STREAM_NONE);
  if (s != DLB_OK || (read_only && !seal_read_only(m))) {
    const dlb_status failed = s != DLB_OK ? s : last_error_code();
    unmap(m);  // sets no message: the copy's (or the seal's) stays
    return failed;
  }
  DLB_TRY(wrap_mapping(m, view, read_only, out, padded));  // unmaps on failure
  if (mapping_out != nullptr) *mapping_out = m;
  return DLB_OK;
}

dlb_status copy_impl(dlb_buffer* buffer, std::uint64_t flags, dlb_buffer** out) {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLB_TRY(check_flags(flags, DLB_SHARE_READ_ONLY, "dlb_buffer_copy_shared"));
  return copy_into_shared(buffer, flags, out, nullptr);
}

}  // namespace

// Bytes [lo, hi) of host memory a buffer's view reaches (lo == hi for an
// empty view, at its data address), as the core measures it.
static void view_span(const DLTensor& t, bool padded, std::uintptr_t* lo, std::uintptr_t* hi) noexcept {
  LayoutInfo info;
  (void)check_layout(&t, Origin::argument, false, &info, padded);  // a buffer's view: checked when it was made
  *lo = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset - info.below_bytes;
  *hi = *lo + info.span_bytes;
}

namespace {

dlb_status share_impl(dlb_buffer* buffer, std::uint64_t flags, dlb_share_descriptor* out) {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLB_TRY(check_flags(flags, DLB_SHARE_COPY_IF_NEEDED | DLB_SHARE_READ_ONLY, "dlb_buffer_share"));
  DLTensor t;
  DLB_TRY(dlb_buffer_dltensor(buffer, &t));  // DLB_ERR_DELETED
  const bool padded = (dlb_buffer_flags(buffer) & DLB_BUFFER_SUBBYTE_PADDED) != 0;  // the description says so
  const bool read_only = read_only_of(flags, (dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0);
  if (cuda_ipc_shareable(buffer)) {
    if (padded)  // the CUDA IPC description is written by the CUDA backend, which knows no padded layout
      return set_error(DLB_ERR_UNSUPPORTED_DTYPE, "a CUDA buffer of padded sub-byte elements cannot be shared by CUDA "
                       "IPC; copy it to the host first");
    return cuda_ipc_share(buffer, read_only, out);
  }
  if (device_type_of(t.device) == kDLCPU && t.data != nullptr) {
    std::uintptr_t lo = 0;
    std::uintptr_t hi = 0;
    view_span(t, padded, &lo, &hi);
    int fd = -1;
    std::uint64_t file_size = 0;
    std::uint64_t offset = 0;
    bool mapped_read_only = false;
    bool found = false;
    {
      std::lock_guard<std::mutex> lock(table_mutex);
      if (Mapping* m = find_locked(lo, hi)) {
        found = true;
        if (!read_only && !m->read_only && sealed_against_writing(m->fd))
          return set_error(DLB_ERR_READ_ONLY,
                           "the buffer's shared memory was shared read-only before, which sealed it against new "
                           "writable mappings (F_SEAL_FUTURE_WRITE); share it with DLB_SHARE_READ_ONLY");
        DLB_TRY(file_for(*m, read_only, &fd));
        file_size = m->size;
        offset = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset - reinterpret_cast<std::uintptr_t>(m->base);
        mapped_read_only = m->read_only;
      }
    }
    if (found) {
      DLTensor d = t;
      d.byte_offset = offset;
      out->fd = fd;
      out->size = static_cast<std::uint32_t>(
          write_description(d, file_size,
                            (read_only || mapped_read_only ? kDescReadOnly : 0) | (padded ? kDescPadded : 0),
                            out->description));
      return DLB_OK;
    }
  }
  if ((flags & DLB_SHARE_COPY_IF_NEEDED) == 0) {
    const bool host = device_is_host_readable(device_type_of(t.device)) && t.data != nullptr;
    return set_error(DLB_ERR_NOT_ZERO_COPY,
                     "the buffer's memory (%s on %s:%d) is not shared memory, and a copy was not allowed "
                     "(DLB_SHARE_COPY_IF_NEEDED); allocate it with dlb_buffer_alloc_shared to share it without one",
                     host ? "host memory" : "memory the host cannot map", device_type_name(device_type_of(t.device)),
                     static_cast<int>(t.device.device_id));
  }
  // One copy, straight into new shared memory, which lives on in the
  // descriptor's file only. The copy's pages leave its mapping marked as
  // not recently used (MADV_COLD): the kernel marks a page accessed when a
  // mapping that touched it goes, and a receiver's unmap of pages so marked
  // moves each to the active list, which made a release of 128 MiB 5 to 8
  // ms slower (docs/sharing.md, "A copy's pages").
  dlb_buffer* copy = nullptr;
  Mapping* m = nullptr;
  DLB_TRY(copy_into_shared(buffer, flags, &copy, &m));
#if defined(MADV_COLD)
  (void)madvise(m->base, m->size, MADV_COLD);
#endif
  const dlb_status s = share_impl(copy, read_only ? DLB_SHARE_READ_ONLY : 0, out);
  dlb_buffer_release(copy);
  return s;
}

dlb_status is_shared_impl(dlb_buffer* buffer, std::int32_t* out) {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLTensor t;
  DLB_TRY(dlb_buffer_dltensor(buffer, &t));  // DLB_ERR_DELETED
  std::int32_t shared = cuda_ipc_shareable(buffer) ? 1 : 0;
  if (shared == 0 && device_type_of(t.device) == kDLCPU && t.data != nullptr) {
    std::uintptr_t lo = 0;
    std::uintptr_t hi = 0;
    view_span(t, (dlb_buffer_flags(buffer) & DLB_BUFFER_SUBBYTE_PADDED) != 0, &lo, &hi);
    std::lock_guard<std::mutex> lock(table_mutex);
    shared = find_locked(lo, hi) != nullptr ? 1 : 0;
  }
  *out = shared;
  return DLB_OK;
}

dlb_status open_impl(std::int32_t fd, const void* description, std::size_t size, std::uint64_t flags,
                     dlb_buffer** out) {
  // A taken fd is closed on every failure before the mapping owns it.
  TakenFd taken{(flags & DLB_SHARE_TAKE_FD) != 0 ? fd : -1};
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (description == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "description is NULL");
  DLB_TRY(check_flags(flags, DLB_SHARE_READ_ONLY | DLB_SHARE_TAKE_FD, "dlb_buffer_open_shared"));
  DLB_TRY(check_fd_for_kind(declared_kind(static_cast<const unsigned char*>(description), size), fd,
                            DLB_ERR_INVALID_ARGUMENT, "fd"));
  Description d;
  DLB_TRY(parse_description(description, size, &d));
  DLB_TRY(check_fd_for_kind(d.kind, fd, DLB_ERR_INVALID_ARGUMENT, "fd"));
  const bool read_only = read_only_of(flags, (d.flags & kDescReadOnly) != 0);
  if (d.kind == DLB_SHARE_KIND_CUDA_IPC) return cuda_ipc_open(d, read_only, out);
  struct stat st;
  int seals = 0;
  DLB_TRY(check_memory_file(fd, &st, &seals));
  if (static_cast<std::uint64_t>(st.st_size) != d.file_size)
    return set_error(DLB_ERR_MALFORMED, "the description says the file has %" PRIu64 " bytes; it has %" PRIu64,
                     d.file_size, static_cast<std::uint64_t>(st.st_size));
  if (d.file_size > SIZE_MAX || d.file_size == 0)
    return set_error(DLB_ERR_MALFORMED, "the description's file size %" PRIu64 " cannot be mapped", d.file_size);
  const int mode = fcntl(fd, F_GETFL);
  if (mode < 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "fd %" PRId32 ": F_GETFL failed: %s", fd, std::strerror(errno));
  const bool fd_read_only = (mode & O_ACCMODE) == O_RDONLY;
  if (fd_read_only && !read_only)
    return set_error(DLB_ERR_READ_ONLY,
                     "the description allows writing but fd %" PRId32 " was opened read-only; open it with "
                     "DLB_SHARE_READ_ONLY",
                     fd);
  if ((seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0 && !read_only)
    return set_error(DLB_ERR_READ_ONLY,
                     "the description allows writing but the memory file of fd %" PRId32
                     " is sealed against writing (it was shared read-only); open it with DLB_SHARE_READ_ONLY",
                     fd);
  int own = fd;
  if (taken.fd >= 0) {
    taken.release();  // map_file's from here (closed if it fails)
  } else {
    own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
      return set_error(DLB_ERR_INVALID_ARGUMENT, "duplicating fd %" PRId32 " failed: %s", fd, std::strerror(errno));
  }
  Mapping* m = map_file(own, static_cast<std::size_t>(d.file_size), read_only, kPopulateBytes);
  if (m == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  return wrap_mapping(m, view_of(d, nullptr), read_only, out,
                      (d.flags & kDescPadded) != 0 ? DLB_BUFFER_SUBBYTE_PADDED : 0);  // wrap_mapping sets the data
}

dlb_status kind_impl(const void* description, std::size_t size, std::uint32_t* kind) {
  if (description == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "description is NULL");
  if (kind == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "kind is NULL");
  Description d;
  DLB_TRY(parse_description(description, size, &d));
  *kind = d.kind;
  return DLB_OK;
}

}  // namespace
}  // namespace dlb::share

extern "C" {

DLB_API dlb_status dlb_buffer_alloc_shared(DLDevice device, DLDataType dtype, int32_t ndim, const int64_t* shape,
                                           dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::share::alloc_impl(device, dtype, ndim, shape, out); });
}

DLB_API dlb_status dlb_buffer_copy_shared(dlb_buffer* buffer, uint64_t flags, dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::share::copy_impl(buffer, flags, out); });
}

DLB_API dlb_status dlb_buffer_share(dlb_buffer* buffer, uint64_t flags, dlb_share_descriptor* out) {
  return dlb::firewall(__func__, [&] { return dlb::share::share_impl(buffer, flags, out); });
}

DLB_API dlb_status dlb_buffer_is_shared(dlb_buffer* buffer, int32_t* out) {
  return dlb::firewall(__func__, [&] { return dlb::share::is_shared_impl(buffer, out); });
}

DLB_API dlb_status dlb_buffer_open_shared(int32_t fd, const void* description, size_t size, uint64_t flags,
                                          dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::share::open_impl(fd, description, size, flags, out); });
}

DLB_API dlb_status dlb_share_description_kind(const void* description, size_t size, uint32_t* kind) {
  return dlb::firewall(__func__, [&] { return dlb::share::kind_impl(description, size, kind); });
}

DLB_API void dlb_share_descriptor_close(dlb_share_descriptor* descriptor) {
  dlb::firewall_void(__func__, [&] {
    if (descriptor == nullptr || descriptor->fd < 0) return;
    close(descriptor->fd);
    descriptor->fd = -1;
  });
}

DLB_API int64_t dlb_shared_mappings(void) {
  return dlb::firewall_value(__func__, int64_t{-1},
                             [] { return dlb::share::mapping_count.load(std::memory_order_relaxed); });
}

}  // extern "C"
