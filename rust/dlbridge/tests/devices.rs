//! The device table is the library's: the crate's answers for every code
//! equal what a C program reads from the same library, and compact strides
//! and resolution come from the C functions.

use dlbridge::ffi::{self, DLB_DEVICE_ADDRESS, DLB_DEVICE_HAS_STREAMS, DLB_DEVICE_HOST_READABLE, DLB_DEVICE_KNOWN};
use dlbridge::{compact_strides, Buffer, CopyPolicy, DLDataType, DLDevice, DeviceInfo, ExportOptions, Status};

#[allow(dead_code)]
mod c {
    include!(concat!(env!("OUT_DIR"), "/c_layout.rs"));
}

#[test]
fn every_code_from_minus_one_to_255_agrees_with_the_c_answer() {
    assert_eq!(c::C_DEVICE_TABLE_ERROR, None, "build.rs could not read the C device table");
    let mut known = Vec::new();
    for code in -1..=255 {
        let from_c = c::C_DEVICE_TABLE.iter().find(|(c, _, _)| *c == code);
        match (DeviceInfo::of(code), from_c) {
            (Ok(info), Some(&(_, flags, name))) => {
                assert_eq!(info.device_type, code);
                assert_eq!(info.flags, flags, "flags of {code}");
                assert_eq!(info.name, name, "name of {code}");
                assert_eq!(DLDevice::new(code, 0).is_host_accessible(), flags & DLB_DEVICE_HOST_READABLE != 0);
                assert_eq!(DeviceInfo::named(name).unwrap().device_type, code);
                known.push(code);
            }
            (Err(e), None) => {
                assert_eq!(e.status, Status::UnsupportedDevice, "{code}");
                assert!(e.message.contains(&code.to_string()), "{}", e.message);
                assert!(!DLDevice::new(code, 0).is_host_accessible());
            }
            (got, want) => panic!("code {code}: Rust {got:?}, C {want:?}"),
        }
    }
    // DLPack 1.3 and main: 1..=20 except 5 and 6.
    assert_eq!(known, (1..=20).filter(|c| *c != 5 && *c != 6).collect::<Vec<_>>());
    let managed = DeviceInfo::named("cuda_managed").unwrap();
    assert_eq!(
        managed.flags,
        DLB_DEVICE_KNOWN | DLB_DEVICE_HOST_READABLE | DLB_DEVICE_ADDRESS | DLB_DEVICE_HAS_STREAMS
    );
    assert!(!DeviceInfo::named("opencl").unwrap().data_is_address());
    assert!(DeviceInfo::named("rocm").unwrap().has_streams());
    assert_eq!(DeviceInfo::named("gpu").unwrap_err().status, Status::UnsupportedDevice);
}

#[test]
fn compact_strides_come_from_the_library() {
    assert_eq!(compact_strides(&[2, 3, 1, 5]).unwrap(), vec![15, 5, 5, 1]);
    assert_eq!(compact_strides(&[]).unwrap(), Vec::<i64>::new());
    assert_eq!(compact_strides(&[0, i64::MAX, 4]).unwrap(), vec![i64::MAX, 4, 1]);
    assert_eq!(compact_strides(&[2, -1]).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(compact_strides(&[2, i64::MAX / 2, 3]).unwrap_err().status, Status::Overflow);
    // What a buffer made without strides carries.
    let b = Buffer::alloc(DLDataType::F32, &[4, 1, 6]).unwrap();
    assert_eq!(b.strides(), &compact_strides(&[4, 1, 6]).unwrap()[..]);
}

#[test]
fn resolve_returns_the_buffer_or_a_host_copy() {
    let b = Buffer::wrap_vec((0..6).map(|i| i as f32).collect(), &[2, 3]).unwrap();
    let same = b.resolve(&Default::default()).unwrap();
    assert_eq!(same.as_ptr(), b.as_ptr());
    let copy = b.resolve(&ExportOptions::default().copy(CopyPolicy::Always)).unwrap();
    assert_ne!(copy.as_ptr(), b.as_ptr());
    assert_eq!(copy.flags() & ffi::DLB_BUFFER_COPIED, ffi::DLB_BUFFER_COPIED);
    assert_eq!(copy.as_slice::<f32>().unwrap(), &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn a_literal_stream_zero_is_refused_by_the_library() {
    let b = Buffer::alloc(DLDataType::F32, &[4]).unwrap();
    // No stream: fine; any given stream, 0 included, is refused for host memory.
    assert!(b.export(&ExportOptions::default().stream(0)).is_ok());
    let e = b.export(&ExportOptions::default().given_stream(0)).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("host memory"), "{}", e.message);
    assert_eq!(b.resolve(&ExportOptions::default().given_stream(2)).unwrap_err().status, Status::InvalidArgument);
}
