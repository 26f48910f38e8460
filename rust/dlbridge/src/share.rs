//! Sharing buffers with other processes (Linux; `include/dlbridge/share.h`).
//!
//! ```no_run
//! use dlbridge::share;
//! use dlbridge::DLDataType;
//! let f32 = DLDataType { code: 2, bits: 32, lanes: 1 };
//! use dlbridge::ShareFlags;
//! let buf = share::alloc_shared(f32, &[4, 4]).unwrap();     // in shared memory
//! let d = share::share(&buf, ShareFlags::empty()).unwrap(); // fd + description
//! assert_eq!(d.kind().unwrap(), share::Kind::Host);
//! let same = d.open(ShareFlags::empty()).unwrap();          // what a receiver does
//! assert_eq!(same.shape(), &[4, 4]);
//! ```
//!
//! A [`Descriptor`] owns its file descriptor, if it has one, and closes it
//! on `Drop`; a [`Buffer`] opened from it keeps a duplicate of its own, so
//! the descriptor may be dropped right after opening or sending.
//!
//! A [`Ticket`] hands a buffer to another process of this machine through
//! any channel that carries bytes (a pipe, a Python `multiprocessing`
//! queue): this process keeps the memory file until the receiver's
//! [`Ticket::open`] takes it, or [`Ticket::withdraw`] /
//! [`withdraw_tickets`] take it back (docs/sharing.md, "Tickets"); a
//! process about to exit may wait for its receivers ([`wait_tickets`]).
//!
//! CUDA device memory of the library's CUDA backend is shared through CUDA
//! IPC: its descriptor has no file ([`Descriptor::fd`] is `None`) and its
//! description carries the CUDA IPC memory and event handles
//! ([`Kind::CudaIpc`]). It is shared, sent, received and opened with the
//! same calls; CUDA opens it only in another process.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::time::Duration;

use crate::error::{check, Error, Status};
use crate::{Buffer, DLDataType, DLDevice, Result, ShareFlags};

use crate::ffi as sys;

/// What a description's memory is (`DLB_SHARE_KIND_*`), as the library
/// reads it from the description ([`description_kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Host memory in the descriptor's file (`DLB_SHARE_KIND_HOST`).
    Host,
    /// CUDA device memory named by the CUDA IPC handles the description
    /// carries; the descriptor has no file (`DLB_SHARE_KIND_CUDA_IPC`).
    CudaIpc,
}

/// `dlb_share_description_kind`: the kind of a description, after the
/// library has checked it as `dlb_buffer_open_shared` does before it looks
/// at a file or a driver (so a malformed description is an error here).
pub fn description_kind(description: &[u8]) -> Result<Kind> {
    let mut kind = u32::MAX;
    // SAFETY: description is read during the call; kind is writable.
    check(unsafe { sys::dlb_share_description_kind(description.as_ptr().cast(), description.len(), &mut kind) })?;
    match kind {
        sys::DLB_SHARE_KIND_HOST => Ok(Kind::Host),
        sys::DLB_SHARE_KIND_CUDA_IPC => Ok(Kind::CudaIpc),
        other => Err(Error::new(Status::Internal, format!("the library reports share description kind {other}"))),
    }
}

/// A shared buffer's descriptor: its memory file (none for a CUDA IPC
/// description) and the description of the tensor.
#[derive(Debug)]
pub struct Descriptor {
    fd: Option<OwnedFd>,
    description: Vec<u8>,
}

impl Descriptor {
    /// A descriptor from its parts (received some other way): `None` for a
    /// description without a file (CUDA IPC). Nothing is checked here; the
    /// library checks the pair when it is opened or sent.
    pub fn from_parts(fd: Option<OwnedFd>, description: Vec<u8>) -> Descriptor {
        Descriptor { fd, description }
    }

    /// The parts, the file descriptor (if any) handed to the caller.
    pub fn into_parts(self) -> (Option<OwnedFd>, Vec<u8>) {
        (self.fd, self.description)
    }

    /// The description's bytes.
    pub fn description(&self) -> &[u8] {
        &self.description
    }

    /// The memory file (still owned by the descriptor); `None` when the
    /// descriptor has none (CUDA IPC).
    pub fn fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// [`description_kind`] of the description.
    pub fn kind(&self) -> Result<Kind> {
        description_kind(&self.description)
    }

    /// `dlb_buffer_open_shared`: maps the memory in this process (opens the
    /// CUDA IPC handles for a CUDA description).
    pub fn open(&self, flags: ShareFlags) -> Result<Buffer> {
        open_shared(self.fd(), &self.description, flags)
    }

