// The small-tensor pool (include/dlbridge/share.h): small writable shared
// tensors live in slots of slabs, memory files of 64 equal slots that a
// receiving process maps once and keeps, so that handing over one more
// tensor of a slab costs that process no system call.
//
// A slab's file starts with a header page, in the shared memory itself:
//
//   offset size field
//        0    4 magic "DLBQ", 4 4 version (1)
//        8    8 slot size in bytes (4, 16 or 64 KiB)
//       16    4 slots (64), 20 4 ticket cells (256)
//       64  256 a 32-bit reference count per slot (bit 31: escaped, the
//               slot is never reused)
//      512 2048 a 64-bit cell per ticket not yet opened, its token: the
//               issuer's pid in the high half, 24 random bits, then 0x80
//               or'ed with the slot in the low byte; 0 when free
//
// then the slots, slot i at 4096 + i * slot size. Every process that maps
// the slab changes the counts and cells atomically. Only the process that
// made a slab takes slots from it, and only slots whose count is 0.
#include <dlbridge/dlbridge.h>
#include <dlbridge/share.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <mutex>
#include <new>
#include <random>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buffer.hpp"
#include "core/errors.hpp"
#include "share_format.hpp"
#include "share_mapping.hpp"

using dlb::set_error;

namespace dlb::share {

namespace {

constexpr std::uint32_t kSlabMagic = 0x51424c44u;  // "DLBQ" in memory on little-endian machines
constexpr std::uint32_t kSlabVersion = 1;
constexpr std::size_t kSlabHeader = 4096;
constexpr std::uint32_t kSlots = 64;
constexpr std::uint32_t kCells = 256;
constexpr std::size_t kRefsAt = 64;
constexpr std::size_t kCellsAt = 512;
constexpr std::uint32_t kEscaped = 0x80000000u;
// A ticket's token: the issuer's pid, 24 random bits, then this mark and
// the slot, so that a ticket opens only for the slot it was issued for.
constexpr std::uint64_t kTokenSlotMark = 0x80;
constexpr std::uint64_t kSlotSizes[] = {4096, 16384, 65536};
static_assert(kSlotSizes[2] == DLB_SHARE_POOL_MAX_BYTES);
static_assert(kCellsAt + 8 * kCells <= kSlabHeader && kRefsAt + 4 * kSlots <= kCellsAt);

// Slabs a process keeps while it holds nothing in them (dlb_share_pool_trim).
constexpr std::size_t kIdleSlabs = 8;

}  // namespace

struct Slab {
  Mapping* m;
  std::uint64_t slot_size;
  std::uint64_t dev;
  std::uint64_t ino;
  bool owner;          // made here, since the last fork: its free slots may be taken
  std::int64_t local;  // slot references held by this process's buffers
  std::uint64_t idle_tick;
};

namespace {

std::atomic<std::uint32_t>& ref_of(const Slab* s, std::uint32_t slot) noexcept {
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(s->m->base + kRefsAt + 4 * slot);
}
std::atomic<std::uint64_t>& cell_of(const Slab* s, std::uint32_t cell) noexcept {
  return *reinterpret_cast<std::atomic<std::uint64_t>*>(s->m->base + kCellsAt + 8 * cell);
}
static_assert(sizeof(std::atomic<std::uint32_t>) == 4 && std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint64_t>) == 8 && std::atomic<std::uint64_t>::is_always_lock_free);

// Every slab this process maps; under pool_mutex (taken before table_mutex).
std::mutex pool_mutex;
std::vector<Slab*>& slabs() {
  static auto* v = new std::vector<Slab*>;  // never destroyed
  return *v;
}
std::uint64_t tick = 0;
std::uint64_t generation = 0;  // fork() in the child: buffers made before hold no reference of this process
std::int64_t references = 0;

struct SlotRef {
  Slab* slab;
  std::uint32_t slot;
  std::uint64_t generation;
};

std::uint64_t next_random() noexcept {  // under pool_mutex
  static std::uint64_t state = [] {
    std::uint64_t seed = 0;
    try {
      std::random_device rd;
      seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    } catch (...) {
    }
    return seed ^ static_cast<std::uint64_t>(getpid()) ^ reinterpret_cast<std::uintptr_t>(&seed);
  }();
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Whether a slab may be unmapped: this process holds nothing in it and
// issued no ticket of it that is still to be opened (its receiver may
// need this process's file descriptor).
bool trimmable_locked(const Slab* s) noexcept {
  if (s->local != 0) return false;
  const std::uint64_t me = static_cast<std::uint64_t>(static_cast<std::uint32_t>(getpid()));
  for (std::uint32_t c = 0; c < kCells; ++c) {
    const std::uint64_t v = cell_of(s, c).load(std::memory_order_acquire);
    if (v != 0 && (v >> 32) == me) return false;
  }
  return true;
}

void drop_locked(std::size_t i) noexcept {
  auto& v = slabs();
  Slab* s = v[i];
  v[i] = v.back();
  v.pop_back();
  unmap(s->m, false);
  delete s;
}

// Unmaps the least recently idle slabs beyond kIdleSlabs.
void evict_locked() noexcept {
  auto& v = slabs();
  for (;;) {
    std::size_t idle = 0;
    for (const Slab* s : v) idle += s->local == 0;
    if (idle <= kIdleSlabs) return;
    std::size_t oldest = v.size();
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i]->local == 0 && (oldest == v.size() || v[i]->idle_tick < v[oldest]->idle_tick) &&
          trimmable_locked(v[i]))
        oldest = i;
    }
    if (oldest == v.size()) return;
    drop_locked(oldest);
  }
}

