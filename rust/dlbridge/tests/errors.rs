//! Every error path returns the right status, a message, and leaves `out`
//! arguments untouched.

mod common;

use std::ptr;

use common::{count, counter, ForeignSpec};
use dlbridge::ffi;
use dlbridge::prelude::*;
use dlbridge::{
    import_versioned, live_exports, status_name, Buffer, BufferFlags, DLDataType, DLDevice, DLTensor, Error,
    ExportOptions, ImportOptions, Status, ValidateFlags,
};

fn status_of<T: std::fmt::Debug>(r: dlbridge::Result<T>) -> Status {
    r.unwrap_err().status()
}

#[test]
fn status_names_and_numbers_are_fixed() {
    let expected = [
        "DLB_OK",
        "DLB_ERR_INVALID_ARGUMENT",
        "DLB_ERR_OUT_OF_MEMORY",
        "DLB_ERR_DELETED",
        "DLB_ERR_NOT_ZERO_COPY",
        "DLB_ERR_UNSUPPORTED_DTYPE",
        "DLB_ERR_UNSUPPORTED_DEVICE",
        "DLB_ERR_UNSUPPORTED_LAYOUT",
        "DLB_ERR_READ_ONLY",
        "DLB_ERR_VERSION",
        "DLB_ERR_OVERFLOW",
        "DLB_ERR_MALFORMED",
        "DLB_ERR_ALIGNMENT",
        "DLB_ERR_BACKEND",
        "DLB_ERR_INTERNAL",
    ];
    assert_eq!(expected.len() as i32, ffi::DLB_STATUS_COUNT);
    for (code, name) in expected.iter().enumerate() {
        assert_eq!(status_name(code as i32), *name);
        let Some(s) = Status::from_code(code as i32) else {
            assert_eq!(code as i32, ffi::DLB_OK, "only DLB_OK is no Status");
            continue;
        };
        assert_eq!(s.code(), code as i32);
        assert!(!matches!(s, Status::Unknown(_)));
        assert_eq!(s.name(), *name);
    }
    assert_eq!(Status::from_code(999), Some(Status::Unknown(999)));
    assert_eq!(status_name(999), "DLB_UNKNOWN_STATUS");
    assert_eq!(status_name(-1), "DLB_UNKNOWN_STATUS");
}

#[test]
fn error_carries_status_and_message_and_clears_the_slot() {
    let err = Buffer::alloc(DLDataType::F32, &[2, -3]).unwrap_err();
    assert_eq!(err.status(), Status::Malformed);
    assert!(err.message().contains("-3"), "message names the value: {}", err.message());
    assert!(err.to_string().starts_with("DLB_ERR_MALFORMED: "), "{err}");
    let dyn_err: &dyn std::error::Error = &err;
    assert!(dyn_err.source().is_none());
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err.clone());
    assert_eq!(boxed.to_string(), err.to_string());
    // Read once, then cleared: no stale message for the next caller.
    assert_eq!(unsafe { ffi::dlb_last_error_code() }, ffi::DLB_OK);
    let _: Error = Error::new(Status::Internal, "x");
}

