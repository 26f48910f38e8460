// The small-tensor pool (DLB_SHARE_POOLED, pool tickets): pooled copies in
// slots of slabs and the reuse of free slots, the tensors the pool refuses,
// tickets issued and opened (once) in this process, in forked children and
// in an unrelated (spawned) process, tickets that lie, the fork rule,
// dlb_buffer_share() and dlb_buffer_is_shared() of pooled buffers, and
// eviction and trimming of idle slabs.
//
// The slot's reference count, which lives in the slab's header, is read
// through the slab's file (dlb_share_pool_file) at the offset share_pool.cpp
// documents (64 + 4 * slot), so that a test sees what every process sees.
#include "share_fixture.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

using namespace dlbtest;
using namespace sharetest;

namespace {

// 4 KiB slots: a 4 KiB header and 64 slots.
constexpr std::uintptr_t kSlab4k = 4096 + 64 * 4096;
// Ticket field offsets (src/share/share_format.hpp).
constexpr int kTicketVersion = 4;
constexpr int kTicketDev = 24;
constexpr int kTicketIno = 32;
constexpr int kTicketSlot = 48;
constexpr int kTicketCell = 52;
constexpr int kTicketToken = 56;
constexpr int kTicketHeader = 64;

// Every test starts with no idle slab (trimmed) and checks that it leaves
// no pooled buffer, no slab beyond those it started with (after a trim), no
// file descriptor and no mapping behind.
class Pool : public Share {
 protected:
  void SetUp() override {
    dlb_share_pool_trim();
    Share::SetUp();
    ASSERT_EQ(dlb_share_pool_stats(&start_), DLB_OK);
  }
  void TearDown() override {
    dlb_share_pool_state now{};
    EXPECT_EQ(dlb_share_pool_stats(&now), DLB_OK);
    EXPECT_EQ(now.references, start_.references) << "a pooled buffer was not released";
    dlb_share_pool_trim();
    EXPECT_EQ(dlb_share_pool_stats(&now), DLB_OK);
    EXPECT_LE(now.slabs, start_.slabs) << "a slab was left after dlb_share_pool_trim";
    Share::TearDown();
  }
  dlb_share_pool_state stats() {
    dlb_share_pool_state s{-1, -1};
    EXPECT_EQ(dlb_share_pool_stats(&s), DLB_OK);
    return s;
  }
  dlb_share_pool_state start_{};
};

// A host (not shared) float32 buffer of `n` elements base, base + 1, ...
dlb_buffer* host_f32(std::int64_t n, float base, std::uint64_t flags = 0) {
  dlb_buffer* src = nullptr;
  EXPECT_EQ(dlb_buffer_alloc(cpu(), f32(), 1, &n, &src), DLB_OK) << dlb_last_error_message();
  float* p = data_of(src);
  for (std::int64_t i = 0; i < n; ++i) p[i] = base + static_cast<float>(i);
  if (flags == 0) return src;
  // A read-only view of it.
  DLTensor t;
  EXPECT_EQ(dlb_buffer_dltensor(src, &t), DLB_OK);
  dlb_buffer* ro = nullptr;
  EXPECT_EQ(dlb_buffer_wrap(&t, flags, [](void* b) { dlb_buffer_release(static_cast<dlb_buffer*>(b)); }, src, &ro),
            DLB_OK);
  return ro;
}

// A shared copy (pooled by default) of such a buffer.
dlb_buffer* copy_f32(std::int64_t n, float base, std::uint64_t flags = DLB_SHARE_POOLED) {
  dlb_buffer* src = host_f32(n, base);
  dlb_buffer* out = nullptr;
  EXPECT_EQ(dlb_buffer_copy_shared(src, flags, &out), DLB_OK) << dlb_last_error_message();
  dlb_buffer_release(src);
  return out;
}

bool holds(dlb_buffer* b, std::int64_t n, float base) {
  const float* p = data_of(b);
  for (std::int64_t i = 0; i < n; ++i)
    if (p[i] != base + static_cast<float>(i)) return false;
  return true;
}

dlb_share_pool_ticket issue(dlb_buffer* b) {
  dlb_share_pool_ticket t;
  std::memset(&t, 0, sizeof t);
  EXPECT_EQ(dlb_share_pool_issue(b, &t), DLB_OK) << dlb_last_error_message();
  return t;
}

dlb_buffer* open_ticket(const dlb_share_pool_ticket& t, int fd = -1, std::uint64_t flags = 0) {
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_share_pool_open(&t, fd, flags, &o), DLB_OK) << dlb_last_error_message();
  return o;
}

void reseal_ticket(dlb_share_pool_ticket& t) { reseal(t.bytes, t.size); }

// The /proc/self/maps line of the mapping that holds `p` ("" if none), and
// its bounds.
std::string map_line(const void* p, std::uintptr_t* lo = nullptr, std::uintptr_t* hi = nullptr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(maps, line)) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &a, &b) == 2 && at >= a && at < b) {
      if (lo != nullptr) *lo = a;
      if (hi != nullptr) *hi = b;
      return line;
    }
  }
  return "";
}

// Where a pooled buffer lies: its slab's file and its slot (from a ticket
// issued and opened again, which leaves the counts as they were).
struct SlotId {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint32_t slot = 0;
};
SlotId slot_of(dlb_buffer* b) {
  SlotId id;
  dlb_share_pool_ticket t = issue(b);
  EXPECT_EQ(dlb_share_pool_ticket_source(&t, nullptr, nullptr, &id.dev, &id.ino), DLB_OK);
  id.slot = static_cast<std::uint32_t>(get_le(t.bytes + kTicketSlot, 4));
  dlb_buffer_release(open_ticket(t));
  return id;
}