void release_slot(void* ctx) noexcept {
  auto* r = static_cast<SlotRef*>(ctx);
  std::lock_guard<std::mutex> lock(pool_mutex);
  Slab* s = r->slab;
  // A buffer inherited over fork() holds no reference of this process's
  // own in the slab's count (its parent's stays the parent's).
  if (r->generation == generation) ref_of(s, r->slot).fetch_sub(1, std::memory_order_acq_rel);
  --references;
  if (--s->local == 0) {
    s->idle_tick = ++tick;
    evict_locked();
  }
  delete r;
}

// A buffer over slot `slot` of `s`, whose reference (taken by the caller)
// it holds; the reference is dropped again on failure. Under pool_mutex.
dlb_status wrap_slot_locked(Slab* s, std::uint32_t slot, const DLTensor& view, bool read_only,
                            dlb_buffer** out) noexcept {
  auto* r = new (std::nothrow) SlotRef{s, slot, generation};
  dlb_status st = DLB_ERR_OUT_OF_MEMORY;
  if (r == nullptr) {
    set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory making a pooled buffer");
  } else {
    st = dlb_buffer_wrap(&view, read_only ? DLB_BUFFER_READ_ONLY : 0, release_slot, r, out);
    if (st != DLB_OK) delete r;
  }
  if (st != DLB_OK) {
    ref_of(s, slot).fetch_sub(1, std::memory_order_acq_rel);
    return st;
  }
  ++s->local;
  ++references;
  return DLB_OK;
}

void fork_prepare() { pool_mutex.lock(); }
void fork_parent() {
  // The child may hold slots through the buffers it inherited, without a
  // reference of its own: no slot of these slabs is taken again.
  for (Slab* s : slabs()) s->owner = false;
  pool_mutex.unlock();
}
void fork_child() {
  // The inherited buffers keep their slabs mapped here (local counts
  // stay), but release no reference in the shared counts.
  for (Slab* s : slabs()) s->owner = false;
  ++generation;
  pool_mutex.unlock();
}

// Before this process maps its first slab, made here or opened.
void register_fork_handlers() noexcept {
  static std::once_flag fork_once;
  std::call_once(fork_once, [] { pthread_atfork(fork_prepare, fork_parent, fork_child); });
}

