//! `Buffer`: an owned, reference-counted handle on a `dlb_buffer`.

use std::ffi::c_void;
use std::mem::{self, MaybeUninit};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::dtype::{DataTypeExt, Element};
use crate::error::{check, Error, Result, Status};
use crate::ffi::{self, DLDataType, DLDevice, DLTensor};
use crate::flags::BufferFlags;
use crate::options::ExportOptions;
use crate::tensor::{LegacyManagedTensor, ManagedTensor};

/// Metadata of a buffer; it never changes once the buffer exists.
#[derive(Debug)]
struct Meta {
    device: DLDevice,
    dtype: DLDataType,
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// `data` of the C view, as an address (NULL: 0).
    data: usize,
    byte_offset: u64,
}

/// One reference to a dlbridge buffer.
///
/// `Clone` takes another reference (`dlb_buffer_retain`), `Drop` gives it
/// back (`dlb_buffer_release`). The memory lives until the last handle and
/// the last export are gone. Handles may be moved and shared across threads:
/// the library's counts are atomic.
pub struct Buffer {
    raw: NonNull<ffi::dlb_buffer>,
    meta: Arc<Meta>,
}

// SAFETY: the library's buffers are thread-safe (atomic reference counts,
// release callbacks allowed on any thread); `Meta` is read-only.
unsafe impl Send for Buffer {}
// SAFETY: as above; every method taking `&self` is thread-safe in C.
unsafe impl Sync for Buffer {}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("raw", &self.raw)
            .field("device", &self.meta.device)
            .field("dtype", &self.meta.dtype)
            .field("shape", &self.meta.shape)
            .field("strides", &self.meta.strides)
            .field("flags", &self.flags())
            .finish()
    }
}