// The slot's reference count in the slab's header, read through the slab's
// file (bit 31: escaped).
std::uint32_t shared_count(const SlotId& id) {
  dlb_share_descriptor d;
  if (dlb_share_pool_file(id.dev, id.ino, &d) != DLB_OK) {
    ADD_FAILURE() << "dlb_share_pool_file: " << dlb_last_error_message();
    return 0xDEADBEEFu;
  }
  dlb_buffer* whole = open_of(d);
  dlb_share_descriptor_close(&d);
  if (whole == nullptr) return 0xDEADBEEFu;
  DLTensor t;
  EXPECT_EQ(dlb_buffer_dltensor(whole, &t), DLB_OK);
  std::uint32_t v = 0;
  std::memcpy(&v, static_cast<const unsigned char*>(t.data) + t.byte_offset + 64 + 4 * id.slot, 4);
  dlb_buffer_release(whole);
  return v;
}

// ---------------------------------------------------------------------------
// Pooled copies
// ---------------------------------------------------------------------------

TEST_F(Pool, PooledCopyLiesInASlotOfASlabAndItsSlotIsReused) {
  dlb_buffer* b = copy_f32(1024, 0.5f);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(holds(b, 1024, 0.5f));
  EXPECT_EQ(dlb_buffer_flags(b) & DLB_BUFFER_READ_ONLY, 0u);
  EXPECT_EQ(dlb_buffer_nbytes(b), 4096u);
  float* p = data_of(b);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE)), 0u);
  std::uintptr_t lo = 0, hi = 0;
  const std::string line = map_line(p, &lo, &hi);
  EXPECT_NE(line.find("memfd:dlbridge-shared"), std::string::npos) << line;
  EXPECT_EQ(hi - lo, kSlab4k) << line;
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(p) - lo;
  EXPECT_GE(at, 4096u);
  EXPECT_EQ((at - 4096) % 4096, 0u);
  EXPECT_EQ(mapping_perms(p), "rw-s");
  // Slabs are not counted as shared mappings.
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
  dlb_share_pool_state s = stats();
  EXPECT_GE(s.slabs, start_.slabs + 1);
  EXPECT_EQ(s.references, start_.references + 1);
  // A second copy takes another slot of the same slab.
  dlb_buffer* c = copy_f32(1000, 7.0f);
  EXPECT_EQ(map_line(data_of(c)), line);
  EXPECT_NE(data_of(c), p);
  EXPECT_EQ(stats().references, start_.references + 2);
  EXPECT_EQ(stats().slabs, s.slabs);
  dlb_buffer_release(c);
  dlb_buffer_release(b);
  EXPECT_EQ(stats().references, start_.references);
  EXPECT_EQ(stats().slabs, s.slabs);  // idle slabs are kept
  // The freed slot is taken again.
  dlb_buffer* d = copy_f32(1024, 3.0f);
  EXPECT_EQ(data_of(d), p);
  EXPECT_TRUE(holds(d, 1024, 3.0f));
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
  dlb_buffer_release(d);
  EXPECT_EQ(dlb_share_pool_trim(), s.slabs - start_.slabs);
  EXPECT_EQ(stats().slabs, start_.slabs);
  EXPECT_EQ(open_fds(), fds_at_start_);
}

TEST_F(Pool, SlotSizesFollowTheTensorSize) {
  // 16 KiB slots for 4 KiB + 1 to 16 KiB, 64 KiB slots up to 64 KiB exactly.
  dlb_buffer* a = copy_f32(1025, 0.0f);
  dlb_buffer* b = copy_f32(16384, 1.0f);  // 64 KiB exactly: pooled
  std::uintptr_t lo = 0, hi = 0;
  map_line(data_of(a), &lo, &hi);
  EXPECT_EQ(hi - lo, 4096u + 64 * 16384);
  map_line(data_of(b), &lo, &hi);
  EXPECT_EQ(hi - lo, 4096u + 64 * 65536);
  EXPECT_TRUE(holds(b, 16384, 1.0f));
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
  EXPECT_EQ(stats().references, start_.references + 2);
  dlb_buffer_release(a);
  dlb_buffer_release(b);
}

