/* Shared body of the header tests: static layout checks of every public
 * struct (C99-compatible: a negative array size fails the build), and a
 * call through the library to show the header links. */
#include <dlbridge/dlbridge.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define HT_CHECK(name, cond) typedef char ht_check_##name[(cond) ? 1 : -1]

HT_CHECK(version_size, sizeof(DLPackVersion) == 8);
HT_CHECK(version_minor, offsetof(DLPackVersion, minor) == 4);
HT_CHECK(device_size, sizeof(DLDevice) == 8);
HT_CHECK(device_id, offsetof(DLDevice, device_id) == 4);
HT_CHECK(dtype_size, sizeof(DLDataType) == 4);
HT_CHECK(dtype_bits, offsetof(DLDataType, bits) == 1);
HT_CHECK(dtype_lanes, offsetof(DLDataType, lanes) == 2);
HT_CHECK(tensor_size, sizeof(DLTensor) == 48);
HT_CHECK(tensor_device, offsetof(DLTensor, device) == 8);
HT_CHECK(tensor_ndim, offsetof(DLTensor, ndim) == 16);
HT_CHECK(tensor_dtype, offsetof(DLTensor, dtype) == 20);
HT_CHECK(tensor_shape, offsetof(DLTensor, shape) == 24);
HT_CHECK(tensor_strides, offsetof(DLTensor, strides) == 32);
HT_CHECK(tensor_offset, offsetof(DLTensor, byte_offset) == 40);
HT_CHECK(legacy_size, sizeof(DLManagedTensor) == 64);
HT_CHECK(legacy_ctx, offsetof(DLManagedTensor, manager_ctx) == 48);
HT_CHECK(legacy_deleter, offsetof(DLManagedTensor, deleter) == 56);
HT_CHECK(versioned_size, sizeof(DLManagedTensorVersioned) == 80);
HT_CHECK(versioned_ctx, offsetof(DLManagedTensorVersioned, manager_ctx) == 8);
HT_CHECK(versioned_deleter, offsetof(DLManagedTensorVersioned, deleter) == 16);
HT_CHECK(versioned_flags, offsetof(DLManagedTensorVersioned, flags) == 24);
HT_CHECK(versioned_tensor, offsetof(DLManagedTensorVersioned, dl_tensor) == 32);
HT_CHECK(export_options_size, sizeof(dlb_export_options) == 40);
HT_CHECK(export_options_copy, offsetof(dlb_export_options, copy) == 8);
HT_CHECK(export_options_has_target, offsetof(dlb_export_options, has_target_device) == 12);
HT_CHECK(export_options_target, offsetof(dlb_export_options, target_device) == 16);
HT_CHECK(export_options_stream, offsetof(dlb_export_options, stream) == 24);
HT_CHECK(export_options_flags, offsetof(dlb_export_options, flags) == 32);
HT_CHECK(import_options_size, sizeof(dlb_import_options) == 32);
HT_CHECK(import_options_alignment, offsetof(dlb_import_options, require_alignment) == 8);
HT_CHECK(import_options_contiguous, offsetof(dlb_import_options, require_contiguous) == 16);
HT_CHECK(import_options_writable, offsetof(dlb_import_options, require_writable) == 20);
HT_CHECK(import_options_flags, offsetof(dlb_import_options, flags) == 24);
HT_CHECK(vtable_size, sizeof(dlb_backend_vtable) == 72);
HT_CHECK(vtable_name, offsetof(dlb_backend_vtable, name) == 8);
HT_CHECK(vtable_acquire, offsetof(dlb_backend_vtable, acquire_access) == 16);
HT_CHECK(vtable_release, offsetof(dlb_backend_vtable, release_access) == 24);
HT_CHECK(vtable_copy, offsetof(dlb_backend_vtable, copy_to_host) == 32);
HT_CHECK(vtable_wait, offsetof(dlb_backend_vtable, wait_ready) == 40);
HT_CHECK(vtable_free, offsetof(dlb_backend_vtable, free_storage) == 48);
HT_CHECK(vtable_query, offsetof(dlb_backend_vtable, query_layout) == 56);
HT_CHECK(vtable_destroy, offsetof(dlb_backend_vtable, destroy) == 64);
HT_CHECK(status_width, sizeof(dlb_status) == 4);
HT_CHECK(codes, DLB_ERR_INTERNAL == 14 && DLB_ERR_INVALID_ARGUMENT == 1 && DLB_ERR_BACKEND == 13);
HT_CHECK(flag_bits, DLPACK_FLAG_BITMASK_READ_ONLY == 1 && DLPACK_FLAG_BITMASK_IS_COPIED == 2);
HT_CHECK(new_codes, kDLBool == 6 && kDLFloat8_e4m3fn == 10 && kDLFloat4_e2m1fn == 17 && kDLTrn == 18);
HT_CHECK(new_devices, kDLOneAPI == 14 && kDLMAIA == 17);
HT_CHECK(dlpack_major, DLPACK_MAJOR_VERSION == 1);
HT_CHECK(xapi_header_size, sizeof(DLPackExchangeAPIHeader) == 16);
HT_CHECK(xapi_header_version, offsetof(DLPackExchangeAPIHeader, version) == 0);
HT_CHECK(xapi_header_prev, offsetof(DLPackExchangeAPIHeader, prev_api) == 8);
HT_CHECK(xapi_size, sizeof(DLPackExchangeAPI) == 56);
HT_CHECK(xapi_header, offsetof(DLPackExchangeAPI, header) == 0);
HT_CHECK(xapi_allocator, offsetof(DLPackExchangeAPI, managed_tensor_allocator) == 16);
HT_CHECK(xapi_from_py, offsetof(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == 24);
HT_CHECK(xapi_to_py, offsetof(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == 32);
HT_CHECK(xapi_dltensor, offsetof(DLPackExchangeAPI, dltensor_from_py_object_no_sync) == 40);
HT_CHECK(xapi_stream, offsetof(DLPackExchangeAPI, current_work_stream) == 48);
/* Who declared the exchange API: dlpack.h 1.3 itself (HT_XAPI_FROM_DLPACK_H,
 * set by the build for that variant), else dlbridge.h. */
#if defined(HT_XAPI_FROM_DLPACK_H) && defined(DLB_EXCHANGE_API_DECLARED_BY_DLBRIDGE)
#error "dlbridge.h declared the exchange API although dlpack.h 1.3 has it"
#endif
#if !defined(HT_XAPI_FROM_DLPACK_H) && !defined(DLB_EXCHANGE_API_DECLARED_BY_DLBRIDGE)
#error "dlbridge.h did not declare the exchange API for a dlpack.h older than 1.3"
#endif

/* dlbridge's allocator has exactly the table's function type. */
static const DLPackManagedTensorAllocator ht_allocator = dlb_managed_tensor_alloc;

static int ht_set_error_calls;
static void ht_set_error(void* ctx, const char* kind, const char* message) {
  (void)message;
  ++ht_set_error_calls;
  *(const char**)ctx = kind;
}

static int header_test_main(void) {
  DLPackVersion v = dlb_dlpack_version();
  if (v.major != 1) return 1;
  if (strcmp(dlb_status_name(DLB_ERR_DELETED), "DLB_ERR_DELETED") != 0) return 2;
  {
    /* The allocator through the table's type: a NULL prototype is refused. */
    const char* kind = NULL;
    DLManagedTensorVersioned* mt = NULL;
    if (ht_allocator(NULL, &mt, (void*)&kind, ht_set_error) != -1) return 3;
    if (ht_set_error_calls != 1 || kind == NULL || strcmp(kind, "ValueError") != 0 || mt != NULL) return 4;
  }
#if defined(DLB_DLPACK_DECLARED_BY_DLBRIDGE)
  printf("DLPack 1.x declarations supplied by dlbridge.h\n");
#else
  printf("DLPack 1.x declarations taken from dlpack.h %d.%d\n", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
#endif
#if defined(DLB_EXCHANGE_API_DECLARED_BY_DLBRIDGE)
  printf("DLPack exchange API declarations supplied by dlbridge.h\n");
#else
  printf("DLPack exchange API declarations taken from dlpack.h %d.%d\n", DLPACK_MAJOR_VERSION,
         DLPACK_MINOR_VERSION);
#endif
  return 0;
}
