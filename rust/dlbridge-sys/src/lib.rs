//! Raw declarations of the C surface in `include/dlbridge/dlbridge.h` (and
//! the headers it includes) and of the DLPack structs it uses, written by
//! hand to match the header exactly (the `dlbridge` crate's `layout` test
//! compiles a C program that compares sizes, offsets and constants).
//!
//! Declarations only: the build script finds and links the library and
//! does nothing else. Everything here is `unsafe` to call; the safe API is
//! the `dlbridge` crate.

#![allow(non_camel_case_types, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_void};

/// `DLDeviceType` (a C enum, `int` sized).
pub type DLDeviceType = i32;

/// The host device type. Every other device type, with its name and
/// properties, comes from the library's table (`dlb_device_type_info`);
/// the crate keeps no list of its own.
pub const kDLCPU: DLDeviceType = 1;

/// `DLDataTypeCode` values (stored in the `u8` `code` field).
pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;
pub const kDLOpaqueHandle: u8 = 3;
pub const kDLBfloat: u8 = 4;
pub const kDLComplex: u8 = 5;
pub const kDLBool: u8 = 6;

pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// A device: type and ordinal.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}

/// An element type: code, bits per lane, lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// A tensor view; strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// The legacy (pre-1.0) managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>,
}

/// A DLPack ABI version.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// The DLPack 1.x managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

pub type dlb_status = i32;

pub const DLB_OK: dlb_status = 0;
pub const DLB_ERR_INVALID_ARGUMENT: dlb_status = 1;
pub const DLB_ERR_OUT_OF_MEMORY: dlb_status = 2;
pub const DLB_ERR_DELETED: dlb_status = 3;
pub const DLB_ERR_NOT_ZERO_COPY: dlb_status = 4;
pub const DLB_ERR_UNSUPPORTED_DTYPE: dlb_status = 5;
pub const DLB_ERR_UNSUPPORTED_DEVICE: dlb_status = 6;
pub const DLB_ERR_UNSUPPORTED_LAYOUT: dlb_status = 7;
pub const DLB_ERR_READ_ONLY: dlb_status = 8;
pub const DLB_ERR_VERSION: dlb_status = 9;
pub const DLB_ERR_OVERFLOW: dlb_status = 10;
pub const DLB_ERR_MALFORMED: dlb_status = 11;
pub const DLB_ERR_ALIGNMENT: dlb_status = 12;
pub const DLB_ERR_BACKEND: dlb_status = 13;
pub const DLB_ERR_INTERNAL: dlb_status = 14;
pub const DLB_STATUS_COUNT: dlb_status = 15;

pub const DLB_VERSION_MAJOR: u32 = 0;
pub const DLB_VERSION_MINOR: u32 = 1;
pub const DLB_VERSION_PATCH: u32 = 0;
/// The header's version as major * 10000 + minor * 100 + patch (compare
/// with `dlb_version_number()`).
pub const DLB_VERSION_NUMBER: u32 = DLB_VERSION_MAJOR * 10000 + DLB_VERSION_MINOR * 100 + DLB_VERSION_PATCH;
pub const DLB_DLPACK_MAJOR: u32 = 1;
pub const DLB_DLPACK_MINOR: u32 = 3;
pub const DLB_MAX_NDIM: i32 = 64;
/// Name of the PyCapsule holding a `DLPackExchangeAPI*`
/// (`__dlpack_c_exchange_api__`).
pub const DLB_EXCHANGE_API_CAPSULE_NAME: &std::ffi::CStr = c"dlpack_exchange_api";

pub const DLB_BUFFER_READ_ONLY: u64 = 1 << 0;
pub const DLB_BUFFER_IMMUTABLE: u64 = 1 << 1;
pub const DLB_BUFFER_SUBBYTE_PADDED: u64 = 1 << 2;
pub const DLB_BUFFER_DELETED: u64 = 1 << 8;
pub const DLB_BUFFER_COPIED: u64 = 1 << 9;
pub const DLB_BUFFER_IMPORTED: u64 = 1 << 10;
pub const DLB_BUFFER_BACKEND: u64 = 1 << 11;

