//! CUDA IPC descriptors from Rust, against the test suite's fake CUDA
//! driver (tests/cuda/fake_cuda.cpp, built as <build>/tests/cuda/
//! libfake_cuda.so; DLB_TEST_FAKE_CUDA names it, scripts/test.d/50-rust.sh
//! sets it). Its SONAME is libcuda.so.1: it is loaded here with
//! dlopen(RTLD_GLOBAL) before the library first needs a driver, and the
//! library's own dlopen("libcuda.so.1") then gets that object.
//!
//! A descriptor of CUDA device memory has no file; it travels over a socket
//! as it is; opening it in the process that made it is refused as on
//! hardware; a fork()ed child (the fake's device memory is a shared mapping,
//! and its IPC handles open in a forked child) opens it, is ordered after
//! the producer's delayed write by the event, writes a value the parent
//! sees, and closes its handle once. Without DLB_TEST_FAKE_CUDA only the
//! test of a description without a file runs.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::os::unix::net::UnixStream;
use std::ptr;
use std::sync::{Mutex, MutexGuard, OnceLock};

use dlbridge::ffi;
use dlbridge::share::{self, Descriptor, Kind};
use dlbridge::ShareFlags;
use dlbridge::{Buffer, DLDataType, DLDevice, ExportOptions, Status};

const F32: DLDataType = DLDataType { code: 2, bits: 32, lanes: 1 };
/// Floats in the shared tensor, 4 x 8.
const COUNT: usize = 32;

// The legacy default stream: CUstream 1, a value and not an address.
#[allow(clippy::manual_dangling_ptr)]
const LEGACY: *mut c_void = 1 as *mut c_void;

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
    fn fork() -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(status: c_int) -> !;
    fn socketpair(domain: c_int, kind: c_int, protocol: c_int, sv: *mut c_int) -> c_int;
    fn usleep(usec: c_uint) -> c_int;
}
const RTLD_NOW: c_int = 2;
const RTLD_GLOBAL: c_int = 0x100;

type Status0 = c_int; // CUresult
#[allow(non_snake_case)]
struct Fake {
    cuInit: unsafe extern "C" fn(c_uint) -> Status0,
    cuDevicePrimaryCtxRetain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> Status0,
    cuCtxPushCurrent_v2: unsafe extern "C" fn(*mut c_void) -> Status0,
    cuStreamCreate: unsafe extern "C" fn(*mut *mut c_void, c_uint) -> Status0,
    cuStreamDestroy_v2: unsafe extern "C" fn(*mut c_void) -> Status0,
    cuStreamSynchronize: unsafe extern "C" fn(*mut c_void) -> Status0,
    cuLaunchHostFunc: unsafe extern "C" fn(*mut c_void, *const c_void, *mut c_void) -> Status0,
    cuMemcpyHtoDAsync_v2: unsafe extern "C" fn(u64, *const c_void, usize, *mut c_void) -> Status0,
    fake_cuda_ipc_counts: unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_int),
}

/// A function pointer of type `F` from a symbol's address.
///
/// # Safety
/// `p` must be a function of type `F`.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    std::mem::transmute_copy(&p)
}

