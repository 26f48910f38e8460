// The body of fuzz_import_versioned and fuzz_import_legacy: a managed tensor
// built from the input, imported, then exported again, copied, deleted and
// released in an order the input chooses. The producer's deleter must run
// exactly once, after the last use, and every export must be gone at the end.
#ifndef DLBRIDGE_FUZZ_FUZZ_IMPORT_HPP_
#define DLBRIDGE_FUZZ_FUZZ_IMPORT_HPP_

#include "fuzz_exercise.hpp"

#include <vector>

namespace fuzz {

// Everything the fuzzer's producer owns for one managed tensor; freed by
// its deleter, so any later read by the library is a heap-use-after-free.
struct Producer {
  int* deleter_calls;
  int64_t* dims;      // shape then strides, exact size
  uint8_t* block;     // the data's memory (Placement::block), may be NULL
};

inline int g_deleter_calls = 0;

template <class Managed>
void producer_deleter(Managed* self) {
  auto* p = static_cast<Producer*>(self->manager_ctx);
  ++*p->deleter_calls;
  std::free(p->dims);
  std::free(p->block);
  std::free(p);
  std::free(self);
}

template <bool Versioned>
int run_import(const uint8_t* data, size_t size) {
  using Managed = std::conditional_t<Versioned, DLManagedTensorVersioned, DLManagedTensor>;
  Reader r(data, size);
  g_deleter_calls = 0;
  FUZZ_CHECK(dlb_live_exports() == 0, "live exports %lld at start", (long long)dlb_live_exports());

  const uint8_t ctl = r.u8();
  const bool null_shape = (ctl & 0x01) != 0 && (ctl & 0x02) != 0;  // rare
  const bool null_strides = (ctl & 0x04) != 0;
  const bool null_data = (ctl & 0x08) != 0 && (ctl & 0x10) != 0;
  const bool use_options = (ctl & 0x20) != 0;

  DLPackVersion version{1, 0};
  uint64_t flags = 0;
  if constexpr (Versioned) {
    uint8_t vs = r.u8();
    if (vs < 0xE0) {
      version.minor = vs % 4;
    } else {
      version.major = r.u32();
      version.minor = r.u32();
    }
    uint8_t fs = r.u8();
    flags = fs < 0xF0 ? (fs & 7) : r.u64();  // READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED
  }

  const NdimPick nd = pick_ndim(r);
  const int32_t ndim = nd.ndim;
  const int32_t ndim_alloc = nd.alloc;

  DLDataType dtype = pick_dtype(r);
  DLDevice device = pick_device(r);

  // Shape and strides in one exact-size block.
  auto* dims = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (2 * ndim_alloc + 1)));
  int64_t* shape = dims;
  int64_t* strides = dims + ndim_alloc;
  for (int32_t i = 0; i < ndim_alloc; ++i) shape[i] = r.extent(false);
  for (int32_t i = 0; i < ndim_alloc; ++i) strides[i] = r.extent(true);
  const int64_t* shape_p = (null_shape || ndim_alloc == 0) && (ctl & 0x40) ? nullptr : shape;
  const int64_t* strides_p = null_strides ? nullptr : strides;

  uint8_t bs = r.u8();
  uint64_t byte_offset = bs < 0xF0 ? (bs % 8) * 8u + (bs & 0x80 ? 1 : 0) : r.u64();

  // The padded flag as the harness reads the spec (padding_of): one byte per
  // element of a sub-byte type narrower than a byte, malformed for a
  // sub-byte type of wider elements, nothing for whole-byte types.
  const bool padded_flag = (flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0;
  Extent e = compute_extent(ndim, shape_p, strides_p, dtype, padded_flag);
  Placement pl;
  bool placed = place(e, byte_offset, 1 << 13, r, &pl);
  void* data_ptr = pl.data;
  if (!placed) {
    // Not readable: a one-byte block only the zero-copy paths may touch.
    pl.block = static_cast<uint8_t*>(std::malloc(1));
    data_ptr = pl.block;
  }
  if (null_data) data_ptr = nullptr;
  const bool readable = (placed && !null_data) || (e.sane && e.numel == 0);

  dlb_import_options* iopts = use_options ? make_import_options(r) : nullptr;

  // The managed tensor: a major other than 1 gets only the stable prefix,
  // so that reading anything past `flags` is caught.
  Managed* t;
  bool prefix_only = false;
  if constexpr (Versioned) {
    prefix_only = version.major != 1;
    size_t bytes = prefix_only ? offsetof(DLManagedTensorVersioned, dl_tensor) : sizeof(Managed);
    t = static_cast<Managed*>(std::malloc(bytes));
    std::memset(static_cast<void*>(t), 0, bytes);
    t->version = version;
    t->flags = flags;
  } else {
    t = static_cast<Managed*>(std::malloc(sizeof(Managed)));
    std::memset(static_cast<void*>(t), 0, sizeof(Managed));
  }
  auto* prod = static_cast<Producer*>(std::malloc(sizeof(Producer)));
  prod->deleter_calls = &g_deleter_calls;
  prod->dims = dims;
  prod->block = pl.block;
  t->manager_ctx = prod;
  t->deleter = &producer_deleter<Managed>;
  if (!prefix_only) {
    DLTensor& dl = t->dl_tensor;
    dl.data = data_ptr;
    dl.device = device;
    dl.ndim = ndim;
    dl.dtype = dtype;
    dl.shape = const_cast<int64_t*>(shape_p);
    dl.strides = const_cast<int64_t*>(strides_p);
    dl.byte_offset = byte_offset;
  }

  dlb_buffer* const sentinel = reinterpret_cast<dlb_buffer*>(uintptr_t{0x5a5a5a50});
  dlb_buffer* buf = sentinel;
  dlb_status st;
  if constexpr (Versioned) st = dlb_import_versioned(t, iopts, &buf);
  else st = dlb_import_legacy(t, iopts, &buf);
  std::free(iopts);

  if (st != DLB_OK) {
    check_failure(st, "import");
    FUZZ_CHECK(buf == sentinel, "out written on failure");
    FUZZ_CHECK(g_deleter_calls == 0, "deleter ran on a failed import");
    if (prefix_only && !use_options)
      FUZZ_CHECK(st == DLB_ERR_VERSION, "major %u gave status %d", version.major, st);
    // The padded flag on a sub-byte type of elements a byte or wider: no
    // layout it can mean, refused as the dtype's fault before anything else.
    if (!use_options && !prefix_only && dtype_legal(dtype) && padding_of(dtype, padded_flag) == Padding::ambiguous)
      FUZZ_CHECK(st == DLB_ERR_UNSUPPORTED_DTYPE, "padded %u x %u-bit elements gave %s", dtype.lanes, dtype.bits,
                 dlb_status_name(st));
    // A sane tensor with default options must be accepted.
    bool must_accept = !use_options && !prefix_only && e.sane && !null_data &&
                       (placed || e.numel == 0) && (flags & ~uint64_t{7}) == 0 &&
                       known_device(device) && dtype_legal(dtype);
    FUZZ_CHECK(!must_accept || refusal_tolerated(e, st), "valid tensor refused with %s", dlb_status_name(st));
    if constexpr (Versioned) dlb_managed_free_versioned(t);
    else dlb_managed_free_legacy(t);
    FUZZ_CHECK(g_deleter_calls == 1, "deleter ran %d times after free", g_deleter_calls);
    return 0;
  }
  FUZZ_CHECK(buf != nullptr && buf != sentinel, "import succeeded without a buffer");
  FUZZ_CHECK(!prefix_only, "major %u imported", version.major);
  FUZZ_CHECK(e.sane, "import accepted a tensor the harness finds malformed (ndim %d dtype %u/%u/%u)", ndim,
             dtype.code, dtype.bits, dtype.lanes);
  FUZZ_CHECK(g_deleter_calls == 0, "deleter ran during import");
  FUZZ_CHECK(addressable(e, byte_offset), "import accepted a view no address space holds (bytes %lld..%lld, "
             "byte_offset %llu)", (long long)e.lo, (long long)e.hi, (unsigned long long)byte_offset);

  // The buffer's view is the producer's tensor.
  {
    DLTensor v;
    FUZZ_CHECK(dlb_buffer_dltensor(buf, &v) == DLB_OK, "dltensor view");
    FUZZ_CHECK(v.ndim == ndim, "ndim %d vs %d", v.ndim, ndim);
    FUZZ_CHECK(v.data == data_ptr && v.byte_offset == byte_offset, "data/byte_offset changed");
    FUZZ_CHECK(v.dtype.code == dtype.code && v.dtype.bits == dtype.bits &&
                   v.dtype.lanes == dtype.lanes, "dtype changed");
    FUZZ_CHECK(ndim == 0 || v.strides != nullptr, "view without strides");
    int64_t expect = 1;
    for (int32_t i = ndim - 1; i >= 0; --i) {
      FUZZ_CHECK(v.shape[i] == shape_p[i], "shape[%d] changed", i);
      if (strides_p) FUZZ_CHECK(v.strides[i] == strides_p[i], "strides[%d] changed", i);
      else if (shape_p[i] > 1) FUZZ_CHECK(v.strides[i] == expect, "implied strides[%d]", i);
      if (__builtin_mul_overflow(expect, shape_p[i] > 0 ? shape_p[i] : 1, &expect)) break;
    }
    FUZZ_CHECK(dlb_buffer_nbytes(buf) == static_cast<uint64_t>(e.nbytes), "nbytes %llu vs %lld",
               (unsigned long long)dlb_buffer_nbytes(buf), (long long)e.nbytes);
  }
  const uint64_t bflags = dlb_buffer_flags(buf);
  FUZZ_CHECK(((bflags & DLB_BUFFER_SUBBYTE_PADDED) != 0) == e.padded, "padded flag %d, harness expects %d",
             (bflags & DLB_BUFFER_SUBBYTE_PADDED) != 0, e.padded);
  if constexpr (Versioned) {
    if (flags & DLPACK_FLAG_BITMASK_READ_ONLY)
      FUZZ_CHECK(bflags & DLB_BUFFER_READ_ONLY, "READ_ONLY import became writable");
  }
  View view{ndim, shape_p, strides_p, e, data_ptr, byte_offset, readable};
  exercise(r, buf, view, &g_deleter_calls);
  FUZZ_CHECK(g_deleter_calls == 1, "deleter ran %d times", g_deleter_calls);
  FUZZ_CHECK(dlb_live_exports() == 0, "live exports %lld at end", (long long)dlb_live_exports());
  return 0;
}

}  // namespace fuzz

#endif
