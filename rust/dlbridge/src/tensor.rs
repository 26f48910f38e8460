//! Managed tensors: owned DLPack structs whose `Drop` runs the deleter.
//! Made by `Buffer::export` / `Buffer::export_legacy`, or taken over from
//! a producer with `from_raw`; `into_buffer` (in `import`) takes them in.

use std::mem;
use std::ptr::NonNull;

use crate::ffi::{self, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use crate::flags::DlpackFlags;

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

    /// The tensor's `DLPACK_FLAG_BITMASK_*` bits (a newer producer's
    /// unnamed bits kept).
    pub fn flags(&self) -> DlpackFlags {
        // SAFETY: the flags are in the stable prefix.
        DlpackFlags::from_bits_retain(unsafe { (*self.raw.as_ptr()).flags })
    }

    pub fn is_read_only(&self) -> bool {
        self.flags().contains(DlpackFlags::READ_ONLY)
    }

    pub fn is_copied(&self) -> bool {
        self.flags().contains(DlpackFlags::IS_COPIED)
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
}