/// The fake driver, loaded once for the whole binary (None: not set).
fn fake() -> Option<&'static Fake> {
    static FAKE: OnceLock<Option<Fake>> = OnceLock::new();
    FAKE.get_or_init(|| {
        let path = std::env::var("DLB_TEST_FAKE_CUDA").ok().filter(|p| !p.is_empty())?;
        let c = CString::new(path.clone()).unwrap();
        // SAFETY: a NUL-terminated path; the library stays loaded.
        let lib = unsafe { dlopen(c.as_ptr(), RTLD_NOW | RTLD_GLOBAL) };
        if lib.is_null() {
            // SAFETY: dlerror's message is valid until the next dl call.
            let why = unsafe { std::ffi::CStr::from_ptr(dlerror()) }.to_string_lossy().into_owned();
            panic!("dlopen({path}) failed: {why}");
        }
        let sym = |name: &str| {
            let n = CString::new(name).unwrap();
            // SAFETY: a NUL-terminated name in a loaded library.
            let p = unsafe { dlsym(lib, n.as_ptr()) };
            assert!(!p.is_null(), "{path} has no {name}");
            p
        };
        // SAFETY: each symbol is the fake's function of that signature.
        let f = unsafe {
            Fake {
                cuInit: as_fn(sym("cuInit")),
                cuDevicePrimaryCtxRetain: as_fn(sym("cuDevicePrimaryCtxRetain")),
                cuCtxPushCurrent_v2: as_fn(sym("cuCtxPushCurrent_v2")),
                cuStreamCreate: as_fn(sym("cuStreamCreate")),
                cuStreamDestroy_v2: as_fn(sym("cuStreamDestroy_v2")),
                cuStreamSynchronize: as_fn(sym("cuStreamSynchronize")),
                cuLaunchHostFunc: as_fn(sym("cuLaunchHostFunc")),
                cuMemcpyHtoDAsync_v2: as_fn(sym("cuMemcpyHtoDAsync_v2")),
                fake_cuda_ipc_counts: as_fn(sym("fake_cuda_ipc_counts")),
            }
        };
        // SAFETY: plain driver calls.
        assert_eq!(unsafe { (f.cuInit)(0) }, 0);
        Some(f)
    })
    .as_ref()
}

impl Fake {
    /// Device 0's primary context made current on this thread.
    fn make_current(&self) {
        let mut ctx = ptr::null_mut();
        // SAFETY: plain driver calls with writable outs.
        unsafe {
            assert_eq!((self.cuDevicePrimaryCtxRetain)(&mut ctx, 0), 0);
            assert_eq!((self.cuCtxPushCurrent_v2)(ctx), 0);
        }
    }

    /// (opened, closed, open now) IPC memory handles of this process.
    fn ipc_counts(&self) -> (c_int, c_int, c_int) {
        let (mut o, mut c, mut n) = (0, 0, 0);
        // SAFETY: writable outs.
        unsafe { (self.fake_cuda_ipc_counts)(&mut o, &mut c, &mut n) };
        (o, c, n)
    }
}

// The tests count this process's file descriptors and exports, and one of
// them forks: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count() - 1
}

/// A compact float32 CUDA buffer of the library's CUDA backend on device 0.
fn cuda_alloc(shape: &[i64]) -> Buffer {
    let mut backend = ptr::null_mut();
    let mut raw = ptr::null_mut();
    let cuda = DLDevice { device_type: 2, device_id: 0 };
    // SAFETY: writable outs; shape is read during the call; the backend
    // reference is ours and released after the buffer took its own.
    unsafe {
        assert_eq!(ffi::dlb_cuda_backend_create(0, &mut backend), ffi::DLB_OK);
        let s = ffi::dlb_cuda_buffer_alloc(backend, cuda, F32, shape.len() as i32, shape.as_ptr(), &mut raw);
        ffi::dlb_backend_release(backend);
        assert_eq!(s, ffi::DLB_OK, "dlb_cuda_buffer_alloc failed");
        Buffer::from_raw(raw).unwrap()
    }
}

/// Where a CUDA buffer's element 0 is (an export gives the address).
fn origin_of(b: &Buffer) -> u64 {
    let m = b.export(&ExportOptions::default()).unwrap();
    m.data_ptr().unwrap() as u64
}

/// A connected pair of Unix seqpacket sockets.
fn seqpacket_pair() -> (UnixStream, UnixStream) {
    use std::os::fd::FromRawFd;
    const AF_UNIX: c_int = 1;
    const SOCK_SEQPACKET: c_int = 5;
    let mut sv = [0 as c_int; 2];
    // SAFETY: a writable pair of ints.
    assert_eq!(unsafe { socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv.as_mut_ptr()) }, 0);
    // SAFETY: two new sockets, ours.
    unsafe { (UnixStream::from_raw_fd(sv[0]), UnixStream::from_raw_fd(sv[1])) }
}

fn set_stream(b: &Buffer, stream: *mut c_void) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { ffi::dlb_cuda_buffer_set_stream(b.as_ptr(), stream as i64) }, ffi::DLB_OK);
}