/// `dlb_copy_policy` (a C enum, `int` sized).
pub type dlb_copy_policy = i32;
pub const DLB_COPY_IF_NEEDED: dlb_copy_policy = 0;
pub const DLB_COPY_NEVER: dlb_copy_policy = 1;
pub const DLB_COPY_ALWAYS: dlb_copy_policy = 2;

pub const DLB_EXPORT_READ_ONLY: u64 = 1 << 0;
pub const DLB_EXPORT_ALLOW_READ_ONLY_LEGACY: u64 = 1 << 1;
pub const DLB_EXPORT_STREAM_GIVEN: u64 = 1 << 2;
pub const DLB_STREAM_NONE: i64 = 0;

pub const DLB_IMPORT_LEGACY_READ_ONLY: u64 = 1 << 0;
pub const DLB_IMPORT_CUDA_BACKEND: u64 = 1 << 1;
pub const DLB_IMPORT_DEVICE_BACKEND: u64 = 1 << 1;

pub const DLB_VALIDATE_CONTIGUOUS: u32 = 1 << 0;
pub const DLB_VALIDATE_STRIDES_REQUIRED: u32 = 1 << 1;

pub const DLB_COPY_FLAG_SWAP_BYTES: u32 = 1 << 0;
pub const DLB_COPY_FLAG_SUBBYTE_PADDED: u32 = 1 << 1;
pub const DLB_COPY_FLAG_BYTE_STRIDES: u32 = 1 << 2;

pub const DLB_LAYOUT_STRIDED: i32 = 0;
pub const DLB_LAYOUT_TILED: i32 = 1;
pub const DLB_LAYOUT_MULTI_PART: i32 = 2;
pub const DLB_LAYOUT_DYNAMIC: i32 = 3;

/// `dlb_buffer_host_view` access: the caller only reads the elements.
pub const DLB_HOST_VIEW_READ: u32 = 0;
/// `dlb_buffer_host_view` access: the caller also writes the elements.
pub const DLB_HOST_VIEW_WRITE: u32 = 1;

/// `dlb_host_view`: what `dlb_buffer_host_view` says of a buffer's elements
/// (set `struct_size`; the library writes the rest on success).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dlb_host_view {
    pub struct_size: usize,
    pub data: *mut c_void,
    pub nbytes: u64,
    pub numel: u64,
    pub dtype: DLDataType,
    pub writable: i32,
}

impl Default for dlb_host_view {
    fn default() -> Self {
        dlb_host_view {
            struct_size: std::mem::size_of::<dlb_host_view>(),
            data: std::ptr::null_mut(),
            nbytes: 0,
            numel: 0,
            dtype: DLDataType { code: 0, bits: 0, lanes: 0 },
            writable: 0,
        }
    }
}

/// Opaque reference-counted buffer handle.
#[repr(C)]
pub struct dlb_buffer {
    _opaque: [u8; 0],
    _not_send_sync: std::marker::PhantomData<*mut u8>,
}

/// Opaque reference-counted backend handle.
#[repr(C)]
pub struct dlb_backend {
    _opaque: [u8; 0],
    _not_send_sync: std::marker::PhantomData<*mut u8>,
}

/// Release callback of `dlb_buffer_wrap`.
pub type dlb_release_fn = Option<unsafe extern "C" fn(ctx: *mut c_void)>;

/// Options of `dlb_export_versioned` / `dlb_export_legacy`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dlb_export_options {
    pub struct_size: usize,
    pub copy: i32,
    pub has_target_device: i32,
    pub target_device: DLDevice,
    pub stream: i64,
    pub flags: u64,
}

/// Options of `dlb_import_versioned` / `dlb_import_legacy`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dlb_import_options {
    pub struct_size: usize,
    pub require_alignment: u64,
    pub require_contiguous: i32,
    pub require_writable: i32,
    pub flags: u64,
}