    /// Takes a descriptor the library filled in (its fd, when not -1, is
    /// new and ours).
    fn from_c(d: &sys::dlb_share_descriptor) -> Descriptor {
        // SAFETY: the library gave us this new descriptor to own.
        let fd = (d.fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(d.fd) });
        let n = (d.size as usize).min(sys::DLB_SHARE_DESCRIPTION_MAX);
        Descriptor { fd, description: d.description[..n].to_vec() }
    }

    fn to_c(&self) -> sys::dlb_share_descriptor {
        let mut d = blank();
        d.fd = self.fd().unwrap_or(-1);
        let n = self.description.len().min(sys::DLB_SHARE_DESCRIPTION_MAX);
        d.description[..n].copy_from_slice(&self.description[..n]);
        // A longer description keeps its true size: the library refuses it.
        d.size = u32::try_from(self.description.len()).unwrap_or(u32::MAX);
        d
    }
}

fn blank() -> sys::dlb_share_descriptor {
    sys::dlb_share_descriptor { fd: -1, size: 0, description: [0; sys::DLB_SHARE_DESCRIPTION_MAX] }
}

/// `dlb_buffer_alloc_shared`: a zero-filled host tensor in shared memory.
pub fn alloc_shared(dtype: DLDataType, shape: &[i64]) -> Result<Buffer> {
    let mut raw = ptr::null_mut();
    let ndim = i32::try_from(shape.len())
        .map_err(|_| Error::new(Status::InvalidArgument, format!("ndim {} is too large", shape.len())))?;
    // SAFETY: shape is read during the call; raw is writable.
    check(unsafe { sys::dlb_buffer_alloc_shared(DLDevice::CPU, dtype, ndim, shape.as_ptr(), &mut raw) })?;
    // SAFETY: a new handle the library just gave us.
    unsafe { Buffer::from_new(raw) }
}

/// `dlb_buffer_copy_shared`: a new shared buffer with `buffer`'s elements
/// (compact), read-only when `flags` has `ShareFlags::READ_ONLY` or `buffer`
/// is; `buffer` stays the caller's.
pub fn copy_shared(buffer: &Buffer, flags: ShareFlags) -> Result<Buffer> {
    let mut raw = ptr::null_mut();
    // SAFETY: a live handle; raw is writable.
    check(unsafe { sys::dlb_buffer_copy_shared(buffer.as_ptr(), flags.bits(), &mut raw) })?;
    // SAFETY: a new handle the library just gave us.
    unsafe { Buffer::from_new(raw) }
}

/// `dlb_buffer_share`: the descriptor of `buffer` (flags
/// `ShareFlags::COPY_IF_NEEDED`, `ShareFlags::READ_ONLY`). CUDA device memory
/// of the library's CUDA backend gives a CUDA IPC descriptor (no file);
/// keep `buffer` alive until every receiver has released what it opened.
pub fn share(buffer: &Buffer, flags: ShareFlags) -> Result<Descriptor> {
    let mut d = blank();
    // SAFETY: a live handle; d is writable.
    check(unsafe { sys::dlb_buffer_share(buffer.as_ptr(), flags.bits(), &mut d) })?;
    Ok(Descriptor::from_c(&d))
}

/// `dlb_buffer_open_shared`: `fd` stays the caller's; `None` for a
/// description without a file (CUDA IPC). `ShareFlags::TAKE_FD` is refused
/// (`Status::InvalidArgument`): the fd is borrowed here, and the library
/// would close it.
pub fn open_shared(fd: Option<RawFd>, description: &[u8], flags: ShareFlags) -> Result<Buffer> {
    if flags.contains(ShareFlags::TAKE_FD) {
        return Err(Error::new(
            Status::InvalidArgument,
            "open_shared borrows fd: DLB_SHARE_TAKE_FD would let the library close a descriptor it does not own",
        ));
    }
    let mut raw = ptr::null_mut();
    let fd = fd.unwrap_or(-1);
    // SAFETY: description is read during the call; raw is writable.
    check(unsafe {
        sys::dlb_buffer_open_shared(fd, description.as_ptr().cast(), description.len(), flags.bits(), &mut raw)
    })?;
    // SAFETY: a new handle the library just gave us.
    unsafe { Buffer::from_new(raw) }
}

/// `dlb_share_send` over a connected Unix socket.
pub fn send(socket: &impl AsRawFd, descriptor: &Descriptor) -> Result<()> {
    let d = descriptor.to_c();
    // SAFETY: d is read during the call; its fd stays the descriptor's.
    check(unsafe { sys::dlb_share_send(socket.as_raw_fd(), &d) })
}