impl Clone for Buffer {
    fn clone(&self) -> Buffer {
        // SAFETY: `raw` is a live handle we hold a reference on.
        unsafe { ffi::dlb_buffer_retain(self.raw.as_ptr()) };
        Buffer { raw: self.raw, meta: Arc::clone(&self.meta) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: we own exactly one reference.
        unsafe { ffi::dlb_buffer_release(self.raw.as_ptr()) };
    }
}

fn out_of_range(what: impl Into<String>) -> Error {
    Error::new(Status::InvalidArgument, what)
}

fn ndim_of(shape: &[i64]) -> Result<i32> {
    i32::try_from(shape.len()).map_err(|_| out_of_range(format!("ndim {} is too large", shape.len())))
}

/// `dlb_compact_strides`: the strides the library writes for a compact
/// row-major tensor of `shape`.
pub fn compact_strides(shape: &[i64]) -> Result<Vec<i64>> {
    let mut out = vec![0i64; shape.len()];
    // SAFETY: both slices hold ndim values.
    check(unsafe { ffi::dlb_compact_strides(ndim_of(shape)?, shape.as_ptr(), out.as_mut_ptr()) })?;
    Ok(out)
}

/// `dlb_layout_describe`: the library's arithmetic for a layout of `dtype`,
/// `shape` and `strides` (in elements; `None` is compact row-major) on the
/// CPU: element count, compact size, element width, contiguity, and the
/// range of element offsets a strided view reaches. Fails as the library
/// would for a buffer of that layout.
pub fn describe_layout(dtype: DLDataType, shape: &[i64], strides: Option<&[i64]>) -> Result<ffi::dlb_layout_info> {
    if let Some(s) = strides {
        if s.len() != shape.len() {
            return Err(out_of_range(format!("{} strides given for {} dimensions", s.len(), shape.len())));
        }
    }
    let view = DLTensor {
        data: ptr::null_mut(),
        device: DLDevice::CPU,
        ndim: ndim_of(shape)?,
        dtype,
        shape: if shape.is_empty() { ptr::null_mut() } else { shape.as_ptr() as *mut i64 },
        strides: match strides {
            Some(s) if !s.is_empty() => s.as_ptr() as *mut i64,
            _ => ptr::null_mut(),
        },
        byte_offset: 0,
    };
    let mut info = ffi::dlb_layout_info { struct_size: mem::size_of::<ffi::dlb_layout_info>(), ..Default::default() };
    // SAFETY: view's shape and strides point at ndim values (or are NULL);
    // the library only reads them; info is writable.
    check(unsafe { ffi::dlb_layout_describe(&view, &mut info) })?;
    Ok(info)
}

unsafe extern "C" fn release_boxed_slice<T>(ctx: *mut c_void) {
    // SAFETY: ctx came from Box::into_raw(Box<Box<[T]>>) in wrap_boxed_slice_strided.
    drop(unsafe { Box::from_raw(ctx as *mut Box<[T]>) });
}

type ReleaseClosure = Box<dyn FnOnce() + Send + 'static>;

unsafe extern "C" fn release_closure(ctx: *mut c_void) {
    // SAFETY: ctx came from Box::into_raw(Box<ReleaseClosure>) in from_raw_parts.
    let f = unsafe { Box::from_raw(ctx as *mut ReleaseClosure) };
    // A panic must not unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

impl Buffer {
    /// Takes over one reference to a C buffer handle.
    ///
    /// # Safety
    /// `raw` must be a live `dlb_buffer*` whose reference the caller owns;
    /// on success that reference belongs to the returned `Buffer`, on failure
    /// it stays the caller's.
    pub unsafe fn from_raw(raw: *mut ffi::dlb_buffer) -> Result<Buffer> {
        let raw = NonNull::new(raw).ok_or_else(|| out_of_range("buffer is NULL"))?;
        let mut t = MaybeUninit::<DLTensor>::uninit();
        // SAFETY: raw is live; t is writable.
        check(unsafe { ffi::dlb_buffer_dltensor(raw.as_ptr(), t.as_mut_ptr()) })?;
        // SAFETY: written on success.
        let t = unsafe { t.assume_init() };
        let n = t.ndim.max(0) as usize;
        // SAFETY: shape and strides point at ndim values inside the buffer
        // (strides always present when ndim > 0).
        let (shape, strides) = unsafe {
            if n == 0 {
                (Vec::new(), Vec::new())
            } else {
                (std::slice::from_raw_parts(t.shape, n).to_vec(), std::slice::from_raw_parts(t.strides, n).to_vec())
            }
        };
        let meta = Meta {
            device: t.device,
            dtype: t.dtype,
            shape,
            strides,
            data: t.data as usize,
            byte_offset: t.byte_offset,
        };
        Ok(Buffer { raw, meta: Arc::new(meta) })
    }

    /// Wraps a fresh handle returned by a successful C call: the one place
    /// the crate takes a new handle over (and releases it if that fails).
    ///
    /// # Safety
    /// `raw` must be a live handle whose one reference the caller owns and
    /// gives up here, on success and on failure.
    pub(crate) unsafe fn from_new(raw: *mut ffi::dlb_buffer) -> Result<Buffer> {
        // SAFETY: per the contract above.
        match unsafe { Buffer::from_raw(raw) } {
            Ok(b) => Ok(b),
            Err(e) => {
                // SAFETY: still ours on failure.
                unsafe { ffi::dlb_buffer_release(raw) };
                Err(e)
            }
        }
    }

    /// The C handle, still owned by `self`.
    pub fn as_ptr(&self) -> *mut ffi::dlb_buffer {
        self.raw.as_ptr()
    }

    /// Gives the reference up as a C handle (release it with
    /// `dlb_buffer_release` or `Buffer::from_raw`).
    pub fn into_raw(self) -> *mut ffi::dlb_buffer {
        let raw = self.raw.as_ptr();
        // Drop the metadata without releasing the handle.
        let meta = unsafe { ptr::read(&self.meta) };
        mem::forget(self);
        drop(meta);
        raw
    }

    /// `dlb_buffer_alloc`: zero-filled, row-major, 64-byte aligned host memory.
    pub fn alloc(dtype: DLDataType, shape: &[i64]) -> Result<Buffer> {
        let mut out = ptr::null_mut();
        let shape_ptr = if shape.is_empty() { ptr::null() } else { shape.as_ptr() };
        // SAFETY: shape has ndim values; out is writable.
        check(unsafe { ffi::dlb_buffer_alloc(DLDevice::CPU, dtype, ndim_of(shape)?, shape_ptr, &mut out) })?;
        // SAFETY: a new handle the library just gave us.
        unsafe { Buffer::from_new(out) }
    }

    /// Wraps a `Vec` as a compact row-major tensor of `shape`; the buffer owns
    /// the vector and drops it when the last handle and export are gone.
    pub fn wrap_vec<T: Element>(data: Vec<T>, shape: &[i64]) -> Result<Buffer> {
        Buffer::wrap_boxed_slice(data.into_boxed_slice(), shape)
    }

    /// Like `wrap_vec`, for a boxed slice.
    pub fn wrap_boxed_slice<T: Element>(data: Box<[T]>, shape: &[i64]) -> Result<Buffer> {
        let info = describe_layout(T::DTYPE, shape, None)?;
        if info.numel != data.len() as u64 {
            return Err(out_of_range(format!(
                "shape {shape:?} does not hold exactly the slice's {} elements",
                data.len()
            )));
        }
        Buffer::wrap_boxed_slice_strided(data, shape, None, 0, BufferFlags::empty())
    }

    /// Wraps a boxed slice the buffer then owns, with any strides (in
    /// elements; `None` is compact row-major), a start offset in elements and
    /// `flags` (empty or `BufferFlags::READ_ONLY`). Every element the view
    /// reaches must lie inside the slice.
    pub fn wrap_boxed_slice_strided<T: Element>(
        data: Box<[T]>,
        shape: &[i64],
        strides: Option<&[i64]>,
        offset: usize,
        flags: BufferFlags,
    ) -> Result<Buffer> {
        let len = data.len() as i64;
        let info = describe_layout(T::DTYPE, shape, strides)?;
        let offset_i = i64::try_from(offset).map_err(|_| out_of_range("offset too large"))?;
        if info.numel > 0 {
            let overflow = || Error::new(Status::Overflow, "strided view's extent overflows 64 bits");
            let lo = offset_i.checked_add(info.min_offset).ok_or_else(overflow)?;
            let hi = offset_i.checked_add(info.max_offset).ok_or_else(overflow)?;
            if lo < 0 || hi >= len {
                return Err(out_of_range(format!("the view reaches elements {lo}..={hi} but the slice has {len}")));
            }
        }
        let raw_slice: *mut [T] = Box::into_raw(data);
        let base = raw_slice as *mut T;
        let mut shape_v = shape.to_vec();
        let mut strides_v = strides.map(|s| s.to_vec());
        let view = DLTensor {
            data: base as *mut c_void,
            device: DLDevice::CPU,
            ndim: ndim_of(shape)?,
            dtype: T::DTYPE,
            shape: if shape_v.is_empty() { ptr::null_mut() } else { shape_v.as_mut_ptr() },
            strides: match strides_v.as_mut() {
                Some(v) if !v.is_empty() => v.as_mut_ptr(),
                _ => ptr::null_mut(),
            },
            byte_offset: (offset * mem::size_of::<T>()) as u64,
        };
        // SAFETY: raw_slice came from Box::into_raw just above.
        let ctx = Box::into_raw(Box::new(unsafe { Box::from_raw(raw_slice) })) as *mut c_void;
        let mut out = ptr::null_mut();
        // SAFETY: view describes memory inside the slice (checked above); the
        // release callback frees ctx exactly once, and is not called on failure.
        let status =
            unsafe { ffi::dlb_buffer_wrap(&view, flags.bits(), Some(release_boxed_slice::<T>), ctx, &mut out) };
        if status != ffi::DLB_OK {
            let err = Error::from_last(status);
            // SAFETY: on failure the library did not take ctx.
            drop(unsafe { Box::from_raw(ctx as *mut Box<[T]>) });
            return Err(err);
        }
        // SAFETY: a new handle the library just gave us.
        unsafe { Buffer::from_new(out) }
    }

    /// `dlb_buffer_wrap` over memory described by `view`; `release` runs
    /// exactly once, on any thread, when nothing uses the memory any more. On
    /// failure `release` is dropped without being called.
    ///
    /// # Safety
    /// `view` must describe valid memory on its device that stays valid (and
    /// is not freed by anyone else) until `release` runs; `view.shape` and
    /// `view.strides` must point at `ndim` values (or be NULL as DLPack
    /// allows).
    pub unsafe fn from_raw_parts<F: FnOnce() + Send + 'static>(
        view: &DLTensor,
        flags: BufferFlags,
        release: F,
    ) -> Result<Buffer> {
        let boxed: Box<ReleaseClosure> = Box::new(Box::new(release));
        let ctx = Box::into_raw(boxed) as *mut c_void;
        let mut out = ptr::null_mut();
        // SAFETY: per this function's contract.
        let status = unsafe { ffi::dlb_buffer_wrap(view, flags.bits(), Some(release_closure), ctx, &mut out) };
        if status != ffi::DLB_OK {
            let err = Error::from_last(status);
            // SAFETY: not taken by the library on failure.
            drop(unsafe { Box::from_raw(ctx as *mut ReleaseClosure) });
            return Err(err);
        }
        // SAFETY: a new handle the library just gave us.
        unsafe { Buffer::from_new(out) }
    }

    /// `dlb_buffer_delete`: later exports fail with `Status::Deleted`;
    /// exports already made stay valid.
    pub fn delete(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { ffi::dlb_buffer_delete(self.raw.as_ptr()) })
    }

