//! Managed tensors: exports that own their DLPack struct, and imports.

use std::mem::{self, MaybeUninit};
use std::ptr::{self, NonNull};

use crate::buffer::Buffer;
use crate::error::{check, Error, Result, Status};
use crate::ffi::{self, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};

/// Copy policy of an export (the Python protocol's `copy` argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CopyPolicy {
    /// Zero-copy when possible, else a host copy.
    #[default]
    IfNeeded,
    /// Fail with `Status::NotZeroCopy` rather than copy.
    Never,
    /// Always a fresh compact host copy.
    Always,
}

/// Options of an export; `Default` is the library's defaults.
#[derive(Clone, Copy, Debug)]
pub struct ExportOptions {
    raw: ffi::dlb_export_options,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions::new()
    }
}

impl ExportOptions {
    pub fn new() -> ExportOptions {
        let mut raw = MaybeUninit::<ffi::dlb_export_options>::zeroed();
        // SAFETY: init fills the whole struct; zeroed is valid for it anyway.
        unsafe { ffi::dlb_export_options_init(raw.as_mut_ptr()) };
        // SAFETY: all-integer struct, initialised.
        let mut raw = unsafe { raw.assume_init() };
        raw.struct_size = mem::size_of::<ffi::dlb_export_options>();
        ExportOptions { raw }
    }
    pub fn copy(mut self, policy: CopyPolicy) -> Self {
        self.raw.copy = match policy {
            CopyPolicy::IfNeeded => ffi::DLB_COPY_IF_NEEDED,
            CopyPolicy::Never => ffi::DLB_COPY_NEVER,
            CopyPolicy::Always => ffi::DLB_COPY_ALWAYS,
        };
        self
    }
    pub fn target_device(mut self, device: DLDevice) -> Self {
        self.raw.has_target_device = 1;
        self.raw.target_device = device;
        self
    }
    pub fn stream(mut self, stream: i64) -> Self {
        self.raw.stream = stream;
        self
    }
    /// A stream the consumer passed explicitly (`DLB_EXPORT_STREAM_GIVEN`),
    /// so that 0 is a literal 0, which the library refuses for devices with
    /// streams, rather than "no stream".
    pub fn given_stream(self, stream: i64) -> Self {
        self.stream(stream).flag(ffi::DLB_EXPORT_STREAM_GIVEN, true)
    }
    fn flag(mut self, bit: u64, on: bool) -> Self {
        if on {
            self.raw.flags |= bit;
        } else {
            self.raw.flags &= !bit;
        }
        self
    }
    /// Mark the export READ_ONLY even for a writable buffer.
    pub fn read_only(self, on: bool) -> Self {
        self.flag(ffi::DLB_EXPORT_READ_ONLY, on)
    }
    /// Allow the legacy export of a read-only buffer.
    pub fn allow_read_only_legacy(self, on: bool) -> Self {
        self.flag(ffi::DLB_EXPORT_ALLOW_READ_ONLY_LEGACY, on)
    }
    pub fn as_raw(&self) -> &ffi::dlb_export_options {
        &self.raw
    }
}

/// Options of an import; `Default` requires nothing.
#[derive(Clone, Copy, Debug)]
pub struct ImportOptions {
    raw: ffi::dlb_import_options,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions::new()
    }
}

impl ImportOptions {
    pub fn new() -> ImportOptions {
        let mut raw = MaybeUninit::<ffi::dlb_import_options>::zeroed();
        // SAFETY: as in ExportOptions::new.
        unsafe { ffi::dlb_import_options_init(raw.as_mut_ptr()) };
        // SAFETY: all-integer struct, initialised.
        let mut raw = unsafe { raw.assume_init() };
        raw.struct_size = mem::size_of::<ffi::dlb_import_options>();
        ImportOptions { raw }
    }
    /// Required alignment in bytes of the first element (a power of two).
    pub fn require_alignment(mut self, bytes: u64) -> Self {
        self.raw.require_alignment = bytes;
        self
    }
    pub fn require_contiguous(mut self, on: bool) -> Self {
        self.raw.require_contiguous = on as i32;
        self
    }
    pub fn require_writable(mut self, on: bool) -> Self {
        self.raw.require_writable = on as i32;
        self
    }
    /// Treat a legacy tensor as read-only.
    pub fn legacy_read_only(mut self, on: bool) -> Self {
        if on {
            self.raw.flags |= ffi::DLB_IMPORT_LEGACY_READ_ONLY;
        } else {
            self.raw.flags &= !ffi::DLB_IMPORT_LEGACY_READ_ONLY;
        }
        self
    }
    pub fn as_raw(&self) -> &ffi::dlb_import_options {
        &self.raw
    }
}

