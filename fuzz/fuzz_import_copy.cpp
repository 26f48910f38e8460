// libFuzzer target: whatever the layout rule accepts is imported and copied,
// from memory the harness allocated to exactly the span it declares, so
// that an accepted tensor whose copy reads outside its declared bytes is an
// ASan report (or a fault on a guard page), and an accepted tensor that no
// address space can hold is a check failure. Hostile shapes, strides (huge,
// negative), byte_offsets, dtypes (sub-byte, lanes) and ndim 0 with stray
// pointers are built from the input; dlb_validate and the import (versioned
// or legacy) must agree, status for status. Accepted views on host devices
// are then copied three ways (dlb_buffer_to_host, dlb_copy_to_contiguous,
// an export with DLB_COPY_ALWAYS) and compared with the naive odometer copy.
//
// Small spans live in an exact-size heap block. Larger ones (up to 2^36
// bytes) live in a reservation of anonymous pages that are never written
// except around the span's two ends (untouched pages read as zero and cost
// no memory): a PROT_NONE page at each end, and the bytes between the span
// and those pages poisoned for ASan, so a read one byte outside the span
// is caught either way.
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fuzz_common.hpp"

namespace {

using namespace fuzz;

int g_deleter_calls = 0;

template <class Managed>
void count_deleter(Managed* self) {
  ++g_deleter_calls;
  std::free(self);
}

constexpr size_t kHeapCap = size_t{1} << 16;      // spans up to here: an exact heap block
constexpr uint64_t kReserveCap = uint64_t{1} << 36;  // spans up to here: a page reservation
constexpr int64_t kCopyCap = int64_t{1} << 16;    // bytes of a copy the harness makes
constexpr int64_t kSparseCopyElements = 4096;     // elements copied from a reservation

// The reservation is made and given back with the system calls themselves:
// ASan's interceptors would write the shadow of the whole range (an eighth
// of it, gigabytes), while the shadow of never-used addresses already says
// "accessible" without being touched.
void* map_reserved(size_t len) {
  return reinterpret_cast<void*>(
      syscall(SYS_mmap, nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
}
void unmap(void* p, size_t len) { syscall(SYS_munmap, p, len); }

// The memory of one view: [span, span + span_len) are the view's bytes.
struct Arena {
  Placement heap;              // small spans
  uint8_t* map = nullptr;      // large spans: the whole reservation
  size_t map_len = 0;
  uint8_t* usable = nullptr;   // between the guard pages
  size_t usable_len = 0;
  uint8_t* poisoned = nullptr; // the slack beside the span, poisoned for ASan
  size_t poisoned_len = 0;
  uint8_t* span = nullptr;
  void* data = nullptr;        // the tensor's data pointer
  bool placed = false;         // the harness owns every byte the view reaches
  bool wrapped = false;        // data + byte_offset does not fit 64 bits: refusal expected

  void release() {
    std::free(heap.block);
    if (map != nullptr) {
      ASAN_UNPOISON_MEMORY_REGION(poisoned, poisoned_len);
      unmap(map, map_len);
    }
  }
};


// Places [lo, hi) of a view (relative to data + byte_offset) so that its
// first byte is `span`: data = span - (byte_offset + lo), computed as an
// address (it may lie anywhere, even wrap; the library only adds to it).
void* data_for(uint8_t* span, const Extent& e, uint64_t byte_offset, bool* wrapped) {
  const __int128 from_data = static_cast<__int128>(byte_offset) + e.lo;
  const __int128 addr = static_cast<__int128>(reinterpret_cast<uintptr_t>(span)) - from_data;
  *wrapped = addr < 0 || addr > static_cast<__int128>(UINTPTR_MAX);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(static_cast<unsigned __int128>(addr)));
}

bool reserve(const Extent& e, uint64_t byte_offset, bool at_end, Reader& r, Arena* a) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uint64_t len = static_cast<uint64_t>(e.hi - e.lo);  // at most kReserveCap (arrange)
  a->usable_len = static_cast<size_t>((len + page - 1) / page * page);
  a->map_len = a->usable_len + 2 * page;
  void* m = map_reserved(a->map_len);
  if (m == MAP_FAILED) return false;
  a->map = static_cast<uint8_t*>(m);
  a->usable = a->map + page;
  if (mprotect(a->usable, a->usable_len, PROT_READ | PROT_WRITE) != 0) {
    unmap(a->map, a->map_len);
    a->map = nullptr;
    return false;
  }
  // The span flush against one guard page; the slack on the other side
  // poisoned, so that both directions of an overrun are caught.
  const size_t slack = a->usable_len - static_cast<size_t>(len);
  a->span = at_end ? a->usable + slack : a->usable;
  a->poisoned = at_end ? a->usable : a->span + len;
  a->poisoned_len = slack;
  ASAN_POISON_MEMORY_REGION(a->poisoned, a->poisoned_len);
  // Contents at the two ends only (touching every page would cost memory).
  const uint8_t seed = r.u8();
  const size_t ends = len < 64 ? static_cast<size_t>(len) : 64;
  for (size_t i = 0; i < ends; ++i) {
    a->span[i] = static_cast<uint8_t>(seed + 3 * i);
    a->span[len - 1 - i] = static_cast<uint8_t>(seed + 7 * i + 1);
  }
  a->data = data_for(a->span, e, byte_offset, &a->wrapped);
  a->placed = true;
  return true;
}

void arrange(const Extent& e, uint64_t byte_offset, bool at_end, Reader& r, Arena* a) {
  if (!e.fits || e.numel == 0) return;
  const __int128 wide = static_cast<__int128>(e.hi) - e.lo;  // up to 2^64: 128 bits
  if (wide > static_cast<__int128>(kReserveCap)) return;
  const uint64_t len = static_cast<uint64_t>(wide);
  if (len <= kHeapCap) {
    a->heap.block = static_cast<uint8_t*>(std::malloc(static_cast<size_t>(len)));
    if (a->heap.block == nullptr) return;
    const uint32_t seed = r.u8() * 2654435761u + 1;
    for (size_t i = 0; i < len; ++i) a->heap.block[i] = static_cast<uint8_t>((seed * (i + 1) * 2246822519u) >> 24);
    a->span = a->heap.block;
    a->data = data_for(a->span, e, byte_offset, &a->wrapped);
    a->placed = true;
  } else {
    reserve(e, byte_offset, at_end, r, a);
  }
}

// memcmp of n bytes, where n may be 0 and the pointers then NULL.
bool same(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// The three copies of an accepted view, each compared with the reference.
void check_copies(dlb_buffer* buf, const DLTensor& t, const Extent& e) {
  std::vector<uint8_t> ref(static_cast<size_t>(e.nbytes) + 1);  // +1: never NULL
  const bool copyable = !e.subbyte || e.compact;
  if (e.numel > 0) {
    const uint8_t* base = static_cast<const uint8_t*>(t.data) + t.byte_offset;
    if (!e.subbyte) reference_copy(base, t.ndim, t.shape, t.strides, e.elem_bytes, ref.data());
    else if (e.compact) std::memcpy(ref.data(), base, static_cast<size_t>(e.nbytes));
  }
  const size_t n = static_cast<size_t>(e.nbytes);

  dlb_buffer* h = nullptr;
  dlb_status s = dlb_buffer_to_host(buf, &h);
  if (!copyable) {
    FUZZ_CHECK(s == DLB_ERR_UNSUPPORTED_LAYOUT, "strided packed sub-byte copy gave %s", dlb_status_name(s));
  } else if (s == DLB_OK) {
    DLTensor v;
    FUZZ_CHECK(dlb_buffer_dltensor(h, &v) == DLB_OK, "dltensor of the copy");
    FUZZ_CHECK(same(static_cast<uint8_t*>(v.data) + v.byte_offset, ref.data(), n),
               "dlb_buffer_to_host differs from the reference");
    dlb_buffer_release(h);
  } else {
    FUZZ_CHECK(s == DLB_ERR_OUT_OF_MEMORY, "to_host of an accepted view: %s", dlb_status_name(s));
  }

  uint8_t* dst = static_cast<uint8_t*>(std::malloc(n + 1));
  s = dlb_copy_to_contiguous(&t, dst, n);
  if (copyable) {
    FUZZ_CHECK(s == DLB_OK, "dlb_copy_to_contiguous of an accepted view: %s", dlb_status_name(s));
    FUZZ_CHECK(same(dst, ref.data(), n), "dlb_copy_to_contiguous differs");
  } else {
    FUZZ_CHECK(s == DLB_ERR_UNSUPPORTED_LAYOUT, "strided packed sub-byte copy gave %s", dlb_status_name(s));
  }
  std::free(dst);

  dlb_export_options o;
  dlb_export_options_init(&o);
  o.copy = DLB_COPY_ALWAYS;
  DLManagedTensorVersioned* m = nullptr;
  s = dlb_export_versioned(buf, &o, &m);
  if (copyable && s == DLB_OK) {
    FUZZ_CHECK(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "copy export without IS_COPIED");
    const uint8_t* out = static_cast<const uint8_t*>(m->dl_tensor.data) + m->dl_tensor.byte_offset;
    FUZZ_CHECK(same(out, ref.data(), n), "DLB_COPY_ALWAYS export differs");
    m->deleter(m);
  } else if (s == DLB_OK) {
    FUZZ_CHECK(false, "strided packed sub-byte view exported as a copy");
  } else {
    check_failure(s, "export copy");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r(data, size);
  g_deleter_calls = 0;
  FUZZ_CHECK(dlb_live_exports() == 0, "live exports %lld at start", (long long)dlb_live_exports());
  const uint8_t ctl = r.u8();
  const bool versioned = (ctl & 0x01) == 0;
  const bool null_strides = (ctl & 0x02) != 0;
  const bool at_end = (ctl & 0x04) != 0;
  const bool stray_scalar = (ctl & 0x08) != 0;  // ndim 0 with pointers that fault when read
  const bool any_device = (ctl & 0x10) != 0;

  const NdimPick nd = pick_ndim(r);
  const int32_t ndim = nd.ndim;
  std::vector<int64_t> shape(static_cast<size_t>(nd.alloc) + 1), strides(shape.size());
  for (int32_t i = 0; i < nd.alloc; ++i) shape[static_cast<size_t>(i)] = r.extent(false);
  for (int32_t i = 0; i < nd.alloc; ++i) strides[static_cast<size_t>(i)] = r.extent(true);
  DLTensor t;
  std::memset(&t, 0, sizeof t);
  t.ndim = ndim;
  t.dtype = pick_dtype(r);
  t.device = any_device ? pick_device(r) : make_device(kDLCPU, 0);
  t.shape = shape.data();
  t.strides = null_strides ? nullptr : strides.data();
  if (ndim == 0 && stray_scalar) {
    t.shape = reinterpret_cast<int64_t*>(uintptr_t{8});
    t.strides = reinterpret_cast<int64_t*>(uintptr_t{8});
  }
  const uint8_t bs = r.u8();
  t.byte_offset = bs < 0xF0 ? bs % 64 : r.u64();

  const Extent e = compute_extent(ndim, ndim == 0 ? nullptr : t.shape, ndim == 0 ? nullptr : t.strides, t.dtype);
  Arena arena;
  arrange(e, t.byte_offset, at_end, r, &arena);
  if (arena.placed) {
    t.data = arena.data;
  } else if (e.sane && e.numel == 0 && (ctl & 0x20)) {
    t.data = nullptr;
  } else {
    t.data = reinterpret_cast<void*>(uintptr_t{1} << 40);  // never read: the view is not placed
  }

  const dlb_status sv = dlb_validate(&t, 0);
  if (sv != DLB_OK) check_failure(sv, "validate");

  void* mem = std::malloc(versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor));
  dlb_buffer* buf = nullptr;
  dlb_status si;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(mem);
    std::memset(static_cast<void*>(m), 0, sizeof *m);
    m->version = DLPackVersion{1, static_cast<uint32_t>(r.u8() % 4)};
    m->deleter = count_deleter<DLManagedTensorVersioned>;
    m->dl_tensor = t;
    si = dlb_import_versioned(m, nullptr, &buf);
    if (si != DLB_OK) dlb_managed_free_versioned(m);
  } else {
    auto* m = static_cast<DLManagedTensor*>(mem);
    std::memset(static_cast<void*>(m), 0, sizeof *m);
    m->deleter = count_deleter<DLManagedTensor>;
    m->dl_tensor = t;
    si = dlb_import_legacy(m, nullptr, &buf);
    if (si != DLB_OK) dlb_managed_free_legacy(m);
  }
  // One rule: validation and import agree, status for status.
  FUZZ_CHECK(si == sv, "import gave %s, validate %s", dlb_status_name(si), dlb_status_name(sv));

  const bool host = host_device(dev_type(t.device)) && t.device.device_id >= 0;
  if (si != DLB_OK) {
    check_failure(si, "import");
    FUZZ_CHECK(g_deleter_calls == 1, "deleter ran %d times after a refused import", g_deleter_calls);
    const bool must_accept = e.sane && addressable(e, t.byte_offset) && known_device(t.device) &&
                             (arena.placed ? !arena.wrapped : e.numel == 0);
    FUZZ_CHECK(!must_accept, "valid view refused: %s", dlb_status_name(si));
    arena.release();
    return 0;
  }
  FUZZ_CHECK(e.sane, "import accepted a tensor the harness finds malformed (ndim %d dtype %u/%u/%u)", ndim,
             t.dtype.code, t.dtype.bits, t.dtype.lanes);
  FUZZ_CHECK(addressable(e, t.byte_offset), "accepted a view no address space holds (bytes %lld..%lld from "
             "data + byte_offset, byte_offset %llu)", (long long)e.lo, (long long)e.hi,
             (unsigned long long)t.byte_offset);
  FUZZ_CHECK(!(arena.placed && arena.wrapped), "accepted a view whose data + byte_offset wraps past 2^64");
  FUZZ_CHECK(dlb_buffer_nbytes(buf) == static_cast<uint64_t>(e.nbytes), "nbytes %llu, harness %lld",
             (unsigned long long)dlb_buffer_nbytes(buf), (long long)e.nbytes);

  // Copy what the harness owns, when the copy is small enough to make.
  const bool sparse = arena.map != nullptr;
  const bool copy = host && (arena.placed || e.numel == 0) && e.nbytes <= kCopyCap &&
                    (!sparse || e.numel <= kSparseCopyElements);
  if (copy) check_copies(buf, t, e);
  FUZZ_CHECK(g_deleter_calls == 0, "deleter ran before the release");
  dlb_buffer_release(buf);
  FUZZ_CHECK(g_deleter_calls == 1, "deleter ran %d times", g_deleter_calls);
  FUZZ_CHECK(dlb_live_exports() == 0, "live exports %lld at end", (long long)dlb_live_exports());
  arena.release();
  return 0;
}