#[test]
fn alloc_errors() {
    let sentinel = 0x1234usize as *mut ffi::dlb_buffer;
    let mut out = sentinel;
    let st = unsafe { ffi::dlb_buffer_alloc(DLDevice::CPU, DLDataType::F32, 2, ptr::null(), &mut out) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT);
    assert_eq!(out, sentinel, "out untouched on failure");
    let st = unsafe { ffi::dlb_buffer_alloc(DLDevice::CPU, DLDataType::F32, 0, ptr::null(), ptr::null_mut()) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT);
    let shape = [2i64];
    let st = unsafe { ffi::dlb_buffer_alloc(DLDevice::CPU, DLDataType::F32, -1, shape.as_ptr(), &mut out) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT);
    let st = unsafe {
        ffi::dlb_buffer_alloc(DLDevice::named("cuda", 0).unwrap(), DLDataType::F32, 1, shape.as_ptr(), &mut out)
    };
    assert_eq!(st, ffi::DLB_ERR_UNSUPPORTED_DEVICE);
    assert_eq!(out, sentinel);
    unsafe { ffi::dlb_clear_last_error() };

    assert_eq!(status_of(Buffer::alloc(DLDataType::F32, &[1; 65])), Status::InvalidArgument);
    assert_eq!(status_of(Buffer::alloc(DLDataType::F32, &[4, -1])), Status::Malformed);
    assert_eq!(status_of(Buffer::alloc(DLDataType::new(ffi::kDLFloat, 7, 1), &[4])), Status::UnsupportedDtype);
    assert_eq!(status_of(Buffer::alloc(DLDataType::new(99, 8, 1), &[4])), Status::UnsupportedDtype);
    assert_eq!(status_of(Buffer::alloc(DLDataType::new(ffi::kDLInt, 32, 0), &[4])), Status::UnsupportedDtype);
    assert_eq!(status_of(Buffer::alloc(DLDataType::U8, &[1 << 40, 1 << 40])), Status::Overflow);
    assert_eq!(status_of(DLDataType::from_name("not_a_type")), Status::UnsupportedDtype);
    assert_eq!(status_of(DLDataType::new(ffi::kDLBfloat, 32, 1).check()), Status::UnsupportedDtype);
}

