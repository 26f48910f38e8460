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
        let ro = share::share(&a, ShareFlags::READ_ONLY).unwrap().open(ShareFlags::empty()).unwrap();
        assert!(ro.is_read_only());

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

#[test]
fn pooled_tensors_travel_as_tickets() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    share::pool_trim();
    let fds = open_fds();
    let (_, refs) = share::pool_state();
    {
        let plain = dlbridge::Buffer::wrap_vec((0..16).map(|i| i as f32).collect::<Vec<_>>(), &[16]).unwrap();
        let mut a = share::copy_shared(&plain, ShareFlags::POOLED).unwrap();
        assert_eq!(share::pool_state().1, refs + 1);
        let ticket = share::PoolTicket::issue(&a).unwrap();
        let source = ticket.source().unwrap();
        assert_eq!(source.pid, std::process::id() as i32);
        // This process maps the slab: the ticket opens over the same memory, once.
        let b = share::PoolTicket::from_bytes(ticket.bytes())
            .open(None, ShareFlags::empty())
            .unwrap()
            .expect("the slab is mapped here");
        assert_eq!(a.data_ptr(), b.data_ptr());
        a.as_mut_slice::<f32>().unwrap()[3] = -3.0;
        assert_eq!(b.get::<f32>(&[3]).unwrap(), -3.0);
        assert_eq!(ticket.open(None, ShareFlags::empty()).unwrap_err().status(), Status::Deleted);
        let mut bad = ticket.bytes().to_vec();
        bad[20] ^= 1;
        assert_eq!(
            share::PoolTicket::from_bytes(&bad).open(None, ShareFlags::empty()).unwrap_err().status(),
            Status::Malformed
        );
        assert_eq!(ticket.open(None, ShareFlags::TAKE_FD).unwrap_err().status(), Status::InvalidArgument);
        assert!(share::pool_file(source.dev, source.ino).unwrap().fd().is_some());
        // Larger than the pool, or not pooled: no ticket.
        let big = dlbridge::Buffer::wrap_vec(
            vec![0u8; share::DLB_SHARE_POOL_MAX_BYTES + 1],
            &[share::DLB_SHARE_POOL_MAX_BYTES as i64 + 1],
        )
        .unwrap();
        let own = share::copy_shared(&big, ShareFlags::POOLED).unwrap();
        assert_eq!(share::PoolTicket::issue(&own).unwrap_err().status(), Status::NotZeroCopy);
        assert_eq!(share::PoolTicket::issue(&plain).unwrap_err().status(), Status::NotZeroCopy);
    }
    assert_eq!(share::pool_state().1, refs);
    share::pool_trim();
    assert_eq!(open_fds(), fds);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

// The pooled child's side: runs only when the parent starts this binary
// with DLB_POOL_CHILD_SOCKET set. It does not map the slab: the first open
// asks for the file, which the parent sends over the socket.
#[test]
fn pool_child_side() {
    let Ok(path) = std::env::var("DLB_POOL_CHILD_SOCKET") else { return };
    let ticket = share::PoolTicket::from_bytes(&unhex(&std::env::var("DLB_POOL_TICKET").unwrap()));
    let mut s = UnixStream::connect(path).unwrap();
    assert!(ticket.open(None, ShareFlags::empty()).unwrap().is_none(), "the slab is not mapped in a new process");
    let file = share::recv(&s).unwrap().expect("the slab's file");
    let mut b = ticket.open(file.fd(), ShareFlags::empty()).unwrap().expect("opened with the slab's file");
    drop(file);
    let x = b.as_mut_slice::<f32>().unwrap();
    assert_eq!(x[5], 5.0);
    for v in x.iter_mut() {
        *v *= 10.0;
    }
    drop(b);
    assert_eq!(share::pool_state(), (1, 0));
    s.write_all(b"k").unwrap();
}

#[test]
fn a_child_process_opens_a_pool_ticket_and_the_parent_sees_its_writes() {
    if std::env::var("DLB_POOL_CHILD_SOCKET").is_ok() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("dlb-pool-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let listener = UnixListener::bind(&path).unwrap();
    let plain = dlbridge::Buffer::wrap_vec((0..8).map(|i| i as f32).collect::<Vec<_>>(), &[8]).unwrap();
    let a = share::copy_shared(&plain, ShareFlags::POOLED).unwrap();
    let ticket = share::PoolTicket::issue(&a).unwrap();
    let source = ticket.source().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "pool_child_side", "--nocapture"])
        .env("DLB_POOL_CHILD_SOCKET", &path)
        .env("DLB_POOL_TICKET", hex(ticket.bytes()))
        .spawn()
        .unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    share::send(&conn, &share::pool_file(source.dev, source.ino).unwrap()).unwrap();
    let mut ack = [0u8; 1];
    conn.read_exact(&mut ack).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(a.to_vec::<f32>().unwrap(), (0..8).map(|i| i as f32 * 10.0).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}
