"""CUDA tensors shared with another process (CUDA IPC), against the fake
CUDA driver: multiprocessing pickling (python/dlbridge/_share.py: _reduce
gives a ticket without a file, dlb_share_ticket_open opens its
description) and
dlbridge.share_send / share_recv over a Unix socket.

The fake driver (tests/cuda/fake_cuda.cpp, fake_cuda_ipc.cpp) is loaded as
in test_cuda_fake.py (DLB_TEST_FAKE_CUDA, set by scripts/test.d/40-python.sh,
loaded RTLD_GLOBAL at collection, before dlbridge first needs a driver).
Its device memory is a shared mapping and an interprocess event keeps its
counters in shared memory, so a CUDA IPC handle opens in a child made by
fork() (at the same address) and, as on hardware, not in the process that
made it. Hence what these tests keep to:

* the child is forked (the "fork" start method, or os.fork): a spawned
  process would not share the fake's memory;
* the allocation and the tensor's interprocess event exist before the
  fork (dlbridge.share() of the tensor makes the event), since the fake's
  handles name what the child inherited; the descriptor that travels is
  made after the fork, after the producer's last write;
* the parent's fake stream workers are idle or asleep when it forks (a
  child of a threaded process must not inherit a held lock), and the child
  makes its own streams (the fake forgets the parent's at fork).

The producer (tests/python/cuda_producer.py) writes its last values after a
pause on its own stream, recorded as the tensor's last writer with
set_stream(): the child sees them only if its open waited for the event.
"""

import gc
import json
import os
import pickle
import socket

import pytest

import fake_cuda_fixtures  # noqa: E402
from fake_cuda_fixtures import _balanced, driver  # noqa: E402,F401 (fixtures of this module)

FAKE = fake_cuda_fixtures.load()
import ctypes  # noqa: E402

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402
import dlbridge._share  # noqa: E402
import cuda_producer as cp  # noqa: E402

A = [float(i) for i in range(1, 9)]         # the producer's first values
B = [10.0 * i for i in range(1, 9)]         # written after a pause
DESCRIPTION_BYTES = 56 + 16 * 1 + 128       # fixed part, one dimension, the two handles

# Python 3.12 warns about fork() in a process with threads (the fake's
# stream workers); the module docstring says why it is safe here.
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


def ipc_counts(driver):
    """(opened, closed, open now): CUDA IPC memory handles of this process."""
    opened, closed, now = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    driver.lib.fake_cuda_ipc_counts(ctypes.byref(opened), ctypes.byref(closed), ctypes.byref(now))
    return opened.value, closed.value, now.value


def host_values(t):
    """A CUDA tensor's values, copied to the host by dlbridge."""
    return np.from_dlpack(dlbridge.from_dlpack(t, device=(1, 0))).tolist()


def shared_cuda_tensor(driver):
    """A producer with A, a dlbridge.Tensor over its memory (no copy) whose
    interprocess event exists, and B pending behind a pause on the
    producer's stream, recorded as the tensor's last writer."""
    p = cp.VersionedProducer(driver, A)
    t = dlbridge.from_dlpack(p, stream=1)
    assert t.device == (2, 0) and t.data_ptr == p.ptr
    assert dlbridge.share(t) is t  # CUDA memory is shared as it is; this makes the event
    p.write(B, delay_us=400_000)
    t.set_stream(p.stream)
    return p, t


def consume(driver, receive, answer):
    """What the child saw of the tensor `receive()` gives: returned as plain
    data (asserted by the parent). Writes `answer` into element 0 on the
    legacy stream of the child, then releases the tensor (the only
    reference is here)."""
    exports = dlbridge.live_exports()
    t = receive()
    seen = {
        "device": list(t.device),
        "stream": t.stream,
        "readonly": t.readonly,
        "same_address": t.data_ptr,
        "counts_open": list(ipc_counts(driver)),
        "values": host_values(t),
    }
    one = (ctypes.c_float * 1)(answer)
    driver.host_to_device(t.data_ptr, one, 1)
    driver.synchronize(1)
    del t
    gc.collect()
    seen["counts_released"] = list(ipc_counts(driver))
    seen["exports"] = dlbridge.live_exports() - exports
    return seen


def check_child(seen, p, answer):
    assert seen["device"] == [2, 0]
    assert seen["stream"] == 1  # the legacy default stream, which waited for the event
    assert seen["readonly"] is False
    assert seen["same_address"] == p.ptr  # the fake maps the handle at the producer's address
    assert seen["counts_open"] == [1, 0, 1]
    assert seen["values"] == B, "the child was not ordered after the producer's last write"
    assert seen["counts_released"] == [1, 1, 0], "the child's handle was not closed exactly once"
    assert seen["exports"] == 0, "an export of the child was left alive"
    assert p.read() == [answer] + B[1:], "the child's write is not in the producer's memory"


def _mp_child(driver, channel, results, how):
    seen = {}
    try:
        seen = consume(driver, lambda: channel.get(timeout=60) if how == "queue" else channel.recv(), 42.0)
    except BaseException as e:  # reported to the parent, which fails with it
        seen["error"] = "%s: %s" % (type(e).__name__, e)
    results.send(json.dumps(seen))


