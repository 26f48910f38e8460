//! Status codes and the error type.

use std::ffi::CStr;
use std::fmt;

use crate::ffi;

/// Why a dlbridge call failed: a non-OK status code (the numbers are fixed
/// by the C ABI; success is `Ok(_)` of a [`Result`], not a status). New
/// codes may come with new library versions, hence `#[non_exhaustive]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    OutOfMemory,
    Deleted,
    NotZeroCopy,
    UnsupportedDtype,
    UnsupportedDevice,
    UnsupportedLayout,
    ReadOnly,
    Version,
    Overflow,
    Malformed,
    Alignment,
    Backend,
    Internal,
    /// A number this crate does not know (a newer library).
    Unknown(i32),
}

impl Status {
    /// The status for a C `dlb_status` value; `None` for `DLB_OK`.
    pub fn from_code(code: ffi::dlb_status) -> Option<Status> {
        Some(match code {
            ffi::DLB_OK => return None,
            ffi::DLB_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            ffi::DLB_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            ffi::DLB_ERR_DELETED => Status::Deleted,
            ffi::DLB_ERR_NOT_ZERO_COPY => Status::NotZeroCopy,
            ffi::DLB_ERR_UNSUPPORTED_DTYPE => Status::UnsupportedDtype,
            ffi::DLB_ERR_UNSUPPORTED_DEVICE => Status::UnsupportedDevice,
            ffi::DLB_ERR_UNSUPPORTED_LAYOUT => Status::UnsupportedLayout,
            ffi::DLB_ERR_READ_ONLY => Status::ReadOnly,
            ffi::DLB_ERR_VERSION => Status::Version,
            ffi::DLB_ERR_OVERFLOW => Status::Overflow,
            ffi::DLB_ERR_MALFORMED => Status::Malformed,
            ffi::DLB_ERR_ALIGNMENT => Status::Alignment,
            ffi::DLB_ERR_BACKEND => Status::Backend,
            ffi::DLB_ERR_INTERNAL => Status::Internal,
            other => Status::Unknown(other),
        })
    }

    /// The C `dlb_status` value.
    pub fn code(self) -> ffi::dlb_status {
        match self {
            Status::InvalidArgument => ffi::DLB_ERR_INVALID_ARGUMENT,
            Status::OutOfMemory => ffi::DLB_ERR_OUT_OF_MEMORY,
            Status::Deleted => ffi::DLB_ERR_DELETED,
            Status::NotZeroCopy => ffi::DLB_ERR_NOT_ZERO_COPY,
            Status::UnsupportedDtype => ffi::DLB_ERR_UNSUPPORTED_DTYPE,
            Status::UnsupportedDevice => ffi::DLB_ERR_UNSUPPORTED_DEVICE,
            Status::UnsupportedLayout => ffi::DLB_ERR_UNSUPPORTED_LAYOUT,
            Status::ReadOnly => ffi::DLB_ERR_READ_ONLY,
            Status::Version => ffi::DLB_ERR_VERSION,
            Status::Overflow => ffi::DLB_ERR_OVERFLOW,
            Status::Malformed => ffi::DLB_ERR_MALFORMED,
            Status::Alignment => ffi::DLB_ERR_ALIGNMENT,
            Status::Backend => ffi::DLB_ERR_BACKEND,
            Status::Internal => ffi::DLB_ERR_INTERNAL,
            Status::Unknown(code) => code,
        }
    }

    /// The constant's name as the library spells it ("DLB_ERR_DELETED").
    pub fn name(self) -> &'static str {
        status_name(self.code())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `dlb_status_name()`: the name of any status number.
pub fn status_name(code: ffi::dlb_status) -> &'static str {
    // SAFETY: the library returns a static NUL-terminated string for any value.
    unsafe {
        let p = ffi::dlb_status_name(code);
        if p.is_null() {
            return "DLB_UNKNOWN_STATUS";
        }
        CStr::from_ptr(p).to_str().unwrap_or("DLB_UNKNOWN_STATUS")
    }
}

/// A failed call: the status and the library's message naming what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    /// An error raised by this crate itself, before reaching the library.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// Why the call failed.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The library's words for what was wrong (may be empty).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error of the call that just returned `code` on this thread; the
    /// thread's last-error slot is cleared so that it cannot go stale.
    pub(crate) fn from_last(code: ffi::dlb_status) -> Error {
        // SAFETY: the message is never NULL and valid until the next call on
        // this thread; it is copied before that.
        let message = unsafe {
            let p = ffi::dlb_last_error_message();
            let m = if p.is_null() { String::new() } else { CStr::from_ptr(p).to_string_lossy().into_owned() };
            ffi::dlb_clear_last_error();
            m
        };
        // A caller passes a failed call's code; DLB_OK here would be a bug of
        // this crate, reported as the library's internal error.
        Error { status: Status::from_code(code).unwrap_or(Status::Internal), message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status.name())
        } else {
            write!(f, "{}: {}", self.status.name(), self.message)
        }
    }
}

impl std::error::Error for Error {}

/// The result of a fallible dlbridge call.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a C status into a `Result`, reading the message on failure.
pub(crate) fn check(code: ffi::dlb_status) -> Result<()> {
    if code == ffi::DLB_OK {
        Ok(())
    } else {
        Err(Error::from_last(code))
    }
}
