// The part of the fuzz targets that exercises a buffer once it exists:
// exports (versioned and legacy, with arbitrary options), host copies,
// delete, retain/release, re-import of its own exports, and a teardown in
// an input-chosen order. It checks pointer identity of zero-copy exports,
// copied data against the naive reference copy, the read-only rules, and
// that whatever owns the memory is released only after the last use.
#ifndef DLBRIDGE_FUZZ_FUZZ_EXERCISE_HPP_
#define DLBRIDGE_FUZZ_FUZZ_EXERCISE_HPP_

#include "fuzz_common.hpp"

#include <vector>

namespace fuzz {

struct HeldExport {
  DLManagedTensorVersioned* v = nullptr;
  DLManagedTensor* l = nullptr;
  // Known to point at the buffer's own memory (zero-copy). A copy does not
  // keep the source alive.
  bool shares = false;
  void drop() {
    if (v) v->deleter(v);
    if (l) l->deleter(l);
    v = nullptr;
    l = nullptr;
  }
};

// The buffer's tensor as the harness built it.
struct View {
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides;  // may be NULL (compact)
  Extent extent;
  void* data;
  uint64_t byte_offset;
  bool readable;  // the harness owns every byte the view spans
};

// Consumes `buf` (the caller's one reference). `owner_calls` counts the
// owner's release (producer deleter or wrap release): it must stay 0 until
// the last reference is gone; the caller checks it afterwards.
inline void exercise(Reader& r, dlb_buffer* buf, const View& v, const int* owner_calls) {
  const bool buffer_ro = (dlb_buffer_flags(buf) & DLB_BUFFER_READ_ONLY) != 0;
  // Padded sub-byte elements (one byte each): the extent is that of bytes.
  FUZZ_CHECK(((dlb_buffer_flags(buf) & DLB_BUFFER_SUBBYTE_PADDED) != 0) == v.extent.padded,
             "buffer's padded flag differs from the harness's layout");
  const int32_t ndim = v.ndim;
  const int64_t* shape_p = v.shape;
  const int64_t* strides_p = v.strides;
  const Extent& e = v.extent;
  void* data_ptr = v.data;
  const uint64_t byte_offset = v.byte_offset;
  // Copies are allowed only of memory the harness owns, and only when small
  // (a broadcast view can describe gigabytes over a few bytes).
  const bool readable = v.readable && e.nbytes <= (int64_t{1} << 16);

  std::vector<HeldExport> held;
  std::vector<dlb_buffer*> extra;  // re-imports and host copies
  bool deleted = false;
  const uint8_t* base =
      readable && data_ptr && e.numel > 0 ? static_cast<uint8_t*>(data_ptr) + byte_offset : nullptr;

  const int nops = r.u8() % 8;
  for (int op = 0; op < nops; ++op) {
    uint8_t code = r.u8();
    switch (code % 7) {
      case 0:
      case 1: {  // export, versioned or legacy
        const bool as_versioned = (code % 7) == 0;
        dlb_export_options* eo = nullptr;
        if (code & 0x80) eo = make_export_options(r);
        if (!readable) {
          if (!eo) {
            eo = static_cast<dlb_export_options*>(std::malloc(sizeof(dlb_export_options)));
            dlb_export_options_init(eo);
          }
          eo->struct_size = sizeof(dlb_export_options);
          eo->copy = DLB_COPY_NEVER;
        }
        const bool full = eo == nullptr || eo->struct_size == sizeof(dlb_export_options);
        const bool ask_ro = full && eo && (eo->flags & DLB_EXPORT_READ_ONLY);
        const bool allow_ro = full && eo && (eo->flags & DLB_EXPORT_ALLOW_READ_ONLY_LEGACY);
        const bool ask_copy = full && eo && eo->copy == DLB_COPY_ALWAYS;
        HeldExport h;
        dlb_status es;
        DLTensor* out_t = nullptr;
        uint64_t out_flags = 0;
        if (as_versioned) {
          es = dlb_export_versioned(buf, eo, &h.v);
          if (es == DLB_OK) {
            FUZZ_CHECK(h.v->version.major == 1, "exported major %u", h.v->version.major);
            out_t = &h.v->dl_tensor;
            out_flags = h.v->flags;
            if (ask_copy) FUZZ_CHECK(out_flags & DLPACK_FLAG_BITMASK_IS_COPIED, "copy not flagged");
            FUZZ_CHECK(((out_flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0) == e.padded,
                       "export's IS_SUBBYTE_TYPE_PADDED %d, buffer padded %d",
                       (out_flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0, e.padded);
          }
        } else {
          es = dlb_export_legacy(buf, eo, &h.l);
          if (es == DLB_OK) {
            // The legacy struct cannot say the elements are padded: its
            // consumer would read them packed.
            FUZZ_CHECK(!e.padded, "padded sub-byte elements exported as a legacy tensor");
            out_t = &h.l->dl_tensor;
          }
        }
        const bool copied_expected = ask_copy;
        std::free(eo);
        if (es != DLB_OK) {
          check_failure(es, "export");
          if (deleted && full) FUZZ_CHECK(es == DLB_ERR_DELETED || es == DLB_ERR_INVALID_ARGUMENT ||
                                              es == DLB_ERR_UNSUPPORTED_DEVICE,
                                          "export of a deleted buffer gave %d", es);
          break;
        }
        FUZZ_CHECK(!deleted, "deleted buffer exported");
        FUZZ_CHECK(out_t->ndim == ndim, "export ndim");
        FUZZ_CHECK(ndim == 0 || out_t->strides != nullptr, "export without strides");
        for (int32_t i = 0; i < ndim; ++i) FUZZ_CHECK(out_t->shape[i] == shape_p[i], "export shape");
        const uintptr_t in_addr = reinterpret_cast<uintptr_t>(data_ptr) + byte_offset;
        const uintptr_t out_addr = reinterpret_cast<uintptr_t>(out_t->data) + out_t->byte_offset;
        if (e.numel > 0) {
          if (out_addr == in_addr) {
            FUZZ_CHECK(!copied_expected, "DLB_COPY_ALWAYS export shares the data");
            // Shared memory is never the consumer's alone.
            if (as_versioned)
              FUZZ_CHECK(!(out_flags & DLPACK_FLAG_BITMASK_IS_COPIED), "zero-copy export flagged IS_COPIED");
            h.shares = true;
          } else {
            // A copy: only possible from readable memory, compact, on the host.
            FUZZ_CHECK(readable, "export moved unreadable data");
            FUZZ_CHECK(dev_type(out_t->device) == kDLCPU, "copy not on the host");
            if (as_versioned)
              FUZZ_CHECK(out_flags & DLPACK_FLAG_BITMASK_IS_COPIED, "copy without IS_COPIED");
            const auto* out_base = reinterpret_cast<const uint8_t*>(out_addr);
            std::vector<uint8_t> ref(static_cast<size_t>(e.nbytes));
            if (!e.subbyte) reference_copy(base, ndim, shape_p, strides_p, e.elem_bytes, ref.data());
            else if (e.compact) std::memcpy(ref.data(), base, ref.size());
            if (!e.subbyte || e.compact)
              FUZZ_CHECK(std::memcmp(ref.data(), out_base, ref.size()) == 0, "copied data differs");
          }
        }
        // Read-only: asked for, or inherited by exports of the same memory
        // (a copy is the consumer's own, writable unless asked otherwise).
        if (as_versioned && ask_ro)
          FUZZ_CHECK(out_flags & DLPACK_FLAG_BITMASK_READ_ONLY, "DLB_EXPORT_READ_ONLY not honoured");
        if (as_versioned && h.shares && buffer_ro)
          FUZZ_CHECK(out_flags & DLPACK_FLAG_BITMASK_READ_ONLY, "read-only memory exported writable");
        // The legacy struct cannot say READ_ONLY: read-only memory goes out
        // shared only when the caller allowed it (else as a copy).
        if (!as_versioned && full && (ask_ro || (h.shares && buffer_ro)))
          FUZZ_CHECK(allow_ro, "read-only export as legacy without DLB_EXPORT_ALLOW_READ_ONLY_LEGACY");
        held.push_back(h);
        break;
      }
      case 2: {  // host copy
        if (!readable) break;
        dlb_buffer* hb = nullptr;
        dlb_status hs = dlb_buffer_to_host(buf, &hb);
        if (hs != DLB_OK) {
          check_failure(hs, "to_host");
          break;
        }
        FUZZ_CHECK(!deleted, "deleted buffer copied");
        FUZZ_CHECK(dlb_buffer_nbytes(hb) == static_cast<uint64_t>(e.nbytes), "to_host nbytes");
        FUZZ_CHECK(((dlb_buffer_flags(hb) & DLB_BUFFER_SUBBYTE_PADDED) != 0) == e.padded,
                   "to_host changed the padded flag");
        extra.push_back(hb);
        break;
      }
      case 3:
        FUZZ_CHECK(dlb_buffer_delete(buf) == DLB_OK, "delete");
        deleted = true;
        break;
      case 4:
        FUZZ_CHECK(dlb_buffer_retain(buf) == buf, "retain");
        dlb_buffer_release(buf);
        break;
      case 5:  // drop one export early
        if (!held.empty()) {
          size_t k = r.u8() % held.size();
          held[k].drop();
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        }
        break;
      case 6: {  // hand one export back in
        if (held.empty()) break;
        size_t k = r.u8() % held.size();
        dlb_buffer* rb = nullptr;
        dlb_status is = held[k].v ? dlb_import_versioned(held[k].v, nullptr, &rb)
                                  : dlb_import_legacy(held[k].l, nullptr, &rb);
        if (is != DLB_OK) {
          check_failure(is, "re-import");
          break;
        }
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        extra.push_back(rb);
        break;
      }
    }
    FUZZ_CHECK(*owner_calls == 0, "owner's release ran while the buffer is in use");
  }

  // Tear down in an input-chosen order; the producer's deleter runs only
  // when the last reference is gone.
  const bool buffer_first = r.u8() & 1;
  if (buffer_first) dlb_buffer_release(buf);
  for (auto* b : extra) dlb_buffer_release(b);
  while (!held.empty()) {
    bool any_shares = !buffer_first;
    for (const auto& h : held) any_shares = any_shares || h.shares;
    if (any_shares) FUZZ_CHECK(*owner_calls == 0, "owner's release ran before the last export was dropped");
    size_t k = r.u8() % held.size();
    held[k].drop();
    held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
  }
  if (!buffer_first) {
    FUZZ_CHECK(*owner_calls == 0, "owner's release ran while a handle is held");
    dlb_buffer_release(buf);
  }
}

}  // namespace fuzz

#endif
