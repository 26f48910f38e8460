"""dlbridge.share, Unix-socket passing and multiprocessing pickling by
sharing, from Python: same memory on both sides (writes seen both ways),
exact statuses, and no export, mapping or file descriptor left behind.

Run: PYTHONPATH=<build>/python DLB_SHARE_EXAMPLE=<build>/tests/share/share_tensor \
     python3 -m pytest tests/share
"""

import fcntl
import gc
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import dlbridge

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")


def element(t, i, ctype=None):
    """Element i of a 1-d tensor, read through its address (numpy 1.24 and
    torch 1.13 take legacy capsules only, which a read-only tensor refuses)."""
    import ctypes

    ctype = ctype or ctypes.c_float
    return ctype.from_address(t.data_ptr + i * ctypes.sizeof(ctype)).value


def open_fds():
    return len(os.listdir("/proc/self/fd")) - 1


def shared_maps():
    with open("/proc/self/maps") as f:
        return sum("memfd:dlbridge-shared" in line for line in f)


def server_state():
    """(tickets held, connections being answered) of this process's ticket
    server."""
    return dlbridge._glue.share_server_state()[:2]


def settle(want=(0, 0), timeout=10.0):
    """Waits for the ticket server to reach `want`: it closes a connection
    on its own thread, a moment after the receiver has read its answer."""
    deadline = time.monotonic() + timeout
    while server_state() != want and time.monotonic() < deadline:
        time.sleep(0.002)
    return server_state()


@pytest.fixture(scope="module", autouse=True)
def process_wide_helpers():
    """Starts what multiprocessing and dlbridge keep for the whole process
    (the resource sharer's listener, the fork server, dlbridge's ticket
    server and this process's connection to it), so that the per-test
    counts see only what a test leaves."""
    from multiprocessing import forkserver, resource_sharer
    from multiprocessing.reduction import ForkingPickler

    fd = os.dup(0)
    dup = resource_sharer.DupFd(fd)  # served to ourselves at once
    os.close(fd)
    os.close(dup.detach())
    forkserver.ensure_running()
    t = dlbridge.share(np.zeros(1, dtype=np.float32))  # a ticket of its file
    ForkingPickler.loads(ForkingPickler.dumps(t))
    del t
    settle()
    yield


@pytest.fixture(autouse=True)
def nothing_left(process_wide_helpers):
    gc.collect()
    served = settle()
    start = (dlbridge.live_exports(), dlbridge.shared_mappings(), shared_maps(), open_fds())
    yield
    gc.collect()
    assert settle(served) == served
    assert (dlbridge.live_exports(), dlbridge.shared_mappings(), shared_maps(), open_fds()) == start


def test_share_copies_other_memory_once_and_keeps_shared_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlbridge.share(a)
    assert t.shape == (3, 4) and t.dtype == "float32"
    assert t.data_ptr != a.ctypes.data  # a copy: numpy's memory is not shared
    assert np.array_equal(np.from_dlpack(t), a)
    assert dlbridge.share(t) is t  # shared already
    before = (dlbridge.shared_mappings(), shared_maps())
    u = dlbridge.share(a)  # a memory file of its own
    assert (dlbridge.shared_mappings(), shared_maps()) == (before[0] + 1, before[1] + 1)
    assert np.array_equal(np.from_dlpack(u), a) and not u.readonly
    del u
    g = torch.from_dlpack(t)
    view = dlbridge.share(g[1:])  # a framework's view into shared memory: no copy
    assert view.data_ptr == t.data_ptr + 16
    g[1, 0] = 40.0
    assert np.from_dlpack(view)[0, 0] == 40.0
    del g, view, t


def test_share_copy_of_a_read_only_tensor_is_read_only():
    t = dlbridge.share(np.arange(6, dtype=np.int32))
    r = dlbridge._glue.share_copy(t, read_only=True)
    assert r.readonly and not t.readonly
    assert np.array_equal(np.from_dlpack(r), np.arange(6, dtype=np.int32))
    fd, description = dlbridge._share.descriptor(r)
    try:
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY  # no descriptor of it can write
    finally:
        os.close(fd)
    assert dlbridge.share(r) is r
    with pytest.raises(TypeError):
        dlbridge._glue.share_copy(np.arange(3))  # a Tensor only: share() imports first
    del r, t