/// `dlb_import_versioned`: takes a DLPack 1.x managed tensor in.
///
/// On success the returned buffer owns `tensor` and runs its deleter once
/// when the last reference goes. On failure the caller still owns `tensor`.
///
/// # Safety
/// `tensor` must point at a valid managed tensor the caller owns, whose
/// memory stays valid until its deleter runs, and whose deleter may be called
/// from any thread.
pub unsafe fn import_versioned(tensor: *mut DLManagedTensorVersioned, options: &ImportOptions) -> Result<Buffer> {
    let mut out = ptr::null_mut();
    // SAFETY: per the contract above.
    check(unsafe { ffi::dlb_import_versioned(tensor, options.as_raw(), &mut out) })?;
    // SAFETY: a new handle owned by us.
    unsafe { from_new_handle(out) }
}

/// `dlb_import_legacy`: as `import_versioned`, for a legacy tensor.
///
/// # Safety
/// As for `import_versioned`.
pub unsafe fn import_legacy(tensor: *mut DLManagedTensor, options: &ImportOptions) -> Result<Buffer> {
    let mut out = ptr::null_mut();
    // SAFETY: per the contract above.
    check(unsafe { ffi::dlb_import_legacy(tensor, options.as_raw(), &mut out) })?;
    // SAFETY: a new handle owned by us.
    unsafe { from_new_handle(out) }
}

unsafe fn from_new_handle(raw: *mut ffi::dlb_buffer) -> Result<Buffer> {
    // SAFETY: caller passes a fresh owned handle.
    match unsafe { Buffer::from_raw(raw) } {
        Ok(b) => Ok(b),
        Err(e) => {
            // SAFETY: still ours on failure.
            unsafe { ffi::dlb_buffer_release(raw) };
            Err(e)
        }
    }
}

fn tensor_shape(t: &DLTensor) -> &[i64] {
    if t.ndim <= 0 || t.shape.is_null() {
        &[]
    } else {
        // SAFETY: a valid tensor's shape has ndim values.
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
    }
}

fn tensor_strides(t: &DLTensor) -> Option<&[i64]> {
    if t.ndim <= 0 {
        Some(&[])
    } else if t.strides.is_null() {
        None
    } else {
        // SAFETY: a valid tensor's strides have ndim values.
        Some(unsafe { std::slice::from_raw_parts(t.strides, t.ndim as usize) })
    }
}

/// An owned `DLManagedTensorVersioned`: `Drop` runs its deleter exactly
/// once; `into_raw` hands it on to a consumer instead.
#[derive(Debug)]
pub struct ManagedTensor {
    raw: NonNull<DLManagedTensorVersioned>,
}

// SAFETY: DLPack deleters may run on any thread; the struct is only read.
unsafe impl Send for ManagedTensor {}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        // SAFETY: we own it; the call reads only the stable prefix.
        unsafe { ffi::dlb_managed_free_versioned(self.raw.as_ptr()) };
    }
}

impl ManagedTensor {
    /// `dlb_export_versioned`.
    pub fn export(buffer: &Buffer, options: &ExportOptions) -> Result<ManagedTensor> {
        let mut out = ptr::null_mut();
        // SAFETY: live buffer handle, valid options, writable out.
        check(unsafe { ffi::dlb_export_versioned(buffer.as_ptr(), options.as_raw(), &mut out) })?;
        NonNull::new(out)
            .map(|raw| ManagedTensor { raw })
            .ok_or_else(|| Error::new(Status::Internal, "export returned OK and NULL"))
    }

    /// Takes ownership of a managed tensor (None for NULL).
    ///
    /// # Safety
    /// `ptr` must be a valid managed tensor the caller owns; its deleter must
    /// be safe to call from any thread. Only the stable prefix is read when
    /// its major version is not 1.
    pub unsafe fn from_raw(ptr: *mut DLManagedTensorVersioned) -> Option<ManagedTensor> {
        NonNull::new(ptr).map(|raw| ManagedTensor { raw })
    }

    /// Hands the struct on; whoever receives it must call the deleter once.
    pub fn into_raw(self) -> *mut DLManagedTensorVersioned {
        let p = self.raw.as_ptr();
        mem::forget(self);
        p
    }

    pub fn as_ptr(&self) -> *mut DLManagedTensorVersioned {
        self.raw.as_ptr()
    }

    pub fn version(&self) -> DLPackVersion {
        // SAFETY: the version is in the stable prefix.
        unsafe { (*self.raw.as_ptr()).version }
    }

    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub fn flags(&self) -> u64 {
        // SAFETY: the flags are in the stable prefix.
        unsafe { (*self.raw.as_ptr()).flags }
    }