@pytest.mark.parametrize("how", ["queue", "pipe"])
def test_multiprocessing_fork_carries_a_cuda_tensor_by_handle(driver, how):
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    p, t = shared_cuda_tensor(driver)
    try:
        reader, writer = ctx.Pipe(duplex=False)
        if how == "queue":
            channel = receiving = ctx.Queue()
        else:
            receiving, channel = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_mp_child, args=(driver, receiving, writer, how))
        child.start()
        fds = len(os.listdir("/proc/self/fd"))
        if how == "queue":
            channel.put(t)  # pickled by the queue's feeder thread: _reduce
        else:
            channel.send(t)
        seen = json.loads(reader.recv())
        child.join(60)
        assert child.exitcode == 0
        assert "error" not in seen, seen.get("error")
        check_child(seen, p, 42.0)
        # A CUDA description travels without a file: no ticket, nothing
        # served, and nothing was left open here.
        assert len(os.listdir("/proc/self/fd")) == fds
        if how == "queue":
            channel.close()
            channel.join_thread()
        assert ipc_counts(driver) == (0, 0, 0), "the parent opened a handle"
        assert host_values(t) == [42.0] + B[1:]
        del t
        gc.collect()
    finally:
        p.close()


def test_share_send_to_a_forked_child_and_back(driver):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    report_r, report_w = os.pipe()
    p, t = shared_cuda_tensor(driver)
    try:
        pid = os.fork()
        if pid == 0:  # the child: receives, reports, leaves without pytest
            code = 1
            try:
                a.close()
                os.close(report_r)
                seen = consume(driver, lambda: dlbridge.share_recv(b), 7.0)
                seen["end"] = dlbridge.share_recv(b) is None  # the parent shut its side
                os.write(report_w, json.dumps(seen).encode())
                code = 0
            finally:
                os._exit(code)
        b.close()
        os.close(report_w)
        dlbridge.share_send(a, t)  # after the fork: the event follows the pending write
        a.shutdown(socket.SHUT_WR)
        text = b""
        while True:
            chunk = os.read(report_r, 65536)
            if not chunk:
                break
            text += chunk
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        seen = json.loads(text)
        assert seen.pop("end") is True
        check_child(seen, p, 7.0)
        assert ipc_counts(driver) == (0, 0, 0)
        assert host_values(t) == [7.0] + B[1:]
        del t
        gc.collect()
    finally:
        a.close()
        os.close(report_r)
        p.close()


def test_in_this_process_a_cuda_description_is_refused_as_on_hardware(driver):
    p = cp.VersionedProducer(driver, A)
    try:
        t = dlbridge.from_dlpack(p, stream=1)
        fds = len(os.listdir("/proc/self/fd"))
        fd, description = dlbridge._share.descriptor(t)
        assert fd == -1 and len(description) == DESCRIPTION_BYTES
        assert dlbridge._glue.is_shared(t) and dlbridge.share(t) is t
        # CUDA opens a handle only in another process.
        with pytest.raises(dlbridge.Error) as e:
            dlbridge._share.open_shared(-1, description)
        assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
        assert "CUDA_ERROR_INVALID_CONTEXT" in e.value.message
        assert "process that made it" in e.value.message
        # The multiprocessing reducer gives the same refusal when unpickled here.
        from multiprocessing.reduction import ForkingPickler

        rebuild, args = dlbridge._share._reduce(t)
        assert rebuild is dlbridge._share._rebuild  # a ticket without a file: the handles only
        assert len(args[0]) == 64 + DESCRIPTION_BYTES and dlbridge._glue.share_server_state()[0] == 0
        data = ForkingPickler.dumps(t)
        u = pickle.loads(data)  # unpickling never raises; what it gives raises when used
        assert isinstance(u, dlbridge._share.Unreceived)
        with pytest.raises(dlbridge.Error) as e:
            u.__dlpack__()
        assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT" and "process that made it" in e.value.message
        del u
        # A CUDA description with a file descriptor is refused before the driver.
        with pytest.raises(dlbridge.Error) as e:
            dlbridge._share.open_shared(0, description)
        assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT" and "fd must be -1" in e.value.message
        # Plain pickle copies the elements, to the host.
        h = pickle.loads(pickle.dumps(t))
        assert h.device == (1, 0) and np.from_dlpack(h).tolist() == host_values(t)
        # Over a socket in this process: the description arrives whole,
        # without a file, and opening it is refused; nothing stays open.
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            dlbridge.share_send(a, t)
            with pytest.raises(dlbridge.Error) as e:
                dlbridge.share_recv(b)
            assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT" and "process that made it" in e.value.message
        finally:
            a.close()
            b.close()
        assert ipc_counts(driver) == (0, 0, 0)
        assert len(os.listdir("/proc/self/fd")) == fds
        del t
        gc.collect()
    finally:
        p.close()


def test_a_handle_of_freed_memory_is_refused_in_the_child(driver):
    p = cp.VersionedProducer(driver, A)
    t = dlbridge.from_dlpack(p, stream=1)
    fd, description = dlbridge._share.descriptor(t)
    assert fd == -1
    del t
    gc.collect()
    p.close()  # the producer frees its memory before anyone opens the handle
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(report_r)
            try:
                dlbridge._share.open_shared(-1, description)
                seen = {"opened": True}
            except dlbridge.Error as e:
                seen = {"status": e.status_name, "message": e.message, "counts": list(ipc_counts(driver))}
            os.write(report_w, json.dumps(seen).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(report_w)
    text = os.read(report_r, 65536)
    os.close(report_r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    seen = json.loads(text)
    assert seen.get("status") == "DLB_ERR_BACKEND", seen
    assert "cuIpcOpenMemHandle_v2 failed with CUDA_ERROR_INVALID_HANDLE" in seen["message"]
    assert seen["counts"] == [0, 0, 0]