def test_share_of_a_read_only_tensor_is_read_only():
    t = dlbridge.share(np.arange(4, dtype=np.int64))
    fd, description = dlbridge._share.descriptor(t, read_only=True)
    try:
        r = dlbridge._share.open_shared(fd, description)
    finally:
        os.close(fd)
    assert r.readonly and not t.readonly
    torch.from_dlpack(t)[2] = 9
    import ctypes

    assert element(r, 2, ctypes.c_int64) == 9
    del r, t


def test_bad_descriptions_raise_precise_errors():
    t = dlbridge.empty((8,), "float32")
    with pytest.raises(dlbridge.Error) as e:
        dlbridge._share.descriptor(t)
    assert e.value.status_name == "DLB_ERR_NOT_ZERO_COPY"
    s = dlbridge.share(t)
    fd, description = dlbridge._share.descriptor(s)
    try:
        with pytest.raises(dlbridge.Error) as e:
            dlbridge._share.open_shared(fd, description[:-1])
        assert e.value.status_name == "DLB_ERR_MALFORMED" and "truncated" in str(e.value)
        with pytest.raises(dlbridge.Error) as e:
            dlbridge._share.open_shared(fd, description[:4] + b"\x07\x00" + description[6:])
        assert e.value.status_name == "DLB_ERR_VERSION"
        with pytest.raises(dlbridge.Error) as e:
            dlbridge._share.open_shared(fd, description[:-1] + bytes([description[-1] ^ 1]))
        assert e.value.status_name == "DLB_ERR_MALFORMED" and "checksum" in str(e.value)
    finally:
        os.close(fd)
    del s, t


def test_plain_pickle_copies_the_elements():
    t = dlbridge.share(np.arange(3, dtype=np.float32))
    data = pickle.dumps(t)
    assert len(data) > 12 and b"DLBP" not in data  # the bytes themselves, no ticket
    u = pickle.loads(data)
    assert u.data_ptr != t.data_ptr and np.from_dlpack(u).tolist() == [0.0, 1.0, 2.0]
    assert not dlbridge._glue.is_shared(u)  # plain host memory: a copy
    del t, u


def test_socket_round_trip_in_one_process():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        t = dlbridge.share(np.arange(6, dtype=np.float64))
        dlbridge.share_send(a, t)
        dlbridge.share_send(a, np.ones(2, dtype=np.int32))  # shared on the way
        r = dlbridge.share_recv(b)
        o = dlbridge.share_recv(b)
        assert np.array_equal(np.from_dlpack(o), [1, 1])
        torch.from_dlpack(r)[5] = -1.0
        assert np.from_dlpack(t)[5] == -1.0
        a.close()
        assert dlbridge.share_recv(b) is None  # end of stream
        del r, o, t


# ---------------------------------------------------------------------------
# multiprocessing, all start methods
# ---------------------------------------------------------------------------


def _child(q, r, ev):
    x = q.get()  # a dlbridge.Tensor, mapped here
    r.put(("seen", element(x, 0), x.readonly))
    if not x.readonly:
        torch.from_dlpack(x)[1] = 42.0  # the parent sees this
    ev.wait()
    r.put(("later", element(x, 2)))  # and this child sees the parent's write
    del x
    gc.collect()
    r.put(("left", dlbridge.live_exports(), dlbridge.shared_mappings()))


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("readonly", [False, True])
def test_multiprocessing_shares_memory(method, readonly):
    import multiprocessing as mp

    ctx = mp.get_context(method)
    q, r, ev = ctx.Queue(), ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_child, args=(q, r, ev))
    p.start()
    t = dlbridge.share(np.zeros(4, dtype=np.float32))
    g = torch.from_dlpack(t)
    g[0] = 7.0
    sent = t
    if readonly:
        fd, description = dlbridge._share.descriptor(t, read_only=True)
        try:
            sent = dlbridge._share.open_shared(fd, description)
        finally:
            os.close(fd)
    q.put(sent)
    assert r.get(timeout=60) == ("seen", 7.0, readonly)
    g[2] = 5.0
    ev.set()
    assert r.get(timeout=60) == ("later", 5.0)
    tag, exports, mappings = r.get(timeout=60)
    p.join(60)
    assert p.exitcode == 0
    assert (tag, exports) == ("left", 0)
    assert float(g[1]) == (0.0 if readonly else 42.0)
    q.close(), r.close()
    q.join_thread(), r.join_thread()
    del g, t, sent


