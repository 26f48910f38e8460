// The strided copy engine: any strided view of byte-addressable elements
// into a compact row-major destination.
#ifndef DLBRIDGE_SRC_COPY_ENGINE_HPP_
#define DLBRIDGE_SRC_COPY_ENGINE_HPP_

#include <dlbridge/dlbridge.h>

#include <cstddef>
#include <cstdint>

namespace dlb {

// dlb_copy_to_contiguous_flags() with DLB_COPY_FLAG_BYTE_STRIDES: `t`'s
// strides (ndim > 0: not NULL) are byte distances between elements of
// whole bytes, which need not be multiples of the element size. The view is
// checked as the uint8 view of its bytes (each element one more, compact
// dimension of its size) is checked: extents, overflow, span, a host
// device; then copied by the engine with its own element size. `swap`:
// DLB_COPY_FLAG_SWAP_BYTES. Sets the error on failure.
dlb_status copy_byte_strided(const DLTensor& t, void* dst, std::uint64_t dst_size, bool swap) noexcept;

// Copies the view described by (src, ndim, shape, strides, elem_size) into
// dst as a compact row-major array.
//  - src is the address of element [0, 0, ...] (data + byte_offset).
//  - strides are in elements and non-null when ndim > 0; they may be
//    negative or zero (broadcast) and arbitrary on size-1 dimensions.
//  - shape extents are >= 0; when any is 0 nothing is copied.
//  - elem_size is the element size in bytes (>= 1).
//  - dst holds product(shape) * elem_size bytes and does not overlap src.
//  - swap_unit: 0 (or 1) copies the bytes as they are; 2, 4 or 8 reverses
//    the bytes of every swap_unit-byte word of the destination (elem_size
//    is a multiple of it): the source holds its scalars in the other byte
//    order, and the destination gets them in the machine's. The kernels
//    swap as they copy (copy_swap.cpp).
//  - strides_in_bytes: the strides are byte distances, not element counts,
//    and need not be multiples of elem_size (a field of a structured
//    array: 4-byte elements 5 bytes apart). Only for the host copy of
//    copy_byte_strided below; DLPack strides are always in elements.
// The caller has validated the view (no overflow of the byte extent).
// Large copies are split among the copy threads (copy_pool.hpp). Never
// throws, never allocates more than a fixed stack scratch.
void copy_strided_to_contiguous(const unsigned char* src, std::int32_t ndim,
                                const std::int64_t* shape, const std::int64_t* strides,
                                std::size_t elem_size, unsigned char* dst,
                                std::size_t swap_unit = 0, bool strides_in_bytes = false) noexcept;

// Instruction-set levels of the copy kernels.
constexpr int kCopyIsaScalar = 0;  // plain loads and stores
constexpr int kCopyIsaSse2 = 1;    // the x86-64 baseline
constexpr int kCopyIsaAvx2 = 2;    // chosen at run time where the CPU has it

namespace testing {
// Makes copies use kernels of at most `level` (one of kCopyIsa*); a level
// above the best available one, or a negative one, restores the best
// available (the CPU's, capped by DLB_COPY_ISA). Returns the level now in
// use. Not for concurrent use with copies.
int set_copy_isa(int level) noexcept;
// Sets the destination sizes from which copies are split among the copy
// threads and written with streaming stores, so that tests reach those
// paths with small views; 0 restores a default. Not for concurrent use
// with copies.
void set_copy_thresholds(std::size_t parallel_bytes, std::size_t streaming_bytes) noexcept;
// The dimension of its normalised view (size-1 dimensions dropped,
// adjacent ones merged) that the last copy split among the copy threads
// was split along: 0 (destination rows), the last one (a streamed
// transpose, split by source rows), or -1 before any split copy.
int last_split_axis() noexcept;
// false: streamed transposes are walked in the destination's order and
// split by destination rows, as in earlier versions (for diagnostics);
// true (the default): in the source's order, split by source rows. Not
// for concurrent use with copies.
void set_transpose_source_order(bool on) noexcept;
// false: compact runs are copied with memcpy even where the copy streams,
// as in earlier versions (for diagnostics); true (the default): streamed
// where the row kernels stream. Not for concurrent use with copies.
void set_compact_streaming(bool on) noexcept;
}  // namespace testing

}  // namespace dlb

#endif