TEST_F(Pool, LargeReadOnlyAndUnpooledBuffersGetNoTicket) {
  dlb_share_pool_ticket t;
  std::memset(&t, 0x5a, sizeof t);
  // Larger than the pool takes: a file of its own.
  dlb_buffer* big = copy_f32(16385, 0.0f);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 1);
  EXPECT_TRUE(holds(big, 16385, 0.0f));
  EXPECT_EQ(dlb_share_pool_issue(big, &t), DLB_ERR_NOT_ZERO_COPY);
  // Read-only, asked for: a file of its own.
  dlb_buffer* ro = copy_f32(16, 0.0f, DLB_SHARE_POOLED | DLB_SHARE_READ_ONLY);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 2);
  EXPECT_NE(dlb_buffer_flags(ro) & DLB_BUFFER_READ_ONLY, 0u);
  EXPECT_EQ(dlb_share_pool_issue(ro, &t), DLB_ERR_NOT_ZERO_COPY);
  // Read-only because the source is.
  dlb_buffer* src = host_f32(16, 2.0f, DLB_BUFFER_READ_ONLY);
  dlb_buffer* ro2 = nullptr;
  ASSERT_EQ(dlb_buffer_copy_shared(src, DLB_SHARE_POOLED, &ro2), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 3);
  EXPECT_EQ(dlb_share_pool_issue(ro2, &t), DLB_ERR_NOT_ZERO_COPY);
  // Ordinary memory, and shared memory of a file of its own.
  dlb_buffer* plain = host_f32(16, 0.0f);
  EXPECT_EQ(dlb_share_pool_issue(plain, &t), DLB_ERR_NOT_ZERO_COPY);
  dlb_buffer* own = alloc_shared_f32({4});
  EXPECT_EQ(dlb_share_pool_issue(own, &t), DLB_ERR_NOT_ZERO_COPY);
  // Without DLB_SHARE_POOLED a small copy is not pooled either.
  dlb_buffer* unpooled = copy_f32(16, 0.0f, 0);
  EXPECT_EQ(dlb_share_pool_issue(unpooled, &t), DLB_ERR_NOT_ZERO_COPY);
  EXPECT_EQ(t.bytes[0], 0x5a);  // untouched
  EXPECT_EQ(t.size, 0x5a5a5a5au);
  EXPECT_EQ(stats().references, start_.references);
  EXPECT_EQ(stats().slabs, start_.slabs);
  for (dlb_buffer* b : {big, ro, src, ro2, plain, own, unpooled}) dlb_buffer_release(b);
  // Unknown copy flags.
  dlb_buffer* s = host_f32(4, 0.0f);
  dlb_buffer* o = nullptr;
  EXPECT_EQ(dlb_buffer_copy_shared(s, DLB_SHARE_POOLED | (UINT64_C(1) << 9), &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(o, nullptr);
  dlb_buffer_release(s);
}

TEST_F(Pool, PooledBufferExportKeepsItsSlot) {
  dlb_buffer* b = copy_f32(64, 1.0f);
  float* p = data_of(b);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  dlb_buffer_release(b);
  EXPECT_EQ(stats().references, start_.references + 1);  // the export holds it
  dlb_buffer* c = copy_f32(64, 2.0f);
  EXPECT_NE(data_of(c), p);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[3], 4.0f);
  dlb_managed_free_versioned(m);
  EXPECT_EQ(stats().references, start_.references + 1);
  dlb_buffer_release(c);
}

// ---------------------------------------------------------------------------
// Tickets in this process
// ---------------------------------------------------------------------------

TEST_F(Pool, TicketOpensOnceOverTheSameMemory) {
  dlb_buffer* b = copy_f32(1024, 1.0f);
  const SlotId id = slot_of(b);
  EXPECT_EQ(shared_count(id), 1u);
  dlb_share_pool_ticket t = issue(b);
  EXPECT_GE(t.size, static_cast<std::uint32_t>(kTicketHeader + DLB_SHARE_DESCRIPTION_HEADER));
  EXPECT_LE(t.size, static_cast<std::uint32_t>(DLB_SHARE_POOL_TICKET_MAX));
  EXPECT_EQ(shared_count(id), 2u);  // the ticket's reference
  EXPECT_EQ(stats().references, start_.references + 1);
  const int fds = open_fds();
  dlb_buffer* o = open_ticket(t);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(open_fds(), fds);  // mapped here already: nothing opened
  EXPECT_EQ(data_of(o), data_of(b));
  EXPECT_EQ(dlb_buffer_flags(o) & DLB_BUFFER_READ_ONLY, 0u);
  DLTensor tb, to;
  ASSERT_EQ(dlb_buffer_dltensor(b, &tb), DLB_OK);
  ASSERT_EQ(dlb_buffer_dltensor(o, &to), DLB_OK);
  EXPECT_EQ(to.ndim, 1);
  EXPECT_EQ(to.shape[0], 1024);
  EXPECT_EQ(to.dtype.code, kDLFloat);
  EXPECT_EQ(to.dtype.bits, 32);
  data_of(o)[7] = -3.0f;
  EXPECT_EQ(data_of(b)[7], -3.0f);
  EXPECT_EQ(stats().references, start_.references + 2);
  EXPECT_EQ(shared_count(id), 2u);  // adopted, not taken again
  // A ticket opens once.
  dlb_buffer* again = reinterpret_cast<dlb_buffer*>(0x1);
  EXPECT_EQ(dlb_share_pool_open(&t, -1, 0, &again), DLB_ERR_DELETED);
  EXPECT_EQ(again, reinterpret_cast<dlb_buffer*>(0x1));
  EXPECT_EQ(shared_count(id), 2u);
  dlb_buffer_release(o);
  EXPECT_EQ(shared_count(id), 1u);
  dlb_buffer_release(b);
  EXPECT_EQ(stats().references, start_.references);
  EXPECT_GE(dlb_share_pool_trim(), 1);
  EXPECT_EQ(stats().slabs, start_.slabs);
  EXPECT_EQ(open_fds(), fds_at_start_);
}

TEST_F(Pool, ReadOnlyOpenGivesReadOnlyBuffersAndTickets) {
  dlb_buffer* b = copy_f32(16, 0.0f);
  dlb_share_pool_ticket t = issue(b);
  dlb_buffer* o = open_ticket(t, -1, DLB_SHARE_READ_ONLY);
  ASSERT_NE(o, nullptr);
  EXPECT_NE(dlb_buffer_flags(o) & DLB_BUFFER_READ_ONLY, 0u);
  // A ticket of a read-only buffer opens read-only.
  dlb_share_pool_ticket t2 = issue(o);
  dlb_buffer* o2 = open_ticket(t2);
  ASSERT_NE(o2, nullptr);
  EXPECT_NE(dlb_buffer_flags(o2) & DLB_BUFFER_READ_ONLY, 0u);
  EXPECT_EQ(data_of(o2), data_of(b));
  EXPECT_EQ(stats().references, start_.references + 3);
  dlb_buffer_release(o2);
  dlb_buffer_release(o);
  dlb_buffer_release(b);
}

