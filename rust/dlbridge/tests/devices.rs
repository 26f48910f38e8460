//! The device table is the library's: the crate's answers for every code
//! equal what the DLPack specification says of it (a table written here),
//! and compact strides, layouts and resolution come from the C functions.

use dlbridge::ffi::{
    self, DLB_DEVICE_ADDRESS, DLB_DEVICE_CUDA_BACKEND, DLB_DEVICE_HAS_STREAMS, DLB_DEVICE_HOST_READABLE,
    DLB_DEVICE_KNOWN,
};
use dlbridge::prelude::*;
use dlbridge::{
    compact_strides, describe_layout, Buffer, BufferFlags, CopyPolicy, DLDataType, DLDevice, DeviceInfo, ExportOptions,
    Status,
};

/// The table as the DLPack header (1.3 and main) defines the codes, with
/// the properties its comments give each device: written here, not read from
/// the library, so that the two can disagree.
const DLPACK_DEVICES: &[(i32, &str, u32)] = {
    const K: u32 = DLB_DEVICE_KNOWN;
    const H: u32 = DLB_DEVICE_HOST_READABLE;
    const A: u32 = DLB_DEVICE_ADDRESS;
    const S: u32 = DLB_DEVICE_HAS_STREAMS;
    const C: u32 = DLB_DEVICE_CUDA_BACKEND;
    &[
        (1, "cpu", K | H | A),
        (2, "cuda", K | A | S | C),
        (3, "cuda_host", K | H | A | S | C),
        (4, "opencl", K),
        (7, "vulkan", K),
        (8, "metal", K),
        (9, "vpi", K | A),
        (10, "rocm", K | A | S),
        (11, "rocm_host", K | H | A | S),
        (12, "ext_dev", K | A),
        (13, "cuda_managed", K | H | A | S | C),
        (14, "oneapi", K | A),
        (15, "webgpu", K),
        (16, "hexagon", K | A),
        (17, "maia", K | A),
        (18, "trn", K | A),
        (19, "tpu", K | A),
        (20, "tpu_host", K | A),
    ]
};

#[test]
fn every_code_from_minus_one_to_255_is_as_dlpack_defines_it() {
    for code in -1..=255 {
        let want = DLPACK_DEVICES.iter().find(|(c, _, _)| *c == code);
        match (DeviceInfo::of(code), want) {
            (Ok(info), Some(&(_, name, flags))) => {
                assert_eq!(info.device_type, code);
                assert_eq!(info.flags.bits(), flags, "flags of {code} ({name})");
                assert_eq!(info.name, name, "name of {code}");
                assert_eq!(DLDevice::new(code, 0).is_host_accessible(), flags & DLB_DEVICE_HOST_READABLE != 0);
                assert_eq!(DeviceInfo::named(name).unwrap().device_type, code);
            }
            (Err(e), None) => {
                assert_eq!(e.status(), Status::UnsupportedDevice, "{code}");
                assert!(e.message().contains(&code.to_string()), "{}", e.message());
                assert!(!DLDevice::new(code, 0).is_host_accessible());
            }
            (got, want) => panic!("code {code}: library {got:?}, DLPack {want:?}"),
        }
    }
    assert!(!DeviceInfo::named("opencl").unwrap().data_is_address());
    assert!(DeviceInfo::named("rocm").unwrap().has_streams());
    assert_eq!(DeviceInfo::named("gpu").unwrap_err().status(), Status::UnsupportedDevice);
}

#[test]
fn compact_strides_come_from_the_library() {
    assert_eq!(compact_strides(&[2, 3, 1, 5]).unwrap(), vec![15, 5, 5, 1]);
    assert_eq!(compact_strides(&[]).unwrap(), Vec::<i64>::new());
    assert_eq!(compact_strides(&[0, i64::MAX, 4]).unwrap(), vec![i64::MAX, 4, 1]);
    assert_eq!(compact_strides(&[2, -1]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(compact_strides(&[2, i64::MAX / 2, 3]).unwrap_err().status(), Status::Overflow);
    // What a buffer made without strides carries.
    let b = Buffer::alloc(DLDataType::F32, &[4, 1, 6]).unwrap();
    assert_eq!(b.strides(), &compact_strides(&[4, 1, 6]).unwrap()[..]);
}

#[test]
fn layouts_are_described_by_the_library() {
    let info = describe_layout(DLDataType::F32, &[3, 4], Some(&[-4, 2])).unwrap();
    assert_eq!((info.numel, info.nbytes, info.element_bits, info.contiguous), (12, 48, 32, 0));
    assert_eq!((info.min_offset, info.max_offset), (-8, 6));
    assert_eq!(DLDataType::new(17, 4, 1).element_bytes(), None);
    assert_eq!(DLDataType::new(ffi::kDLComplex, 64, 2).element_bytes(), Some(16));
    assert_eq!(DLDataType::new(ffi::kDLFloat, 12, 1).element_bytes(), None);
    assert_eq!(describe_layout(DLDataType::F32, &[2, -1], None).unwrap_err().status(), Status::Malformed);
    // A strided wrap is checked against the slice with those facts.
    let e = Buffer::wrap_boxed_slice_strided(
        vec![0f32; 6].into_boxed_slice(),
        &[3, 4],
        Some(&[-4, 2]),
        0,
        BufferFlags::empty(),
    );
    assert_eq!(e.unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn resolve_returns_the_buffer_or_a_host_copy() {
    let b = Buffer::wrap_vec((0..6).map(|i| i as f32).collect(), &[2, 3]).unwrap();
    let same = b.resolve(&Default::default()).unwrap();
    assert_eq!(same.as_ptr(), b.as_ptr());
    let copy = b.resolve(&ExportOptions::default().copy(CopyPolicy::Always)).unwrap();
    assert_ne!(copy.as_ptr(), b.as_ptr());
    assert!(copy.flags().contains(BufferFlags::COPIED));
    assert_eq!(copy.to_vec::<f32>().unwrap(), &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn a_literal_stream_zero_is_refused_by_the_library() {
    let b = Buffer::alloc(DLDataType::F32, &[4]).unwrap();
    // No stream: fine; any given stream, 0 included, is refused for host memory.
    assert!(b.export(&ExportOptions::default().stream(0)).is_ok());
    let e = b.export(&ExportOptions::default().given_stream(0)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("host memory"), "{}", e.message());
    assert_eq!(b.resolve(&ExportOptions::default().given_stream(2)).unwrap_err().status(), Status::InvalidArgument);
}
