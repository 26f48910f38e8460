//! Shared buffers from Rust: a child process (this test binary again) and
//! the parent see each other's writes through a buffer passed over a Unix
//! socket; bad descriptions are refused with their status; Drop closes.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;

use dlbridge::share;
use dlbridge::ShareFlags;
use dlbridge::{DLDataType, Status};

// The tests count this process's file descriptors and mappings: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const F32: DLDataType = DLDataType { code: 2, bits: 32, lanes: 1 };

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count() - 1
}

#[test]
fn same_process_round_trip_and_refusals() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fds = open_fds();
    let maps = share::shared_mappings();
    {
        let mut a = share::alloc_shared(F32, &[2, 3]).unwrap();
        a.as_mut_slice::<f32>().unwrap().copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let d = share::share(&a, ShareFlags::empty()).unwrap();
        let b = d.open(ShareFlags::empty()).unwrap();
        drop(d);
        assert_eq!(b.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_ne!(a.data_ptr(), b.data_ptr());
        a.as_mut_slice::<f32>().unwrap()[0] = 9.0;
        assert_eq!(b.get::<f32>(&[0, 0]).unwrap(), 9.0);
        let d = share::share(&a, ShareFlags::empty()).unwrap();
        let mut bytes = d.description().to_vec();
        bytes.pop();
        let e = share::open_shared(d.fd(), &bytes, ShareFlags::empty()).unwrap_err();
        assert_eq!(e.status(), Status::Malformed);
        assert!(e.message().contains("truncated"), "{}", e.message());
        let mut bytes = d.description().to_vec();
        bytes[4] = 2;
        assert_eq!(share::open_shared(d.fd(), &bytes, ShareFlags::empty()).unwrap_err().status(), Status::Version);
        // The fd is borrowed: the flag that would let the library close it is refused, and it stays open.
        let e = d.open(ShareFlags::TAKE_FD).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert_eq!(d.open(ShareFlags::empty()).unwrap().to_vec::<f32>().unwrap()[0], 9.0);
        // Shared read-only, the memory is sealed against new writable
        // mappings: only read-only shares of it from now on.
        let ro = share::share(&a, ShareFlags::READ_ONLY).unwrap().open(ShareFlags::empty()).unwrap();
        assert!(ro.is_read_only());
        assert_eq!(share::share(&a, ShareFlags::empty()).unwrap_err().status(), Status::ReadOnly);

        let plain = dlbridge::Buffer::wrap_vec(vec![1.0f32; 4], &[4]).unwrap();
        assert_eq!(share::share(&plain, ShareFlags::empty()).unwrap_err().status(), Status::NotZeroCopy);
        let copied = share::share(&plain, ShareFlags::COPY_IF_NEEDED).unwrap().open(ShareFlags::empty()).unwrap();
        assert_eq!(copied.to_vec::<f32>().unwrap(), vec![1.0; 4]);
        let before = share::shared_mappings();
        let kept = share::copy_shared(&plain, ShareFlags::empty()).unwrap();
        assert_eq!(share::shared_mappings(), before + 1);
        assert_eq!(kept.to_vec::<f32>().unwrap(), vec![1.0; 4]);
        assert!(!kept.is_read_only());
        let seen = share::share(&kept, ShareFlags::empty()).unwrap().open(ShareFlags::empty()).unwrap();
        assert_eq!(seen.to_vec::<f32>().unwrap(), vec![1.0; 4]);
        let frozen = share::copy_shared(&plain, ShareFlags::READ_ONLY).unwrap();
        assert!(frozen.is_read_only());
        let e = share::copy_shared(&plain, ShareFlags::COPY_IF_NEEDED).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
    }
    assert_eq!(share::shared_mappings(), maps);
    assert_eq!(open_fds(), fds);
}

// The child's side: runs only when the parent starts this binary with
// DLB_SHARE_CHILD_SOCKET set.
#[test]
fn child_side() {
    let Ok(path) = std::env::var("DLB_SHARE_CHILD_SOCKET") else { return };
    let mut s = UnixStream::connect(path).unwrap();
    let d = share::recv(&s).unwrap().expect("a descriptor");
    let mut b = d.open(ShareFlags::empty()).unwrap();
    drop(d);
    let x = b.as_mut_slice::<f32>().unwrap();
    assert_eq!(x[7], 7.0); // the parent's write
    for v in x.iter_mut() {
        *v *= 10.0;
    }
    drop(b);
    s.write_all(b"k").unwrap();
    assert_eq!(share::shared_mappings(), 0);
}

#[test]
fn a_child_process_and_the_parent_see_each_others_writes() {
    if std::env::var("DLB_SHARE_CHILD_SOCKET").is_ok() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("dlb-share-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let listener = UnixListener::bind(&path).unwrap();
    let mut a = share::alloc_shared(F32, &[8]).unwrap();
    for (i, v) in a.as_mut_slice::<f32>().unwrap().iter_mut().enumerate() {
        *v = i as f32;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_side", "--nocapture"])
        .env("DLB_SHARE_CHILD_SOCKET", &path)
        .spawn()
        .unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    share::send(&conn, &share::share(&a, ShareFlags::empty()).unwrap()).unwrap();
    let mut ack = [0u8; 1];
    conn.read_exact(&mut ack).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(a.to_vec::<f32>().unwrap(), (0..8).map(|i| i as f32 * 10.0).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}