TEST_F(Pool, TicketOfAViewOfAPooledBuffer) {
  // An import of a pooled buffer's export lies in the slot too.
  dlb_buffer* b = copy_f32(32, 0.0f);
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(dlb_export_versioned(b, nullptr, &m), DLB_OK);
  dlb_buffer* imported = nullptr;
  ASSERT_EQ(dlb_import_versioned(m, nullptr, &imported), DLB_OK) << dlb_last_error_message();
  dlb_share_pool_ticket t = issue(imported);
  dlb_buffer_release(imported);
  dlb_buffer_release(b);
  dlb_buffer* o = open_ticket(t);
  ASSERT_NE(o, nullptr);
  EXPECT_TRUE(holds(o, 32, 0.0f));
  dlb_buffer_release(o);
}

TEST_F(Pool, TicketSourceNamesThisProcessAndTheSlabFile) {
  dlb_buffer* b = copy_f32(8, 0.0f);
  dlb_share_pool_ticket t = issue(b);
  std::int32_t pid = 0, fd = -2;
  std::uint64_t dev = 0, ino = 0;
  ASSERT_EQ(dlb_share_pool_ticket_source(&t, &pid, &fd, &dev, &ino), DLB_OK);
  EXPECT_EQ(pid, static_cast<std::int32_t>(getpid()));
  ASSERT_GE(fd, 0);
  EXPECT_NE(fcntl(fd, F_GETFD), -1);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_dev), dev);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_ino), ino);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), kSlab4k);
  EXPECT_EQ(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK, F_SEAL_SHRINK);
  // Every output may be NULL.
  EXPECT_EQ(dlb_share_pool_ticket_source(&t, nullptr, nullptr, nullptr, nullptr), DLB_OK);
  // The slab's file, for a process that cannot take it itself.
  dlb_share_descriptor d;
  ASSERT_EQ(dlb_share_pool_file(dev, ino, &d), DLB_OK) << dlb_last_error_message();
  ASSERT_EQ(fstat(d.fd, &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_ino), ino);
  EXPECT_EQ(fcntl(d.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  dlb_buffer* whole = open_of(d);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(dlb_buffer_nbytes(whole), kSlab4k);
  dlb_buffer_release(whole);
  dlb_share_descriptor_close(&d);
  EXPECT_EQ(dlb_share_pool_file(dev, ino + 1000000, &d), DLB_ERR_DELETED);
  EXPECT_EQ(dlb_share_pool_file(dev, ino, nullptr), DLB_ERR_INVALID_ARGUMENT);
  dlb_buffer_release(open_ticket(t));
  dlb_buffer_release(b);
}

TEST_F(Pool, BadTicketsAreRefusedAndTakeNoReference) {
  dlb_buffer* b = copy_f32(256, 0.0f);
  const SlotId id = slot_of(b);
  const dlb_share_pool_ticket good = issue(b);
  ASSERT_EQ(shared_count(id), 2u);
  dlb_buffer* const sentinel = reinterpret_cast<dlb_buffer*>(0x1);
  // Opens `t` with fd -1 and `flags`; expects `want` and `out` untouched.
  auto refused = [&](const dlb_share_pool_ticket& t, dlb_status want, std::uint64_t flags = 0, int fd = -1) {
    dlb_buffer* o = sentinel;
    const dlb_status s = dlb_share_pool_open(&t, fd, flags, &o);
    EXPECT_EQ(s, want) << dlb_last_error_message();
    EXPECT_EQ(o, sentinel);
    if (s == DLB_OK && o != nullptr && o != sentinel) dlb_buffer_release(o);
    EXPECT_NE(std::string(dlb_last_error_message()), "");
  };
  // NULL arguments.
  dlb_buffer* o = sentinel;
  EXPECT_EQ(dlb_share_pool_open(nullptr, -1, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_pool_open(&good, -1, 0, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(o, sentinel);
  dlb_share_pool_ticket scratch;
  EXPECT_EQ(dlb_share_pool_issue(nullptr, &scratch), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_pool_issue(b, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_pool_ticket_source(nullptr, nullptr, nullptr, nullptr, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_share_pool_stats(nullptr), DLB_ERR_INVALID_ARGUMENT);
  // Flags and descriptors.
  refused(good, DLB_ERR_INVALID_ARGUMENT, UINT64_C(1) << 7);
  refused(good, DLB_ERR_INVALID_ARGUMENT, DLB_SHARE_POOLED);
  refused(good, DLB_ERR_INVALID_ARGUMENT, 0, -2);
  // Cut short, too long, not a ticket.
  dlb_share_pool_ticket t = good;
  t.size -= 1;
  refused(t, DLB_ERR_MALFORMED);
  t.size = 10;
  refused(t, DLB_ERR_MALFORMED);
  t.size = 0;
  refused(t, DLB_ERR_MALFORMED);
  t.size = DLB_SHARE_POOL_TICKET_MAX + 1;
  refused(t, DLB_ERR_MALFORMED);
  t.size = UINT32_MAX;
  refused(t, DLB_ERR_MALFORMED);
  t = good;
  t.bytes[0] = 'X';
  reseal_ticket(t);
  refused(t, DLB_ERR_MALFORMED);
  // A byte flipped: the checksum does not match (in the fixed part and in
  // the description).
  for (std::uint32_t at : {16u, static_cast<std::uint32_t>(kTicketSlot), good.size - 1}) {
    t = good;
    t.bytes[at] ^= 0x01;
    refused(t, DLB_ERR_MALFORMED);
  }
  // Another version, checksum recomputed.
  t = good;
  put_le(t.bytes + kTicketVersion, 2, 2);
  reseal_ticket(t);
  refused(t, DLB_ERR_VERSION);
  std::int32_t pid = 12345;
  EXPECT_EQ(dlb_share_pool_ticket_source(&t, &pid, nullptr, nullptr, nullptr), DLB_ERR_VERSION);
  EXPECT_EQ(pid, 12345);
  // Another slot (the layout is outside it), a slot and a cell out of range.
  for (std::uint32_t slot : {id.slot + 1, id.slot == 0 ? 1u : id.slot - 1, 64u, 0xFFFFFFFFu}) {
    t = good;
    put_le(t.bytes + kTicketSlot, slot, 4);
    reseal_ticket(t);
    refused(t, DLB_ERR_MALFORMED);
  }
  t = good;
  put_le(t.bytes + kTicketCell, 256, 4);
  reseal_ticket(t);
  refused(t, DLB_ERR_MALFORMED);
  // A layout past its slot: the description's byte offset moved by one
  // slot (description checksum recomputed too).
  t = good;
  {
    unsigned char* desc = t.bytes + kTicketHeader;
    const std::size_t dsize = t.size - kTicketHeader;
    put_le(desc + kByteOffset, get_le(desc + kByteOffset, 8) + 4096, 8);
    reseal(desc, dsize);
    reseal_ticket(t);
  }
  refused(t, DLB_ERR_MALFORMED);
  // The slot and the layout moved together to the next slot, both resealed:
  // the token names the slot it was issued for, so the ticket is refused
  // (it would adopt a reference on a slot it never held).
  t = good;
  {
    const std::uint32_t other = id.slot == 63 ? id.slot - 1 : id.slot + 1;
    const std::int64_t step = static_cast<std::int64_t>(other) - static_cast<std::int64_t>(id.slot);
    unsigned char* desc = t.bytes + kTicketHeader;
    const std::size_t dsize = t.size - kTicketHeader;
    put_le(desc + kByteOffset, get_le(desc + kByteOffset, 8) + static_cast<std::uint64_t>(step * 4096), 8);
    reseal(desc, dsize);
    put_le(t.bytes + kTicketSlot, other, 4);
    reseal_ticket(t);
  }
  refused(t, DLB_ERR_MALFORMED);
  // A token that is not the cell's: a ticket already opened.
  t = good;
  put_le(t.bytes + kTicketToken, get_le(t.bytes + kTicketToken, 8) ^ 0x100, 8);
  reseal_ticket(t);
  refused(t, DLB_ERR_DELETED);
  // None of these took the ticket's reference or its cell: it opens once.
  EXPECT_EQ(shared_count(id), 2u);
  EXPECT_EQ(stats().references, start_.references + 1);
  dlb_buffer* opened = open_ticket(good);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(data_of(opened), data_of(b));
  refused(good, DLB_ERR_DELETED);
  dlb_buffer_release(opened);
  EXPECT_EQ(shared_count(id), 1u);
  dlb_buffer_release(b);
}

TEST_F(Pool, TicketOfASlabNotMappedHereNeedsItsFile) {
  dlb_buffer* b = copy_f32(64, 5.0f);
  const dlb_share_pool_ticket good = issue(b);
  // The same ticket naming another file: not mapped here.
  dlb_share_pool_ticket t = good;
  put_le(t.bytes + kTicketIno, get_le(t.bytes + kTicketIno, 8) + 1000000, 8);
  reseal_ticket(t);
  dlb_buffer* o = reinterpret_cast<dlb_buffer*>(0x1);
  ASSERT_EQ(dlb_share_pool_open(&t, -1, 0, &o), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(o, nullptr);
  // A file that is not the one it names: the real slab's, and a new memory
  // file (taken: closed on failure).
  std::int32_t slab_fd = -1;
  ASSERT_EQ(dlb_share_pool_ticket_source(&good, nullptr, &slab_fd, nullptr, nullptr), DLB_OK);
  o = reinterpret_cast<dlb_buffer*>(0x1);
  EXPECT_EQ(dlb_share_pool_open(&t, slab_fd, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(o, reinterpret_cast<dlb_buffer*>(0x1));
  EXPECT_NE(fcntl(slab_fd, F_GETFD), -1);  // not taken: still the pool's
  const int other = memfd_create("other", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(other, 0);
  ASSERT_EQ(ftruncate(other, static_cast<off_t>(kSlab4k)), 0);
  EXPECT_EQ(dlb_share_pool_open(&t, other, 0, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(fcntl(other, F_GETFD), -1);
  EXPECT_EQ(dlb_share_pool_open(&t, other, DLB_SHARE_TAKE_FD, &o), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fcntl(other, F_GETFD), -1);  // taken and closed
  // The device changed instead.
  t = good;
  put_le(t.bytes + kTicketDev, get_le(t.bytes + kTicketDev, 8) ^ 0x7700, 8);
  reseal_ticket(t);
  o = reinterpret_cast<dlb_buffer*>(0x1);
  ASSERT_EQ(dlb_share_pool_open(&t, -1, 0, &o), DLB_OK);
  EXPECT_EQ(o, nullptr);
  // The slab is mapped here: a descriptor given anyway is not needed (and,
  // taken, closed).
  dlb_share_descriptor d;
  std::uint64_t dev = 0, ino = 0;
  ASSERT_EQ(dlb_share_pool_ticket_source(&good, nullptr, nullptr, &dev, &ino), DLB_OK);
  ASSERT_EQ(dlb_share_pool_file(dev, ino, &d), DLB_OK);
  dlb_buffer* opened = open_ticket(good, d.fd, DLB_SHARE_TAKE_FD);
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(fcntl(d.fd, F_GETFD), -1);
  EXPECT_TRUE(holds(opened, 64, 5.0f));
  dlb_buffer_release(opened);
  dlb_buffer_release(b);
}

TEST_F(Pool, EveryTicketCellHeldRefusesAnotherTicket) {
  dlb_buffer* b = copy_f32(4, 0.0f);
  const SlotId id = slot_of(b);
  std::vector<dlb_share_pool_ticket> tickets(256);
  for (auto& t : tickets) ASSERT_EQ(dlb_share_pool_issue(b, &t), DLB_OK) << dlb_last_error_message();
  dlb_share_pool_ticket more;
  more.size = 77;
  EXPECT_EQ(dlb_share_pool_issue(b, &more), DLB_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(more.size, 77u);
  EXPECT_EQ(shared_count(id), 257u);
  // Another slot of the same slab shares the cells.
  dlb_buffer* c = copy_f32(4, 0.0f);
  EXPECT_EQ(map_line(data_of(c)), map_line(data_of(b)));
  EXPECT_EQ(dlb_share_pool_issue(c, &more), DLB_ERR_OUT_OF_MEMORY);
  dlb_buffer_release(open_ticket(tickets[100]));
  dlb_share_pool_ticket again = issue(c);  // a cell is free again
  dlb_buffer_release(open_ticket(again));
  for (std::size_t i = 0; i < tickets.size(); ++i)
    if (i != 100) dlb_buffer_release(open_ticket(tickets[i]));
  EXPECT_EQ(shared_count(id), 1u);
  dlb_buffer_release(c);
  dlb_buffer_release(b);
}

// ---------------------------------------------------------------------------
// dlb_buffer_share and dlb_buffer_is_shared of pooled buffers
// ---------------------------------------------------------------------------

TEST_F(Pool, SharingAPooledBufferGivesTheSlabFileAndRetiresTheSlot) {
  dlb_buffer* b = copy_f32(1024, 2.0f);
  float* p = data_of(b);
  const SlotId id = slot_of(b);
  dlb_share_descriptor d = share_of(b);
  EXPECT_NE(shared_count(id) & 0x80000000u, 0u);  // escaped
  struct stat st;
  ASSERT_EQ(fstat(d.fd, &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_ino), id.ino);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), kSlab4k);
  const std::uint64_t offset = get_le(d.description + kByteOffset, 8);
  EXPECT_EQ(offset, 4096u + 4096u * id.slot);
  dlb_buffer* o = open_of(d);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 1);  // a mapping of the whole slab
  EXPECT_TRUE(holds(o, 1024, 2.0f));
  data_of(o)[1] = 100.0f;
  EXPECT_EQ(p[1], 100.0f);
  // Not a pool buffer: a mapping of its own.
  dlb_share_pool_ticket t;
  EXPECT_EQ(dlb_share_pool_issue(o, &t), DLB_ERR_NOT_ZERO_COPY);
  dlb_share_descriptor_close(&d);
  dlb_buffer_release(b);
  // The slot is never taken again, even though no process holds it.
  dlb_buffer* c = copy_f32(1024, 0.0f);
  EXPECT_NE(data_of(c), p);
  EXPECT_EQ(map_line(data_of(c)), map_line(p));
  EXPECT_EQ(p[1], 100.0f);  // still the receiver's
  dlb_buffer_release(c);
  dlb_buffer_release(o);
}

TEST_F(Pool, IsSharedTellsPooledAndSharedFromPlainMemory) {
  std::int32_t v = -1;
  dlb_buffer* pooled = copy_f32(1024, 0.0f);
  float* p = data_of(pooled);
  ASSERT_EQ(dlb_buffer_is_shared(pooled, &v), DLB_OK);
  EXPECT_EQ(v, 1);
  dlb_buffer* own = alloc_shared_f32({3});
  v = -1;
  ASSERT_EQ(dlb_buffer_is_shared(own, &v), DLB_OK);
  EXPECT_EQ(v, 1);
  dlb_buffer* plain = host_f32(3, 0.0f);
  v = -1;
  ASSERT_EQ(dlb_buffer_is_shared(plain, &v), DLB_OK);
  EXPECT_EQ(v, 0);
  v = 7;
  EXPECT_EQ(dlb_buffer_is_shared(nullptr, &v), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dlb_buffer_is_shared(plain, nullptr), DLB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(v, 7);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_ + 1);
  dlb_buffer_release(plain);
  dlb_buffer_release(own);
  dlb_buffer_release(pooled);
  // Asking did not retire the slot.
  dlb_buffer* again = copy_f32(1024, 0.0f);
  EXPECT_EQ(data_of(again), p);
  dlb_buffer_release(again);
}

// ---------------------------------------------------------------------------
// Idle slabs: eviction and trimming
// ---------------------------------------------------------------------------

TEST_F(Pool, IdleSlabsBeyondEightAreEvictedAndTrimUnmapsTheRest) {
  // Ten slabs of 4 KiB slots (64 slots each).
  std::vector<dlb_buffer*> bufs;
  for (int i = 0; i < 64 * 9 + 1; ++i) {
    bufs.push_back(copy_f32(4, static_cast<float>(i)));
    ASSERT_NE(bufs.back(), nullptr);
  }
  EXPECT_EQ(stats().slabs, start_.slabs + 10);
  EXPECT_EQ(stats().references, start_.references + 64 * 9 + 1);
  EXPECT_EQ(dlb_shared_mappings(), mappings_at_start_);
  EXPECT_EQ(shared_maps(), maps_at_start_ + 10);
  EXPECT_EQ(open_fds(), fds_at_start_ + 10);
  for (dlb_buffer* b : bufs) dlb_buffer_release(b);
  EXPECT_EQ(stats().references, start_.references);
  EXPECT_EQ(stats().slabs, start_.slabs + 8);  // eight idle slabs kept
  EXPECT_EQ(shared_maps(), maps_at_start_ + 8);
  EXPECT_EQ(dlb_share_pool_trim(), 8);
  EXPECT_EQ(dlb_share_pool_trim(), 0);
  EXPECT_EQ(stats().slabs, start_.slabs);
  EXPECT_EQ(shared_maps(), maps_at_start_);
  EXPECT_EQ(open_fds(), fds_at_start_);
}

TEST_F(Pool, TrimKeepsSlabsHeldHereOrWithATicketToOpen) {
  dlb_buffer* held = copy_f32(4, 0.0f);      // 4 KiB slots
  dlb_buffer* ticketed = copy_f32(2048, 0.0f);  // 16 KiB slots
  dlb_share_pool_ticket t = issue(ticketed);
  dlb_buffer_release(ticketed);
  EXPECT_EQ(stats().slabs, start_.slabs + 2);
  EXPECT_EQ(dlb_share_pool_trim(), 0);  // one held, one with a ticket of this process to open
  EXPECT_EQ(stats().slabs, start_.slabs + 2);
  dlb_buffer* o = open_ticket(t);
  ASSERT_NE(o, nullptr);
  EXPECT_TRUE(holds(o, 2048, 0.0f));
  dlb_buffer_release(o);
  EXPECT_EQ(dlb_share_pool_trim(), 1);
  dlb_buffer_release(held);
  EXPECT_EQ(dlb_share_pool_trim(), 1);
  EXPECT_EQ(stats().slabs, start_.slabs);
}

// ---------------------------------------------------------------------------
// Other processes
// ---------------------------------------------------------------------------

TEST_F(Pool, ForkedChildOpensATicketFromTheInheritedMapping) {
  dlb_buffer* b = copy_f32(1024, 1.0f);
  const SlotId id = slot_of(b);
  dlb_share_pool_ticket t = issue(b);
  const int rc = in_child([&] {
    const int fds = open_fds();
    dlb_share_pool_state before{};
    dlb_share_pool_stats(&before);
    dlb_buffer* o = nullptr;
    if (dlb_share_pool_open(&t, -1, 0, &o) != DLB_OK || o == nullptr) return 10;  // mapped: inherited
    if (open_fds() != fds) return 11;
    if (!holds(o, 1024, 1.0f)) return 12;
    data_of(o)[9] = -9.0f;
    dlb_buffer_release(o);
    dlb_share_pool_state after{};
    dlb_share_pool_stats(&after);
    if (after.references != before.references) return 13;
    // The inherited buffer releases no reference of the parent's.
    dlb_buffer_release(b);
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(data_of(b)[9], -9.0f);
  EXPECT_EQ(shared_count(id), 1u);  // the child dropped the ticket's, only
  dlb_buffer_release(b);
  EXPECT_EQ(shared_count(id), 0u);
}

TEST_F(Pool, AfterForkNeitherProcessReusesSlotsOfEarlierSlabs) {
  dlb_buffer* b = copy_f32(1024, 0.0f);
  float* p = data_of(b);
  const std::string slab = map_line(p);
  dlb_buffer* freed = copy_f32(1024, 0.0f);  // a slot freed before the fork
  float* q = data_of(freed);
  dlb_buffer_release(freed);
  const int rc = in_child([&] {
    // The child takes a new slab too.
    dlb_buffer* c = copy_f32(1024, 0.0f);
    const bool fresh = c != nullptr && map_line(data_of(c)) != slab;
    dlb_buffer_release(c);
    dlb_buffer_release(b);
    return fresh ? 0 : 20;
  });
  EXPECT_EQ(rc, 0);
  dlb_buffer* c = copy_f32(1024, 0.0f);
  EXPECT_NE(data_of(c), q);
  EXPECT_NE(map_line(data_of(c)), slab);
  EXPECT_EQ(stats().slabs, start_.slabs + 2);
  // The new slab's slots are reused as usual.
  float* r = data_of(c);
  dlb_buffer_release(c);
  dlb_buffer* d = copy_f32(1024, 0.0f);
  EXPECT_EQ(data_of(d), r);
  dlb_buffer_release(d);
  dlb_buffer_release(b);
}

TEST_F(Pool, ChildWithoutTheMappingOpensWithTheSlabFile) {
  dlb_buffer* b = copy_f32(256, 3.0f);
  const SlotId id = slot_of(b);
  dlb_share_pool_ticket t = issue(b);
  dlb_share_descriptor f;
  ASSERT_EQ(dlb_share_pool_file(id.dev, id.ino, &f), DLB_OK) << dlb_last_error_message();
  const int rc = in_child([&] {
    // Drop the inherited handle and slabs: the slab is not mapped here any
    // more, as in an unrelated process.
    dlb_buffer_release(b);
    if (dlb_share_pool_trim() < 1) return 30;
    dlb_share_pool_state s{};
    dlb_share_pool_stats(&s);
    if (s.slabs != 0) return 31;
    dlb_buffer* o = reinterpret_cast<dlb_buffer*>(0x1);
    if (dlb_share_pool_open(&t, -1, 0, &o) != DLB_OK || o != nullptr) return 32;
    if (dlb_share_pool_open(&t, f.fd, 0, &o) != DLB_OK || o == nullptr) return 33;
    if (fcntl(f.fd, F_GETFD) == -1) return 34;  // not taken
    if (!holds(o, 256, 3.0f)) return 35;
    data_of(o)[0] = 42.0f;
    dlb_share_pool_stats(&s);
    if (s.slabs != 1 || s.references != 1) return 36;
    dlb_buffer_release(o);
    if (dlb_share_pool_trim() != 1) return 37;  // kept until trimmed
    return 0;
  });
  EXPECT_EQ(rc, 0);
  dlb_share_descriptor_close(&f);
  EXPECT_EQ(data_of(b)[0], 42.0f);
  EXPECT_EQ(shared_count(id), 1u);
  dlb_buffer_release(b);
}

// A receiver that is not a child: /proc/self/exe started with posix_spawn
// (which runs no fork handlers) and SharePoolHelper.SpawnedReceiver as its
// only test, given the ticket (hex, DLB_POOL_TICKET) and the slab's file
// (descriptor 200). It opens the ticket, forks (its child releases the
// inherited buffer), writes and releases.
std::string hex_of(const dlb_share_pool_ticket& t) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::uint32_t i = 0; i < t.size; ++i) {
    s += digits[t.bytes[i] >> 4];
    s += digits[t.bytes[i] & 15];
  }
  return s;
}

int spawn_receiver(const dlb_share_pool_ticket& t, int slab_fd) {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "GTEST_", 6) != 0 && std::strncmp(*e, "DLB_POOL_TICKET=", 16) != 0) env.emplace_back(*e);
  env.push_back("DLB_POOL_TICKET=" + hex_of(t));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=SharePoolHelper.SpawnedReceiver";
  char* argv[] = {exe, filter.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, slab_fd, 200);
  fflush(nullptr);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, exe, &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return -1;
  return wait_child(pid);
}

// A process that maps a slab only by opening a ticket registers the fork
// rules too: its child drops no reference it never held, so the slot's
// count does not reach 0 while this process still holds it.
TEST_F(Pool, SpawnedReceiverThatForksReleasesOnlyItsOwnReference) {
  dlb_buffer* b = copy_f32(1024, 0.0f);
  const SlotId id = slot_of(b);
  ASSERT_EQ(shared_count(id), 1u);
  dlb_share_pool_ticket t = issue(b);
  dlb_share_descriptor f;
  ASSERT_EQ(dlb_share_pool_file(id.dev, id.ino, &f), DLB_OK);
  EXPECT_EQ(spawn_receiver(t, f.fd), 0) << "SharePoolHelper.SpawnedReceiver failed (its output is above)";
  dlb_share_descriptor_close(&f);
  EXPECT_EQ(data_of(b)[5], -1.0f);  // the receiver's write
  // The receiver adopted the ticket's reference and dropped it once; its
  // forked child, which inherited its buffer, dropped none.
  EXPECT_EQ(shared_count(id), 1u);
  // So the slot is still b's: a new copy does not land on it.
  dlb_buffer* c = copy_f32(1024, 0.0f);
  EXPECT_NE(data_of(c), data_of(b));
  data_of(c)[5] = 123.0f;
  EXPECT_EQ(data_of(b)[5], -1.0f);
  dlb_buffer_release(c);
  dlb_buffer_release(b);
}

TEST(SharePoolHelper, SpawnedReceiver) {
  const char* hex = std::getenv("DLB_POOL_TICKET");
  if (hex == nullptr) GTEST_SKIP() << "run by Pool.SpawnedReceiverThatForksReleasesOnlyItsOwnReference";
  dlb_share_pool_ticket t;
  std::memset(&t, 0, sizeof t);
  const std::size_t len = std::strlen(hex) / 2;
  ASSERT_LE(len, sizeof t.bytes);
  for (std::size_t i = 0; i < len; ++i)
    t.bytes[i] = static_cast<unsigned char>(std::stoul(std::string(hex + 2 * i, 2), nullptr, 16));
  t.size = static_cast<std::uint32_t>(len);
  std::int32_t pid = 0;
  ASSERT_EQ(dlb_share_pool_ticket_source(&t, &pid, nullptr, nullptr, nullptr), DLB_OK) << dlb_last_error_message();
  EXPECT_EQ(pid, static_cast<std::int32_t>(getppid()));
  // Nothing of the slab is mapped here: its file is needed.
  dlb_buffer* o = reinterpret_cast<dlb_buffer*>(0x1);
  ASSERT_EQ(dlb_share_pool_open(&t, -1, 0, &o), DLB_OK) << dlb_last_error_message();
  ASSERT_EQ(o, nullptr);
  ASSERT_EQ(dlb_share_pool_open(&t, 200, DLB_SHARE_TAKE_FD, &o), DLB_OK) << dlb_last_error_message();
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(fcntl(200, F_GETFD), -1);  // taken (the slab keeps a copy)
  EXPECT_TRUE(holds(o, 1024, 0.0f));
  dlb_share_pool_state s{};
  ASSERT_EQ(dlb_share_pool_stats(&s), DLB_OK);
  EXPECT_EQ(s.slabs, 1);
  EXPECT_EQ(s.references, 1);
  // A child inherits the buffer but holds no reference of its own: its
  // release must leave the slot's count alone.
  EXPECT_EQ(in_child([&] {
              dlb_buffer_release(o);
              return 0;
            }),
            0);
  data_of(o)[5] = -1.0f;
  dlb_buffer_release(o);
  ASSERT_EQ(dlb_share_pool_stats(&s), DLB_OK);
  EXPECT_EQ(s.references, 0);
  EXPECT_EQ(dlb_share_pool_trim(), 1);
}

}  // namespace