/// The callbacks of a backend; zero-fill (`Default`), set `struct_size`, fill in.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dlb_backend_vtable {
    pub struct_size: usize,
    pub name: *const c_char,
    pub acquire_access: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            storage: *mut c_void,
            data: *mut *mut c_void,
            access_ref: *mut *mut c_void,
        ) -> i32,
    >,
    pub release_access: Option<unsafe extern "C" fn(ctx: *mut c_void, storage: *mut c_void, access_ref: *mut c_void)>,
    pub copy_to_host:
        Option<unsafe extern "C" fn(ctx: *mut c_void, storage: *mut c_void, dst: *mut c_void, dst_size: u64) -> i32>,
    pub wait_ready: Option<unsafe extern "C" fn(ctx: *mut c_void, storage: *mut c_void, stream: i64) -> i32>,
    pub free_storage: Option<unsafe extern "C" fn(ctx: *mut c_void, storage: *mut c_void)>,
    pub query_layout: Option<unsafe extern "C" fn(ctx: *mut c_void, storage: *mut c_void) -> i32>,
    pub destroy: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
}

impl Default for dlb_backend_vtable {
    fn default() -> Self {
        dlb_backend_vtable {
            struct_size: std::mem::size_of::<dlb_backend_vtable>(),
            name: std::ptr::null(),
            acquire_access: None,
            release_access: None,
            copy_to_host: None,
            wait_ready: None,
            free_storage: None,
            query_layout: None,
            destroy: None,
        }
    }
}