def _pool_sum(x):
    return float(torch.from_dlpack(x).sum())


def test_pool_with_a_copy_into_shared_memory():
    import multiprocessing as mp

    t = dlbridge.from_dlpack(np.arange(100, dtype=np.float32))  # not shared: one copy when pickled
    with mp.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_pool_sum, (t,)) == 4950.0
    del t


# ---------------------------------------------------------------------------
# Senders that exit: a tensor sent arrives whatever its sender does next
# ---------------------------------------------------------------------------


def _worker_tensor(i):
    return dlbridge.share(np.full(BIG, float(i), dtype=np.float32))  # a ticket, past the by-value size


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pool_workers_that_end_after_each_task_deliver_every_tensor(method):
    import multiprocessing as mp

    n = 8 if method == "fork" else 4
    pool = mp.get_context(method).Pool(2, maxtasksperchild=1)
    try:
        # Each worker exits right after its one task: it waits at its exit
        # until the parent has opened the tensor's ticket.
        got = pool.map_async(_worker_tensor, range(n)).get(timeout=120)
        assert [element(x, BIG - 1) for x in got] == [float(i) for i in range(n)]
        assert pool._result_handler.is_alive()
        pool.close()
        pool.join()
    finally:
        pool.terminate()
    del got


def _put_and_end(q, done):
    q.put(dlbridge.share(np.arange(BIG, dtype=np.float32)))
    done.set()  # and returns at once


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_process_that_puts_a_tensor_and_ends_delivers_it(method):
    # A spawned child runs no after-fork hooks: its exit wait is armed when
    # it starts all the same (before, it exited at once and the ticket was
    # refused as "it has exited").
    import multiprocessing as mp

    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_put_and_end, args=(q, done))
    p.start()
    assert done.wait(60)
    time.sleep(0.5)  # the child has returned meanwhile, and waits to exit
    x = q.get(timeout=60)
    assert element(x, BIG - 1) == BIG - 1
    p.join(60)
    assert p.exitcode == 0
    q.close()
    q.join_thread()
    del x


class _Withdrawn:
    """Pickles as a ticket its sender has withdrawn: unpickling it fails."""

    def __reduce__(self):
        t = dlbridge.share(np.zeros(BIG, dtype=np.float32))
        rebuild, (ticket,) = dlbridge._share._reduce(t)
        dlbridge._glue.share_ticket_withdraw(ticket)
        return rebuild, (ticket,)


def _withdrawn(_):
    return _Withdrawn()


def test_an_unpickling_failure_does_not_stop_a_pool():
    import multiprocessing as mp

    with mp.get_context("fork").Pool(1) as pool:
        bad = pool.apply_async(_withdrawn, (0,)).get(timeout=60)  # the result handler survives it
        assert isinstance(bad, dlbridge._share.Unreceived)
        with pytest.raises(dlbridge.Error) as e:
            np.from_dlpack(bad)
        assert e.value.status_name == "DLB_ERR_DELETED" and "withdrew its ticket" in str(e.value)
        assert pool._result_handler.is_alive()
        x = pool.apply_async(_worker_tensor, (3,)).get(timeout=60)  # and the pool goes on
        assert element(x, 0) == 3.0
        del x


# ---------------------------------------------------------------------------
# Tickets: how a pickled tensor's memory file reaches its receiver
# ---------------------------------------------------------------------------


def _pickled(t):
    from multiprocessing.reduction import ForkingPickler

    return bytes(ForkingPickler.dumps(t))


def _unpickled(data):
    from multiprocessing.reduction import ForkingPickler

    return ForkingPickler.loads(data)


