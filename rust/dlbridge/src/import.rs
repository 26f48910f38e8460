//! Imports: managed tensors from any producer in, as buffers.

use std::mem;
use std::ptr;

use crate::buffer::Buffer;
use crate::error::{check, Result};
use crate::ffi::{self, DLManagedTensor, DLManagedTensorVersioned};
use crate::options::ImportOptions;
use crate::tensor::{LegacyManagedTensor, ManagedTensor};

/// `dlb_import_versioned`: takes a DLPack 1.x managed tensor in.
///
/// On success the returned buffer owns `tensor` and runs its deleter once
/// when the last reference goes. On failure the caller still owns `tensor`.
///
/// # Safety
/// `tensor` must point at a valid managed tensor the caller owns, whose
/// memory stays valid until its deleter runs, and whose deleter may be called
/// from any thread. (Reading the buffer through a borrowed slice also needs
/// its producer not to write meanwhile: see [`Buffer::as_slice`].)
pub unsafe fn import_versioned(tensor: *mut DLManagedTensorVersioned, options: &ImportOptions) -> Result<Buffer> {
    let mut out = ptr::null_mut();
    // SAFETY: per the contract above.
    check(unsafe { ffi::dlb_import_versioned(tensor, options.as_raw(), &mut out) })?;
    // SAFETY: a new handle owned by us.
    unsafe { Buffer::from_new(out) }
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
    unsafe { Buffer::from_new(out) }
}

impl ManagedTensor {
    /// Imports this tensor. On failure the tensor is freed (its deleter runs)
    /// and the error returned; use `import_versioned` to keep it instead.
    pub fn into_buffer(self, options: &ImportOptions) -> Result<Buffer> {
        // SAFETY: we own a valid tensor; on success the buffer owns it.
        let b = unsafe { import_versioned(self.as_ptr(), options) }?;
        mem::forget(self);
        Ok(b)
    }
}

impl LegacyManagedTensor {
    /// Imports this tensor; on failure it is freed and the error returned.
    pub fn into_buffer(self, options: &ImportOptions) -> Result<Buffer> {
        // SAFETY: we own a valid tensor; on success the buffer owns it.
        let b = unsafe { import_legacy(self.as_ptr(), options) }?;
        mem::forget(self);
        Ok(b)
    }
}
