// libFuzzer target: the strided copy engine. A view with fuzzed shape,
// strides (negative, zero, huge on size-1 dimensions), element size and
// byte_offset over an exact-size arena; dlb_copy_to_contiguous must produce
// what the naive odometer copy produces, byte for byte, and must succeed on
// every view that is valid and fits the destination. One control bit lowers
// the engine's size thresholds to a byte, so that the small views fuzzed
// here also take the paths of large copies: split among 1 to 4 threads,
// written with streaming stores. Two more bits cap the kernels' instruction
// set (scalar, SSE2, AVX2; clamped to what the CPU has), so that every
// level's kernels meet the fuzzed views.
#include "copy/copy_engine.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuzz;
  Reader r(data, size);
  const uint8_t ctl = r.u8();

  int32_t ndim;
  uint8_t ns = r.u8();
  if (ns < 0xE0) ndim = ns % 7;
  else ndim = ns % 71;
  std::vector<int64_t> shape(static_cast<size_t>(ndim) + 1), strides(shape.size());
  for (int32_t i = 0; i < ndim; ++i) shape[static_cast<size_t>(i)] = r.extent(false);
  for (int32_t i = 0; i < ndim; ++i) strides[static_cast<size_t>(i)] = r.extent(true);
  DLTensor t;
  std::memset(&t, 0, sizeof(t));
  t.ndim = ndim;
  t.dtype = pick_dtype(r);
  t.device = (ctl & 1) ? pick_device(r) : make_device(kDLCPU, 0);
  t.shape = shape.data();
  t.strides = (ctl & 2) ? nullptr : strides.data();
  uint8_t bs = r.u8();
  t.byte_offset = bs < 0xF0 ? (bs % 32) * 2u : r.u64();

  const Extent e = compute_extent(ndim, t.shape, t.strides, t.dtype);
  constexpr size_t cap = size_t{1} << 13;
  if (!e.sane) {
    // Malformed or overflowing: refused before anything is read.
    t.data = reinterpret_cast<void*>(uintptr_t{1} << 40);
    uint8_t dst[16];
    dlb_status s = dlb_copy_to_contiguous(&t, dst, sizeof(dst));
    FUZZ_CHECK(s != DLB_OK, "copy of a malformed view succeeded");
    check_failure(s, "copy");
    return 0;
  }
  if (static_cast<uint64_t>(e.nbytes) > cap) return 0;  // valid but large (broadcasts)
  Placement pl;
  if (!place(e, t.byte_offset, cap, r, &pl)) return 0;
  t.data = pl.data;
  if (e.numel == 0 && (ctl & 4)) t.data = nullptr;

  // Destination: exact, one short, or with slack; heap so overruns show.
  const uint8_t ds = r.u8() % 4;
  size_t dst_size = static_cast<size_t>(e.nbytes);
  bool short_dst = false;
  if (ds == 1 && dst_size > 0) {
    dst_size -= 1;
    short_dst = true;
  } else if (ds == 2) {
    dst_size += 7;
  }
  uint8_t* dst = dst_size > 0 ? static_cast<uint8_t*>(std::malloc(dst_size)) : nullptr;
  if (dst) std::memset(dst, 0xA5, dst_size);
  std::vector<uint8_t> ref(static_cast<size_t>(e.nbytes) + 1, 0);

  const bool large_paths = (ctl & 8) != 0;
  if (large_paths) {
    dlb_set_copy_threads(1 + ((ctl >> 4) & 3));
    dlb::testing::set_copy_thresholds(1, 1);
  }
  const int isa_cap = (ctl >> 6) & 3;  // 0: the best available
  if (isa_cap != 0) dlb::testing::set_copy_isa(isa_cap - 1);
  const dlb_status s = dlb_copy_to_contiguous(&t, dst, dst_size);
  if (isa_cap != 0) dlb::testing::set_copy_isa(-1);
  if (large_paths) {
    dlb::testing::set_copy_thresholds(0, 0);
    dlb_set_copy_threads(1);
  }
  const bool host = host_device(dev_type(t.device)) && t.device.device_id >= 0;
  const bool known = host || (t.device.device_id >= 0 &&
                              (dev_type(t.device) == kDLCUDA || dev_type(t.device) == kDLROCM));
  if (s != DLB_OK) {
    check_failure(s, "copy");
    const bool subbyte_strided = e.subbyte && !e.compact;
    if (refusal_tolerated(e, s)) {
      std::free(dst);
      std::free(pl.block);
      return 0;
    }
    FUZZ_CHECK(!(host && !short_dst && !subbyte_strided), "valid copy refused: %s",
               dlb_status_name(s));
    if (short_dst && host && !subbyte_strided)
      FUZZ_CHECK(s == DLB_ERR_INVALID_ARGUMENT, "short dst gave %s", dlb_status_name(s));
    if (known && !host) FUZZ_CHECK(s == DLB_ERR_UNSUPPORTED_DEVICE, "device memory gave %s",
                                   dlb_status_name(s));
    if (subbyte_strided && host && !short_dst)
      FUZZ_CHECK(s == DLB_ERR_UNSUPPORTED_LAYOUT, "strided sub-byte gave %s", dlb_status_name(s));
  } else {
    FUZZ_CHECK(host, "copy from a non-host device");
    FUZZ_CHECK(!short_dst, "copy into a short destination");
    if (e.numel > 0) {
      const uint8_t* base = static_cast<const uint8_t*>(t.data) + t.byte_offset;
      if (!e.subbyte) {
        reference_copy(base, ndim, t.shape, t.strides, e.elem_bytes, ref.data());
      } else {
        FUZZ_CHECK(e.compact, "strided sub-byte view copied");
        std::memcpy(ref.data(), base, static_cast<size_t>(e.nbytes));
      }
      FUZZ_CHECK(std::memcmp(ref.data(), dst, static_cast<size_t>(e.nbytes)) == 0,
                 "copy differs from the reference");
    }
    for (size_t i = static_cast<size_t>(e.nbytes); i < dst_size; ++i)
      FUZZ_CHECK(dst[i] == 0xA5, "copy wrote past the tensor's size");
  }
  std::free(dst);
  std::free(pl.block);
  return 0;
}
