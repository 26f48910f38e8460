"""The C surface of libdlbridge as a cffi cdef, for cffi's ABI mode.

Usage::

    import cffi
    from dlbridge._cdef import CDEF, library_path
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(library_path())

It declares the DLPack structs (the 1.x layout, x86-64 / LP64), the option
and backend structs, the constants, and every ``dlb_`` function of
``include/dlbridge/dlbridge.h``. It lists no device types or dtype codes:
those are asked of the library. The test
suite checks it against the real header: the same functions with the same
parameter types, the same struct sizes and field offsets, the same constants.
Write the macros' values as plain numbers here, since cffi's ABI mode reads
only integer literals in ``#define``.
"""

CDEF = r"""
/* ---- DLPack -------------------------------------------------------------- */
/* Device types and type codes are plain integers here: what they mean is
   asked of the library (dlb_device_type_info, dlb_dtype_name,
   dlb_dtype_from_name), never listed in a binding. */
typedef int32_t DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

typedef struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY 1
#define DLPACK_FLAG_BITMASK_IS_COPIED 2
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED 4

/* ---- Version ------------------------------------------------------------- */
#define DLB_VERSION_MAJOR 0
#define DLB_VERSION_MINOR 1
#define DLB_VERSION_PATCH 0
#define DLB_DLPACK_MAJOR 1
#define DLB_DLPACK_MINOR 3

const char* dlb_version_string(void);
uint32_t dlb_version_number(void);
DLPackVersion dlb_dlpack_version(void);

/* ---- Status and errors --------------------------------------------------- */
typedef int32_t dlb_status;

#define DLB_OK 0
#define DLB_ERR_INVALID_ARGUMENT 1
#define DLB_ERR_OUT_OF_MEMORY 2
#define DLB_ERR_DELETED 3
#define DLB_ERR_NOT_ZERO_COPY 4
#define DLB_ERR_UNSUPPORTED_DTYPE 5
#define DLB_ERR_UNSUPPORTED_DEVICE 6
#define DLB_ERR_UNSUPPORTED_LAYOUT 7
#define DLB_ERR_READ_ONLY 8
#define DLB_ERR_VERSION 9
#define DLB_ERR_OVERFLOW 10
#define DLB_ERR_MALFORMED 11
#define DLB_ERR_ALIGNMENT 12
#define DLB_ERR_BACKEND 13
#define DLB_ERR_INTERNAL 14
#define DLB_STATUS_COUNT 15

const char* dlb_status_name(dlb_status code);
const char* dlb_last_error_message(void);
dlb_status dlb_last_error_code(void);
void dlb_clear_last_error(void);

/* ---- Data types ---------------------------------------------------------- */
#define DLB_MAX_NDIM 64

dlb_status dlb_dtype_check(DLDataType dtype);
dlb_status dlb_dtype_name(DLDataType dtype, char* out, size_t out_size);
dlb_status dlb_dtype_from_name(const char* name, DLDataType* out);

/* ---- Buffers ------------------------------------------------------------- */
typedef struct dlb_buffer dlb_buffer;

#define DLB_BUFFER_READ_ONLY 1
#define DLB_BUFFER_IMMUTABLE 2
#define DLB_BUFFER_SUBBYTE_PADDED 4
#define DLB_BUFFER_DELETED 256
#define DLB_BUFFER_COPIED 512
#define DLB_BUFFER_IMPORTED 1024
#define DLB_BUFFER_BACKEND 2048

typedef void (*dlb_release_fn)(void* ctx);

dlb_status dlb_buffer_alloc(DLDevice device, DLDataType dtype, int32_t ndim,
                            const int64_t* shape, dlb_buffer** out);
dlb_status dlb_buffer_wrap(const DLTensor* view, uint64_t flags, dlb_release_fn release,
                           void* ctx, dlb_buffer** out);
dlb_buffer* dlb_buffer_retain(dlb_buffer* buffer);
void dlb_buffer_release(dlb_buffer* buffer);
dlb_status dlb_buffer_delete(dlb_buffer* buffer);
dlb_status dlb_buffer_dltensor(const dlb_buffer* buffer, DLTensor* out);
uint64_t dlb_buffer_flags(const dlb_buffer* buffer);
uint64_t dlb_buffer_nbytes(const dlb_buffer* buffer);
int64_t dlb_buffer_refcount(const dlb_buffer* buffer);
dlb_status dlb_buffer_to_host(dlb_buffer* buffer, dlb_buffer** out);
#define DLB_HOST_VIEW_READ 0
#define DLB_HOST_VIEW_WRITE 1
typedef struct dlb_host_view {
  size_t struct_size;
  void* data;
  uint64_t nbytes;
  uint64_t numel;
  DLDataType dtype;
  int32_t writable;
} dlb_host_view;
dlb_status dlb_buffer_host_view(const dlb_buffer* buffer, uint32_t access, dlb_host_view* out);

/* ---- Export -------------------------------------------------------------- */
typedef enum dlb_copy_policy {
  DLB_COPY_IF_NEEDED = 0,
  DLB_COPY_NEVER = 1,
  DLB_COPY_ALWAYS = 2
} dlb_copy_policy;

#define DLB_EXPORT_READ_ONLY 1
#define DLB_EXPORT_ALLOW_READ_ONLY_LEGACY 2
#define DLB_EXPORT_STREAM_GIVEN 4
#define DLB_STREAM_NONE 0

typedef struct dlb_export_options {
  size_t struct_size;
  int32_t copy;
  int32_t has_target_device;
  DLDevice target_device;
  int64_t stream;
  uint64_t flags;
} dlb_export_options;

void dlb_export_options_init(dlb_export_options* options);
dlb_status dlb_export_versioned(dlb_buffer* buffer, const dlb_export_options* options,
                                DLManagedTensorVersioned** out);
dlb_status dlb_export_legacy(dlb_buffer* buffer, const dlb_export_options* options,
                             DLManagedTensor** out);
int64_t dlb_live_exports(void);

/* ---- Import -------------------------------------------------------------- */
#define DLB_IMPORT_LEGACY_READ_ONLY 1
#define DLB_IMPORT_CUDA_BACKEND 2
#define DLB_IMPORT_DEVICE_BACKEND 2

typedef struct dlb_import_options {
  size_t struct_size;
  uint64_t require_alignment;
  int32_t require_contiguous;
  int32_t require_writable;
  uint64_t flags;
} dlb_import_options;

void dlb_import_options_init(dlb_import_options* options);
dlb_status dlb_import_versioned(DLManagedTensorVersioned* tensor,
                                const dlb_import_options* options, dlb_buffer** out);
dlb_status dlb_import_legacy(DLManagedTensor* tensor, const dlb_import_options* options,
                             dlb_buffer** out);
dlb_status dlb_import_versioned_on_stream(DLManagedTensorVersioned* tensor,
                                          const dlb_import_options* options, int64_t stream,
                                          dlb_buffer** out);
dlb_status dlb_import_legacy_on_stream(DLManagedTensor* tensor, const dlb_import_options* options,
                                       int64_t stream, dlb_buffer** out);
void dlb_managed_free_versioned(DLManagedTensorVersioned* tensor);
void dlb_managed_free_legacy(DLManagedTensor* tensor);

/* ---- Validation and copy ------------------------------------------------- */
#define DLB_VALIDATE_CONTIGUOUS 1
#define DLB_VALIDATE_STRIDES_REQUIRED 2

dlb_status dlb_validate(const DLTensor* t, uint32_t flags);
dlb_status dlb_copy_to_contiguous(const DLTensor* src, void* dst, uint64_t dst_size);
#define DLB_COPY_FLAG_SWAP_BYTES 1
#define DLB_COPY_FLAG_SUBBYTE_PADDED 2
#define DLB_COPY_FLAG_BYTE_STRIDES 4
dlb_status dlb_copy_to_contiguous_flags(const DLTensor* src, void* dst, uint64_t dst_size, uint32_t flags);

/* ---- Backends ------------------------------------------------------------ */
typedef struct dlb_backend dlb_backend;

#define DLB_LAYOUT_STRIDED 0
#define DLB_LAYOUT_TILED 1
#define DLB_LAYOUT_MULTI_PART 2
#define DLB_LAYOUT_DYNAMIC 3

typedef struct dlb_backend_vtable {
  size_t struct_size;
  const char* name;
  int32_t (*acquire_access)(void* ctx, void* storage, void** data, void** access_ref);
  void (*release_access)(void* ctx, void* storage, void* access_ref);
  int32_t (*copy_to_host)(void* ctx, void* storage, void* dst, uint64_t dst_size);
  int32_t (*wait_ready)(void* ctx, void* storage, int64_t stream);
  void (*free_storage)(void* ctx, void* storage);
  int32_t (*query_layout)(void* ctx, void* storage);
  void (*destroy)(void* ctx);
} dlb_backend_vtable;

dlb_status dlb_backend_create(const dlb_backend_vtable* vtable, void* ctx,
                              dlb_backend** out);
dlb_backend* dlb_backend_retain(dlb_backend* backend);
void dlb_backend_release(dlb_backend* backend);
dlb_status dlb_buffer_from_backend(dlb_backend* backend, void* storage,
                                   const DLTensor* layout, uint64_t flags,
                                   dlb_buffer** out);
void dlb_backend_set_error(const char* message);

/* ---- Devices and protocol rules ------------------------------------------ */
#define DLB_DEVICE_KNOWN 1
#define DLB_DEVICE_HOST_READABLE 2
#define DLB_DEVICE_ADDRESS 4
#define DLB_DEVICE_HAS_STREAMS 8
#define DLB_DEVICE_CUDA_BACKEND 16

typedef struct dlb_device_info {
  size_t struct_size;
  int32_t device_type;
  uint32_t flags;
  const char* name;
} dlb_device_info;

dlb_status dlb_device_type_info(int32_t device_type, dlb_device_info* out);
dlb_status dlb_check_consumer_stream(DLDevice device, int64_t stream);
dlb_status dlb_compact_strides(int32_t ndim, const int64_t* shape, int64_t* strides_out);
dlb_status dlb_buffer_resolve(dlb_buffer* buffer, const dlb_export_options* options,
                              dlb_buffer** out);

typedef struct dlb_layout_info {
  size_t struct_size;
  uint64_t numel;
  uint64_t nbytes;
  uint32_t element_bits;
  int32_t contiguous;
  int64_t min_offset;
  int64_t max_offset;
} dlb_layout_info;
dlb_status dlb_layout_describe(const DLTensor* layout, dlb_layout_info* out);
dlb_status dlb_layout_describe_flags(const DLTensor* layout, uint64_t flags, dlb_layout_info* out);

dlb_status dlb_cuda_backend_create(int32_t device_id, dlb_backend** out);
dlb_status dlb_cuda_buffer_alloc(dlb_backend* backend, DLDevice device, DLDataType dtype,
                                 int32_t ndim, const int64_t* shape, dlb_buffer** out);
dlb_status dlb_cuda_buffer_wrap(dlb_backend* backend, const DLTensor* view, uint64_t flags,
                                int64_t stream, dlb_release_fn release, void* ctx,
                                dlb_buffer** out);
dlb_status dlb_cuda_import_versioned(dlb_backend* backend, DLManagedTensorVersioned* tensor,
                                     int64_t stream, dlb_buffer** out);
dlb_status dlb_cuda_import_legacy(dlb_backend* backend, DLManagedTensor* tensor, int64_t stream,
                                  dlb_buffer** out);
dlb_status dlb_cuda_buffer_set_stream(dlb_buffer* buffer, int64_t stream);
dlb_status dlb_cuda_buffer_stream(const dlb_buffer* buffer, int64_t* out);

dlb_status dlb_opencl_device_count(int32_t* out);
dlb_status dlb_opencl_device_index(void* device, int32_t* out);
dlb_status dlb_opencl_queue_device_index(void* queue, int32_t* out);
dlb_status dlb_opencl_backend_create(int32_t device_id, dlb_backend** out);
dlb_status dlb_opencl_backend_from_queue(void* context, void* queue, dlb_backend** out);
dlb_status dlb_opencl_backend_queue(const dlb_backend* backend, void** context, void** queue);
dlb_status dlb_opencl_buffer_alloc(dlb_backend* backend, DLDataType dtype, int32_t ndim,
                                   const int64_t* shape, dlb_buffer** out);
dlb_status dlb_opencl_buffer_wrap(dlb_backend* backend, const DLTensor* view, uint64_t flags,
                                  void* event, dlb_release_fn release, void* ctx, dlb_buffer** out);
dlb_status dlb_opencl_import_versioned(dlb_backend* backend, DLManagedTensorVersioned* tensor,
                                       int64_t stream, dlb_buffer** out);
dlb_status dlb_opencl_import_legacy(dlb_backend* backend, DLManagedTensor* tensor, int64_t stream,
                                    dlb_buffer** out);
dlb_status dlb_opencl_buffer_set_event(dlb_buffer* buffer, void* event);

dlb_status dlb_set_copy_threads(int n);
int dlb_copy_threads(void);

#define DLB_SHARE_DESCRIPTION_VERSION 1
#define DLB_SHARE_DESCRIPTION_HEADER 56
#define DLB_SHARE_CUDA_HANDLES 128
#define DLB_SHARE_DESCRIPTION_MAX 1208
#define DLB_SHARE_KIND_HOST 0
#define DLB_SHARE_KIND_CUDA_IPC 1
#define DLB_SHARE_COPY_IF_NEEDED 1
#define DLB_SHARE_READ_ONLY 2
#define DLB_SHARE_TAKE_FD 4
typedef struct dlb_share_descriptor {
  int32_t fd;
  uint32_t size;
  unsigned char description[1208];
} dlb_share_descriptor;
dlb_status dlb_buffer_alloc_shared(DLDevice device, DLDataType dtype, int32_t ndim,
                                   const int64_t* shape, dlb_buffer** out);
dlb_status dlb_buffer_copy_shared(dlb_buffer* buffer, uint64_t flags, dlb_buffer** out);
dlb_status dlb_buffer_share(dlb_buffer* buffer, uint64_t flags, dlb_share_descriptor* out);
dlb_status dlb_buffer_is_shared(dlb_buffer* buffer, int32_t* out);
dlb_status dlb_buffer_open_shared(int32_t fd, const void* description, size_t size, uint64_t flags,
                                  dlb_buffer** out);
dlb_status dlb_share_description_kind(const void* description, size_t size, uint32_t* kind);
void dlb_share_descriptor_close(dlb_share_descriptor* descriptor);
dlb_status dlb_share_send(int32_t socket_fd, const dlb_share_descriptor* descriptor);
dlb_status dlb_share_recv(int32_t socket_fd, dlb_share_descriptor* out);
int64_t dlb_shared_mappings(void);
#define DLB_SHARE_TICKET_MAX 1272
#define DLB_SHARE_VIA_SERVER 8
typedef struct dlb_share_ticket {
  uint32_t size;
  unsigned char bytes[1272];
} dlb_share_ticket;
dlb_status dlb_share_ticket_issue(dlb_buffer* buffer, uint64_t flags, dlb_share_ticket* out);
dlb_status dlb_share_ticket_open(const void* ticket, size_t size, uint64_t flags, dlb_buffer** out);
int32_t dlb_share_ticket_server(int64_t* held, int64_t* connections, int64_t* links);
dlb_status dlb_share_ticket_withdraw(const void* ticket, size_t size, int64_t* withdrawn);
int64_t dlb_share_ticket_wait(int64_t timeout_ms);
"""

# The struct types a binding allocates or reads, for layout checks.
STRUCTS = (
    "DLDevice",
    "DLDataType",
    "DLTensor",
    "DLManagedTensor",
    "DLPackVersion",
    "DLManagedTensorVersioned",
    "dlb_export_options",
    "dlb_import_options",
    "dlb_backend_vtable",
    "dlb_device_info",
    "dlb_share_descriptor",
    "dlb_share_ticket",
    "dlb_host_view",
)


def library_path() -> str:
    """The path of the libdlbridge the package itself loads."""
    from . import _lib

    return _lib.path