// A new slab of `slot_size` slots, made here; nullptr with the error set.
Slab* new_slab_locked(std::uint64_t slot_size) noexcept {
  register_fork_handlers();
  const std::size_t size = kSlabHeader + kSlots * slot_size;
  const int fd = new_sealed_file(size);
  if (fd < 0) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    set_error(DLB_ERR_OUT_OF_MEMORY, "fstat of a new slab failed: %s", std::strerror(e));
    return nullptr;
  }
  Mapping* m = map_file(fd, size, false, 0, false);
  if (m == nullptr) return nullptr;
  unsigned char* h = m->base;
  const std::uint32_t magic = kSlabMagic, version = kSlabVersion, slots = kSlots, cells = kCells;
  std::memcpy(h, &magic, 4);
  std::memcpy(h + 4, &version, 4);
  std::memcpy(h + 8, &slot_size, 8);
  std::memcpy(h + 16, &slots, 4);
  std::memcpy(h + 20, &cells, 4);
  auto* s = new (std::nothrow) Slab{m, slot_size, static_cast<std::uint64_t>(st.st_dev),
                                    static_cast<std::uint64_t>(st.st_ino), true, 0, 0};
  if (s == nullptr) {
    unmap(m, false);
    set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory recording a slab");
    return nullptr;
  }
  try {
    slabs().push_back(s);
  } catch (...) {
    unmap(m, false);
    delete s;
    set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory recording a slab");
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    m->pool = s;
  }
  return s;
}

Slab* find_slab_locked(std::uint64_t dev, std::uint64_t ino) noexcept {
  for (Slab* s : slabs())
    if (s->dev == dev && s->ino == ino) return s;
  return nullptr;
}

// The slab a buffer's view lies in, and its slot; under pool_mutex.
dlb_status slot_of_locked(dlb_buffer* buffer, Slab** slab, std::uint32_t* slot, DLTensor* t) noexcept {
  DLB_TRY(dlb_buffer_dltensor(buffer, t));  // DLB_ERR_DELETED
  std::uintptr_t lo = 0, hi = 0;
  if (t->data != nullptr) view_span(*t, &lo, &hi);
  Mapping* m = nullptr;
  if (t->data != nullptr && t->device.device_type == kDLCPU) {
    std::lock_guard<std::mutex> lock(table_mutex);
    m = find_locked(lo, hi == lo ? lo + 1 : hi);
  }
  if (m == nullptr || m->pool == nullptr)
    return set_error(DLB_ERR_NOT_ZERO_COPY,
                     "the buffer is not in the small-tensor pool (made with DLB_SHARE_POOLED or opened from a "
                     "pool ticket); share it with dlb_buffer_share");
  Slab* s = m->pool;
  const std::uint64_t a = lo - reinterpret_cast<std::uintptr_t>(m->base);
  const std::uint64_t b = (hi == lo ? lo + 1 : hi) - reinterpret_cast<std::uintptr_t>(m->base);
  if (a < kSlabHeader || (a - kSlabHeader) / s->slot_size != (b - 1 - kSlabHeader) / s->slot_size)
    return set_error(DLB_ERR_NOT_ZERO_COPY, "the buffer's elements do not lie in one slot of its slab");
  *slab = s;
  *slot = static_cast<std::uint32_t>((a - kSlabHeader) / s->slot_size);
  return DLB_OK;
}

dlb_status issue_impl(dlb_buffer* buffer, dlb_share_pool_ticket* out) {
  if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  std::lock_guard<std::mutex> lock(pool_mutex);
  Slab* s = nullptr;
  std::uint32_t slot = 0;
  DLTensor t;
  DLB_TRY(slot_of_locked(buffer, &s, &slot, &t));
  const std::uint64_t me = static_cast<std::uint64_t>(static_cast<std::uint32_t>(getpid())) << 32;
  std::uint64_t token = 0;
  std::uint32_t cell = kCells;
  for (std::uint32_t c = 0; c < kCells && cell == kCells; ++c) {
    std::uint64_t expected = 0;
    token = me | (next_random() & 0xFFFFFF00u) | kTokenSlotMark | slot;
    if (cell_of(s, c).compare_exchange_strong(expected, token, std::memory_order_acq_rel)) cell = c;
  }
  if (cell == kCells)
    return set_error(DLB_ERR_OUT_OF_MEMORY,
                     "every ticket cell of the tensor's slab (%u) is held by a ticket not yet opened", kCells);
  ref_of(s, slot).fetch_add(1, std::memory_order_acq_rel);  // the ticket's
  PoolTicket pt;
  pt.pid = static_cast<std::int32_t>(getpid());
  pt.fd = s->m->fd;
  pt.dev = s->dev;
  pt.ino = s->ino;
  pt.slab_size = s->m->size;
  pt.slot = slot;
  pt.cell = cell;
  pt.token = token;
  DLTensor d = t;
  d.byte_offset = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset - reinterpret_cast<std::uintptr_t>(s->m->base);
  const bool read_only = (dlb_buffer_flags(buffer) & DLB_BUFFER_READ_ONLY) != 0;
  unsigned char desc[DLB_SHARE_DESCRIPTION_MAX];
  const std::size_t dsize = write_description(d, s->m->size, read_only ? kDescReadOnly : 0, desc);
  out->size = static_cast<std::uint32_t>(write_pool_ticket(pt, desc, dsize, out->bytes));
  return DLB_OK;
}

