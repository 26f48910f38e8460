//! Host views are the library's decision (`dlb_buffer_host_view`): the
//! crate's slices, `get` and `to_vec` give the library's status and message
//! for a backend's storage, a deleted buffer, a read-only buffer and a
//! strided layout, and read what it allows.

mod common;

use std::sync::atomic::Ordering;

use dlbridge::{ffi, live_exports, Buffer, BufferFlags, Status};

#[test]
fn backend_storage_has_no_host_view_but_copies() {
    let _g = common::serial();
    let counts = common::leak_counts();
    let backend = common::remote_backend(counts);
    let buf = common::remote_buffer(backend, vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    unsafe { ffi::dlb_backend_release(backend) };

    let e = buf.host_view(false).unwrap_err();
    assert_eq!(e.status(), Status::NotZeroCopy, "{e}");
    assert!(e.message().contains("dlb_buffer_to_host"), "the library's message: {}", e.message());
    let e = unsafe { buf.as_slice::<f32>() }.unwrap_err();
    assert_eq!(e.status(), Status::NotZeroCopy, "{e}");
    assert_eq!(buf.get::<f32>(&[1, 0]).unwrap_err().status(), Status::NotZeroCopy);
    // to_vec copies through the backend, as the message says.
    assert_eq!(buf.to_vec::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(counts.copies.load(Ordering::SeqCst), 1);
    drop(buf);
    assert_eq!(counts.freed.load(Ordering::SeqCst), 1);
    assert_eq!(live_exports(), 0);
    drop(unsafe { Box::from_raw(counts as *const common::RemoteCounts as *mut common::RemoteCounts) });
}

#[test]
fn the_view_is_the_librarys() {
    let buf = Buffer::wrap_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let view = buf.host_view(true).unwrap();
    assert_eq!(view.data, buf.data_ptr());
    assert_eq!((view.numel, view.nbytes, view.writable), (6, 24, 1));
    assert_eq!(view.dtype, dlbridge::DLDataType::I32);
    assert_eq!(unsafe { buf.as_slice::<i32>() }.unwrap().as_ptr() as *mut _, buf.data_ptr());
    let e = unsafe { buf.as_slice::<f32>() }.unwrap_err();
    assert_eq!(e.status(), Status::UnsupportedDtype);
}

#[test]
fn read_only_buffers_refuse_write_views_with_the_librarys_message() {
    let mut ro =
        Buffer::wrap_boxed_slice_strided(vec![7u8; 4].into_boxed_slice(), &[4], None, 0, BufferFlags::READ_ONLY)
            .unwrap();
    let e = ro.as_mut_slice::<u8>().unwrap_err();
    assert_eq!(e.status(), Status::ReadOnly);
    assert!(e.message().contains("read-only"), "{}", e.message());
    assert_eq!(ro.host_view(false).unwrap().writable, 0);
    assert_eq!(unsafe { ro.as_slice::<u8>() }.unwrap(), &[7, 7, 7, 7]);
}

#[test]
fn deleted_buffers_have_no_view() {
    let buf = Buffer::wrap_vec(vec![1.0f64; 3], &[3]).unwrap();
    buf.delete().unwrap();
    for e in [buf.host_view(false).unwrap_err(), buf.to_vec::<f64>().unwrap_err(), buf.get::<f64>(&[0]).unwrap_err()] {
        assert_eq!(e.status(), Status::Deleted);
        assert!(e.message().contains("deleted"), "{}", e.message());
    }
}

#[test]
fn strided_buffers_are_read_through_the_librarys_copy() {
    // A transposed 2 x 3 view of [0, 1, 2, 3, 4, 5].
    let buf = Buffer::wrap_boxed_slice_strided(
        (0..6).map(|v| v as f32).collect::<Vec<_>>().into_boxed_slice(),
        &[3, 2],
        Some(&[1, 3]),
        0,
        BufferFlags::empty(),
    )
    .unwrap();
    let e = unsafe { buf.as_slice::<f32>() }.unwrap_err();
    assert_eq!(e.status(), Status::UnsupportedLayout);
    assert!(e.message().contains("compact"), "{}", e.message());
    assert_eq!(buf.to_vec::<f32>().unwrap(), &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(buf.get::<f32>(&[2, 1]).unwrap(), 5.0);
    assert_eq!(buf.get::<f32>(&[1, 0]).unwrap(), 1.0);
}
