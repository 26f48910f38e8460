//! Tensors made in Rust by "another producer", with counted deleters.

mod common;

use common::{count, counter, ForeignSpec};
use dlbridge::ffi;
use dlbridge::{import_legacy, import_versioned, live_exports, ExportOptions, ImportOptions, ManagedTensor, Status};

#[test]
fn imported_reexported_dropped_deleter_runs_once() {
    let _g = common::serial();
    let deleted = counter();
    let raw = ForeignSpec::new(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).versioned(&deleted);
    let data_addr = unsafe { (*raw).dl_tensor.data as usize };

    let buf = unsafe { import_versioned(raw, &ImportOptions::new()) }.unwrap();
    assert_eq!(buf.data_ptr() as usize, data_addr, "import is zero-copy");
    assert_eq!(buf.strides(), &[3, 1], "NULL strides read as compact");
    assert!(buf.flags().contains(dlbridge::BufferFlags::IMPORTED));

    let re1 = buf.export(&ExportOptions::new()).unwrap();
    let re2 = buf.export_legacy(&ExportOptions::new()).unwrap();
    assert_eq!(re1.data_ptr().unwrap() as usize, data_addr);
    assert_eq!(live_exports(), 2);
    drop(buf);
    assert_eq!(count(&deleted), 0, "re-exports keep the foreign tensor alive");
    drop(re1);
    assert_eq!(count(&deleted), 0);
    // The last user is an import of the legacy re-export.
    let again = re2.into_buffer(&ImportOptions::new()).unwrap();
    assert_eq!(again.get::<f64>(&[1, 2]).unwrap(), 6.0);
    assert_eq!(count(&deleted), 0);
    drop(again);
    assert_eq!(count(&deleted), 1, "deleter ran exactly once");
    assert_eq!(live_exports(), 0);
}

#[test]
fn transposed_foreign_layout_with_byte_offset_reads_right() {
    let _g = common::serial();
    let deleted = counter();
    // Elements 0..=6 with one padding element in front: the tensor is the
    // transpose (3x2, strides [1, 3]) of [[1,2,3],[4,5,6]] starting at
    // byte_offset 8.
    let mut spec = ForeignSpec::new(vec![-99.0f64, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    spec.strides = Some(vec![1, 3]);
    spec.byte_offset = 8;
    let raw = spec.versioned(&deleted);
    let buf = unsafe { import_versioned(raw, &ImportOptions::new()) }.unwrap();
    assert_eq!(buf.strides(), &[1, 3]);
    assert_eq!(buf.to_vec::<f64>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(buf.get::<f64>(&[0, 1]).unwrap(), 4.0);
    let sum: f64 = buf.to_vec::<f64>().unwrap().iter().sum();
    assert_eq!(sum, 21.0);
    drop(buf);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn managed_tensor_drop_runs_a_foreign_deleter_once() {
    let deleted = counter();
    let raw = ForeignSpec::new(vec![1u8, 2, 3], &[3]).versioned(&deleted);
    let t = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
    assert_eq!(t.shape().unwrap(), &[3]);
    drop(t);
    assert_eq!(count(&deleted), 1);

    // into_raw hands it on: no deleter call until the new owner frees it.
    let raw = ForeignSpec::new(vec![1u8], &[1]).versioned(&deleted);
    let t = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
    let p = t.into_raw();
    assert_eq!(count(&deleted), 1);
    unsafe { ffi::dlb_managed_free_versioned(p) };
    assert_eq!(count(&deleted), 2);
}

#[test]
fn failed_import_leaves_the_tensor_with_the_caller() {
    let _g = common::serial();
    let deleted = counter();
    let mut spec = ForeignSpec::new(vec![0i32; 4], &[4]);
    spec.version = dlbridge::DLPackVersion { major: 2, minor: 0 };
    let raw = spec.versioned(&deleted);
    let err = unsafe { import_versioned(raw, &ImportOptions::new()) }.unwrap_err();
    assert_eq!(err.status(), Status::Version);
    assert_eq!(count(&deleted), 0, "the caller still owns it");
    // Freeing a struct of an unknown major reads only the stable prefix.
    let t = unsafe { ManagedTensor::from_raw(raw) }.unwrap();
    assert!(t.dl_tensor().is_none());
    drop(t);
    assert_eq!(count(&deleted), 1);

    // into_buffer frees the tensor when the import fails.
    let mut spec = ForeignSpec::new(vec![0i32; 4], &[4]);
    spec.flags = ffi::DLPACK_FLAG_BITMASK_READ_ONLY;
    let t = unsafe { ManagedTensor::from_raw(spec.versioned(&deleted)) }.unwrap();
    let err = t.into_buffer(&ImportOptions::new().require_writable(true)).unwrap_err();
    assert_eq!(err.status(), Status::ReadOnly);
    assert_eq!(count(&deleted), 2);
}

#[test]
fn legacy_foreign_tensor_imports_and_frees_once() {
    let _g = common::serial();
    let deleted = counter();
    let raw = ForeignSpec::new(vec![5u16, 6, 7, 8], &[2, 2]).legacy(&deleted);
    let buf = unsafe { import_legacy(raw, &ImportOptions::new()) }.unwrap();
    assert!(!buf.is_read_only(), "legacy imports are writable by default");
    let t = buf.export(&ExportOptions::new()).unwrap();
    drop(buf);
    assert_eq!(count(&deleted), 0);
    drop(t);
    assert_eq!(count(&deleted), 1);

    let raw = ForeignSpec::new(vec![1u16], &[1]).legacy(&deleted);
    let buf = unsafe { import_legacy(raw, &ImportOptions::new().legacy_read_only(true)) }.unwrap();
    assert!(buf.is_read_only());
    drop(buf);
    assert_eq!(count(&deleted), 2);
    assert_eq!(live_exports(), 0);
}
