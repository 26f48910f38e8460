//! Tickets between Rust and a Python `multiprocessing` process: a Rust
//! receiver opens the ticket a Python producer's reducer pickles (what a
//! multiprocessing queue carries), writes into the tensor, and the
//! producer sees the writes; and a Python receiver opens a Rust producer's
//! ticket as unpickling does (`dlbridge._share._rebuild`) and writes back.
//!
//! The Python side runs with `DLB_TEST_PYTHON` (default /usr/bin/python3)
//! and the package of the build under test, `DLB_TEST_PYTHONPATH` (set by
//! scripts/test.d/50-rust.sh); without it the tests fail.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use dlbridge::share::{self, Ticket};
use dlbridge::{DLDataType, ShareFlags, Status};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const F32: DLDataType = DLDataType { code: 2, bits: 32, lanes: 1 };

fn python(code: &str) -> Command {
    let path = std::env::var("DLB_TEST_PYTHONPATH")
        .expect("DLB_TEST_PYTHONPATH must name the Python package of the build under test (scripts/test.d/50-rust.sh)");
    let mut c = Command::new(std::env::var("DLB_TEST_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into()));
    c.args(["-c", code]).env("PYTHONPATH", path).env("PYTHONDONTWRITEBYTECODE", "1");
    c
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

// The producer: a shared tensor 0..8, the ticket its multiprocessing
// reducer puts into the pickle, on stdout; after the receiver's "done",
// the values it sees now.
const PRODUCER: &str = "
import sys, numpy as np, dlbridge
from multiprocessing.reduction import ForkingPickler
t = dlbridge.share(np.arange(8, dtype=np.float32))
rebuild, (ticket,) = dlbridge._share._reduce(t)
assert rebuild is dlbridge._share._rebuild and bytes(ForkingPickler.dumps(t)).find(ticket[:12]) > 0
print(ticket.hex(), flush=True)
sys.stdin.readline()
print(' '.join(str(x) for x in np.from_dlpack(t).tolist()), flush=True)
";

#[test]
fn a_rust_receiver_opens_a_python_producers_ticket() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = python(PRODUCER).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let ticket = Ticket::from_bytes(&unhex(line.trim()));
    {
        let mut b = ticket.open(ShareFlags::empty()).unwrap();
        assert_eq!(b.shape(), &[8]);
        let x = b.as_mut_slice::<f32>().unwrap();
        assert_eq!(x, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        for v in x.iter_mut() {
            *v *= 10.0;
        }
    }
    child.stdin.take().unwrap().write_all(b"done\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "0.0 10.0 20.0 30.0 40.0 50.0 60.0 70.0");
    assert!(child.wait().unwrap().success());
    // The producer has exited: its ticket is refused, naming it.
    let e = ticket.open(ShareFlags::empty()).unwrap_err();
    assert_eq!(e.status(), Status::Deleted, "{e:?}");
}

#[test]
fn a_python_receiver_opens_a_rust_producers_ticket() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut a = share::alloc_shared(F32, &[4]).unwrap();
    a.as_mut_slice::<f32>().unwrap().copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
    let ticket = Ticket::issue(&a, ShareFlags::empty()).unwrap();
    assert_eq!(share::ticket_server().0, 1);
    let code = format!(
        "import torch, dlbridge\n\
         u = dlbridge._share._rebuild(bytes.fromhex('{}'))  # what unpickling the ticket calls\n\
         x = torch.from_dlpack(u)\n\
         assert x.tolist() == [1.0, 2.0, 3.0, 4.0], x\n\
         x.mul_(-1)\n\
         print('ok')\n",
        hex(ticket.bytes())
    );
    let out = python(&code).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![-1.0, -2.0, -3.0, -4.0]);
    // Released by the receiver: the server closes its file.
    for _ in 0..5000 {
        if share::ticket_server().0 == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(share::ticket_server().0, 0);
}

#[test]
fn tickets_refused_in_rust_keep_their_status() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let a = share::alloc_shared(F32, &[2]).unwrap();
    let t = Ticket::issue(&a, ShareFlags::empty()).unwrap();
    let mut cut = t.bytes().to_vec();
    cut.pop();
    let e = Ticket::from_bytes(&cut).open(ShareFlags::empty()).unwrap_err();
    assert_eq!(e.status(), Status::Malformed);
    let b = t.open(ShareFlags::VIA_SERVER).unwrap();
    assert_eq!(b.shape(), &[2]);
}
