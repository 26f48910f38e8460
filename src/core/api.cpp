// The C entry points of the core: versions, errors, dtypes, buffers, export,
// import, validation, backends, devices and protocol rules. Each body runs
// behind the firewall (errors.hpp: no exception leaves the library, every
// failure is a status plus the thread's message) and calls the C++ core;
// the checks and the work live there. The other entry points sit beside
// what they expose: the CUDA ones in cuda/cuda_backend.cpp (cuda/
// cuda_disabled.cpp in builds without CUDA), the exchange allocator in
// exchange_alloc.cpp, the copy-thread settings in copy_pool.cpp; they use the
// same firewall (errors.hpp: firewall, firewall_void, firewall_value). Also here: the static checks of the DLPack layouts the
// library relies on.
#include <dlbridge/dlbridge.h>

#include <cinttypes>
#include <cstddef>
#include <cstring>

#include "backend.hpp"
#include "buffer.hpp"
#include "cuda/cuda_backend.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "export.hpp"
#include "import.hpp"
#include "layout.hpp"
#include "streams.hpp"

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

#define DLB_STR2(x) #x
#define DLB_STR(x) DLB_STR2(x)

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
  if (dlb::is_cuda_memory(device)) return dlb::cuda_default_alloc(device, dtype, ndim, shape, out);
  if (dlb::device_type_of(device) != kDLCPU || device.device_id != 0)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE,
                     "dlb_buffer_alloc allocates host memory only; device %s:%d was asked for (wrap device memory "
                     "with dlb_buffer_wrap or a backend)",
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

dlb_status device_info_impl(int32_t device_type, dlb_device_info* out) {
  constexpr std::size_t kMinSize = offsetof(dlb_device_info, name) + sizeof(const char*);
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (out->struct_size < kMinSize)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "out->struct_size is %zu (must be at least %zu: set it to "
                     "sizeof(dlb_device_info))", out->struct_size, kMinSize);
  const dlb::DeviceTypeInfo* d = dlb::device_type_info(device_type);
  if (d == nullptr)
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "device type %" PRId32 " is not a DLPack device type", device_type);
  out->device_type = device_type;
  out->flags = d->flags;
  out->name = d->name;
  return DLB_OK;
}

dlb_status layout_describe_impl(const DLTensor* layout, dlb_layout_info* out) {
  constexpr std::size_t kMinSize = offsetof(dlb_layout_info, max_offset) + sizeof(int64_t);
  if (layout == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "layout is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  if (out->struct_size < kMinSize)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "out->struct_size is %zu (must be at least %zu: set it to "
                     "sizeof(dlb_layout_info))", out->struct_size, kMinSize);
  dlb::LayoutInfo info;
  DLB_TRY(dlb::check_layout(layout, dlb::Origin::argument, false, &info));
  out->numel = info.numel;
  out->nbytes = info.nbytes;
  out->element_bits = static_cast<uint32_t>(dlb::element_bits(layout->dtype));
  out->contiguous = info.contiguous ? 1 : 0;
  out->min_offset = info.min_offset;
  out->max_offset = info.max_offset;
  return DLB_OK;
}

dlb_status compact_strides_impl(int32_t ndim, const int64_t* shape, int64_t* strides_out) {
  if (ndim < 0 || ndim > DLB_MAX_NDIM)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "ndim is %" PRId32 " (must be 0..%d)", ndim, DLB_MAX_NDIM);
  if (ndim == 0) return DLB_OK;
  if (shape == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "shape is NULL with ndim %" PRId32, ndim);
  if (strides_out == nullptr)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "strides_out is NULL with ndim %" PRId32, ndim);
  bool empty = false;
  for (int32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0)
      return set_error(DLB_ERR_INVALID_ARGUMENT, "shape[%" PRId32 "] is %" PRId64, i, shape[i]);
    if (shape[i] == 0) empty = true;
  }
  int64_t strides[DLB_MAX_NDIM];
  dlb::compact_strides(ndim, shape, strides);
  if (!empty) {
    // compact_strides saturates; for a non-empty shape a saturated stride is
    // an overflow (the product of the trailing extents passed INT64_MAX).
    int64_t step = 1;
    for (int32_t i = ndim - 1; i > 0; --i)
      if (__builtin_mul_overflow(step, shape[i] > 1 ? shape[i] : 1, &step))
        return set_error(DLB_ERR_OVERFLOW, "the strides of this shape exceed INT64_MAX (extents from dimension %"
                         PRId32 " on multiply past it)", i);
  }
  std::memcpy(strides_out, strides, static_cast<std::size_t>(ndim) * sizeof(int64_t));
  return DLB_OK;
}

