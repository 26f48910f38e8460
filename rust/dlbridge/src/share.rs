//! Sharing buffers with other processes (Linux; `include/dlbridge/share.h`).
//!
//! ```no_run
//! use dlbridge::share;
//! use dlbridge::DLDataType;
//! let f32 = DLDataType { code: 2, bits: 32, lanes: 1 };
//! let buf = share::alloc_shared(f32, &[4, 4]).unwrap();     // in shared memory
//! let d = share::share(&buf, 0).unwrap();                   // fd + description
//! let same = d.open(0).unwrap();                            // what a receiver does
//! assert_eq!(same.shape(), &[4, 4]);
//! ```
//!
//! A [`Descriptor`] owns its file descriptor and closes it on `Drop`; a
//! [`Buffer`] opened from it keeps a duplicate of its own, so the
//! descriptor may be dropped right after opening or sending.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use crate::error::check;
use crate::{Buffer, DLDataType, DLDevice, Result};

use crate::ffi as sys;

pub use sys::{DLB_SHARE_COPY_IF_NEEDED, DLB_SHARE_READ_ONLY};

/// A shared buffer's descriptor: its memory file and the description of
/// the tensor over it.
#[derive(Debug)]
pub struct Descriptor {
    fd: OwnedFd,
    description: Vec<u8>,
}

impl Descriptor {
    /// A descriptor from its parts (received some other way).
    pub fn from_parts(fd: OwnedFd, description: Vec<u8>) -> Descriptor {
        Descriptor { fd, description }
    }

    /// The description's bytes.
    pub fn description(&self) -> &[u8] {
        &self.description
    }

    /// The memory file (still owned by the descriptor).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// `dlb_buffer_open_shared`: maps the memory in this process.
    pub fn open(&self, flags: u64) -> Result<Buffer> {
        open_shared(self.fd(), &self.description, flags)
    }

    fn from_c(d: &sys::dlb_share_descriptor) -> Descriptor {
        // SAFETY: the library gave us this new descriptor to own.
        let fd = unsafe { OwnedFd::from_raw_fd(d.fd) };
        Descriptor { fd, description: d.description[..d.size as usize].to_vec() }
    }

    fn to_c(&self) -> sys::dlb_share_descriptor {
        let mut d =
            sys::dlb_share_descriptor { fd: self.fd(), size: 0, description: [0; sys::DLB_SHARE_DESCRIPTION_MAX] };
        let n = self.description.len().min(sys::DLB_SHARE_DESCRIPTION_MAX);
        d.description[..n].copy_from_slice(&self.description[..n]);
        d.size = self.description.len() as u32;
        d
    }
}

fn blank() -> sys::dlb_share_descriptor {
    sys::dlb_share_descriptor { fd: -1, size: 0, description: [0; sys::DLB_SHARE_DESCRIPTION_MAX] }
}

fn take_buffer(raw: *mut crate::ffi::dlb_buffer) -> Result<Buffer> {
    // SAFETY: a new handle the library just gave us.
    match unsafe { Buffer::from_raw(raw) } {
        Ok(b) => Ok(b),
        Err(e) => {
            // SAFETY: still ours on failure.
            unsafe { crate::ffi::dlb_buffer_release(raw) };
            Err(e)
        }
    }
}

/// `dlb_buffer_alloc_shared`: a zero-filled host tensor in shared memory.
pub fn alloc_shared(dtype: DLDataType, shape: &[i64]) -> Result<Buffer> {
    let mut raw = ptr::null_mut();
    let cpu = DLDevice { device_type: 1, device_id: 0 };
    // SAFETY: shape is read during the call; raw is writable.
    check(unsafe { sys::dlb_buffer_alloc_shared(cpu, dtype, shape.len() as i32, shape.as_ptr(), &mut raw) })?;
    take_buffer(raw)
}

/// `dlb_buffer_share`: the descriptor of `buffer` (flags
/// `DLB_SHARE_COPY_IF_NEEDED`, `DLB_SHARE_READ_ONLY`).
pub fn share(buffer: &Buffer, flags: u64) -> Result<Descriptor> {
    let mut d = blank();
    // SAFETY: a live handle; d is writable.
    check(unsafe { sys::dlb_buffer_share(buffer.as_ptr(), flags, &mut d) })?;
    Ok(Descriptor::from_c(&d))
}

/// `dlb_buffer_open_shared`: `fd` stays the caller's.
pub fn open_shared(fd: RawFd, description: &[u8], flags: u64) -> Result<Buffer> {
    let mut raw = ptr::null_mut();
    // SAFETY: description is read during the call; raw is writable.
    check(unsafe { sys::dlb_buffer_open_shared(fd, description.as_ptr(), description.len(), flags, &mut raw) })?;
    take_buffer(raw)
}

/// `dlb_share_send` over a connected Unix socket.
pub fn send(socket: &impl AsRawFd, descriptor: &Descriptor) -> Result<()> {
    let d = descriptor.to_c();
    // SAFETY: d is read during the call; its fd stays the descriptor's.
    check(unsafe { sys::dlb_share_send(socket.as_raw_fd(), &d) })
}

/// `dlb_share_recv`: the next descriptor, `None` at the end of the stream.
pub fn recv(socket: &impl AsRawFd) -> Result<Option<Descriptor>> {
    let mut d = blank();
    // SAFETY: d is writable.
    check(unsafe { sys::dlb_share_recv(socket.as_raw_fd(), &mut d) })?;
    if d.fd < 0 && d.size == 0 {
        return Ok(None);
    }
    if d.fd < 0 {
        // A CUDA IPC description (no file): Descriptor owns a file for now.
        return Err(crate::error::Error::new(
            crate::error::Status::UnsupportedDevice,
            "a CUDA IPC share description arrived; the Rust crate shares host memory only",
        ));
    }
    Ok(Some(Descriptor::from_c(&d)))
}

/// `dlb_shared_mappings`: live shared mappings of this process.
pub fn shared_mappings() -> i64 {
    // SAFETY: no arguments.
    unsafe { sys::dlb_shared_mappings() }
}