#[test]
fn a_description_without_a_file_is_carried_as_none() {
    let _ = fake(); // loaded first, whichever test runs first
    let _serial = serial();
    // A host descriptor has a file and says so.
    let a = share::alloc_shared(F32, &[2]).unwrap();
    let d = share::share(&a, ShareFlags::empty()).unwrap();
    assert!(d.fd().is_some());
    assert_eq!(d.kind().unwrap(), Kind::Host);
    // A descriptor without a file is passed to the library as fd -1; the
    // library judges it (a host description needs its file).
    let (fd, bytes) = d.into_parts();
    let bare = Descriptor::from_parts(None, bytes.clone());
    assert_eq!(bare.fd(), None);
    let e = bare.open(ShareFlags::empty()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("fd is -1"), "{}", e.message());
    let (s0, _s1) = UnixStream::pair().unwrap();
    let e = share::send(&s0, &bare).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    // The kind is the library's reading of the checked bytes.
    let e = share::description_kind(&bytes[..bytes.len() - 1]).unwrap_err();
    assert_eq!(e.status(), Status::Malformed);
    assert!(e.message().contains("truncated"), "{}", e.message());
    let mut bent = bytes.clone();
    bent[56] ^= 1; // shape[0], without a new checksum
    let e = share::description_kind(&bent).unwrap_err();
    assert_eq!(e.status(), Status::Malformed);
    assert!(e.message().contains("checksum"), "{}", e.message());
    // into_parts handed the file over: it opens with it.
    let whole = Descriptor::from_parts(fd, bytes);
    assert_eq!(whole.open(ShareFlags::empty()).unwrap().shape(), &[2]);
}

#[test]
fn a_cuda_descriptor_has_no_file_travels_as_it_is_and_is_refused_here() {
    let Some(f) = fake() else {
        eprintln!("DLB_TEST_FAKE_CUDA is not set: the fake CUDA driver tests are skipped");
        return;
    };
    let _serial = serial();
    f.make_current();
    let fds = open_fds();
    let exports = dlbridge::live_exports();
    {
        let b = cuda_alloc(&[4, 8]);
        assert_eq!(b.device().device_type, 2);
        let d = share::share(&b, ShareFlags::empty()).unwrap();
        assert_eq!(d.fd(), None);
        assert_eq!(d.kind().unwrap(), Kind::CudaIpc);
        assert_eq!(d.description().len(), 56 + 16 * 2 + ffi::DLB_SHARE_CUDA_HANDLES);
        assert_eq!(open_fds(), fds, "a CUDA descriptor opened a file");

        for (s0, s1) in [UnixStream::pair().unwrap(), seqpacket_pair()] {
            share::send(&s0, &d).unwrap();
            let r = share::recv(&s1).unwrap().expect("a descriptor");
            assert_eq!(r.fd(), None);
            assert_eq!(r.description(), d.description());
            assert_eq!(r.kind().unwrap(), Kind::CudaIpc);
            drop(s0);
            assert!(share::recv(&s1).unwrap().is_none(), "the end of the stream");
        }

        // CUDA opens a handle only in another process.
        let e = d.open(ShareFlags::empty()).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("CUDA_ERROR_INVALID_CONTEXT"), "{}", e.message());
        assert!(e.message().contains("process that made it"), "{}", e.message());
        assert_eq!(f.ipc_counts().2, 0);
        // A CUDA description with a file is refused before the driver, and
        // is not sent.
        let file = share::share(&share::alloc_shared(F32, &[1]).unwrap(), ShareFlags::empty()).unwrap().into_parts().0;
        let with_file = Descriptor::from_parts(file, d.description().to_vec());
        let e = with_file.open(ShareFlags::empty()).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("fd must be -1"), "{}", e.message());
        let (s0, _s1) = UnixStream::pair().unwrap();
        let e = share::send(&s0, &with_file).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument);
        assert!(e.message().contains("carries no file"), "{}", e.message());
    }
    assert_eq!(open_fds(), fds);
    assert_eq!(dlbridge::live_exports(), exports);
}

