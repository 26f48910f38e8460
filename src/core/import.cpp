// The importer: managed tensors from any producer in, as buffers.
#include "import.hpp"

#include <cinttypes>
#include <cstddef>
#include <cstring>

#include "buffer.hpp"
#include "device.hpp"
#include "device_backend.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "export.hpp"
#include "layout.hpp"

namespace dlb {
namespace {

__attribute__((always_inline)) inline dlb_status read_options(const dlb_import_options* options,
                                                              dlb_import_options* opt) noexcept {
  dlb_import_options_init(opt);
  if (options == nullptr) return DLB_OK;
  if (options->struct_size < offsetof(dlb_import_options, require_alignment) + sizeof(options->require_alignment))
    return set_error(DLB_ERR_INVALID_ARGUMENT,
                     "options->struct_size is %zu; call dlb_import_options_init() first", options->struct_size);
  std::memcpy(opt, options, options->struct_size < sizeof *opt ? options->struct_size : sizeof *opt);
  opt->struct_size = sizeof *opt;
  const std::uint64_t a = opt->require_alignment;
  if ((a & (a - 1)) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "options->require_alignment is %" PRIu64 " (must be 0 or a power of two)",
                     a);
  constexpr std::uint64_t known = DLB_IMPORT_LEGACY_READ_ONLY | DLB_IMPORT_DEVICE_BACKEND;
  if ((opt->flags & ~known) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "options->flags has unknown bits 0x%" PRIx64, opt->flags & ~known);
  return DLB_OK;
}

// Checks `t` and the caller's requirements; fills `info` and the buffer
// flags the import gets.
__attribute__((always_inline)) inline dlb_status check_incoming(const DLTensor& t, std::uint64_t dl_flags,
                                                                const dlb_import_options& opt, LayoutInfo* info,
                                                                std::uint64_t* flags) noexcept {
  // IS_SUBBYTE_TYPE_PADDED: one byte per element for a dtype of fewer than
  // 8 bits. A type of whole bytes (bits >= 8) is not a sub-byte type: the
  // flag means nothing for it, and is dropped there. A sub-byte type whose
  // elements are a byte or more (int4 x 2, float6 x 3 or x 4 lanes) has no
  // padded layout DLPack defines (each lane in a byte, or the element
  // packed?): refused, not misread, whether or not its elements are whole
  // bytes.
  const bool flagged = (dl_flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0;
  if (flagged && t.dtype.bits < 8 && !paddable(t.dtype))
    return set_error(DLB_ERR_UNSUPPORTED_DTYPE,
                     "tensor has IS_SUBBYTE_TYPE_PADDED set for %u-bit elements (%u bits x %u lanes); dlbridge pads "
                     "only elements of fewer than 8 bits, and DLPack defines no padded layout for wider ones",
                     static_cast<unsigned>(element_bits(t.dtype)), static_cast<unsigned>(t.dtype.bits),
                     static_cast<unsigned>(t.dtype.lanes));
  const bool padded = flagged && paddable(t.dtype);
  DLB_TRY(check_layout(&t, Origin::incoming, true, info, padded));
  const std::uintptr_t origin = reinterpret_cast<std::uintptr_t>(t.data) + static_cast<std::uintptr_t>(t.byte_offset);
  if (opt.require_alignment > 1 && !info->empty && origin % opt.require_alignment != 0)
    return set_error(DLB_ERR_ALIGNMENT,
                     "tensor data + byte_offset = %p + %" PRIu64 " is not aligned to %" PRIu64 " bytes", t.data,
                     static_cast<std::uint64_t>(t.byte_offset), opt.require_alignment);
  if (opt.require_contiguous != 0 && !info->contiguous)
    return set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                     "tensor is not compact row-major and require_contiguous is set (copy it with "
                     "dlb_buffer_to_host, or drop the requirement)");
  const bool read_only = (dl_flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if (opt.require_writable != 0 && read_only)
    return set_error(DLB_ERR_READ_ONLY, "tensor is flagged READ_ONLY and require_writable is set");
  std::uint64_t f = DLB_BUFFER_IMPORTED;
  if (read_only) f |= DLB_BUFFER_READ_ONLY;
  if ((dl_flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0) f |= DLB_BUFFER_COPIED;
  if (padded) f |= DLB_BUFFER_SUBBYTE_PADDED;
  *flags = f;
  return DLB_OK;
}

// Checks `t` and the caller's requirements, then makes the buffer over
// `ops`. Owns nothing on failure.
dlb_status import_tensor(const DLTensor& t, std::uint64_t dl_flags, const dlb_import_options& opt,
                         const StorageOps& ops, const StorageState& state, dlb_buffer** out) noexcept {
  LayoutInfo info;
  std::uint64_t flags = 0;
  DLB_TRY(check_incoming(t, dl_flags, opt, &info, &flags));
  dlb_buffer* b = buffer_create(t, info, ops, flags, state);
  if (b == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  *out = b;
  return DLB_OK;
}

// A versioned tensor of another major version: only its stable prefix may
// be read.
dlb_status check_major(const DLManagedTensorVersioned& m) noexcept {
  if (m.version.major == 1) return DLB_OK;
  return set_error(DLB_ERR_VERSION,
                   "tensor has DLPack major version %u; dlbridge reads major version 1 (call the deleter and ask the "
                   "producer for version 1)",
                   static_cast<unsigned>(m.version.major));
}

// A device backend reads packed sub-byte elements only.
dlb_status refuse_padded(const char* backend, const char* remedy) noexcept {
  return set_error(DLB_ERR_UNSUPPORTED_DTYPE,
                   "the %s backend takes in packed sub-byte elements only; this tensor's are padded to a byte each%s",
                   backend, remedy);
}

// An import under DLB_IMPORT_DEVICE_BACKEND: after the same checks, memory
// of a device a built-in backend serves goes to that backend (which then
// owns the managed tensor in `state`), and what it refuses as not its own
// comes in over `ops`. Kept out of line: the plain import stays as it was.
__attribute__((noinline)) dlb_status import_routed(const DLTensor& t, std::uint64_t dl_flags,
                                                   const dlb_import_options& opt, std::int64_t stream,
                                                   const StorageOps& ops, const StorageState& state,
                                                   dlb_buffer** out) noexcept {
  const DeviceBackend* be = device_backend(device_type_of(t.device));
  if (be != nullptr && be->take_in != nullptr) {
    LayoutInfo info;
    std::uint64_t flags = 0;
    DLB_TRY(check_incoming(t, dl_flags, opt, &info, &flags));
    if ((flags & DLB_BUFFER_SUBBYTE_PADDED) != 0) return refuse_padded(be->name, " (import it without DLB_IMPORT_DEVICE_BACKEND)");
    const bool versioned = &ops == &kImportedVersionedStorage;
    void* managed = versioned ? static_cast<void*>(state.versioned) : static_cast<void*>(state.legacy);
    const dlb_status s = be->take_in(t, flags & DLB_BUFFER_READ_ONLY, stream, versioned, managed, out);
    if (s != DLB_ERR_UNSUPPORTED_DEVICE) return s;  // taken, or a failure of the backend's own
  }
  return import_tensor(t, dl_flags, opt, ops, state, out);
}

__attribute__((always_inline)) inline dlb_status versioned_body(DLManagedTensorVersioned* m,
                                                                const dlb_import_options* options,
                                                                std::int64_t stream, dlb_buffer** out) noexcept {
  if (m == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLB_TRY(check_major(*m));
  dlb_import_options opt;
  DLB_TRY(read_options(options, &opt));
  dlb_buffer* b = nullptr;
  StorageState state{};
  state.versioned = m;
  if ((opt.flags & DLB_IMPORT_DEVICE_BACKEND) != 0)
    DLB_TRY(import_routed(m->dl_tensor, m->flags, opt, stream, kImportedVersionedStorage, state, &b));
  else
    DLB_TRY(import_tensor(m->dl_tensor, m->flags, opt, kImportedVersionedStorage, state, &b));
  *out = b;
  return DLB_OK;
}

__attribute__((always_inline)) inline dlb_status legacy_body(DLManagedTensor* m, const dlb_import_options* options,
                                                             std::int64_t stream, dlb_buffer** out) noexcept {
  if (m == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  dlb_import_options opt;
  DLB_TRY(read_options(options, &opt));
  std::uint64_t flags = (opt.flags & DLB_IMPORT_LEGACY_READ_ONLY) != 0 ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  // One of this library's own legacy exports: what its struct could not say
  // (a copy, read-only memory) is known from the export itself.
  std::uint64_t own = 0;
  if (own_legacy_export(m, &own)) flags |= own;
  dlb_buffer* b = nullptr;
  StorageState state{};
  state.legacy = m;
  if ((opt.flags & DLB_IMPORT_DEVICE_BACKEND) != 0)
    DLB_TRY(import_routed(m->dl_tensor, flags, opt, stream, kImportedLegacyStorage, state, &b));
  else
    DLB_TRY(import_tensor(m->dl_tensor, flags, opt, kImportedLegacyStorage, state, &b));
  *out = b;
  return DLB_OK;
}

}  // namespace

dlb_status import_versioned(DLManagedTensorVersioned* m, const dlb_import_options* options,
                            dlb_buffer** out) noexcept {
  return versioned_body(m, options, DLB_STREAM_NONE, out);
}

dlb_status import_versioned_on_stream(DLManagedTensorVersioned* m, const dlb_import_options* options,
                                      std::int64_t stream, dlb_buffer** out) noexcept {
  return versioned_body(m, options, stream, out);
}

dlb_status import_legacy(DLManagedTensor* m, const dlb_import_options* options, dlb_buffer** out) noexcept {
  return legacy_body(m, options, DLB_STREAM_NONE, out);
}

dlb_status import_legacy_on_stream(DLManagedTensor* m, const dlb_import_options* options, std::int64_t stream,
                                   dlb_buffer** out) noexcept {
  return legacy_body(m, options, stream, out);
}

dlb_status validate(const DLTensor* t, std::uint32_t flags) noexcept {
  if (t == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "tensor is NULL");
  constexpr std::uint32_t known = DLB_VALIDATE_CONTIGUOUS | DLB_VALIDATE_STRIDES_REQUIRED;
  if ((flags & ~known) != 0) return set_error(DLB_ERR_INVALID_ARGUMENT, "flags has unknown bits 0x%x", flags & ~known);
  LayoutInfo info;
  DLB_TRY(check_layout(t, Origin::incoming, true, &info));
  if ((flags & DLB_VALIDATE_STRIDES_REQUIRED) != 0 && t->ndim > 0 && t->strides == nullptr)
    return set_error(DLB_ERR_MALFORMED, "tensor strides is NULL with ndim %d (DLPack 1.2 requires strides)", t->ndim);
  if ((flags & DLB_VALIDATE_CONTIGUOUS) != 0 && !info.contiguous)
    return set_error(DLB_ERR_UNSUPPORTED_LAYOUT, "tensor is not compact row-major");
  return DLB_OK;
}

dlb_status device_import_flags(const DLManagedTensorVersioned& m, const char* backend, std::uint64_t* flags) noexcept {
  DLB_TRY(check_major(m));
  if ((m.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0) return refuse_padded(backend, "");
  *flags = (m.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0 ? DLB_BUFFER_READ_ONLY : 0;
  return DLB_OK;
}

}  // namespace dlb