dlb_status source_impl(const dlb_share_pool_ticket* ticket, std::int32_t* pid, std::int32_t* fd, std::uint64_t* dev,
                       std::uint64_t* ino) {
  if (ticket == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "ticket is NULL");
  PoolTicket pt;
  DLB_TRY(parse_pool_ticket(ticket->bytes, ticket->size, &pt));
  if (pid != nullptr) *pid = pt.pid;
  if (fd != nullptr) *fd = pt.fd;
  if (dev != nullptr) *dev = pt.dev;
  if (ino != nullptr) *ino = pt.ino;
  return DLB_OK;
}

// Maps the slab file `fd` (the caller's, duplicated here) that ticket `pt`
// names, after checking it; under pool_mutex. nullptr with the error set.
Slab* map_slab_locked(const PoolTicket& pt, int fd) noexcept {
  struct stat st;
  if (check_memory_file(fd, &st) != DLB_OK) return nullptr;
  if (static_cast<std::uint64_t>(st.st_dev) != pt.dev || static_cast<std::uint64_t>(st.st_ino) != pt.ino)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "fd %d is not the slab file the ticket names", fd), nullptr;
  bool sized = false;
  for (std::uint64_t ss : kSlotSizes) sized = sized || pt.slab_size == kSlabHeader + kSlots * ss;
  if (!sized || static_cast<std::uint64_t>(st.st_size) != pt.slab_size)
    return set_error(DLB_ERR_MALFORMED, "the slab file has %" PRIu64 " bytes; the ticket says %" PRIu64
                     " (a slab has a 4 KiB header and 64 slots of 4, 16 or 64 KiB)",
                     static_cast<std::uint64_t>(st.st_size), pt.slab_size),
           nullptr;
  const int mode = fcntl(fd, F_GETFL);
  if (mode < 0 || (mode & O_ACCMODE) != O_RDWR)
    return set_error(DLB_ERR_READ_ONLY, "fd %d is not open for reading and writing (a slab's counts are written)",
                     fd),
           nullptr;
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "duplicating fd %d failed: %s", fd, std::strerror(errno)), nullptr;
  register_fork_handlers();
  Mapping* m = map_file(own, static_cast<std::size_t>(pt.slab_size), false, 0, false);
  if (m == nullptr) return nullptr;
  std::uint32_t magic = 0, version = 0, slots = 0, cells = 0;
  std::uint64_t slot_size = 0;
  std::memcpy(&magic, m->base, 4);
  std::memcpy(&version, m->base + 4, 4);
  std::memcpy(&slot_size, m->base + 8, 8);
  std::memcpy(&slots, m->base + 16, 4);
  std::memcpy(&cells, m->base + 20, 4);
  if (magic != kSlabMagic || version != kSlabVersion || slots != kSlots || cells != kCells ||
      kSlabHeader + kSlots * slot_size != pt.slab_size) {
    unmap(m, false);
    return set_error(DLB_ERR_MALFORMED, "the slab's header is not a slab's of version %u with 64 slots", kSlabVersion),
           nullptr;
  }
  auto* s = new (std::nothrow) Slab{m, slot_size, pt.dev, pt.ino, false, 0, ++tick};
  try {
    if (s == nullptr) throw std::bad_alloc();
    slabs().push_back(s);
  } catch (...) {
    unmap(m, false);
    delete s;
    return set_error(DLB_ERR_OUT_OF_MEMORY, "out of memory recording a slab"), nullptr;
  }
  std::lock_guard<std::mutex> lock(table_mutex);
  m->pool = s;
  return s;
}