    /// `dlb_buffer_flags` (a newer library's unnamed bits kept).
    pub fn flags(&self) -> BufferFlags {
        // SAFETY: live handle.
        BufferFlags::from_bits_retain(unsafe { ffi::dlb_buffer_flags(self.raw.as_ptr()) })
    }

    pub fn is_read_only(&self) -> bool {
        self.flags().contains(BufferFlags::READ_ONLY)
    }

    pub fn is_deleted(&self) -> bool {
        self.flags().contains(BufferFlags::DELETED)
    }

    /// `dlb_buffer_nbytes`: bytes of the elements when compact.
    pub fn nbytes(&self) -> u64 {
        // SAFETY: live handle.
        unsafe { ffi::dlb_buffer_nbytes(self.raw.as_ptr()) }
    }

    /// `dlb_buffer_refcount`: handles plus exports.
    pub fn refcount(&self) -> i64 {
        // SAFETY: live handle.
        unsafe { ffi::dlb_buffer_refcount(self.raw.as_ptr()) }
    }

    pub fn shape(&self) -> &[i64] {
        &self.meta.shape
    }

    /// Strides in elements (always present, as the library reports them).
    pub fn strides(&self) -> &[i64] {
        &self.meta.strides
    }

    pub fn ndim(&self) -> usize {
        self.meta.shape.len()
    }