BIG = 1 << 15  # float32 elements: 128 KiB, past what travels by value (64 KiB)


def test_a_small_tensor_not_in_shared_memory_travels_as_its_bytes():
    t = dlbridge.from_dlpack(np.arange(4, dtype=np.float32))
    rebuild, args = dlbridge._share._reduce(t)
    assert rebuild is dlbridge._glue.tensor_from_payload and server_state() == (0, 0)
    u = _unpickled(_pickled(t))
    assert u.data_ptr != t.data_ptr and np.array_equal(np.from_dlpack(u), np.arange(4, dtype=np.float32))
    big = dlbridge.from_dlpack(np.arange(BIG, dtype=np.float32))  # larger: one copy into a memory file
    data = _pickled(big)
    assert server_state() == (1, 0)  # a ticket for its file
    v = _unpickled(data)
    assert np.from_dlpack(v)[-1] == BIG - 1
    del t, u, big, v


def test_a_pickled_large_tensor_carries_a_ticket_taken_once():
    t = dlbridge.share(np.arange(BIG, dtype=np.float32))
    data = _pickled(t)
    assert server_state() == (1, 0)  # the server holds the file for the ticket
    u = _unpickled(data)  # the file handed over by the server
    assert server_state()[0] == 0  # taken before the answer
    torch.from_dlpack(u)[0] = 9.0
    assert element(t, 0) == 9.0 and u.data_ptr != t.data_ptr  # another mapping, the same memory
    again = _unpickled(data)  # a replay, at once: unpickling does not raise, using it does
    assert isinstance(again, dlbridge._share.Unreceived)
    assert again.error.status_name == "DLB_ERR_DELETED" and "opened already" in str(again.error)
    with pytest.raises(dlbridge.Error) as e:
        torch.from_dlpack(again)
    assert e.value.status_name == "DLB_ERR_DELETED" and "opened already" in str(e.value)
    del u, t


def test_unreceived_raises_wherever_a_tensor_is_used():
    u = dlbridge._share._rebuild(b"not a ticket, but long enough")  # what unpickling a ticket calls
    assert isinstance(u, dlbridge._share.Unreceived) and u.error.status_name == "DLB_ERR_MALFORMED"
    for use in (lambda: np.from_dlpack(u), lambda: torch.from_dlpack(u), lambda: u.shape,
                lambda: u.__dlpack_device__(), lambda: pickle.dumps(u)):
        with pytest.raises(dlbridge.Error) as e:
            use()
        assert e.value.status_name == "DLB_ERR_MALFORMED" and "not a dlbridge share ticket" in str(e.value)
    with pytest.raises(dlbridge.Error) as e:  # its own cure has nothing to copy either; the words stay
        dlbridge.from_dlpack(u)
    assert "not a dlbridge share ticket" in str(e.value)
    assert not hasattr(u, "__array_interface__") and not hasattr(u, "_repr_html_")
    assert "DLB_ERR_MALFORMED" in repr(u)


def test_the_via_server_flag_is_accepted_and_refusals_raise_when_called_directly():
    t = dlbridge.share(np.arange(BIG, dtype=np.float32))
    rebuild, (ticket,) = dlbridge._share._reduce(t)
    assert rebuild is dlbridge._share._rebuild
    u = dlbridge._glue.share_ticket_open(ticket, via_server=True)
    assert element(u, 3) == 3.0 and server_state()[0] == 0  # handed over before the answer
    with pytest.raises(dlbridge.Error) as e:
        dlbridge._glue.share_ticket_open(ticket, via_server=True)
    assert e.value.status_name == "DLB_ERR_DELETED" and "opened already" in str(e.value)
    for bad, what in [(ticket[:-1], "truncated"), (b"XXXX" + ticket[4:], "not a dlbridge share ticket"),
                      (b"", "truncated"), (ticket[64:], "a share ticket was expected")]:
        with pytest.raises(dlbridge.Error) as e:
            dlbridge._glue.share_ticket_open(bad)
        assert e.value.status_name == "DLB_ERR_MALFORMED" and what in str(e.value)
    del u, t


