//! Safe Rust bindings to dlbridge: DLPack export and import with correct
//! lifetimes, over the library's stable C ABI.
//!
//! ```no_run
//! use dlbridge::{Buffer, ExportOptions, ImportOptions};
//! let buf = Buffer::wrap_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! let exported = buf.export(&ExportOptions::new()).unwrap();  // zero-copy
//! let again = exported.into_buffer(&ImportOptions::new()).unwrap();
//! assert_eq!(again.get::<f32>(&[1, 0]).unwrap(), 3.0);
//! ```
//!
//! The raw declarations are the `dlbridge-sys` crate, re-exported as
//! [`ffi`]; everything else is safe unless marked `unsafe`.

pub use dlbridge_sys as ffi;

mod buffer;
mod dtype;
mod error;
mod flags;
mod import;
mod options;
#[cfg(feature = "python")]
pub mod python;
#[cfg(all(unix, feature = "share"))]
pub mod share;
mod tensor;

use std::ffi::CStr;

pub use buffer::{compact_strides, describe_layout, Buffer};
pub use dtype::{DataTypeExt, DeviceExt, DeviceInfo, Element};

/// The traits that give `DLDataType` and `DLDevice` the library's answers.
pub mod prelude {
    pub use crate::dtype::{DataTypeExt, DeviceExt};
}
pub use error::{status_name, Error, Result, Status};
pub use ffi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
#[cfg(all(unix, feature = "share"))]
pub use flags::ShareFlags;
pub use flags::{BufferFlags, DeviceFlags, DlpackFlags, ValidateFlags};
pub use import::{import_legacy, import_versioned};
pub use options::{CopyPolicy, ExportOptions, ImportOptions};
pub use tensor::{LegacyManagedTensor, ManagedTensor};

/// The library's version, "MAJOR.MINOR.PATCH".
pub fn version_string() -> &'static str {
    // SAFETY: a static string, never NULL.
    unsafe { CStr::from_ptr(ffi::dlb_version_string()) }.to_str().unwrap_or("")
}

/// The library's version as major * 10000 + minor * 100 + patch.
pub fn version_number() -> u32 {
    // SAFETY: no arguments.
    unsafe { ffi::dlb_version_number() }
}

/// The DLPack version written into versioned exports.
pub fn dlpack_version() -> DLPackVersion {
    // SAFETY: no arguments.
    unsafe { ffi::dlb_dlpack_version() }
}

/// Managed tensors exported by the library whose deleter has not run.
pub fn live_exports() -> i64 {
    // SAFETY: no arguments.
    unsafe { ffi::dlb_live_exports() }
}

/// `dlb_validate`: checks a tensor against the DLPack rules, and what
/// `flags` adds.
///
/// # Safety
/// `shape` and `strides` must be NULL or point at `ndim` readable values.
pub unsafe fn validate(tensor: &DLTensor, flags: ValidateFlags) -> Result<()> {
    // SAFETY: per the contract above.
    error::check(unsafe { ffi::dlb_validate(tensor, flags.bits()) })
}