    pub fn dtype(&self) -> DLDataType {
        self.meta.dtype
    }

    pub fn device(&self) -> DLDevice {
        self.meta.device
    }

    /// Number of elements.
    pub fn numel(&self) -> u64 {
        self.meta.shape.iter().map(|&e| e.max(0) as u64).product()
    }

    /// Address of the first element (`data + byte_offset`); NULL for a
    /// backend buffer, whose memory is only reached through an export.
    pub fn data_ptr(&self) -> *mut c_void {
        if self.meta.data == 0 {
            return ptr::null_mut();
        }
        self.meta.data.wrapping_add(self.meta.byte_offset as usize) as *mut c_void
    }

    /// Whether the elements are compact row-major (size-1 dimensions and
    /// zero-size tensors ignore strides).
    pub fn is_contiguous(&self) -> bool {
        if self.meta.shape.contains(&0) {
            return true;
        }
        let mut expected = 1i64;
        for (&e, &s) in self.meta.shape.iter().zip(&self.meta.strides).rev() {
            if e != 1 && s != expected {
                return false;
            }
            expected = expected.saturating_mul(e);
        }
        true
    }

    /// `dlb_buffer_dltensor`: a fresh non-owning view from the library.
    pub fn dltensor(&self) -> Result<DLTensor> {
        let mut t = MaybeUninit::<DLTensor>::uninit();
        // SAFETY: live handle, writable out.
        check(unsafe { ffi::dlb_buffer_dltensor(self.raw.as_ptr(), t.as_mut_ptr()) })?;
        // SAFETY: written on success.
        Ok(unsafe { t.assume_init() })
    }