dlb_status copy_impl(const DLTensor* src, void* dst, uint64_t dst_size) {
  if (src == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "src is NULL");
  dlb::LayoutInfo info;
  DLB_TRY(dlb::check_layout(src, dlb::Origin::incoming, true, &info));
  if (!dlb::device_is_host_readable(dlb::device_type_of(src->device)))
    return set_error(DLB_ERR_UNSUPPORTED_DEVICE, "src is on %s:%d, which the host cannot read",
                     dlb::device_type_name(dlb::device_type_of(src->device)),
                     static_cast<int>(src->device.device_id));
  if (dst_size < info.nbytes)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "dst_size is %" PRIu64 " bytes but the tensor needs %" PRIu64, dst_size,
                     info.nbytes);
  if (dst == nullptr && info.nbytes > 0) return set_error(DLB_ERR_INVALID_ARGUMENT, "dst is NULL");
  return dlb::copy_view_to_contiguous(*src, info, dst);
}

const char* status_name(dlb_status code) noexcept {
  switch (code) {
    case DLB_OK: return "DLB_OK";
    case DLB_ERR_INVALID_ARGUMENT: return "DLB_ERR_INVALID_ARGUMENT";
    case DLB_ERR_OUT_OF_MEMORY: return "DLB_ERR_OUT_OF_MEMORY";
    case DLB_ERR_DELETED: return "DLB_ERR_DELETED";
    case DLB_ERR_NOT_ZERO_COPY: return "DLB_ERR_NOT_ZERO_COPY";
    case DLB_ERR_UNSUPPORTED_DTYPE: return "DLB_ERR_UNSUPPORTED_DTYPE";
    case DLB_ERR_UNSUPPORTED_DEVICE: return "DLB_ERR_UNSUPPORTED_DEVICE";
    case DLB_ERR_UNSUPPORTED_LAYOUT: return "DLB_ERR_UNSUPPORTED_LAYOUT";
    case DLB_ERR_READ_ONLY: return "DLB_ERR_READ_ONLY";
    case DLB_ERR_VERSION: return "DLB_ERR_VERSION";
    case DLB_ERR_OVERFLOW: return "DLB_ERR_OVERFLOW";
    case DLB_ERR_MALFORMED: return "DLB_ERR_MALFORMED";
    case DLB_ERR_ALIGNMENT: return "DLB_ERR_ALIGNMENT";
    case DLB_ERR_BACKEND: return "DLB_ERR_BACKEND";
    case DLB_ERR_INTERNAL: return "DLB_ERR_INTERNAL";
    default: return "DLB_UNKNOWN_STATUS";
  }
}

}  // namespace

