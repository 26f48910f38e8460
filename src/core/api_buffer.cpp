// The C entry points of buffer.h: buffers (allocate, wrap, reference,
// delete, read), their export and import, and the managed-tensor frees;
// also the static checks of the DLPack layouts the library relies on. Each
// body runs behind the firewall (errors.hpp) and calls the C++ core, where
// the checks and the work live.
#include <dlbridge/dlbridge.h>

#include <cinttypes>
#include <cstddef>
#include <cstring>

#include "buffer.hpp"
#include "device.hpp"
#include "device_backend.hpp"
#include "errors.hpp"
#include "export.hpp"
#include "import.hpp"
#include "layout.hpp"

// The DLPack layouts dlbridge relies on (x86-64 / LP64 values; every
// 64-bit ABI DLPack runs on lays them out the same way).
static_assert(sizeof(DLPackVersion) == 8);
static_assert(offsetof(DLPackVersion, major) == 0 && offsetof(DLPackVersion, minor) == 4);
static_assert(sizeof(DLDevice) == 8);
static_assert(offsetof(DLDevice, device_type) == 0 && offsetof(DLDevice, device_id) == 4);
static_assert(sizeof(DLDataType) == 4);
static_assert(offsetof(DLDataType, code) == 0 && offsetof(DLDataType, bits) == 1 && offsetof(DLDataType, lanes) == 2);
static_assert(sizeof(void*) != 8 || sizeof(DLTensor) == 48);
static_assert(sizeof(void*) != 8 || (offsetof(DLTensor, data) == 0 && offsetof(DLTensor, device) == 8 &&
                                      offsetof(DLTensor, ndim) == 16 && offsetof(DLTensor, dtype) == 20 &&
                                      offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, strides) == 32 &&
                                      offsetof(DLTensor, byte_offset) == 40));
static_assert(sizeof(void*) != 8 || sizeof(DLManagedTensor) == 64);
static_assert(sizeof(void*) != 8 || (offsetof(DLManagedTensor, dl_tensor) == 0 &&
                                      offsetof(DLManagedTensor, manager_ctx) == 48 &&
                                      offsetof(DLManagedTensor, deleter) == 56));
static_assert(sizeof(void*) != 8 || sizeof(DLManagedTensorVersioned) == 80);
static_assert(sizeof(void*) != 8 || (offsetof(DLManagedTensorVersioned, version) == 0 &&
                                      offsetof(DLManagedTensorVersioned, manager_ctx) == 8 &&
                                      offsetof(DLManagedTensorVersioned, deleter) == 16 &&
                                      offsetof(DLManagedTensorVersioned, flags) == 24 &&
                                      offsetof(DLManagedTensorVersioned, dl_tensor) == 32));
static_assert(DLPACK_FLAG_BITMASK_READ_ONLY == 1 && DLPACK_FLAG_BITMASK_IS_COPIED == 2 &&
              DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == 4);
static_assert(kDLBool == 6 && kDLFloat4_e2m1fn == 17 && kDLMAIA == 17 && kDLTrn == 18 && kDLOneAPI == 14);

using dlb::firewall;
using dlb::set_error;