    /// `dlb_buffer_to_host`: an independent compact host copy.
    pub fn to_host(&self) -> Result<Buffer> {
        let mut out = ptr::null_mut();
        // SAFETY: live handle, writable out.
        check(unsafe { ffi::dlb_buffer_to_host(self.raw.as_ptr(), &mut out) })?;
        // SAFETY: a new handle the library just gave us.
        unsafe { Buffer::from_new(out) }
    }

    /// `dlb_buffer_resolve`: what an export with `options` would hand out,
    /// as a buffer: this buffer itself (another handle) when it already
    /// satisfies them, else a fresh compact host copy (flagged
    /// `DLB_BUFFER_COPIED`). Fails as the export would.
    pub fn resolve(&self, options: &ExportOptions) -> Result<Buffer> {
        let mut out = ptr::null_mut();
        // SAFETY: live handle, valid options, writable out.
        check(unsafe { ffi::dlb_buffer_resolve(self.raw.as_ptr(), options.as_raw(), &mut out) })?;
        // SAFETY: a new handle the library just gave us.
        unsafe { Buffer::from_new(out) }
    }

    /// `dlb_export_versioned`: exports as a DLPack 1.x managed tensor (the
    /// one way to make a `ManagedTensor` from a buffer).
    pub fn export(&self, options: &ExportOptions) -> Result<ManagedTensor> {
        let mut out = ptr::null_mut();
        // SAFETY: live buffer handle, valid options, writable out.
        check(unsafe { ffi::dlb_export_versioned(self.raw.as_ptr(), options.as_raw(), &mut out) })?;
        // SAFETY: on success `out` is a managed tensor we now own.
        unsafe { ManagedTensor::from_raw(out) }
            .ok_or_else(|| Error::new(Status::Internal, "export returned OK and NULL"))
    }

    /// `dlb_export_legacy`: exports as a legacy managed tensor.
    pub fn export_legacy(&self, options: &ExportOptions) -> Result<LegacyManagedTensor> {
        let mut out = ptr::null_mut();
        // SAFETY: live buffer handle, valid options, writable out.
        check(unsafe { ffi::dlb_export_legacy(self.raw.as_ptr(), options.as_raw(), &mut out) })?;
        // SAFETY: on success `out` is a managed tensor we now own.
        unsafe { LegacyManagedTensor::from_raw(out) }
            .ok_or_else(|| Error::new(Status::Internal, "export returned OK and NULL"))
    }