#[test]
fn wrap_errors() {
    assert_eq!(status_of(Buffer::wrap_vec(vec![1.0f32; 5], &[2, 3])), Status::InvalidArgument);
    assert_eq!(status_of(Buffer::wrap_vec(vec![1.0f32; 6], &[2, -3])), Status::Malformed);
    assert_eq!(
        status_of(Buffer::wrap_boxed_slice_strided(
            vec![0u8; 6].into(),
            &[3, 2],
            Some(&[1, 4]),
            0,
            BufferFlags::empty()
        )),
        Status::InvalidArgument,
        "a view reaching past the slice is refused"
    );
    assert_eq!(
        status_of(Buffer::wrap_boxed_slice_strided(vec![0u8; 6].into(), &[3], Some(&[-1]), 1, BufferFlags::empty())),
        Status::InvalidArgument,
        "a view reaching before the slice is refused"
    );
    assert_eq!(
        status_of(Buffer::wrap_boxed_slice_strided(
            vec![0u8; 6].into(),
            &[6],
            None,
            0,
            BufferFlags::from_bits_retain(1 << 40)
        )),
        Status::InvalidArgument,
        "unknown flag bits"
    );
    let mut out = ptr::null_mut();
    let st = unsafe { ffi::dlb_buffer_wrap(ptr::null(), 0, None, ptr::null_mut(), &mut out) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT);
    let mut shape = [3i64];
    let view = DLTensor {
        data: ptr::null_mut(),
        device: DLDevice::CPU,
        ndim: 1,
        dtype: DLDataType::F32,
        shape: shape.as_mut_ptr(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    let st = unsafe { ffi::dlb_buffer_wrap(&view, 0, None, ptr::null_mut(), &mut out) };
    assert_eq!(st, ffi::DLB_ERR_MALFORMED, "NULL data with a non-zero size");
    assert!(out.is_null());
    unsafe { ffi::dlb_clear_last_error() };
}

#[test]
fn deleted_buffer_is_refused_and_old_exports_stay_valid() {
    let _g = common::serial();
    let buf = Buffer::wrap_vec(vec![1i32, 2, 3], &[3]).unwrap();
    let before = buf.export(&ExportOptions::new()).unwrap();
    buf.delete().unwrap();
    buf.delete().unwrap();
    assert!(buf.is_deleted());
    let err = buf.export(&ExportOptions::new()).unwrap_err();
    assert_eq!(err.status(), Status::Deleted);
    assert!(!err.message().is_empty());
    assert_eq!(status_of(buf.export_legacy(&ExportOptions::new())), Status::Deleted);
    assert_eq!(status_of(buf.to_host()), Status::Deleted);
    assert_eq!(status_of(buf.dltensor()), Status::Deleted);
    assert_eq!(status_of(unsafe { buf.as_slice::<i32>() }), Status::Deleted);
    assert_eq!(unsafe { *(before.data_ptr().unwrap() as *const i32).add(2) }, 3);
    drop(buf);
    drop(before);
    assert_eq!(live_exports(), 0);
    assert_eq!(unsafe { ffi::dlb_buffer_delete(ptr::null_mut()) }, ffi::DLB_ERR_INVALID_ARGUMENT);
    unsafe { ffi::dlb_clear_last_error() };
}

#[test]
fn read_only_legacy_export_is_a_copy_refused_without_one() {
    let _g = common::serial();
    let ro = Buffer::wrap_boxed_slice_strided(vec![1u8, 2].into(), &[2], None, 0, BufferFlags::READ_ONLY).unwrap();
    let err = ro.export_legacy(&ExportOptions::new().copy(dlbridge::CopyPolicy::Never)).unwrap_err();
    assert_eq!(err.status(), Status::ReadOnly);
    let copy = ro.export_legacy(&ExportOptions::new()).unwrap();
    assert_eq!(live_exports(), 1);
    drop(copy);
    let ok = ro.export_legacy(&ExportOptions::new().allow_read_only_legacy(true)).unwrap();
    drop(ok);
    let v = ro.export(&ExportOptions::new()).unwrap();
    assert!(v.is_read_only());
    drop(v);
    let mut ro2 = ro.clone();
    drop(ro);
    assert_eq!(status_of(ro2.as_mut_slice::<u8>()), Status::ReadOnly);

    let rw = Buffer::wrap_vec(vec![1u8, 2], &[2]).unwrap();
    assert_eq!(status_of(rw.export_legacy(&ExportOptions::new().read_only(true))), Status::ReadOnly);
    assert!(rw.export(&ExportOptions::new().read_only(true)).unwrap().is_read_only());
    assert_eq!(live_exports(), 0);
}

#[test]
fn export_option_errors() {
    let _g = common::serial();
    let buf = Buffer::wrap_vec(vec![1.0f32; 4], &[4]).unwrap();
    let cuda = DLDevice::named("cuda", 0).unwrap();
    assert_eq!(status_of(buf.export(&ExportOptions::new().target_device(cuda))), Status::UnsupportedDevice);
    // A stream on a host export: the header lists it under
    // DLB_ERR_UNSUPPORTED_DEVICE, the library answers DLB_ERR_INVALID_ARGUMENT.
    let err = buf.export(&ExportOptions::new().stream(7)).unwrap_err();
    assert!(matches!(err.status(), Status::UnsupportedDevice | Status::InvalidArgument), "{err}");
    assert!(err.message().contains("stream"), "{err}");
    let st = unsafe { ffi::dlb_export_versioned(ptr::null_mut(), ptr::null(), &mut ptr::null_mut()) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT);
    unsafe { ffi::dlb_clear_last_error() };
    assert_eq!(live_exports(), 0);
}

#[test]
fn import_errors_leave_ownership_with_the_caller() {
    let _g = common::serial();
    let deleted = counter();
    let opts = ImportOptions::new();

    let mut spec = ForeignSpec::new(vec![1.0f32; 4], &[2, -2]);
    spec.strides = Some(vec![2, 1]);
    let raw = spec.versioned(&deleted);
    assert_eq!(status_of(unsafe { import_versioned(raw, &opts) }), Status::Malformed);
    unsafe { ffi::dlb_managed_free_versioned(raw) };

    let mut spec = ForeignSpec::new(Vec::<f32>::new(), &[4]);
    spec.dtype = DLDataType::F32;
    let raw = spec.versioned(&deleted);
    assert_eq!(status_of(unsafe { import_versioned(raw, &opts) }), Status::Malformed, "NULL data, 4 elements");
    unsafe { ffi::dlb_managed_free_versioned(raw) };

    let mut spec = ForeignSpec::new(vec![0u8; 4], &[4]);
    spec.dtype = DLDataType::new(42, 8, 1);
    let raw = spec.versioned(&deleted);
    assert_eq!(status_of(unsafe { import_versioned(raw, &opts) }), Status::UnsupportedDtype);
    unsafe { ffi::dlb_managed_free_versioned(raw) };

    let mut spec = ForeignSpec::new(vec![0u8; 4], &[4]);
    spec.device = DLDevice::new(77, 0);
    let raw = spec.versioned(&deleted);
    assert_eq!(status_of(unsafe { import_versioned(raw, &opts) }), Status::UnsupportedDevice);
    unsafe { ffi::dlb_managed_free_versioned(raw) };

    let mut spec = ForeignSpec::new(vec![0.0f64; 6], &[3, 2]);
    spec.strides = Some(vec![1, 3]);
    let raw = spec.versioned(&deleted);
    let contiguous = ImportOptions::new().require_contiguous(true);
    assert_eq!(status_of(unsafe { import_versioned(raw, &contiguous) }), Status::UnsupportedLayout);
    unsafe { ffi::dlb_managed_free_versioned(raw) };

    let mut spec = ForeignSpec::new(vec![0.0f64; 6], &[5]);
    spec.byte_offset = 8;
    let raw = spec.versioned(&deleted);
    let aligned = ImportOptions::new().require_alignment(4096);
    assert_eq!(status_of(unsafe { import_versioned(raw, &aligned) }), Status::Alignment);
    unsafe { ffi::dlb_managed_free_versioned(raw) };

    let mut spec = ForeignSpec::new(vec![0u8; 2], &[2]);
    spec.version = dlbridge::DLPackVersion { major: 0, minor: 9 };
    let raw = spec.versioned(&deleted);
    assert_eq!(status_of(unsafe { import_versioned(raw, &opts) }), Status::Version);
    unsafe { ffi::dlb_managed_free_versioned(raw) };

    assert_eq!(count(&deleted), 7, "each refused tensor freed once, by its owner");
    let mut out = ptr::null_mut();
    let st = unsafe { ffi::dlb_import_versioned(ptr::null_mut(), ptr::null(), &mut out) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT);
    unsafe { ffi::dlb_managed_free_versioned(ptr::null_mut()) };
    unsafe { ffi::dlb_managed_free_legacy(ptr::null_mut()) };
    unsafe { ffi::dlb_clear_last_error() };
}

#[test]
fn validate_and_element_access_errors() {
    let mut shape = [2i64, 2];
    let data = [0f32; 4];
    let t = DLTensor {
        data: data.as_ptr() as *mut _,
        device: DLDevice::CPU,
        ndim: 2,
        dtype: DLDataType::F32,
        shape: shape.as_mut_ptr(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    unsafe { dlbridge::validate(&t, ValidateFlags::empty()) }.unwrap();
    assert_eq!(status_of(unsafe { dlbridge::validate(&t, ValidateFlags::STRIDES_REQUIRED) }), Status::Malformed);
    assert_eq!(
        status_of(unsafe { dlbridge::validate(&t, ValidateFlags::from_bits_retain(1 << 20)) }),
        Status::InvalidArgument
    );

    let buf = Buffer::wrap_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(status_of(unsafe { buf.as_slice::<f64>() }), Status::UnsupportedDtype);
    assert_eq!(status_of(buf.get::<f32>(&[2])), Status::InvalidArgument);
    assert_eq!(status_of(buf.get::<f32>(&[0, 0])), Status::InvalidArgument);
    assert_eq!(status_of(buf.get::<i32>(&[0])), Status::UnsupportedDtype);

    let mut vt = ffi::dlb_backend_vtable::default();
    let mut backend = ptr::null_mut();
    let st = unsafe { ffi::dlb_backend_create(&vt, ptr::null_mut(), &mut backend) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT, "a backend needs a name");
    vt.struct_size = 4;
    vt.name = c"x".as_ptr();
    let st = unsafe { ffi::dlb_backend_create(&vt, ptr::null_mut(), &mut backend) };
    assert_eq!(st, ffi::DLB_ERR_INVALID_ARGUMENT, "struct_size too small");
    assert!(backend.is_null());
    unsafe { ffi::dlb_clear_last_error() };
}
