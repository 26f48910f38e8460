"""The sharing calls of the extension (dlbridge._glue), and how the
multiprocessing reducer is registered without importing multiprocessing at
``import dlbridge``. Needs no numpy or torch."""

import os
import socket
import subprocess
import sys

import pytest

import dlbridge
from dlbridge import _glue


def run(code):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


# After registration: the reducer is ForkingPickler's, the hook has left
# sys.meta_path, and a shared tensor goes through ForkingPickler and back as
# its memory file, mapped again (the same memory, in this one process); a
# small tensor that is not shared travels as its bytes.
REGISTERED = (
    "from multiprocessing.reduction import ForkingPickler\n"
    "assert ForkingPickler._extra_reducers[dlbridge.Tensor] is dlbridge._share._reduce\n"
    "assert not any(type(f).__name__ == '_Hook' for f in sys.meta_path), sys.meta_path\n"
    "t = dlbridge.from_buffer(bytearray(b'abcdefgh'))\n"
    "u = ForkingPickler.loads(ForkingPickler.dumps(t))\n"
    "assert (u.shape, u.dtype) == ((8,), 'uint8') and u.data_ptr != t.data_ptr\n"
    "assert dlbridge.shared_mappings() == 0 and not dlbridge._glue.is_shared(u)\n"
    "big = dlbridge.share(dlbridge.from_buffer(bytearray(8)))\n"
    "v = ForkingPickler.loads(ForkingPickler.dumps(big))\n"
    "assert v.shape == (8,) and v.data_ptr != big.data_ptr and dlbridge.shared_mappings() == 2\n"
    "del t, u, big, v\n"
    "assert dlbridge.shared_mappings() == 0 and dlbridge.live_exports() == 0\n"
    "print('ok')\n"
)


def test_import_dlbridge_loads_neither_ctypes_nor_multiprocessing():
    run("import sys, dlbridge\n"
        "loaded = sorted(m for m in sys.modules if m == 'ctypes' or m.startswith('multiprocessing'))\n"
        "assert not loaded, loaded\n"
        "assert callable(dlbridge.share) and callable(dlbridge.share_send)\n"
        "assert callable(dlbridge.share_recv) and dlbridge.shared_mappings() == 0\n"
        "print('ok')\n")


def test_reducer_registered_when_multiprocessing_comes_after_dlbridge():
    run("import sys, dlbridge\n"
        "import multiprocessing\n" + REGISTERED)


def test_reducer_registered_when_multiprocessing_comes_before_dlbridge():
    run("import sys, multiprocessing\n"
        "import dlbridge\n" + REGISTERED)


def test_reducer_registered_when_only_the_reduction_module_is_imported():
    run("import sys, dlbridge\n"
        "import multiprocessing.reduction\n" + REGISTERED)


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def test_open_shared_borrows_the_file_descriptor():
    t = dlbridge.share(dlbridge.empty((4,), "int32"))
    fd, description = _glue.share_descriptor(t)
    try:
        u = _glue.open_shared(fd, description)
        os.fstat(fd)  # still open: the caller's
        u2 = _glue.open_shared(fd, description, read_only=True)  # and usable again
        assert u.data_ptr != t.data_ptr and u2.readonly and not u.readonly
        assert dlbridge.shared_mappings() == 3
    finally:
        os.close(fd)
    del t, u, u2
    assert dlbridge.shared_mappings() == 0


def test_is_shared():
    t = dlbridge.empty((2,), "float32")
    assert not _glue.is_shared(t)
    s = dlbridge.share(t)
    assert _glue.is_shared(s) and s is not t and dlbridge.share(s) is s
    del s, t


def test_share_calls_refuse_bad_arguments_precisely():
    start = open_fds()
    t = dlbridge.share(dlbridge.empty((2,), "float32"))
    with pytest.raises(TypeError):
        _glue.share_descriptor(bytearray(4))
    with pytest.raises(TypeError):
        _glue.share_descriptor(t, 1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        _glue.share_descriptor(t, writable=True)
    for fd in (-1, 2 ** 40):
        with pytest.raises(dlbridge.Error) as e:
            _glue.open_shared(fd, b"")
        assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    with pytest.raises(TypeError):
        _glue.open_shared(0, "not bytes")
    fd, description = _glue.share_descriptor(t)
    os.close(fd)
    with pytest.raises(dlbridge.Error) as e:  # not a memory file
        _glue.open_shared(0, description)
    assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    r, w = os.pipe()
    try:
        with pytest.raises(dlbridge.Error) as e:  # a pipe is not a socket
            dlbridge.share_send(w, t)
        assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    finally:
        os.close(r)
        os.close(w)
    del t, e  # the traceback holds share_send's frame
    assert dlbridge.shared_mappings() == 0 and open_fds() == start


def test_share_recv_at_the_end_of_the_stream_is_none():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        a.close()
        assert dlbridge.share_recv(b) is None