dlb_status open_impl(const dlb_share_pool_ticket* ticket, std::int32_t fd, std::uint64_t flags, dlb_buffer** out) {
  TakenFd taken{(flags & DLB_SHARE_TAKE_FD) != 0 ? fd : -1};  // closed on return: the slab keeps a duplicate
  if (ticket == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "ticket is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLB_TRY(check_flags(flags, DLB_SHARE_READ_ONLY | DLB_SHARE_TAKE_FD, "dlb_share_pool_open"));
  if (fd < -1) return set_error(DLB_ERR_INVALID_ARGUMENT, "fd is %" PRId32, fd);
  PoolTicket pt;
  DLB_TRY(parse_pool_ticket(ticket->bytes, ticket->size, &pt));
  Description d;
  DLB_TRY(parse_description(pt.description, pt.description_size, &d));
  if (d.kind != DLB_SHARE_KIND_HOST || d.file_size != pt.slab_size)
    return set_error(DLB_ERR_MALFORMED, "the pool ticket's description is not one of host memory over its slab");
  if (pt.slot >= kSlots || pt.cell >= kCells || (pt.token & 0xFF) != (kTokenSlotMark | pt.slot))
    return set_error(DLB_ERR_MALFORMED, "the pool ticket names slot %" PRIu32 " and cell %" PRIu32
                     " (a slab has %u and %u)", pt.slot, pt.cell, kSlots, kCells);
  std::lock_guard<std::mutex> lock(pool_mutex);
  Slab* s = find_slab_locked(pt.dev, pt.ino);
  if (s == nullptr) {
    if (fd == -1) {
      *out = nullptr;  // the slab's file is needed
      return DLB_OK;
    }
    s = map_slab_locked(pt, fd);
    if (s == nullptr) return last_error_code();
  }
  const std::uint64_t begin = kSlabHeader + pt.slot * s->slot_size;
  if (s->m->size != pt.slab_size || d.reach_begin < begin || d.reach_end > begin + s->slot_size) {
    if (s->local == 0) {  // a slab mapped for this ticket alone may go
      s->idle_tick = ++tick;
      evict_locked();
    }
    return set_error(DLB_ERR_MALFORMED, "the pool ticket's layout (bytes %" PRIu64 " to %" PRIu64
                     ") does not lie in its slot %" PRIu32 " (bytes %" PRIu64 " to %" PRIu64 ")",
                     d.reach_begin, d.reach_end, pt.slot, begin, begin + s->slot_size);
  }
  std::uint64_t token = pt.token;
  if (!cell_of(s, pt.cell).compare_exchange_strong(token, 0, std::memory_order_acq_rel)) {
    if (s->local == 0) {
      s->idle_tick = ++tick;
      evict_locked();
    }
    return set_error(DLB_ERR_DELETED, "the pool ticket (pid %" PRId32 ", slot %" PRIu32
                     ") was opened already: a ticket opens once", pt.pid, pt.slot);
  }
  const DLTensor view = view_of(d, s->m->base);
  const bool read_only = (flags & DLB_SHARE_READ_ONLY) != 0 || (d.flags & kDescReadOnly) != 0;
  return wrap_slot_locked(s, pt.slot, view, read_only, out);  // adopts the ticket's reference
}

dlb_status file_impl(std::uint64_t dev, std::uint64_t ino, dlb_share_descriptor* out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  std::lock_guard<std::mutex> lock(pool_mutex);
  Slab* s = find_slab_locked(dev, ino);
  if (s == nullptr)
    return set_error(DLB_ERR_DELETED, "no slab with device %" PRIu64 " and inode %" PRIu64 " is mapped here", dev, ino);
  const int fd = fcntl(s->m->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "duplicating the slab's file descriptor failed: %s",
                     std::strerror(errno));
  std::int64_t shape = static_cast<std::int64_t>(s->m->size);
  std::int64_t stride = 1;
  DLTensor t;
  std::memset(&t, 0, sizeof t);
  t.device = DLDevice{kDLCPU, 0};
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.ndim = 1;
  t.shape = &shape;
  t.strides = &stride;
  out->fd = fd;
  out->size = static_cast<std::uint32_t>(write_description(t, s->m->size, 0, out->description));
  return DLB_OK;
}

std::int64_t trim_impl() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  std::int64_t n = 0;
  auto& v = slabs();
  for (std::size_t i = v.size(); i-- > 0;) {
    if (trimmable_locked(v[i])) {
      drop_locked(i);
      ++n;
    }
  }
  return n;
}

}  // namespace