def test_withdrawn_tickets_open_nothing():
    t = dlbridge.share(np.arange(BIG, dtype=np.float32))
    datas = [_pickled(t) for _ in range(3)]
    assert server_state()[0] == 3
    assert dlbridge.withdraw_tickets() == 3 and server_state()[0] == 0
    assert dlbridge.withdraw_tickets() == 0
    u = _unpickled(datas[1])
    assert isinstance(u, dlbridge._share.Unreceived) and "withdrew its ticket" in str(u.error)
    with pytest.raises(dlbridge.Error):
        dlbridge._glue.share_ticket_withdraw(b"no ticket")
    del t


def test_a_ticket_whose_sender_exited_is_refused():
    r, w = os.pipe()

    def sender():
        os.close(r)
        data = _pickled(dlbridge.share(np.ones(8, dtype=np.float32)))
        os.write(w, len(data).to_bytes(4, "little") + data)
        return 0  # exits without serving it

    pid = _fork(sender)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        n = int.from_bytes(f.read(4), "little")
        data = f.read(n)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    u = _unpickled(data)
    assert u.error.status_name == "DLB_ERR_DELETED" and "exited" in str(u.error)


def test_a_forked_child_serves_its_own_and_takes_the_parents():
    t = dlbridge.share(np.arange(BIG, dtype=np.float32))
    data = _pickled(t)
    small = dlbridge.share(np.arange(16, dtype=np.float32))
    small_data = _pickled(small)

    def child():
        if dlbridge._glue.share_server_state() != (0, 0, 0, False):
            return 2  # the parent's server, tickets or connections came along
        u = _unpickled(data)  # from the parent's server
        if element(u, BIG - 1) != BIG - 1:
            return 3
        mine = _pickled(dlbridge.share(np.zeros(BIG, dtype=np.float32)))
        if dlbridge._glue.share_server_state()[:2] != (1, 0) or _unpickled(mine).shape != (BIG,):
            return 4
        v = _unpickled(small_data)  # the parent's file, mapped again
        if element(v, 15) != 15.0:
            return 5
        torch.from_dlpack(v)[15] = -1.0
        return 0

    pid = _fork(child)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert settle() == (0, 0)  # the child took the tickets
    assert element(small, 15) == -1.0  # the child's write, in the same memory
    del t, small


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another user needs root")
def test_another_user_gets_neither_the_file_nor_the_server():
    t = dlbridge.share(np.arange(BIG, dtype=np.float32))
    data = _pickled(t)

    def stranger():
        os.setgid(65534)
        os.setuid(65534)
        u = _unpickled(data)
        if not isinstance(u, dlbridge._share.Unreceived):
            return 1
        e = u.error  # a permission refusal, said as one
        return 0 if e.status_name == "DLB_ERR_INVALID_ARGUMENT" and "permission denied" in str(e) else 2

    pid = _fork(stranger)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert server_state()[0] == 1  # still held for a receiver that may have it
    assert element(_unpickled(data), 2) == 2.0
    del t