extern "C" {
    // Version
    pub fn dlb_version_string() -> *const c_char;
    pub fn dlb_version_number() -> u32;
    pub fn dlb_dlpack_version() -> DLPackVersion;

    // Status and errors
    pub fn dlb_status_name(code: dlb_status) -> *const c_char;
    pub fn dlb_last_error_message() -> *const c_char;
    pub fn dlb_last_error_code() -> dlb_status;
    pub fn dlb_clear_last_error();

    // Data types
    pub fn dlb_dtype_check(dtype: DLDataType) -> dlb_status;
    pub fn dlb_dtype_name(dtype: DLDataType, out: *mut c_char, out_size: usize) -> dlb_status;
    pub fn dlb_dtype_from_name(name: *const c_char, out: *mut DLDataType) -> dlb_status;

    // Buffers
    pub fn dlb_buffer_alloc(
        device: DLDevice,
        dtype: DLDataType,
        ndim: i32,
        shape: *const i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_buffer_wrap(
        view: *const DLTensor,
        flags: u64,
        release: dlb_release_fn,
        ctx: *mut c_void,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_buffer_retain(buffer: *mut dlb_buffer) -> *mut dlb_buffer;
    pub fn dlb_buffer_release(buffer: *mut dlb_buffer);
    pub fn dlb_buffer_delete(buffer: *mut dlb_buffer) -> dlb_status;
    pub fn dlb_buffer_dltensor(buffer: *const dlb_buffer, out: *mut DLTensor) -> dlb_status;
    pub fn dlb_buffer_flags(buffer: *const dlb_buffer) -> u64;
    pub fn dlb_buffer_nbytes(buffer: *const dlb_buffer) -> u64;
    pub fn dlb_buffer_refcount(buffer: *const dlb_buffer) -> i64;
    pub fn dlb_buffer_to_host(buffer: *mut dlb_buffer, out: *mut *mut dlb_buffer) -> dlb_status;
    pub fn dlb_buffer_host_view(buffer: *const dlb_buffer, access: u32, out: *mut dlb_host_view) -> dlb_status;

    // Export
    pub fn dlb_export_options_init(options: *mut dlb_export_options);
    pub fn dlb_export_versioned(
        buffer: *mut dlb_buffer,
        options: *const dlb_export_options,
        out: *mut *mut DLManagedTensorVersioned,
    ) -> dlb_status;
    pub fn dlb_export_legacy(
        buffer: *mut dlb_buffer,
        options: *const dlb_export_options,
        out: *mut *mut DLManagedTensor,
    ) -> dlb_status;
    pub fn dlb_live_exports() -> i64;

    // Import
    pub fn dlb_import_options_init(options: *mut dlb_import_options);
    pub fn dlb_import_versioned(
        tensor: *mut DLManagedTensorVersioned,
        options: *const dlb_import_options,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_import_legacy(
        tensor: *mut DLManagedTensor,
        options: *const dlb_import_options,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_managed_free_versioned(tensor: *mut DLManagedTensorVersioned);
    pub fn dlb_managed_free_legacy(tensor: *mut DLManagedTensor);

    // Validation and copy
    pub fn dlb_validate(t: *const DLTensor, flags: u32) -> dlb_status;
    pub fn dlb_copy_to_contiguous(src: *const DLTensor, dst: *mut c_void, dst_size: u64) -> dlb_status;
    pub fn dlb_copy_to_contiguous_flags(
        src: *const DLTensor,
        dst: *mut c_void,
        dst_size: u64,
        flags: u32,
    ) -> dlb_status;

    // Backends
    pub fn dlb_backend_create(
        vtable: *const dlb_backend_vtable,
        ctx: *mut c_void,
        out: *mut *mut dlb_backend,
    ) -> dlb_status;
    pub fn dlb_backend_retain(backend: *mut dlb_backend) -> *mut dlb_backend;
    pub fn dlb_backend_release(backend: *mut dlb_backend);
    pub fn dlb_buffer_from_backend(
        backend: *mut dlb_backend,
        storage: *mut c_void,
        layout: *const DLTensor,
        flags: u64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_backend_set_error(message: *const c_char);

    // Devices and protocol rules
    pub fn dlb_device_type_info(device_type: i32, out: *mut dlb_device_info) -> dlb_status;
    pub fn dlb_compact_strides(ndim: i32, shape: *const i64, strides_out: *mut i64) -> dlb_status;
    pub fn dlb_buffer_resolve(
        buffer: *mut dlb_buffer,
        options: *const dlb_export_options,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_check_consumer_stream(device: DLDevice, stream: i64) -> dlb_status;
    pub fn dlb_layout_describe(layout: *const DLTensor, out: *mut dlb_layout_info) -> dlb_status;
    pub fn dlb_layout_describe_flags(layout: *const DLTensor, flags: u64, out: *mut dlb_layout_info) -> dlb_status;
    pub fn dlb_import_versioned_on_stream(
        tensor: *mut DLManagedTensorVersioned,
        options: *const dlb_import_options,
        stream: i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_import_legacy_on_stream(
        tensor: *mut DLManagedTensor,
        options: *const dlb_import_options,
        stream: i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;

    // Copy threads
    pub fn dlb_set_copy_threads(n: c_int) -> dlb_status;
    pub fn dlb_copy_threads() -> c_int;

    // DLPack C exchange API
    pub fn dlb_managed_tensor_alloc(
        prototype: *mut DLTensor,
        out: *mut *mut DLManagedTensorVersioned,
        error_ctx: *mut c_void,
        set_error: Option<unsafe extern "C" fn(error_ctx: *mut c_void, kind: *const c_char, message: *const c_char)>,
    ) -> i32;
}

// The CUDA backend's entry points (feature `cuda`, on by default). A library
// built without CUDA exports them too; each refuses.
#[cfg(feature = "cuda")]
extern "C" {
    pub fn dlb_cuda_backend_create(device_id: i32, out: *mut *mut dlb_backend) -> dlb_status;
    pub fn dlb_cuda_buffer_alloc(
        backend: *mut dlb_backend,
        device: DLDevice,
        dtype: DLDataType,
        ndim: i32,
        shape: *const i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_cuda_buffer_wrap(
        backend: *mut dlb_backend,
        view: *const DLTensor,
        flags: u64,
        stream: i64,
        release: dlb_release_fn,
        ctx: *mut c_void,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_cuda_import_versioned(
        backend: *mut dlb_backend,
        tensor: *mut DLManagedTensorVersioned,
        stream: i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_cuda_import_legacy(
        backend: *mut dlb_backend,
        tensor: *mut DLManagedTensor,
        stream: i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_cuda_buffer_set_stream(buffer: *mut dlb_buffer, stream: i64) -> dlb_status;
    pub fn dlb_cuda_buffer_stream(buffer: *const dlb_buffer, out: *mut i64) -> dlb_status;

}

// The OpenCL backend's entry points (feature `opencl`, on by default). OpenCL
// handles (cl_context, cl_command_queue, cl_mem, cl_event) are `*mut c_void`.
// A library built without OpenCL exports them too; each refuses.
#[cfg(feature = "opencl")]
extern "C" {
    pub fn dlb_opencl_device_count(out: *mut i32) -> dlb_status;
    pub fn dlb_opencl_device_index(device: *mut c_void, out: *mut i32) -> dlb_status;
    pub fn dlb_opencl_queue_device_index(queue: *mut c_void, out: *mut i32) -> dlb_status;
    pub fn dlb_opencl_backend_create(device_id: i32, out: *mut *mut dlb_backend) -> dlb_status;
    pub fn dlb_opencl_backend_from_queue(
        context: *mut c_void,
        queue: *mut c_void,
        out: *mut *mut dlb_backend,
    ) -> dlb_status;
    pub fn dlb_opencl_backend_queue(
        backend: *const dlb_backend,
        context: *mut *mut c_void,
        queue: *mut *mut c_void,
    ) -> dlb_status;
    pub fn dlb_opencl_buffer_alloc(
        backend: *mut dlb_backend,
        dtype: DLDataType,
        ndim: i32,
        shape: *const i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_opencl_buffer_wrap(
        backend: *mut dlb_backend,
        view: *const DLTensor,
        flags: u64,
        event: *mut c_void,
        release: dlb_release_fn,
        ctx: *mut c_void,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_opencl_import_versioned(
        backend: *mut dlb_backend,
        tensor: *mut DLManagedTensorVersioned,
        stream: i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_opencl_import_legacy(
        backend: *mut dlb_backend,
        tensor: *mut DLManagedTensor,
        stream: i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_opencl_buffer_set_event(buffer: *mut dlb_buffer, event: *mut c_void) -> dlb_status;
}

pub const DLB_DEVICE_KNOWN: u32 = 1 << 0;
pub const DLB_DEVICE_HOST_READABLE: u32 = 1 << 1;
pub const DLB_DEVICE_ADDRESS: u32 = 1 << 2;
pub const DLB_DEVICE_HAS_STREAMS: u32 = 1 << 3;
pub const DLB_DEVICE_CUDA_BACKEND: u32 = 1 << 4;

/// `dlb_device_info`: what the library knows about one device type.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dlb_device_info {
    pub struct_size: usize,
    pub device_type: i32,
    pub flags: u32,
    pub name: *const c_char,
}

/// `dlb_layout_info`: a layout's arithmetic, from `dlb_layout_describe`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dlb_layout_info {
    pub struct_size: usize,
    pub numel: u64,
    pub nbytes: u64,
    pub element_bits: u32,
    pub contiguous: i32,
    pub min_offset: i64,
    pub max_offset: i64,
}

// The DLPack spec's values, as constructors and constants (no library call).
impl DLDataType {
    pub const fn new(code: u8, bits: u8, lanes: u16) -> DLDataType {
        DLDataType { code, bits, lanes }
    }
    pub const I8: DLDataType = DLDataType::new(kDLInt, 8, 1);
    pub const I16: DLDataType = DLDataType::new(kDLInt, 16, 1);
    pub const I32: DLDataType = DLDataType::new(kDLInt, 32, 1);
    pub const I64: DLDataType = DLDataType::new(kDLInt, 64, 1);
    pub const U8: DLDataType = DLDataType::new(kDLUInt, 8, 1);
    pub const U16: DLDataType = DLDataType::new(kDLUInt, 16, 1);
    pub const U32: DLDataType = DLDataType::new(kDLUInt, 32, 1);
    pub const U64: DLDataType = DLDataType::new(kDLUInt, 64, 1);
    pub const F16: DLDataType = DLDataType::new(kDLFloat, 16, 1);
    pub const F32: DLDataType = DLDataType::new(kDLFloat, 32, 1);
    pub const F64: DLDataType = DLDataType::new(kDLFloat, 64, 1);
    pub const BF16: DLDataType = DLDataType::new(kDLBfloat, 16, 1);
    pub const BOOL: DLDataType = DLDataType::new(kDLBool, 8, 1);
    pub const COMPLEX64: DLDataType = DLDataType::new(kDLComplex, 64, 1);
    pub const COMPLEX128: DLDataType = DLDataType::new(kDLComplex, 128, 1);
}

impl DLDevice {
    pub const fn new(device_type: DLDeviceType, device_id: i32) -> DLDevice {
        DLDevice { device_type, device_id }
    }
    /// The host: `{kDLCPU, 0}`.
    pub const CPU: DLDevice = DLDevice::new(kDLCPU, 0);
}

// ---------------------------------------------------------------------------
// include/dlbridge/share.h: tensors shared with other processes
// ---------------------------------------------------------------------------

pub const DLB_SHARE_DESCRIPTION_VERSION: u32 = 1;
pub const DLB_SHARE_DESCRIPTION_HEADER: usize = 56;
pub const DLB_SHARE_CUDA_HANDLES: usize = 128;
pub const DLB_SHARE_DESCRIPTION_MAX: usize = DLB_SHARE_DESCRIPTION_HEADER + 16 * 64 + DLB_SHARE_CUDA_HANDLES;
pub const DLB_SHARE_KIND_HOST: u32 = 0;
pub const DLB_SHARE_KIND_CUDA_IPC: u32 = 1;
pub const DLB_SHARE_COPY_IF_NEEDED: u64 = 1 << 0;
pub const DLB_SHARE_READ_ONLY: u64 = 1 << 1;
pub const DLB_SHARE_TAKE_FD: u64 = 1 << 2;

#[repr(C)]
pub struct dlb_share_descriptor {
    pub fd: i32,
    pub size: u32,
    pub description: [u8; DLB_SHARE_DESCRIPTION_MAX],
}

extern "C" {
    pub fn dlb_buffer_alloc_shared(
        device: DLDevice,
        dtype: DLDataType,
        ndim: i32,
        shape: *const i64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_buffer_copy_shared(buffer: *mut dlb_buffer, flags: u64, out: *mut *mut dlb_buffer) -> dlb_status;
    pub fn dlb_buffer_share(buffer: *mut dlb_buffer, flags: u64, out: *mut dlb_share_descriptor) -> dlb_status;
    pub fn dlb_buffer_is_shared(buffer: *mut dlb_buffer, out: *mut i32) -> dlb_status;
    pub fn dlb_buffer_open_shared(
        fd: i32,
        description: *const c_void,
        size: usize,
        flags: u64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_share_description_kind(description: *const c_void, size: usize, kind: *mut u32) -> dlb_status;
    pub fn dlb_share_descriptor_close(descriptor: *mut dlb_share_descriptor);
    pub fn dlb_share_send(socket_fd: i32, descriptor: *const dlb_share_descriptor) -> dlb_status;
    pub fn dlb_share_recv(socket_fd: i32, out: *mut dlb_share_descriptor) -> dlb_status;
    pub fn dlb_shared_mappings() -> i64;
    pub fn dlb_share_ticket_issue(buffer: *mut dlb_buffer, flags: u64, out: *mut dlb_share_ticket) -> dlb_status;
    pub fn dlb_share_ticket_open(
        ticket: *const c_void,
        size: usize,
        flags: u64,
        out: *mut *mut dlb_buffer,
    ) -> dlb_status;
    pub fn dlb_share_ticket_server(held: *mut i64, connections: *mut i64, links: *mut i64) -> i32;
    pub fn dlb_share_ticket_withdraw(ticket: *const c_void, size: usize, withdrawn: *mut i64) -> dlb_status;
    pub fn dlb_share_ticket_wait(timeout_ms: i64) -> i64;
}

/// Largest ticket in bytes (`dlb_share_ticket`): 64 bytes of source and a
/// description.
pub const DLB_SHARE_TICKET_MAX: usize = 64 + DLB_SHARE_DESCRIPTION_MAX;
/// `dlb_share_ticket_open` flag, accepted for compatibility (every open
/// asks the issuer's server for the file).
pub const DLB_SHARE_VIA_SERVER: u64 = 1 << 3;

/// A ticket: `size` bytes of `bytes` in use.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct dlb_share_ticket {
    pub size: u32,
    pub bytes: [u8; DLB_SHARE_TICKET_MAX],
}