extern "C" {

// Constant answers: nothing in them can throw, but they sit behind the
// firewall like every other entry point.
DLB_API const char* dlb_version_string(void) {
  return dlb::firewall_value(__func__, "", [] {
    return DLB_STR(DLB_VERSION_MAJOR) "." DLB_STR(DLB_VERSION_MINOR) "." DLB_STR(DLB_VERSION_PATCH);
  });
}

DLB_API uint32_t dlb_version_number(void) {
  return dlb::firewall_value(__func__, uint32_t{0}, [] { return uint32_t{DLB_VERSION_NUMBER}; });
}

DLB_API DLPackVersion dlb_dlpack_version(void) {
  return dlb::firewall_value(__func__, DLPackVersion{DLB_DLPACK_MAJOR, DLB_DLPACK_MINOR}, [] {
    DLPackVersion v;
    v.major = DLB_DLPACK_MAJOR;
    v.minor = DLB_DLPACK_MINOR;
    return v;
  });
}

DLB_API const char* dlb_status_name(dlb_status code) {
  return dlb::firewall_value(__func__, "DLB_UNKNOWN_STATUS", [&] { return status_name(code); });
}

DLB_API const char* dlb_last_error_message(void) {
  return dlb::firewall_value(__func__, "", [] { return dlb::last_error_message(); });
}
DLB_API dlb_status dlb_last_error_code(void) {
  return dlb::firewall_value(__func__, DLB_ERR_INTERNAL, [] { return dlb::last_error_code(); });
}
DLB_API void dlb_clear_last_error(void) {
  dlb::firewall_void(__func__, [] { dlb::clear_error(); });
}

DLB_API dlb_status dlb_dtype_check(DLDataType dtype) {
  return firewall(__func__, [&] { return dlb::check_dtype(dtype); });
}

DLB_API dlb_status dlb_dtype_name(DLDataType dtype, char* out, size_t out_size) {
  return firewall(__func__, [&] { return dlb::format_dtype_name(dtype, out, out_size); });
}

DLB_API dlb_status dlb_dtype_from_name(const char* name, DLDataType* out) {
  return firewall(__func__, [&] { return dlb::parse_dtype_name(name, out); });
}

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

DLB_API dlb_status dlb_validate(const DLTensor* t, uint32_t flags) {
  return firewall(__func__, [&] { return dlb::validate(t, flags); });
}

DLB_API dlb_status dlb_copy_to_contiguous(const DLTensor* src, void* dst, uint64_t dst_size) {
  return firewall(__func__, [&] { return copy_impl(src, dst, dst_size); });
}

DLB_API dlb_status dlb_backend_create(const dlb_backend_vtable* vtable, void* ctx, dlb_backend** out) {
  return firewall(__func__, [&] { return dlb::backend_create(vtable, ctx, out); });
}

DLB_API dlb_backend* dlb_backend_retain(dlb_backend* backend) {
  return dlb::firewall_value(__func__, backend, [&] {
    if (backend != nullptr)
      reinterpret_cast<dlb::Backend*>(backend)->refs.fetch_add(1, std::memory_order_relaxed);
    return backend;
  });
}

DLB_API void dlb_backend_release(dlb_backend* backend) {
  dlb::firewall_void(__func__, [&] {
    if (backend != nullptr) dlb::backend_release(reinterpret_cast<dlb::Backend*>(backend));
  });
}

DLB_API dlb_status dlb_buffer_from_backend(dlb_backend* backend, void* storage, const DLTensor* layout,
                                           uint64_t flags, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::buffer_from_backend(backend, storage, layout, flags, dlb::StorageKind::backend, out);
  });
}

DLB_API void dlb_backend_set_error(const char* message) {
  dlb::firewall_void(__func__, [&] { dlb::set_backend_text(message); });
}

DLB_API dlb_status dlb_device_type_info(int32_t device_type, dlb_device_info* out) {
  return firewall(__func__, [&] { return device_info_impl(device_type, out); });
}

DLB_API dlb_status dlb_compact_strides(int32_t ndim, const int64_t* shape, int64_t* strides_out) {
  return firewall(__func__, [&] { return compact_strides_impl(ndim, shape, strides_out); });
}

DLB_API dlb_status dlb_buffer_resolve(dlb_buffer* buffer, const dlb_export_options* options, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::buffer_resolve(buffer, options, out); });
}

DLB_API dlb_status dlb_import_versioned_on_stream(DLManagedTensorVersioned* tensor, const dlb_import_options* options,
                                                  int64_t stream, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::import_versioned_on_stream(tensor, options, stream, out); });
}

DLB_API dlb_status dlb_import_legacy_on_stream(DLManagedTensor* tensor, const dlb_import_options* options,
                                               int64_t stream, dlb_buffer** out) {
  return firewall(__func__, [&] { return dlb::import_legacy_on_stream(tensor, options, stream, out); });
}

DLB_API dlb_status dlb_check_consumer_stream(DLDevice device, int64_t stream) {
  return firewall(__func__, [&] { return dlb::check_consumer_stream(device, stream); });
}

DLB_API dlb_status dlb_layout_describe(const DLTensor* layout, dlb_layout_info* out) {
  return firewall(__func__, [&] { return layout_describe_impl(layout, out); });
}

}  // extern "C"