    pub fn is_read_only(&self) -> bool {
        self.flags() & ffi::DLPACK_FLAG_BITMASK_READ_ONLY != 0
    }

    pub fn is_copied(&self) -> bool {
        self.flags() & ffi::DLPACK_FLAG_BITMASK_IS_COPIED != 0
    }

    /// The tensor, or None when the major version is not 1 (then only the
    /// stable prefix may be read).
    pub fn dl_tensor(&self) -> Option<&DLTensor> {
        if self.version().major != 1 {
            return None;
        }
        // SAFETY: a major-1 struct has its dl_tensor there.
        Some(unsafe { &(*self.raw.as_ptr()).dl_tensor })
    }

    pub fn shape(&self) -> Option<&[i64]> {
        self.dl_tensor().map(tensor_shape)
    }

    /// Strides in elements; Some(&[]) for 0-d; None for unknown versions or
    /// NULL strides (compact row-major).
    pub fn strides(&self) -> Option<&[i64]> {
        self.dl_tensor().and_then(tensor_strides)
    }

    pub fn dtype(&self) -> Option<DLDataType> {
        self.dl_tensor().map(|t| t.dtype)
    }

    pub fn device(&self) -> Option<DLDevice> {
        self.dl_tensor().map(|t| t.device)
    }

    /// `data + byte_offset`.
    pub fn data_ptr(&self) -> Option<*mut u8> {
        self.dl_tensor().map(|t| (t.data as *mut u8).wrapping_add(t.byte_offset as usize))
    }

    /// Imports this tensor. On failure the tensor is freed (its deleter runs)
    /// and the error returned; use `import_versioned` to keep it instead.
    pub fn into_buffer(self, options: &ImportOptions) -> Result<Buffer> {
        // SAFETY: we own a valid tensor; on success the buffer owns it.
        match unsafe { import_versioned(self.raw.as_ptr(), options) } {
            Ok(b) => {
                mem::forget(self);
                Ok(b)
            }
            Err(e) => Err(e),
        }
    }
}

/// An owned legacy `DLManagedTensor`: `Drop` runs its deleter once.
#[derive(Debug)]
pub struct LegacyManagedTensor {
    raw: NonNull<DLManagedTensor>,
}

// SAFETY: as for ManagedTensor.
unsafe impl Send for LegacyManagedTensor {}

impl Drop for LegacyManagedTensor {
    fn drop(&mut self) {
        // SAFETY: we own it.
        unsafe { ffi::dlb_managed_free_legacy(self.raw.as_ptr()) };
    }
}

impl LegacyManagedTensor {
    /// `dlb_export_legacy`.
    pub fn export(buffer: &Buffer, options: &ExportOptions) -> Result<LegacyManagedTensor> {
        let mut out = ptr::null_mut();
        // SAFETY: live buffer handle, valid options, writable out.
        check(unsafe { ffi::dlb_export_legacy(buffer.as_ptr(), options.as_raw(), &mut out) })?;
        NonNull::new(out)
            .map(|raw| LegacyManagedTensor { raw })
            .ok_or_else(|| Error::new(Status::Internal, "export returned OK and NULL"))
    }

    /// Takes ownership of a legacy managed tensor (None for NULL).
    ///
    /// # Safety
    /// As for `ManagedTensor::from_raw`.
    pub unsafe fn from_raw(ptr: *mut DLManagedTensor) -> Option<LegacyManagedTensor> {
        NonNull::new(ptr).map(|raw| LegacyManagedTensor { raw })
    }

    pub fn into_raw(self) -> *mut DLManagedTensor {
        let p = self.raw.as_ptr();
        mem::forget(self);
        p
    }

    pub fn as_ptr(&self) -> *mut DLManagedTensor {
        self.raw.as_ptr()
    }

    pub fn dl_tensor(&self) -> &DLTensor {
        // SAFETY: we own a valid struct.
        unsafe { &(*self.raw.as_ptr()).dl_tensor }
    }

    pub fn shape(&self) -> &[i64] {
        tensor_shape(self.dl_tensor())
    }

    pub fn strides(&self) -> Option<&[i64]> {
        tensor_strides(self.dl_tensor())
    }

    /// Imports this tensor; on failure it is freed and the error returned.
    pub fn into_buffer(self, options: &ImportOptions) -> Result<Buffer> {
        // SAFETY: we own a valid tensor; on success the buffer owns it.
        match unsafe { import_legacy(self.raw.as_ptr(), options) } {
            Ok(b) => {
                mem::forget(self);
                Ok(b)
            }
            Err(e) => Err(e),
        }
    }
}