namespace {

dlb_status wrap_impl(const DLTensor* view, uint64_t flags, dlb_release_fn release, void* ctx, dlb_buffer** out) {
  if (view == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "view is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  constexpr uint64_t known = DLB_BUFFER_READ_ONLY | DLB_BUFFER_SUBBYTE_PADDED;
  if ((flags & ~known) != 0)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "flags has bits 0x%" PRIx64 " that dlb_buffer_wrap does not take",
                     flags & ~known);
  DLB_TRY(dlb::check_padded_flag(view->dtype, flags));
  dlb::LayoutInfo info;
  DLB_TRY(dlb::check_layout(view, dlb::Origin::argument, true, &info, (flags & DLB_BUFFER_SUBBYTE_PADDED) != 0));
  dlb::StorageState state{};
  state.wrap.release = release;
  state.wrap.ctx = ctx;
  dlb_buffer* b = dlb::buffer_create(*view, info, dlb::kWrappedStorage, flags, state);
  if (b == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  *out = b;
  return DLB_OK;
}

dlb_status alloc_impl(DLDevice device, DLDataType dtype, int32_t ndim, const int64_t* shape, dlb_buffer** out) {
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  DLTensor view;
  std::memset(&view, 0, sizeof view);
  view.device = device;
  view.dtype = dtype;
  view.ndim = ndim;
  view.shape = const_cast<int64_t*>(shape);
  dlb::LayoutInfo info;
  DLB_TRY(dlb::check_layout(&view, dlb::Origin::argument, false, &info));
  if (const dlb::DeviceBackend* be = dlb::device_backend(dlb::device_type_of(device)))
    return be->alloc(device, dtype, ndim, shape, out);
  if (dlb::device_type_of(device) != kDLCPU || device.device_id != 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                     "dlb_buffer_alloc allocates host memory and memory of devices a built-in backend serves; "
                     "device %s:%d was asked for (wrap its memory with dlb_buffer_wrap or a backend)",
                     dlb::device_type_name(dlb::device_type_of(device)),
                     static_cast<int>(device.device_id));
  const dlb::StorageState none{};
  dlb_buffer* b = dlb::buffer_create(view, info, dlb::kOwnedStorage, 0, none);
  if (b == nullptr) return DLB_ERR_OUT_OF_MEMORY;
  *out = b;
  return DLB_OK;
}

dlb_status to_host_impl(dlb_buffer* src, dlb_buffer** out) {
  if (src == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  return dlb::buffer_to_host(src, DLB_STREAM_NONE, 0, out);
}

}  // namespace

extern "C" {

DLB_API dlb_status dlb_buffer_alloc(DLDevice device, DLDataType dtype, int32_t ndim, const int64_t* shape,
                                    dlb_buffer** out) {
  return firewall(__func__, [&] { return alloc_impl(device, dtype, ndim, shape, out); });
}

DLB_API dlb_status dlb_buffer_wrap(const DLTensor* view, uint64_t flags, dlb_release_fn release, void* ctx,
                                   dlb_buffer** out) {
  return firewall(__func__, [&] { return wrap_impl(view, flags, release, ctx, out); });
}

DLB_API dlb_buffer* dlb_buffer_retain(dlb_buffer* buffer) {
  return dlb::firewall_value(__func__, buffer, [&] {
    if (buffer != nullptr) dlb::buffer_retain(buffer);
    return buffer;
  });
}

DLB_API void dlb_buffer_release(dlb_buffer* buffer) {
  dlb::firewall_void(__func__, [&] {
    if (buffer != nullptr) dlb::buffer_release(buffer);
  });
}

DLB_API dlb_status dlb_buffer_delete(dlb_buffer* buffer) {
  return firewall(__func__, [&] {
    if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
    buffer->deleted.store(true, std::memory_order_release);
    return DLB_OK;
  });
}

DLB_API dlb_status dlb_buffer_dltensor(const dlb_buffer* buffer, DLTensor* out) {
  return firewall(__func__, [&] {
    if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
    if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
    if (buffer->deleted.load(std::memory_order_acquire))
      return set_error(DLB_ERR_DELETED, "buffer was deleted (donated); its view is gone");
    *out = buffer->tensor;
    return DLB_OK;
  });
}

DLB_API uint64_t dlb_buffer_flags(const dlb_buffer* buffer) {
  return dlb::firewall_value(__func__, uint64_t{0}, [&] {
    if (buffer == nullptr) return uint64_t{0};
    uint64_t flags = buffer->flags;
    if (buffer->deleted.load(std::memory_order_acquire)) flags |= DLB_BUFFER_DELETED;
    return flags;
  });
}

DLB_API uint64_t dlb_buffer_nbytes(const dlb_buffer* buffer) {
  return dlb::firewall_value(__func__, uint64_t{0}, [&] { return buffer == nullptr ? uint64_t{0} : buffer->nbytes; });
}

DLB_API int64_t dlb_buffer_refcount(const dlb_buffer* buffer) {
  return dlb::firewall_value(__func__, int64_t{0}, [&] {
    return buffer == nullptr ? int64_t{0} : buffer->refs.load(std::memory_order_relaxed);
  });
}

DLB_API dlb_status dlb_buffer_to_host(dlb_buffer* buffer, dlb_buffer** out) {
  return firewall(__func__, [&] { return to_host_impl(buffer, out); });
}

DLB_API dlb_status dlb_buffer_host_view(const dlb_buffer* buffer, uint32_t access, dlb_host_view* out) {
  return firewall(__func__, [&] {
    if (buffer == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "buffer is NULL");
    if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
    if (out->struct_size < sizeof(dlb_host_view))
      return set_error(DLB_ERR_INVALID_ARGUMENT, "out->struct_size is %zu, less than the %zu of dlb_host_view",
                       out->struct_size, sizeof(dlb_host_view));
    if ((access & ~DLB_HOST_VIEW_WRITE) != 0)
      return set_error(DLB_ERR_INVALID_ARGUMENT, "access 0x%x has bits other than DLB_HOST_VIEW_WRITE", access);
    if (buffer->deleted.load(std::memory_order_acquire))
      return set_error(DLB_ERR_DELETED, "buffer was deleted (donated); its memory cannot be viewed");
    const DLTensor& t = buffer->tensor;
    const std::int32_t dev_type = dlb::device_type_of(t.device);
    if ((buffer->flags & DLB_BUFFER_BACKEND) != 0)
      return set_error(DLB_ERR_NOT_ZERO_COPY,
                       "the buffer is a storage of a backend on %s:%d, reached only through an export or a copy "
                       "(dlb_buffer_to_host), not by a host view",
                       dlb::device_type_name(dev_type), static_cast<int>(t.device.device_id));
    if (!dlb::device_is_host_readable(dev_type))
      return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                       "the buffer's memory is on %s:%d, which the CPU cannot read; copy it (dlb_buffer_to_host)",
                       dlb::device_type_name(dev_type), static_cast<int>(t.device.device_id));
    if (!buffer->contiguous)
      return set_error(DLB_ERR_UNSUPPORTED_LAYOUT,
                       "the buffer is not compact row-major; copy it (dlb_copy_to_contiguous, dlb_buffer_to_host)");
    if ((access & DLB_HOST_VIEW_WRITE) != 0 && (buffer->flags & DLB_BUFFER_READ_ONLY) != 0)
      return set_error(DLB_ERR_READ_ONLY, "the buffer is read-only: ask for a read view, or copy it");
    if (t.data == nullptr && buffer->nbytes != 0)
      return set_error(DLB_ERR_MALFORMED, "the buffer has %" PRIu64 " bytes of elements but NULL data",
                       buffer->nbytes);
    uint64_t numel = 1;  // the extents were checked, without overflow, when the buffer was made
    for (int32_t i = 0; i < t.ndim; ++i) numel *= static_cast<uint64_t>(t.shape[i]);
    out->data = buffer->nbytes == 0 ? nullptr : dlb::buffer_origin(buffer);
    out->nbytes = buffer->nbytes;
    out->numel = numel;
    out->dtype = t.dtype;
    out->writable = (buffer->flags & DLB_BUFFER_READ_ONLY) == 0 ? 1 : 0;
    return DLB_OK;
  });
}

DLB_API void dlb_export_options_init(dlb_export_options* options) {
  dlb::firewall_void(__func__, [&] {
    if (options == nullptr) return;
    std::memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
    options->copy = DLB_COPY_IF_NEEDED;
    options->stream = DLB_STREAM_NONE;
  });
}

DLB_API dlb_status dlb_export_versioned(dlb_buffer* buffer, const dlb_export_options* options,
                                        DLManagedTensorVersioned** out) {
  return firewall(__func__, [&] { return dlb::export_versioned(buffer, options, out); });
}

DLB_API dlb_status dlb_export_legacy(dlb_buffer* buffer, const dlb_export_options* options, DLManagedTensor** out) {
  return firewall(__func__, [&] { return dlb::export_legacy(buffer, options, out); });
}

DLB_API int64_t dlb_live_exports(void) {
  return dlb::firewall_value(__func__, int64_t{-1}, [] { return dlb::live_exports(); });
}

DLB_API void dlb_import_options_init(dlb_import_options* options) {
  dlb::firewall_void(__func__, [&] {
    if (options == nullptr) return;
    std::memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
  });
}

DLB_API dlb_status dlb_import_versioned(DLManagedTensorVersioned* tensor, const dlb_import_options* options,
                                        dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::import_versioned(tensor, options, out); });
}

DLB_API dlb_status dlb_import_legacy(DLManagedTensor* tensor, const dlb_import_options* options, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::import_legacy(tensor, options, out); });
}

DLB_API dlb_status dlb_import_versioned_on_stream(DLManagedTensorVersioned* tensor, const dlb_import_options* options,
                                                  int64_t stream, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::import_versioned_on_stream(tensor, options, stream, out); });
}

DLB_API dlb_status dlb_import_legacy_on_stream(DLManagedTensor* tensor, const dlb_import_options* options,
                                               int64_t stream, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::import_legacy_on_stream(tensor, options, stream, out); });
}

DLB_API void dlb_managed_free_versioned(DLManagedTensorVersioned* tensor) {
  dlb::firewall_void(__func__, [&] {
    if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
  });
}

DLB_API void dlb_managed_free_legacy(DLManagedTensor* tensor) {
  dlb::firewall_void(__func__, [&] {
    if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
  });
}

}  // extern "C"
