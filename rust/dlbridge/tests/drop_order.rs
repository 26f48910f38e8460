//! Whatever order handles, clones and exports go in, memory is freed once.

mod common;

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{count, counter, ForeignSpec};
use dlbridge::{import_versioned, live_exports, Buffer, DLDataType, DLDevice, DLTensor, ExportOptions, ImportOptions};

/// A buffer over Rust memory whose release is counted.
fn counted_buffer(released: &Arc<AtomicUsize>) -> Buffer {
    let mut storage = vec![1.0f32, 2.0, 3.0, 4.0];
    let mut shape = [4i64];
    let view = DLTensor {
        data: storage.as_mut_ptr().cast(),
        device: DLDevice::CPU,
        ndim: 1,
        dtype: DLDataType::F32,
        shape: shape.as_mut_ptr(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    let r = Arc::clone(released);
    unsafe {
        Buffer::from_raw_parts(&view, dlbridge::BufferFlags::empty(), move || {
            drop(storage);
            r.fetch_add(1, Ordering::SeqCst);
        })
    }
    .unwrap()
}

#[test]
fn buffer_dropped_before_its_export() {
    let _g = common::serial();
    let released = counter();
    let buf = counted_buffer(&released);
    let t = buf.export(&ExportOptions::new()).unwrap();
    drop(buf);
    assert_eq!(count(&released), 0);
    assert_eq!(unsafe { *(t.data_ptr().unwrap() as *const f32).add(3) }, 4.0);
    drop(t);
    assert_eq!(count(&released), 1);
    assert_eq!(live_exports(), 0);
}

#[test]
fn export_dropped_before_its_buffer() {
    let _g = common::serial();
    let released = counter();
    let buf = counted_buffer(&released);
    let t = buf.export(&ExportOptions::new()).unwrap();
    let l = buf.export_legacy(&ExportOptions::new()).unwrap();
    drop(t);
    drop(l);
    assert_eq!(count(&released), 0);
    assert_eq!(buf.refcount(), 1);
    drop(buf);
    assert_eq!(count(&released), 1);
    assert_eq!(live_exports(), 0);
}

#[test]
fn clones_interleaved_with_exports_and_imports() {
    let _g = common::serial();
    let released = counter();
    let a = counted_buffer(&released);
    let b = a.clone();
    assert_eq!(a.refcount(), 2);
    let t1 = b.export(&ExportOptions::new()).unwrap();
    drop(a);
    let imported = t1.into_buffer(&ImportOptions::new()).unwrap();
    let c = imported.clone();
    let t2 = c.export(&ExportOptions::new()).unwrap();
    drop(imported);
    drop(b);
    drop(c);
    assert_eq!(count(&released), 0, "t2 keeps the chain alive");
    drop(t2);
    assert_eq!(count(&released), 1);
    assert_eq!(live_exports(), 0);
}

#[test]
fn delete_then_release_in_any_order() {
    let _g = common::serial();
    let released = counter();
    let buf = counted_buffer(&released);
    let t = buf.export(&ExportOptions::new()).unwrap();
    let clone = buf.clone();
    buf.delete().unwrap();
    drop(buf);
    assert!(clone.is_deleted());
    drop(t);
    assert_eq!(count(&released), 0);
    drop(clone);
    assert_eq!(count(&released), 1);
}

#[test]
fn raw_handles_round_trip_without_leaks() {
    let _g = common::serial();
    let released = counter();
    let buf = counted_buffer(&released);
    let raw = buf.into_raw();
    assert_eq!(unsafe { dlbridge::ffi::dlb_buffer_refcount(raw) }, 1);
    let buf = unsafe { Buffer::from_raw(raw) }.unwrap();
    let t = buf.export(&ExportOptions::new()).unwrap();
    let raw_t = t.into_raw();
    drop(buf);
    assert_eq!(count(&released), 0);
    assert_eq!(live_exports(), 1);
    unsafe { dlbridge::ffi::dlb_managed_free_versioned(raw_t) };
    assert_eq!(count(&released), 1);
    assert_eq!(live_exports(), 0);
}

#[test]
fn foreign_import_dropped_before_and_after_reexports() {
    let _g = common::serial();
    for order in 0..2 {
        let deleted = counter();
        let raw = ForeignSpec::new(vec![1i64, 2], &[2]).versioned(&deleted);
        let buf = unsafe { import_versioned(raw, &ImportOptions::new()) }.unwrap();
        let t = buf.export(&ExportOptions::new()).unwrap();
        if order == 0 {
            drop(buf);
            drop(t);
        } else {
            drop(t);
            drop(buf);
        }
        assert_eq!(count(&deleted), 1, "order {order}");
    }
    assert_eq!(live_exports(), 0);
}
