//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use dlbridge::ffi;
use dlbridge::prelude::*;
use dlbridge::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, Element};

/// `dlb_live_exports()` is process-wide: tests that export or assert on it
/// run one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a foreign producer keeps alive for one tensor.
struct ForeignCtx<T> {
    data: Vec<T>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    deleted: Arc<AtomicUsize>,
}

/// A tensor made by "another library": the data, shape and strides live in
/// the producer's context, freed by its deleter, which counts its calls.
pub struct ForeignSpec<T> {
    pub data: Vec<T>,
    pub shape: Vec<i64>,
    pub strides: Option<Vec<i64>>,
    pub byte_offset: u64,
    pub dtype: DLDataType,
    pub device: DLDevice,
    pub version: DLPackVersion,
    pub flags: u64,
}

impl<T: Element> ForeignSpec<T> {
    pub fn new(data: Vec<T>, shape: &[i64]) -> Self {
        ForeignSpec {
            data,
            shape: shape.to_vec(),
            strides: None,
            byte_offset: 0,
            dtype: T::DTYPE,
            device: DLDevice::CPU,
            version: DLPackVersion { major: 1, minor: 3 },
            flags: 0,
        }
    }

    fn into_ctx(self, deleted: &Arc<AtomicUsize>) -> (Box<ForeignCtx<T>>, DLTensor) {
        let mut ctx = Box::new(ForeignCtx {
            data: self.data,
            shape: self.shape,
            strides: self.strides,
            deleted: Arc::clone(deleted),
        });
        let t = DLTensor {
            data: if ctx.data.is_empty() { ptr::null_mut() } else { ctx.data.as_mut_ptr() as *mut c_void },
            device: self.device,
            ndim: ctx.shape.len() as i32,
            dtype: self.dtype,
            shape: if ctx.shape.is_empty() { ptr::null_mut() } else { ctx.shape.as_mut_ptr() },
            strides: match ctx.strides.as_mut() {
                Some(s) => s.as_mut_ptr(),
                None => ptr::null_mut(),
            },
            byte_offset: self.byte_offset,
        };
        (ctx, t)
    }

    /// A DLManagedTensorVersioned whose deleter increments `deleted`.
    pub fn versioned(self, deleted: &Arc<AtomicUsize>) -> *mut DLManagedTensorVersioned {
        let (version, flags) = (self.version, self.flags);
        let (ctx, t) = self.into_ctx(deleted);
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version,
            manager_ctx: Box::into_raw(ctx) as *mut c_void,
            deleter: Some(delete_versioned::<T>),
            flags,
            dl_tensor: t,
        }))
    }

    /// A legacy DLManagedTensor whose deleter increments `deleted`.
    pub fn legacy(self, deleted: &Arc<AtomicUsize>) -> *mut DLManagedTensor {
        let (ctx, t) = self.into_ctx(deleted);
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: t,
            manager_ctx: Box::into_raw(ctx) as *mut c_void,
            deleter: Some(delete_legacy::<T>),
        }))
    }
}

unsafe extern "C" fn delete_versioned<T>(p: *mut DLManagedTensorVersioned) {
    let t = unsafe { Box::from_raw(p) };
    let ctx = unsafe { Box::from_raw(t.manager_ctx as *mut ForeignCtx<T>) };
    ctx.deleted.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy<T>(p: *mut DLManagedTensor) {
    let t = unsafe { Box::from_raw(p) };
    let ctx = unsafe { Box::from_raw(t.manager_ctx as *mut ForeignCtx<T>) };
    ctx.deleted.fetch_add(1, Ordering::SeqCst);
}

pub fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

pub fn count(c: &Arc<AtomicUsize>) -> usize {
    c.load(Ordering::SeqCst)
}

/// A copy-only backend ("remote"): storages are boxed Vec<f32>, reachable
/// only through copy_to_host. Counts free_storage and destroy calls.
pub struct RemoteCounts {
    pub freed: AtomicUsize,
    pub copies: AtomicUsize,
    pub destroyed: AtomicUsize,
}

unsafe extern "C" fn remote_copy(ctx: *mut c_void, storage: *mut c_void, dst: *mut c_void, dst_size: u64) -> i32 {
    let counts = unsafe { &*(ctx as *const RemoteCounts) };
    let v = unsafe { &*(storage as *const Vec<f32>) };
    let bytes = v.len() * 4;
    if (dst_size as usize) < bytes {
        return 1;
    }
    unsafe { ptr::copy_nonoverlapping(v.as_ptr() as *const u8, dst as *mut u8, bytes) };
    counts.copies.fetch_add(1, Ordering::SeqCst);
    0
}

unsafe extern "C" fn remote_free(ctx: *mut c_void, storage: *mut c_void) {
    let counts = unsafe { &*(ctx as *const RemoteCounts) };
    drop(unsafe { Box::from_raw(storage as *mut Vec<f32>) });
    counts.freed.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn remote_destroy(ctx: *mut c_void) {
    let counts = unsafe { &*(ctx as *const RemoteCounts) };
    counts.destroyed.fetch_add(1, Ordering::SeqCst);
}

/// Creates the backend; `counts` must outlive it (see `leak_counts`).
pub fn remote_backend(counts: &'static RemoteCounts) -> *mut ffi::dlb_backend {
    let vt = ffi::dlb_backend_vtable {
        name: c"remote".as_ptr(),
        copy_to_host: Some(remote_copy),
        free_storage: Some(remote_free),
        destroy: Some(remote_destroy),
        ..Default::default()
    };
    let mut out = ptr::null_mut();
    let st = unsafe { ffi::dlb_backend_create(&vt, counts as *const RemoteCounts as *mut c_void, &mut out) };
    assert_eq!(st, ffi::DLB_OK, "dlb_backend_create failed");
    out
}

/// Counts that live until the test frees them again after the backend's
/// `destroy` ran.
pub fn leak_counts() -> &'static RemoteCounts {
    Box::leak(Box::new(RemoteCounts {
        freed: AtomicUsize::new(0),
        copies: AtomicUsize::new(0),
        destroyed: AtomicUsize::new(0),
    }))
}

/// A buffer over a new remote storage holding `values` with `shape`.
pub fn remote_buffer(backend: *mut ffi::dlb_backend, values: Vec<f32>, shape: &[i64]) -> dlbridge::Buffer {
    let mut shape_v = shape.to_vec();
    let layout = DLTensor {
        data: ptr::null_mut(),
        device: DLDevice::named("ext_dev", 0).unwrap(),
        ndim: shape.len() as i32,
        dtype: DLDataType::F32,
        shape: shape_v.as_mut_ptr(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    let storage = Box::into_raw(Box::new(values)) as *mut c_void;
    let mut out = ptr::null_mut();
    let st = unsafe { ffi::dlb_buffer_from_backend(backend, storage, &layout, 0, &mut out) };
    assert_eq!(st, ffi::DLB_OK, "dlb_buffer_from_backend: {}", dlbridge::status_name(st));
    unsafe { dlbridge::Buffer::from_raw(out) }.expect("backend buffer handle")
}