dlb_status pool_copy(dlb_buffer* buffer, const DLTensor& compact_view, std::uint64_t nbytes, dlb_buffer** out) noexcept {
  std::uint64_t slot_size = 0;
  for (std::uint64_t ss : kSlotSizes) {
    if (nbytes <= ss) {
      slot_size = ss;
      break;
    }
  }
  if (slot_size == 0) return DLB_ERR_NOT_ZERO_COPY;
  std::lock_guard<std::mutex> lock(pool_mutex);
  Slab* slab = nullptr;
  std::uint32_t slot = kSlots;
  for (Slab* s : slabs()) {
    if (!s->owner || s->slot_size != slot_size) continue;
    for (std::uint32_t i = 0; i < kSlots; ++i) {
      std::uint32_t expected = 0;
      if (ref_of(s, i).compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        slab = s;
        slot = i;
        break;
      }
    }
    if (slab != nullptr) break;
  }
  if (slab == nullptr) {
    slab = new_slab_locked(slot_size);
    if (slab == nullptr) return last_error_code();
    slot = 0;
    ref_of(slab, 0).store(1, std::memory_order_release);
  }
  unsigned char* data = slab->m->base + kSlabHeader + slot * slot_size;
  const dlb_status s = buffer_copy_out(buffer, data, nbytes, DLB_STREAM_NONE);
  if (s != DLB_OK) {
    ref_of(slab, slot).fetch_sub(1, std::memory_order_acq_rel);
    return s;
  }
  DLTensor view = compact_view;
  view.data = data;
  return wrap_slot_locked(slab, slot, view, false, out);
}

void pool_escape(Slab* slab, std::uint64_t lo, std::uint64_t hi) noexcept {
  if (hi <= lo) hi = lo + 1;
  if (lo < kSlabHeader) lo = kSlabHeader;
  for (std::uint64_t slot = (lo - kSlabHeader) / slab->slot_size;
       slot < kSlots && kSlabHeader + slot * slab->slot_size < hi; ++slot)
    ref_of(slab, static_cast<std::uint32_t>(slot)).fetch_or(kEscaped, std::memory_order_acq_rel);
}

}  // namespace dlb::share

extern "C" {

DLB_API dlb_status dlb_share_pool_issue(dlb_buffer* buffer, dlb_share_pool_ticket* out) {
  return dlb::firewall(__func__, [&] { return dlb::share::issue_impl(buffer, out); });
}

DLB_API dlb_status dlb_share_pool_ticket_source(const dlb_share_pool_ticket* ticket, int32_t* pid, int32_t* fd,
                                                uint64_t* dev, uint64_t* ino) {
  return dlb::firewall(__func__, [&] { return dlb::share::source_impl(ticket, pid, fd, dev, ino); });
}

DLB_API dlb_status dlb_share_pool_open(const dlb_share_pool_ticket* ticket, int32_t fd, uint64_t flags,
                                       dlb_buffer** out) {
  return dlb::firewall(__func__, [&] { return dlb::share::open_impl(ticket, fd, flags, out); });
}

DLB_API dlb_status dlb_share_pool_file(uint64_t dev, uint64_t ino, dlb_share_descriptor* out) {
  return dlb::firewall(__func__, [&] { return dlb::share::file_impl(dev, ino, out); });
}

DLB_API dlb_status dlb_share_pool_stats(dlb_share_pool_state* out) {
  return dlb::firewall(__func__, [&] {
    if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
    std::lock_guard<std::mutex> lock(dlb::share::pool_mutex);
    out->slabs = static_cast<int64_t>(dlb::share::slabs().size());
    out->references = dlb::share::references;
    return DLB_OK;
  });
}

DLB_API int64_t dlb_share_pool_trim(void) {
  return dlb::firewall_value(__func__, int64_t{-1}, [] { return dlb::share::trim_impl(); });
}

}  // extern "C"