// The child's words go straight to stderr: the harness captures eprintln!,
// and what a forked child leaves in its copy of the capture is lost.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// The child's side: 0, or the number of the check that failed (said on
/// stderr). Receives the descriptor, opens it, expects 1..=COUNT (written
/// by the parent after a pause, ordered by the event), writes 42 into
/// element 0 and releases everything it opened.
fn child(f: &Fake, sock: &UnixStream) -> c_int {
    let exports = dlbridge::live_exports();
    let Ok(Some(d)) = share::recv(sock) else { return 1 };
    if d.fd().is_some() || d.kind() != Ok(Kind::CudaIpc) {
        return 2;
    }
    let b = match d.open(ShareFlags::empty()) {
        Ok(b) => b,
        Err(e) => {
            say!("child: open: {e}");
            return 3;
        }
    };
    drop(d);
    if b.device().device_type != 2 || b.shape() != [4, 8] {
        return 4;
    }
    if f.ipc_counts() != (1, 0, 1) {
        say!("child: ipc counts after open {:?}", f.ipc_counts());
        return 5;
    }
    let values = match b.to_host().and_then(|h| h.to_vec::<f32>()) {
        Ok(v) => v,
        Err(e) => {
            say!("child: to_host: {e}");
            return 6;
        }
    };
    let want: Vec<f32> = (1..=COUNT).map(|i| i as f32).collect();
    if values != want {
        say!("child: values {values:?}");
        return 7;
    }
    let answer = 42.0f32;
    let origin = origin_of(&b);
    // SAFETY: a device address of the opened allocation; the source lives
    // until the synchronisation.
    let rc = unsafe {
        (f.cuMemcpyHtoDAsync_v2)(origin, &answer as *const f32 as *const c_void, 4, LEGACY)
            | (f.cuStreamSynchronize)(LEGACY)
    };
    if rc != 0 {
        return 8;
    }
    drop(b);
    if f.ipc_counts() != (1, 1, 0) {
        say!("child: ipc counts after release {:?}", f.ipc_counts());
        return 9;
    }
    if dlbridge::live_exports() != exports {
        return 10;
    }
    0
}

#[test]
fn a_forked_child_waits_for_the_event_reads_the_values_and_writes_back() {
    let Some(f) = fake() else { return };
    let _serial = serial();
    f.make_current();
    let exports = dlbridge::live_exports();
    let b = cuda_alloc(&[4, 8]);
    let origin = origin_of(&b);
    // The producer's write: after a 300 ms pause on a stream of its own,
    // recorded as the buffer's last writer.
    let mut producer = ptr::null_mut();
    let values: Vec<f32> = (1..=COUNT).map(|i| i as f32).collect();
    // SAFETY: plain driver calls; `values` outlives the stream's work
    // (synchronised below before it goes).
    unsafe {
        assert_eq!((f.cuStreamCreate)(&mut producer, 1), 0);
        assert_eq!((f.cuLaunchHostFunc)(producer, usleep as *const c_void, 300_000 as *mut c_void), 0);
        assert_eq!((f.cuMemcpyHtoDAsync_v2)(origin, values.as_ptr().cast(), 4 * COUNT, producer), 0);
    }
    set_stream(&b, producer);
    let d = share::share(&b, ShareFlags::empty()).unwrap();
    assert_eq!(d.fd(), None);
    let (parent_end, child_end) = UnixStream::pair().unwrap();
    share::send(&parent_end, &d).unwrap();
    drop(d);

    // The event exists before the fork (the fake's handles open only in a
    // child forked after they were made); the producer's worker is asleep.
    // SAFETY: the child runs only `child` and leaves with _exit.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| child(f, &child_end))).unwrap_or(99);
        // SAFETY: leaves the child without running the parent's test harness.
        unsafe { _exit(code) };
    }
    let mut status = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    let exited = status & 0x7f == 0;
    assert!(exited && (status >> 8) & 0xff == 0, "the child failed at check {} (wait status {status})", status >> 8);

    // The child's write is in the producer's memory.
    // SAFETY: plain driver calls; the buffer leaves the stream first.
    unsafe {
        assert_eq!((f.cuStreamSynchronize)(producer), 0);
        set_stream(&b, LEGACY);
        assert_eq!((f.cuStreamDestroy_v2)(producer), 0);
    }
    let back = b.to_host().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(back[0], 42.0, "the child's write is not in the producer's memory");
    assert_eq!(back[1..], values[1..]);
    assert_eq!(f.ipc_counts(), (0, 0, 0), "the parent opened no handle");
    drop(b);
    assert_eq!(dlbridge::live_exports(), exports);
}
