// libFuzzer target: buffers made by dlb_buffer_alloc or dlb_buffer_wrap from
// fuzzed layouts (wrap with or without DLB_BUFFER_SUBBYTE_PADDED), exported
// with arbitrary dlb_export_options bytes (struct_size included), copied,
// deleted and released (fuzz_exercise.hpp).
// A wrapped view lies in an exact-size heap block that its release callback
// frees, so a read outside it, or after release, is an ASan report.
#include "fuzz_exercise.hpp"

namespace {

struct Owned {
  int calls = 0;
  uint8_t* block = nullptr;
};
Owned g_owned;

void release_block(void* ctx) {
  auto* o = static_cast<Owned*>(ctx);
  FUZZ_CHECK(o == &g_owned, "release got the wrong ctx");
  ++o->calls;
  std::free(o->block);
  o->block = nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuzz;
  Reader r(data, size);
  FUZZ_CHECK(dlb_live_exports() == 0, "live exports at start");
  const uint8_t ctl = r.u8();
  const bool use_wrap = (ctl & 1) != 0;

  const NdimPick nd = pick_ndim(r);
  const int32_t ndim = nd.ndim;
  const int32_t ndim_alloc = nd.alloc;
  std::vector<int64_t> shape(static_cast<size_t>(ndim_alloc) + 1), strides(shape.size());
  for (int32_t i = 0; i < ndim_alloc; ++i) shape[static_cast<size_t>(i)] = r.extent(false);
  for (int32_t i = 0; i < ndim_alloc; ++i) strides[static_cast<size_t>(i)] = r.extent(true);
  DLDataType dtype = pick_dtype(r);
  constexpr size_t cap = size_t{1} << 13;

  dlb_buffer* buf = nullptr;
  const int* owner_calls = nullptr;
  static const int no_owner = 0;
  dlb_buffer* const sentinel = reinterpret_cast<dlb_buffer*>(uintptr_t{0x5a5a5a50});

  if (!use_wrap) {
    DLDevice dev = (ctl & 2) ? pick_device(r) : make_device(kDLCPU, 0);
    // OpenCL allocations reach a real driver where one is installed (PoCL):
    // not host memory to fuzz here (the OpenCL suites test it), and once the
    // driver is loaded LeakSanitizer's check after each input reports the
    // export blocks this thread keeps for reuse as leaked (no leak at exit).
    if (dev_type(dev) == kDLOpenCL) return 0;
    Extent e = compute_extent(ndim, shape.data(), nullptr, dtype);
    if (e.sane && static_cast<uint64_t>(e.nbytes) > cap) return 0;  // too big to be worth it
    dlb_buffer* out = sentinel;
    dlb_status s = dlb_buffer_alloc(dev, dtype, ndim, shape.data(), &out);
    const bool must = e.sane && dev_type(dev) == kDLCPU && dev.device_id == 0;
    if (s != DLB_OK) {
      check_failure(s, "alloc");
      FUZZ_CHECK(out == sentinel, "out written on failure");
      FUZZ_CHECK(!must || s == DLB_ERR_OUT_OF_MEMORY, "valid alloc refused: %s", dlb_status_name(s));
      return 0;
    }
    FUZZ_CHECK(e.sane, "alloc accepted a layout the harness finds malformed");
    buf = out;
    owner_calls = &no_owner;
  } else {
    const bool null_strides = (ctl & 4) != 0;
    uint8_t bs = r.u8();
    uint64_t byte_offset = bs < 0xF0 ? (bs % 16) * 4u : r.u64();
    DLDevice dev = (ctl & 2) ? pick_device(r) : make_device(kDLCPU, 0);
    const int64_t* sp = null_strides ? nullptr : strides.data();
    // DLB_BUFFER_SUBBYTE_PADDED: taken only for elements narrower than a
    // byte (buffer.h), DLB_ERR_INVALID_ARGUMENT otherwise.
    const bool pad = (ctl & 0x10) != 0;
    const bool pad_refused = pad && static_cast<uint32_t>(dtype.bits) * dtype.lanes >= 8;
    Extent e = compute_extent(ndim, shape.data(), sp, dtype, pad);
    Placement pl;
    DLTensor view;
    std::memset(&view, 0, sizeof(view));
    view.ndim = ndim;
    view.dtype = dtype;
    view.device = dev;
    view.shape = shape.data();
    view.strides = const_cast<int64_t*>(sp);
    view.byte_offset = byte_offset;
    const uint64_t wflags = ((ctl & 8) ? DLB_BUFFER_READ_ONLY : 0) | (pad ? DLB_BUFFER_SUBBYTE_PADDED : 0);
    if (!place(e, byte_offset, cap, r, &pl)) {
      if (e.sane && !pad_refused) return 0;  // valid but larger than the arena cap
      // Malformed, or padded elements of a byte or more: wrap must refuse
      // it, without reading anything.
      view.data = reinterpret_cast<void*>(uintptr_t{1} << 40);
      dlb_buffer* out = sentinel;
      dlb_status s = dlb_buffer_wrap(&view, wflags & DLB_BUFFER_SUBBYTE_PADDED, release_block, &g_owned, &out);
      FUZZ_CHECK(s != DLB_OK, "malformed view wrapped (ndim %d dtype %u/%u/%u, padded %d)", ndim, dtype.code,
                 dtype.bits, dtype.lanes, pad);
      check_failure(s, "wrap");
      FUZZ_CHECK(out == sentinel, "out written on failure");
      if (pad_refused && dtype_legal(dtype))
        FUZZ_CHECK(s == DLB_ERR_INVALID_ARGUMENT, "padded %u-bit elements gave %s",
                   static_cast<unsigned>(dtype.bits * dtype.lanes), dlb_status_name(s));
      return 0;
    }
    view.data = pl.data;
    g_owned.calls = 0;
    g_owned.block = pl.block;
    dlb_buffer* out = sentinel;
    dlb_status s = dlb_buffer_wrap(&view, wflags, release_block, &g_owned, &out);
    if (s != DLB_OK) {
      check_failure(s, "wrap");
      FUZZ_CHECK(out == sentinel, "out written on failure");
      FUZZ_CHECK(g_owned.calls == 0, "release ran on a failed wrap");
      if (pad_refused) {
        FUZZ_CHECK(s == DLB_ERR_INVALID_ARGUMENT, "padded %u-bit elements gave %s",
                   static_cast<unsigned>(dtype.bits * dtype.lanes), dlb_status_name(s));
      } else {
        const bool known = known_device(dev);
        FUZZ_CHECK(!known || refusal_tolerated(e, s), "valid view refused by wrap: %s", dlb_status_name(s));
      }
      std::free(pl.block);
      return 0;
    }
    FUZZ_CHECK(!pad_refused, "DLB_BUFFER_SUBBYTE_PADDED taken for %u-bit elements",
               static_cast<unsigned>(dtype.bits * dtype.lanes));
    if (wflags & DLB_BUFFER_READ_ONLY) FUZZ_CHECK(dlb_buffer_flags(out) & DLB_BUFFER_READ_ONLY, "READ_ONLY flag lost");
    buf = out;
    owner_calls = &g_owned.calls;
  }

  DLTensor v;
  FUZZ_CHECK(dlb_buffer_dltensor(buf, &v) == DLB_OK, "dltensor");
  Extent e = compute_extent(v.ndim, v.shape, v.strides, v.dtype,
                            (dlb_buffer_flags(buf) & DLB_BUFFER_SUBBYTE_PADDED) != 0);
  FUZZ_CHECK(e.sane, "buffer view is malformed");
  FUZZ_CHECK(dlb_buffer_nbytes(buf) == static_cast<uint64_t>(e.nbytes), "nbytes");
  if (!use_wrap && e.nbytes > 0) {
    FUZZ_CHECK(reinterpret_cast<uintptr_t>(v.data) % 64 == 0, "alloc not 64-byte aligned");
    const auto* p = static_cast<const uint8_t*>(v.data) + v.byte_offset;
    for (int64_t i = 0; i < e.nbytes; ++i) FUZZ_CHECK(p[i] == 0, "alloc not zero-filled");
  }
  // The library's own strides (copied) stay valid while we hold `buf`.
  View view{v.ndim, v.shape, v.strides, e, v.data, v.byte_offset, true};
  exercise(r, buf, view, owner_calls);
  if (use_wrap) FUZZ_CHECK(g_owned.calls == 1, "release ran %d times", g_owned.calls);
  FUZZ_CHECK(dlb_live_exports() == 0, "live exports at end");
  return 0;
}
