"""Deleters on other threads, without the GIL, and at interpreter exit."""

import array
import gc
import os
import subprocess
import sys
import threading
import weakref

try:
    import numpy as np
except ImportError:  # tests that use it are skipped (conftest)
    np = None
import pytest

import dlbridge
from dlbridge import _lib

from conftest import clib


def run_threads(target, args_list):
    threads = [threading.Thread(target=target, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_exports_dropped_on_other_threads():
    torch = pytest.importorskip("torch")
    sources = [array.array("d", [float(i)] * 64) for i in range(8)]
    refs = [weakref.ref(s) for s in sources]
    views = []
    for s in sources:
        t = dlbridge.from_buffer(s)
        views.append([np.from_dlpack(t), torch.from_dlpack(t), t.__dlpack__(),
                      t.__dlpack__(max_version=(1, 0)), t])
    del sources, s, t
    assert dlbridge.live_exports() == 8 * 4

    def drop(bundle):
        bundle.clear()  # the last references die on this thread
        gc.collect()

    run_threads(drop, [(b,) for b in views])
    gc.collect()
    assert dlbridge.live_exports() == 0
    assert all(r() is None for r in refs)


def test_exports_made_and_dropped_concurrently():
    base = dlbridge.from_buffer(bytearray(1024))
    errors = []

    def work():
        try:
            for _ in range(300):
                a = np.from_dlpack(base)
                u = dlbridge.from_dlpack(base)
                c = u.__dlpack__()
                del a, u, c
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads(work, [()] * 4)
    assert not errors
    assert dlbridge.live_exports() == 0


def test_release_without_the_gil_takes_it():
    # ctypes.CDLL releases the GIL around the call: the buffer's release
    # callback (PyBuffer_Release) and an import's producer deleter (numpy's,
    # which itself assumes the GIL) must take it themselves.
    arr = array.array("i", [1, 2, 3])
    arr_ref = weakref.ref(arr)
    a = np.arange(4.0)
    a_ref = weakref.ref(a)
    handles = []
    for t in (dlbridge.from_buffer(arr), dlbridge.from_dlpack(a)):
        handles.append(clib().dlb_buffer_retain(t._handle))
    del arr, a, t
    gc.collect()
    assert arr_ref() is not None and a_ref() is not None

    def release(h):
        clib().dlb_buffer_release(h)

    run_threads(release, [(h,) for h in handles])
    gc.collect()
    assert arr_ref() is None
    assert a_ref() is None


def test_release_from_a_thread_python_never_saw():
    # A thread started by C (here: a raw pthread through ctypes would need a
    # compiler; a Python thread calling through CDLL without the GIL is the
    # same for the library). Many at once, to shake out GIL ordering issues.
    sources = [bytearray(32) for _ in range(16)]
    handles = []
    for s in sources:
        t = dlbridge.from_buffer(s)
        handles.append(clib().dlb_buffer_retain(t._handle))
    del t
    gc.collect()

    def release(h):
        clib().dlb_buffer_release(h)

    run_threads(release, [(h,) for h in handles])
    for s in sources:
        s.append(0)  # every buffer export ended


EXIT_SCRIPT = r"""
import sys, threading, array
import numpy as np
import dlbridge
torch = None
try:
    import torch
except ImportError:
    pass

keep = []
src = bytearray(64)
t = dlbridge.from_buffer(src)
keep.append(t.__dlpack__())                       # capsule never consumed
keep.append(t.__dlpack__(max_version=(1, 0)))
keep.append(np.from_dlpack(t))                    # consumed by numpy
if torch is not None:
    keep.append(torch.from_dlpack(t))
    g = torch.arange(10.0)
    keep.append(dlbridge.from_dlpack(g))          # import holding torch memory
a = np.arange(10.0)
keep.append(dlbridge.from_dlpack(a))              # import holding a numpy array
keep.append(dlbridge.from_buffer(array.array("d", [1.0])))

stop = threading.Event()
def churn():
    x = dlbridge.from_buffer(bytearray(16))
    while not stop.is_set():
        y = np.from_dlpack(x)
        z = x.__dlpack__()
        del y, z
worker = threading.Thread(target=churn, daemon=True)
worker.start()
assert dlbridge.live_exports() > 0
print("exports alive at exit:", dlbridge.live_exports())
sys.stdout.flush()
"""


def test_subprocess_exits_with_exports_alive(tmp_path):
    script = tmp_path / "exit_with_exports.py"
    script.write_text(EXIT_SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for _ in range(3):
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "exports alive at exit:" in proc.stdout
        assert "Fatal" not in proc.stderr