def test_threads_unpickling_from_one_sender_at_once():
    import threading

    t = dlbridge.share(np.arange(BIG, dtype=np.float32))
    small = dlbridge.share(np.arange(64, dtype=np.float32))
    datas = [_pickled(t) for _ in range(200)] + [_pickled(small) for _ in range(200)]
    bad = []

    def work(chunk):
        for d in chunk:
            u = _unpickled(d)
            if element(u, 63) != 63.0:
                bad.append(d)

    threads = [threading.Thread(target=work, args=(datas[i::4],)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not bad
    assert settle() == (0, 0)
    del t, small


# ---------------------------------------------------------------------------
# Lifetimes across processes
# ---------------------------------------------------------------------------


def _fork(body):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = body()
        finally:
            os._exit(code)
    return pid


def test_receiver_dies_producer_intact():
    a, b = socket.socketpair()
    t = dlbridge.share(np.arange(1024, dtype=np.float32))

    def receiver():
        a.close()
        x = dlbridge.share_recv(b)
        torch.from_dlpack(x)[0] = -5.0
        os.kill(os.getpid(), signal.SIGKILL)  # dies holding the mapping

    pid = _fork(receiver)
    b.close()
    dlbridge.share_send(a, t)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    x = np.from_dlpack(t)
    assert x[0] == -5.0 and x[1023] == 1023.0
    a.close()
    del x, t


def test_producer_dies_after_sending_mapping_stays_valid():
    a, b = socket.socketpair()

    def producer():
        b.close()
        t = dlbridge.share(np.full(4096, 3.0, dtype=np.float32))
        dlbridge.share_send(a, t)
        os.kill(os.getpid(), signal.SIGKILL)

    pid = _fork(producer)
    a.close()
    x = dlbridge.share_recv(b)
    os.waitpid(pid, 0)
    assert float(torch.from_dlpack(x).sum()) == 3.0 * 4096
    torch.from_dlpack(x)[:] = 1.0  # still writable memory after its producer is gone
    assert float(torch.from_dlpack(x).sum()) == 4096.0
    b.close()
    del x


def _stress_peer(role, sock_fd, seed):
    # A child that streams tensors (producer) or takes them (receiver) until
    # the parent kills it at a random point.
    s = socket.socket(fileno=sock_fd)
    rng = np.random.default_rng(seed)
    if role == "producer":
        while True:
            dlbridge.share_send(s, np.full(int(rng.integers(1, 5000)), 1.0, dtype=np.float32))
    while True:
        x = dlbridge.share_recv(s)
        if x is None:
            return 0
        torch.from_dlpack(x).add_(1)
        del x


@pytest.mark.parametrize("role", ["producer", "receiver"])
def test_killing_the_peer_at_random_points_leaks_nothing(role):
    rng = np.random.default_rng(1234 if role == "producer" else 4321)
    for round_ in range(12):
        a, b = socket.socketpair()
        pid = _fork(lambda: (a.close(), _stress_peer(role, b.detach(), round_))[1])
        b.close()
        deadline = time.monotonic() + float(rng.uniform(0.001, 0.05))
        got = []
        try:
            while time.monotonic() < deadline:
                if role == "producer":
                    x = dlbridge.share_recv(a)  # the peer produces
                    if x is None:
                        break
                    got.append(x)
                else:
                    dlbridge.share_send(a, dlbridge.share(np.zeros(int(rng.integers(1, 5000)), dtype=np.float32)))
        except dlbridge.Error as e:  # the peer may die in the middle of a message
            assert e.status_name in ("DLB_ERR_MALFORMED", "DLB_ERR_INVALID_ARGUMENT")
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        # Drain what the killed producer had sent; each is a valid mapping.
        if role == "producer":
            try:
                while (x := dlbridge.share_recv(a)) is not None:
                    got.append(x)
            except dlbridge.Error as e:
                assert e.status_name == "DLB_ERR_MALFORMED"  # cut short by the kill
            for x in got:
                assert float(torch.from_dlpack(x).sum()) == x.shape[0]
        a.close()
        del got
    # nothing_left checks fds, mappings and exports


# ---------------------------------------------------------------------------
# A C producer, a Python consumer
# ---------------------------------------------------------------------------


def test_python_consumer_of_the_c_example_producer():
    exe = os.environ.get("DLB_SHARE_EXAMPLE")
    if not exe:
        pytest.skip("skipped: DLB_SHARE_EXAMPLE (the built examples/share_tensor.c) not given")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sock")
        producer = subprocess.Popen([exe, "--producer", path], stdout=subprocess.PIPE, text=True)
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            for _ in range(250):
                try:
                    s.connect(path)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.02)
            with s:
                x = dlbridge.share_recv(s)
                assert x.shape == (4, 4) and x.dtype == "float32"
                g = torch.from_dlpack(x)
                assert float(g.sum()) == 120.0
                g *= 2
                del g, x
                s.sendall(b"d")
            out, _ = producer.communicate(timeout=30)
        finally:
            if producer.poll() is None:
                producer.kill()
                producer.wait()
    assert producer.returncode == 0
    assert "producer: after the consumer: x[15] = 30" in out.splitlines()