    /// `dlb_buffer_host_view`: the library's answer to "may the CPU see this
    /// buffer's elements without a copy, and write them?" (`write`), with
    /// the first element, the compact byte count, the element count and
    /// type. Refused, with the library's status and message, for a deleted
    /// buffer, a backend's storage, memory the CPU cannot read, a strided
    /// layout, a write view of a read-only buffer, NULL data with elements.
    /// The view lends memory that stays valid while `self` lives (and the
    /// buffer is not deleted); the crate decides none of this itself.
    pub fn host_view(&self, write: bool) -> Result<ffi::dlb_host_view> {
        let mut view = ffi::dlb_host_view::default();
        let access = if write { ffi::DLB_HOST_VIEW_WRITE } else { ffi::DLB_HOST_VIEW_READ };
        // SAFETY: live handle; view is writable with struct_size set.
        check(unsafe { ffi::dlb_buffer_host_view(self.raw.as_ptr(), access, &mut view) })?;
        Ok(view)
    }

    /// The element type `T` against the buffer's: the one check of this
    /// crate's own (Rust's types are its business, not the library's).
    fn check_dtype<T: Element>(&self, dtype: DLDataType) -> Result<()> {
        if dtype != T::DTYPE {
            return Err(Error::new(
                Status::UnsupportedDtype,
                format!(
                    "buffer holds {} but {} was asked for",
                    dtype.name().unwrap_or_else(|_| format!("{dtype:?}")),
                    T::DTYPE.name().unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    /// The host view's elements as `T`: pointer and count (a dangling
    /// pointer for none), after the library's view and the type check; a
    /// pointer not aligned for `T` is refused (a Rust slice needs it).
    fn typed_view<T: Element>(&self, write: bool) -> Result<(*mut T, usize)> {
        let view = self.host_view(write)?;
        self.check_dtype::<T>(view.dtype)?;
        let n = usize::try_from(view.numel).map_err(|_| Error::new(Status::Overflow, "too many elements"))?;
        if n == 0 {
            return Ok((NonNull::<T>::dangling().as_ptr(), 0));
        }
        let p = view.data as *mut T;
        if (p as usize) & (mem::align_of::<T>() - 1) != 0 {
            return Err(Error::new(
                Status::Alignment,
                format!("data at {p:p} is not aligned to {} bytes", mem::align_of::<T>()),
            ));
        }
        Ok((p, n))
    }

    /// A read view for `get` and `to_vec`: `Ok(Some(view))` for a compact
    /// buffer, `Ok(None)` when the library refused only because the layout
    /// is strided (its rule checks the memory itself first: a deleted
    /// buffer, a backend's storage or a device the CPU cannot read is refused
    /// as such), then read through the library's strided copy.
    fn read_view<T: Element>(&self) -> Result<Option<ffi::dlb_host_view>> {
        match self.host_view(false) {
            Ok(view) => {
                self.check_dtype::<T>(view.dtype)?;
                Ok(Some(view))
            }
            Err(e) if e.status() == Status::UnsupportedLayout => {
                self.check_dtype::<T>(self.meta.dtype)?;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The elements of a compact host buffer whose dtype is `T`, borrowed.
    ///
    /// Safe ways to read instead: [`Buffer::to_vec`] (a copy),
    /// [`Buffer::get`], or [`Buffer::as_mut_slice`] (only handle, no export).
    ///
    /// # Safety
    /// Nothing may write the elements while the slice lives: no consumer of a
    /// writable export of this buffer (made before or during the borrow), no
    /// other handle's `as_mut_slice`, and, for imported or wrapped memory, not
    /// its producer either. A read-only buffer whose producer keeps to that
    /// flag meets this.
    pub unsafe fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let (p, n) = self.typed_view::<T>(false)?;
        // SAFETY: p points at n initialised elements of T (any bit pattern is
        // valid), kept alive by our reference; unchanged while borrowed, per
        // the contract above.
        Ok(unsafe { std::slice::from_raw_parts(p, n) })
    }

    /// The elements, writable. Refused for read-only buffers and while
    /// another handle or an export shares the buffer (reference count > 1),
    /// so the returned slice is the only way to the memory from this process
    /// apart from an imported tensor's own producer.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        let (p, n) = self.typed_view::<T>(true)?;
        let rc = self.refcount();
        if rc != 1 {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("buffer is shared ({rc} references); mutable access needs the only one"),
            ));
        }
        // SAFETY: as in as_slice, and no other reference exists.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
    }

    /// One element at a multi-index, whatever the strides.
    pub fn get<T: Element>(&self, index: &[i64]) -> Result<T> {
        let view = self.read_view::<T>()?;
        if index.len() != self.meta.shape.len() {
            return Err(out_of_range(format!(
                "index has {} coordinates, the buffer {} dimensions",
                index.len(),
                self.meta.shape.len()
            )));
        }
        let mut offset = 0i64;
        for (d, ((&i, &e), &s)) in index.iter().zip(&self.meta.shape).zip(&self.meta.strides).enumerate() {
            if i < 0 || i >= e {
                return Err(out_of_range(format!("index[{d}] is {i}, extent is {e}")));
            }
            offset += i * s;
        }
        let byte_offset = offset as isize * mem::size_of::<T>() as isize;
        if let Some(view) = view {
            let p = (view.data as *const u8).wrapping_offset(byte_offset);
            // SAFETY: the library's host view of live memory; the index is
            // in bounds of its layout.
            return Ok(unsafe { ptr::read_unaligned(p as *const T) });
        }
        // Strided: the one element as a 0-d tensor, copied by the library.
        let mut element = self.dltensor()?;
        element.byte_offset = (element.byte_offset as i64 + byte_offset as i64) as u64;
        element.ndim = 0;
        element.shape = ptr::null_mut();
        element.strides = ptr::null_mut();
        let mut out = MaybeUninit::<T>::uninit();
        // SAFETY: a view of one element inside the buffer's memory (index
        // checked above); out has room for one T.
        check(unsafe {
            ffi::dlb_copy_to_contiguous(&element, out.as_mut_ptr() as *mut c_void, mem::size_of::<T>() as u64)
        })?;
        // SAFETY: the copy wrote it.
        Ok(unsafe { out.assume_init() })
    }

    /// All elements as a compact row-major `Vec`, whatever the strides and
    /// wherever the memory: the library's host view copied, its strided copy
    /// (`dlb_copy_to_contiguous`), or, for memory the library says has no
    /// host view (a backend's storage, a device's memory), a host copy made
    /// by `to_host` (which refuses what it cannot copy).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let view = match self.read_view::<T>() {
            Err(e) if matches!(e.status(), Status::NotZeroCopy | Status::UnsupportedDevice) => {
                return self.to_host()?.to_vec();
            }
            other => other?,
        };
        let n = usize::try_from(self.numel()).map_err(|_| Error::new(Status::Overflow, "too many elements"))?;
        let mut out: Vec<T> = Vec::with_capacity(n);
        let bytes = (n * mem::size_of::<T>()) as u64;
        match view {
            Some(view) => {
                if view.nbytes != bytes {
                    return Err(Error::new(
                        Status::Internal,
                        format!("host view has {} bytes, {n} elements need {bytes}", view.nbytes),
                    ));
                }
                if n > 0 {
                    // SAFETY: the view holds `bytes` readable bytes; out has
                    // room for them; they do not overlap.
                    unsafe {
                        ptr::copy_nonoverlapping(
                            view.data as *const u8,
                            out.as_mut_ptr() as *mut u8,
                            n * mem::size_of::<T>(),
                        )
                    };
                }
            }
            None => {
                let view = self.dltensor()?;
                // SAFETY: view is the library's own view of live memory; out
                // has room for n elements.
                check(unsafe { ffi::dlb_copy_to_contiguous(&view, out.as_mut_ptr() as *mut c_void, bytes) })?;
            }
        }
        // SAFETY: all n elements were written.
        unsafe { out.set_len(n) };
        Ok(out)
    }
}
