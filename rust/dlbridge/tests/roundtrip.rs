//! Export from Rust, import through the C surface, and back.

mod common;

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

// The as_slice calls below: nothing else writes these buffers while the slices live.
use dlbridge::ffi;
use dlbridge::prelude::*;
use dlbridge::{
    live_exports, Buffer, BufferFlags, CopyPolicy, DLDataType, DLDevice, DLTensor, ExportOptions, ImportOptions,
};

#[test]
fn wrap_vec_exports_zero_copy_and_imports_back() {
    let _g = common::serial();
    let v: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let addr = v.as_ptr() as usize;
    let buf = Buffer::wrap_vec(v, &[3, 4]).unwrap();
    assert_eq!(buf.shape(), &[3, 4]);
    assert_eq!(buf.strides(), &[4, 1]);
    assert_eq!(buf.dtype(), DLDataType::F32);
    assert_eq!(buf.device(), DLDevice::CPU);
    assert_eq!(buf.nbytes(), 48);
    assert_eq!(buf.data_ptr() as usize, addr);

    let t = buf.export(&ExportOptions::new()).unwrap();
    assert_eq!(live_exports(), 1);
    assert_eq!(t.version(), dlbridge::dlpack_version());
    assert_eq!(t.version().major, 1);
    assert!(!t.is_copied());
    assert!(!t.is_read_only());
    assert_eq!(t.data_ptr().unwrap() as usize, addr, "export must be zero-copy");
    assert_eq!(t.shape().unwrap(), &[3, 4]);
    assert_eq!(t.strides().unwrap(), &[4, 1]);
    assert_eq!(buf.refcount(), 2, "the export holds a reference");

    // Through the raw C surface: import the pointer, as a consumer in C would.
    let raw = t.into_raw();
    let mut handle = ptr::null_mut();
    let st = unsafe { ffi::dlb_import_versioned(raw, ptr::null(), &mut handle) };
    assert_eq!(st, ffi::DLB_OK);
    let mut view = std::mem::MaybeUninit::<DLTensor>::uninit();
    assert_eq!(unsafe { ffi::dlb_buffer_dltensor(handle, view.as_mut_ptr()) }, ffi::DLB_OK);
    let view = unsafe { view.assume_init() };
    assert_eq!((view.data as usize) + view.byte_offset as usize, addr);
    assert!(unsafe { ffi::dlb_buffer_flags(handle) } & ffi::DLB_BUFFER_IMPORTED != 0);

    // ...and back to Rust.
    let back = unsafe { Buffer::from_raw(handle) }.unwrap();
    assert_eq!(unsafe { back.as_slice::<f32>() }.unwrap()[5], 5.0);
    assert_eq!(back.get::<f32>(&[2, 3]).unwrap(), 11.0);
    assert_eq!(back.data_ptr() as usize, addr);
    drop(back);
    assert_eq!(live_exports(), 0);
    assert_eq!(buf.refcount(), 1);
    assert_eq!(unsafe { buf.as_slice::<f32>() }.unwrap()[11], 11.0);
}