/// `dlb_share_recv`: the next descriptor, `None` at the end of the
/// stream. A CUDA IPC description arrives without a file (its
/// [`Descriptor::fd`] is `None`); the library refuses one that does not
/// match its kind.
pub fn recv(socket: &impl AsRawFd) -> Result<Option<Descriptor>> {
    let mut d = blank();
    // SAFETY: d is writable.
    check(unsafe { sys::dlb_share_recv(socket.as_raw_fd(), &mut d) })?;
    if d.fd < 0 && d.size == 0 {
        return Ok(None);
    }
    Ok(Some(Descriptor::from_c(&d)))
}

/// `dlb_shared_mappings`: live shared mappings of this process.
pub fn shared_mappings() -> i64 {
    // SAFETY: no arguments.
    unsafe { sys::dlb_shared_mappings() }
}

/// A ticket for one buffer (`dlb_share_ticket_issue`): plain bytes, to be
/// sent as they are to one process of this machine, which opens it once
/// with [`Ticket::open`]. The issuing process keeps the buffer's memory
/// file (in the library's ticket server) until then, or until it exits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket(Vec<u8>);

impl Ticket {
    /// `dlb_share_ticket_issue` (`ShareFlags::COPY_IF_NEEDED`,
    /// `ShareFlags::READ_ONLY`); `buffer` stays the caller's.
    pub fn issue(buffer: &Buffer, flags: ShareFlags) -> Result<Ticket> {
        let mut t = sys::dlb_share_ticket { size: 0, bytes: [0; sys::DLB_SHARE_TICKET_MAX] };
        // SAFETY: a live handle; t is writable.
        check(unsafe { sys::dlb_share_ticket_issue(buffer.as_ptr(), flags.bits(), &mut t) })?;
        Ok(Ticket(t.bytes[..(t.size as usize).min(sys::DLB_SHARE_TICKET_MAX)].to_vec()))
    }

    /// A ticket received as bytes; the library checks it when it is opened.
    pub fn from_bytes(bytes: &[u8]) -> Ticket {
        Ticket(bytes.to_vec())
    }

    /// The ticket's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// `dlb_share_ticket_open` (`ShareFlags::READ_ONLY`; the issuer's
    /// server hands the file over, once): the buffer, mapped in this
    /// process.
    pub fn open(&self, flags: ShareFlags) -> Result<Buffer> {
        let mut raw = ptr::null_mut();
        // SAFETY: the bytes are read during the call; raw is writable.
        check(unsafe { sys::dlb_share_ticket_open(self.0.as_ptr().cast(), self.0.len(), flags.bits(), &mut raw) })?;
        // SAFETY: a new handle the library just gave us.
        unsafe { Buffer::from_new(raw) }
    }

    /// `dlb_share_ticket_withdraw`: takes back a ticket this process
    /// issued and nobody opened yet (its file is closed; opening it fails
    /// with `Status::Deleted`). `Status::Deleted` when it was opened or
    /// withdrawn already, `Status::InvalidArgument` for another process's.
    pub fn withdraw(&self) -> Result<()> {
        // SAFETY: the bytes are read during the call; the count may be NULL.
        check(unsafe { sys::dlb_share_ticket_withdraw(self.0.as_ptr().cast(), self.0.len(), ptr::null_mut()) })
    }
}

/// `dlb_share_ticket_withdraw(NULL, ...)`: takes back every ticket this
/// process issued that is not opened yet; returns how many.
pub fn withdraw_tickets() -> i64 {
    let mut n = 0;
    // SAFETY: NULL ticket (every one); n is writable. It cannot fail so.
    unsafe { sys::dlb_share_ticket_withdraw(ptr::null(), 0, &mut n) };
    n
}

/// `dlb_share_ticket_wait`: waits up to `timeout` until every ticket this
/// process issued was opened or withdrawn (for a process about to exit,
/// whose files go with it); returns how many are still unopened.
pub fn wait_tickets(timeout: Duration) -> i64 {
    let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
    // SAFETY: no pointers.
    unsafe { sys::dlb_share_ticket_wait(ms) }
}

/// `dlb_share_ticket_server`: `(held, connections, links)` of this
/// process's ticket server (files kept for tickets not yet opened, the
/// connection it is answering now: 0 or 1, and 0: no connection to other
/// issuers is kept), for leak checks.
pub fn ticket_server() -> (i64, i64, i64) {
    let (mut held, mut connections, mut links) = (0, 0, 0);
    // SAFETY: three writable counts.
    unsafe { sys::dlb_share_ticket_server(&mut held, &mut connections, &mut links) };
    (held, connections, links)
}
