// libFuzzer target: dlb_validate on arbitrary DLTensors and flags. The data
// pointer is never dereferenced by validation, so it is any value; shape
// and strides are exact-size heap arrays. The result is checked against the
// harness's own reading of the DLPack rules, and a tensor validate accepts
// must also be accepted by dlb_buffer_wrap with the same metadata.
#include "fuzz_common.hpp"

namespace {

int g_release_calls = 0;
void count_release(void* ctx) {
  FUZZ_CHECK(ctx == &g_release_calls, "release got the wrong ctx");
  ++g_release_calls;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using fuzz::Reader;
  Reader r(data, size);
  const uint8_t ctl = r.u8();

  if ((ctl & 0xC0) == 0xC0) {
    uint32_t f = r.u32();
    dlb_status s = dlb_validate(nullptr, f);
    FUZZ_CHECK(s == DLB_ERR_INVALID_ARGUMENT, "NULL tensor gave %d", s);
    fuzz::check_failure(s, "validate(NULL)");
  }

  const fuzz::NdimPick nd = fuzz::pick_ndim(r);
  const int32_t ndim = nd.ndim;
  const int32_t ndim_alloc = nd.alloc;

  DLTensor t;
  std::memset(&t, 0, sizeof(t));
  t.ndim = ndim;
  t.dtype = fuzz::pick_dtype(r);
  t.device = fuzz::pick_device(r);

  int64_t* shape = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (ndim_alloc + 1)));
  int64_t* strides = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (ndim_alloc + 1)));
  for (int32_t i = 0; i < ndim_alloc; ++i) shape[i] = r.extent(false);
  for (int32_t i = 0; i < ndim_alloc; ++i) strides[i] = r.extent(true);
  t.shape = (ctl & 0x01) && (ctl & 0x02) ? nullptr : shape;
  t.strides = (ctl & 0x04) ? nullptr : strides;

  // Data: NULL, a plausible address, or anything.
  const uintptr_t plausible = uintptr_t{1} << 40;
  switch (r.u8() % 4) {
    case 0: t.data = nullptr; break;
    case 3: t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(r.u64())); break;
    default: t.data = reinterpret_cast<void*>(plausible); break;
  }
  uint8_t bs = r.u8();
  t.byte_offset = bs < 0xF0 ? bs : r.u64();
  uint8_t fs = r.u8();
  const uint32_t flags = fs < 0xF0 ? (fs & 3u) : r.u32();

  const dlb_status s = dlb_validate(&t, flags);
  if (s != DLB_OK) fuzz::check_failure(s, "validate");
  const dlb_status s0 = dlb_validate(&t, 0);
  FUZZ_CHECK(fuzz::status_known(s0), "validate(0) status %d", s0);

  const fuzz::Extent e = fuzz::compute_extent(ndim, t.shape, t.strides, t.dtype);
  const bool ndim_bad = ndim < 0 || ndim > DLB_MAX_NDIM;
  if (ndim_bad) FUZZ_CHECK(s == DLB_ERR_INVALID_ARGUMENT, "ndim %d gave %d", ndim, s);
  if (flags & ~3u) FUZZ_CHECK(s == DLB_ERR_INVALID_ARGUMENT, "flags %#x gave %d", flags, s);
  if (s == DLB_OK) {
    FUZZ_CHECK(s0 == DLB_OK, "accepted with flags %#x but refused without", flags);
    if ((flags & DLB_VALIDATE_CONTIGUOUS) && e.fits) FUZZ_CHECK(e.compact, "non-compact tensor passed CONTIGUOUS");
    if (flags & DLB_VALIDATE_STRIDES_REQUIRED)
      FUZZ_CHECK(ndim == 0 || t.strides != nullptr, "NULL strides passed STRIDES_REQUIRED");
  }
  if (s0 == DLB_OK) {
    FUZZ_CHECK(e.sane, "validate accepted a tensor the harness finds malformed (ndim %d dtype %u/%u/%u)", ndim,
               t.dtype.code, t.dtype.bits, t.dtype.lanes);
    FUZZ_CHECK(t.data != nullptr || e.numel == 0, "NULL data with %lld elements", (long long)e.numel);
    FUZZ_CHECK(fuzz::addressable(e, t.byte_offset), "validate accepted a view no address space holds (bytes %lld..%lld, "
               "byte_offset %llu)", (long long)e.lo, (long long)e.hi, (unsigned long long)t.byte_offset);
    FUZZ_CHECK(fuzz::dtype_legal(t.dtype), "illegal dtype accepted");
  }

  // What must be accepted: a sane tensor on a known device at a plausible
  // address with a moderate extent.
  const bool known_dev = fuzz::known_device(t.device);
  const int64_t moderate = int64_t{1} << 38;
  const bool must_accept = e.fits && known_dev &&
                           (t.data == reinterpret_cast<void*>(plausible) ||
                            (t.data == nullptr && e.numel == 0)) &&
                           t.byte_offset < (uint64_t{1} << 20) && e.lo > -moderate && e.hi < moderate;
  if (must_accept && !fuzz::refusal_tolerated(e, s0)) {
    FUZZ_CHECK(s0 == DLB_OK, "valid tensor refused: %s", dlb_status_name(s0));
    if (flags == DLB_VALIDATE_CONTIGUOUS && e.compact)
      FUZZ_CHECK(s == DLB_OK, "compact tensor refused under CONTIGUOUS: %s", dlb_status_name(s));
  }

  // Cross-check with wrap: same metadata, same verdict; release once.
  if (s0 == DLB_OK && (ctl & 0x10)) {
    g_release_calls = 0;
    dlb_buffer* b = nullptr;
    dlb_status ws = dlb_buffer_wrap(&t, 0, count_release, &g_release_calls, &b);
    FUZZ_CHECK(ws == DLB_OK || ws == DLB_ERR_OUT_OF_MEMORY, "validated tensor refused by wrap: %s",
               dlb_status_name(ws));
    if (ws == DLB_OK) {
      DLTensor v;
      FUZZ_CHECK(dlb_buffer_dltensor(b, &v) == DLB_OK, "dltensor");
      FUZZ_CHECK(v.ndim == ndim && v.data == t.data && v.byte_offset == t.byte_offset, "view changed");
      for (int32_t i = 0; i < ndim; ++i) {
        FUZZ_CHECK(v.shape[i] == t.shape[i], "shape[%d]", i);
        if (t.strides) FUZZ_CHECK(v.strides[i] == t.strides[i], "strides[%d]", i);
      }
      FUZZ_CHECK(dlb_buffer_nbytes(b) == static_cast<uint64_t>(e.nbytes), "nbytes");
      FUZZ_CHECK(g_release_calls == 0, "release ran early");
      dlb_buffer_release(b);
      FUZZ_CHECK(g_release_calls == 1, "release ran %d times", g_release_calls);
    } else {
      FUZZ_CHECK(g_release_calls == 0, "release ran on a failed wrap");
    }
  }

  std::free(shape);
  std::free(strides);
  return 0;
}