#[test]
fn writes_through_one_side_are_seen_on_the_other() {
    let _g = common::serial();
    let mut buf = Buffer::alloc(DLDataType::I32, &[2, 3]).unwrap();
    assert_eq!(unsafe { buf.as_slice::<i32>() }.unwrap(), &[0; 6], "alloc is zero-filled");
    assert_eq!(buf.data_ptr() as usize % 64, 0, "alloc is 64-byte aligned");
    buf.as_mut_slice::<i32>().unwrap().copy_from_slice(&[1, 2, 3, 4, 5, 6]);

    let imported = buf.export(&ExportOptions::new()).unwrap().into_buffer(&ImportOptions::new()).unwrap();
    assert_eq!(imported.data_ptr(), buf.data_ptr());
    assert_eq!(imported.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
    // Shared now: mutable access refused until the import is gone.
    assert!(buf.as_mut_slice::<i32>().is_err());
    unsafe { *(imported.data_ptr() as *mut i32).add(4) = 50 };
    assert_eq!(buf.get::<i32>(&[1, 1]).unwrap(), 50);
    drop(imported);
    assert_eq!(live_exports(), 0);
    buf.as_mut_slice::<i32>().unwrap()[0] = -1;
    assert_eq!(buf.get::<i32>(&[0, 0]).unwrap(), -1);
}

#[test]
fn copy_always_gives_an_independent_copied_tensor() {
    let _g = common::serial();
    let buf = Buffer::wrap_vec(vec![1u16, 2, 3], &[3]).unwrap();
    let t = buf.export(&ExportOptions::new().copy(CopyPolicy::Always)).unwrap();
    assert!(t.is_copied());
    assert_ne!(t.data_ptr().unwrap() as usize, buf.data_ptr() as usize);
    let copy = t.into_buffer(&ImportOptions::new()).unwrap();
    assert!(copy.flags().contains(BufferFlags::COPIED));
    assert_eq!(unsafe { copy.as_slice::<u16>() }.unwrap(), &[1, 2, 3]);
    drop(copy);
    assert_eq!(live_exports(), 0);
}

#[test]
fn strided_views_keep_their_strides_and_read_right() {
    let _g = common::serial();
    // A 3x2 transposed view of a row-major 2x3 matrix [[0,1,2],[3,4,5]].
    let data: Box<[f64]> = (0..6).map(f64::from).collect();
    let buf = Buffer::wrap_boxed_slice_strided(data, &[3, 2], Some(&[1, 3]), 0, BufferFlags::empty()).unwrap();
    assert!(!buf.is_contiguous());
    assert_eq!(buf.strides(), &[1, 3]);
    assert_eq!(buf.get::<f64>(&[2, 1]).unwrap(), 5.0);
    assert_eq!(buf.get::<f64>(&[1, 0]).unwrap(), 1.0);
    assert_eq!(buf.to_vec::<f64>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(unsafe { buf.as_slice::<f64>() }.unwrap_err().status(), dlbridge::Status::UnsupportedLayout);

    let t = buf.export(&ExportOptions::new()).unwrap();
    assert_eq!(t.strides().unwrap(), &[1, 3]);
    let back = t.into_buffer(&ImportOptions::new()).unwrap();
    assert_eq!(back.to_vec::<f64>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    drop((back, buf));
    assert_eq!(live_exports(), 0);
}

#[test]
fn negative_strides_read_right() {
    let _g = common::serial();
    // Reversed order with an element offset: negative stride.
    let data: Box<[i64]> = (0..4).collect();
    let rev = Buffer::wrap_boxed_slice_strided(data, &[4], Some(&[-1]), 3, BufferFlags::empty()).unwrap();
    assert_eq!(rev.strides(), &[-1]);
    assert_eq!(rev.to_vec::<i64>().unwrap(), vec![3, 2, 1, 0]);
    assert_eq!(rev.get::<i64>(&[0]).unwrap(), 3);
    let t = rev.export(&ExportOptions::new()).unwrap();
    assert_eq!(t.strides().unwrap(), &[-1]);
    let back = t.into_buffer(&ImportOptions::new()).unwrap();
    assert_eq!(back.to_vec::<i64>().unwrap(), vec![3, 2, 1, 0]);
    drop((back, rev));
    assert_eq!(live_exports(), 0);
}

#[test]
fn legacy_round_trip() {
    let _g = common::serial();
    let buf = Buffer::wrap_vec(vec![7i8, 8, 9, 10], &[2, 2]).unwrap();
    let t = buf.export_legacy(&ExportOptions::new()).unwrap();
    assert_eq!(t.shape(), &[2, 2]);
    assert_eq!(t.dl_tensor().data as usize + t.dl_tensor().byte_offset as usize, buf.data_ptr() as usize);
    assert_eq!(live_exports(), 1);
    let back = t.into_buffer(&ImportOptions::new()).unwrap();
    assert_eq!(unsafe { back.as_slice::<i8>() }.unwrap(), &[7, 8, 9, 10]);
    drop(back);
    assert_eq!(live_exports(), 0);
}

#[test]
fn from_raw_parts_release_runs_once_after_the_last_user() {
    let _g = common::serial();
    let released = Arc::new(AtomicUsize::new(0));
    let mut storage: Vec<u32> = vec![1, 2, 3, 4, 5, 6];
    let mut shape = [2i64, 3];
    let view = DLTensor {
        data: storage.as_mut_ptr().cast(),
        device: DLDevice::CPU,
        ndim: 2,
        dtype: DLDataType::U32,
        shape: shape.as_mut_ptr(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    let r = Arc::clone(&released);
    let buf = unsafe {
        Buffer::from_raw_parts(&view, BufferFlags::READ_ONLY, move || {
            drop(storage);
            r.fetch_add(1, Ordering::SeqCst);
        })
    }
    .unwrap();
    assert!(buf.is_read_only());
    assert_eq!(buf.strides(), &[3, 1], "NULL strides become compact ones");
    let t = buf.export(&ExportOptions::new()).unwrap();
    assert!(t.is_read_only());
    let clone = buf.clone();
    drop(buf);
    drop(clone);
    assert_eq!(released.load(Ordering::SeqCst), 0, "the export still uses the memory");
    assert_eq!(unsafe { *(t.data_ptr().unwrap() as *const u32).add(5) }, 6);
    drop(t);
    assert_eq!(released.load(Ordering::SeqCst), 1);
    assert_eq!(live_exports(), 0);
}

#[test]
fn to_host_copies_and_zero_size_and_scalars_work() {
    let _g = common::serial();
    let src = Buffer::wrap_vec(vec![1.5f32, 2.5], &[2]).unwrap();
    let host = src.to_host().unwrap();
    assert_ne!(host.data_ptr(), src.data_ptr());
    assert_eq!(unsafe { host.as_slice::<f32>() }.unwrap(), &[1.5, 2.5]);

    let empty = Buffer::wrap_vec(Vec::<f64>::new(), &[0, 5]).unwrap();
    assert_eq!(unsafe { empty.as_slice::<f64>() }.unwrap().len(), 0);
    assert_eq!(empty.nbytes(), 0);
    let t = empty.export(&ExportOptions::new()).unwrap();
    assert_eq!(t.shape().unwrap(), &[0, 5]);
    drop(t);

    let scalar = Buffer::wrap_vec(vec![42u64], &[]).unwrap();
    assert_eq!(scalar.ndim(), 0);
    assert_eq!(scalar.get::<u64>(&[]).unwrap(), 42);
    let back = scalar.export(&ExportOptions::new()).unwrap().into_buffer(&ImportOptions::new()).unwrap();
    assert_eq!(unsafe { back.as_slice::<u64>() }.unwrap(), &[42]);
    drop(back);
    assert_eq!(live_exports(), 0);
}

#[test]
fn copy_only_backend_exports_by_copying() {
    let _g = common::serial();
    let counts = common::leak_counts();
    let backend = common::remote_backend(counts);
    let buf = common::remote_buffer(backend, vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    unsafe { ffi::dlb_backend_release(backend) };
    assert!(buf.flags().contains(BufferFlags::BACKEND));
    assert!(buf.data_ptr().is_null());

    let t = buf.export(&ExportOptions::new()).unwrap();
    assert!(t.is_copied());
    assert_eq!(t.device().unwrap(), DLDevice::CPU);
    let values = unsafe { std::slice::from_raw_parts(t.data_ptr().unwrap() as *const f32, 4) };
    assert_eq!(values, &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(counts.copies.load(Ordering::SeqCst), 1);

    let err = buf.export(&ExportOptions::new().copy(CopyPolicy::Never)).unwrap_err();
    assert_eq!(err.status(), dlbridge::Status::NotZeroCopy);
    assert!(err.message().contains("remote"), "message names the backend: {}", err.message());

    assert_eq!(buf.to_host().unwrap().to_vec::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    drop(buf);
    drop(t);
    assert_eq!(counts.freed.load(Ordering::SeqCst), 1);
    assert_eq!(counts.destroyed.load(Ordering::SeqCst), 1);
    assert_eq!(live_exports(), 0);
    // The backend is gone (destroy ran): nothing refers to the counts now.
    drop(unsafe { Box::from_raw(counts as *const common::RemoteCounts as *mut common::RemoteCounts) });
}

#[test]
fn versions_and_dtype_names() {
    let v = dlbridge::version_string();
    assert_eq!(v.split('.').count(), 3, "{v}");
    assert_eq!(
        dlbridge::version_number(),
        ffi::DLB_VERSION_MAJOR * 10000 + ffi::DLB_VERSION_MINOR * 100 + ffi::DLB_VERSION_PATCH
    );
    assert_eq!(dlbridge::dlpack_version().major, ffi::DLB_DLPACK_MAJOR);
    assert_eq!(DLDataType::F32.name().unwrap(), "float32");
    assert_eq!(DLDataType::from_name("uint8").unwrap(), DLDataType::U8);
    assert_eq!(DLDataType::of::<i16>(), DLDataType::I16);
}
