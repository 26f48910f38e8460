"""The sharing fault suite (scripts/test.d/49-share-faults.sh): loops of
hostile senders, killed peers, terminated pools and forged tickets, each
checking that the survivor ends where it started (file descriptors,
mappings, exports, held tickets, memory) and dies of no signal.

    PYTHONPATH=<build>/python /usr/bin/python3 tests/share/share_faults.py CASE

One case per run (the stage bounds each in time); it prints one line of
figures and exits 0 (held), 1 (a check failed) or 77 (cannot run here).
LOOPS holds every case's count (scripts/doc-facts writes them into
docs/RELIABILITY.md). The module imports little at its top: the spawned
pool workers import it again.
"""

import os
import random
import signal
import socket
import sys
import time

import dlbridge

LOOPS = {
    "sigbus-seconds": 25,  # a sender shrinking and sealing files under its receiver
    "kill-receivers": 200,  # receivers killed with SIGKILL while they open the issuer's tickets
    "kill-issuers": 200,  # issuers killed with SIGKILL while the receiver opens their tickets
    "pool-terminate-fork": 100,  # Pool rounds terminated mid-task
    "pool-terminate-spawn": 100,
    "maxtasks-fork": 10,  # Pool(maxtasksperchild=1) rounds of 8 tasks, every result delivered
    "maxtasks-spawn": 3,  # rounds of 4 tasks
    "unopened": 5000,  # tickets nobody opens, under a 1024-descriptor limit
    "forged": 200,  # forgeries of each kind, and replays
}

PAGE = 4096
BIG = 1 << 15  # float32 elements: 128 KiB, past what travels by value


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def figures():
    with open("/proc/self/maps") as f:
        maps = sum("memfd:dlbridge-shared" in line for line in f)
    held, connections, _, _ = dlbridge._glue.share_server_state()
    return {
        "fds": len(os.listdir("/proc/self/fd")) - 1,
        "maps": maps,
        "mappings": dlbridge.shared_mappings(),
        "exports": dlbridge.live_exports(),
        "held": held,
        "rss": _status_kib("VmRSS") // 1024,
        "shmem": _status_kib("RssShmem") // 1024,
    }


def quiet(timeout=10.0):
    """Waits until the ticket server answers no connection (it closes one a
    moment after its receiver read the answer, or found it gone)."""
    deadline = time.monotonic() + timeout
    while dlbridge._glue.share_server_state()[1] != 0 and time.monotonic() < deadline:
        time.sleep(0.002)


def withdraw():
    """dlbridge.withdraw_tickets() once the server is quiet: an answer to a
    receiver killed meanwhile puts its ticket back."""
    quiet()
    return dlbridge.withdraw_tickets()


def settled():
    import gc

    quiet()
    gc.collect()
    return figures()


# Memory may move a little with the interpreter's own allocations; shared
# memory not at all once everything is released.
RSS_SLACK_MIB = 24
SHMEM_SLACK_MIB = 1


def compare(before, after):
    """The figures that grew, as words; empty when none did."""
    grown = [k for k in ("fds", "maps", "mappings", "exports", "held") if after[k] > before[k]]
    if after["rss"] > before["rss"] + RSS_SLACK_MIB:
        grown.append("rss")
    if after["shmem"] > before["shmem"] + SHMEM_SLACK_MIB:
        grown.append("shmem")
    return ["%s %s -> %s" % (k, before[k], after[k]) for k in grown]


def report(case, before, after, facts, problems=()):
    problems = list(problems) + compare(before, after)
    shown = ", ".join("%s %s->%s" % (k, before[k], after[k]) for k in before)
    print("%-22s %s; %s (rss, shmem in MiB): %s" % (case, facts, shown, "FAIL: " + "; ".join(problems)
                                                   if problems else "ok"), flush=True)
    return 1 if problems else 0


def _pickled(t):
    from multiprocessing.reduction import ForkingPickler

    return bytes(ForkingPickler.dumps(t))


def _unpickled(data):
    from multiprocessing.reduction import ForkingPickler

    return ForkingPickler.loads(data)


def _element(t, i):
    import ctypes

    return ctypes.c_float.from_address(t.data_ptr + 4 * i).value


def _set_element(t, i, v):
    import ctypes

    ctypes.c_float.from_address(t.data_ptr + 4 * i).value = v


def _shared(n, value):
    import numpy as np

    return dlbridge.share(np.full(n, value, dtype=np.float32))


def _warm():
    """What stays for the process's life: the ticket server, multiprocessing's
    reducer, numpy."""
    t = _shared(BIG, 1.0)
    _unpickled(_pickled(t))
    del t


def _fork(body):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = body()
        finally:
            os._exit(code)
    return pid


def _exit_status(pid):
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------


def case_sigbus():
    """A sender passes an unsealed memory file of the described size, then
    after a random spin shrinks it to nothing and seals it; one file in four
    it seals whole instead (a fair sender). The receiver opens every file it
    can and reads every page. Dying of SIGBUS ends this process."""
    import fcntl

    import numpy as np

    seconds = LOOPS["sigbus-seconds"]
    n = 64 * PAGE // 4  # 64 pages
    template = dlbridge.share(np.zeros(n, dtype=np.float32))
    fd, description = dlbridge._share.descriptor(template)
    os.close(fd)
    del template
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    _warm()
    before = settled()

    def sender():
        a.close()
        rng = random.Random(7)
        while True:
            m = os.memfd_create("shrinking", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(m, 64 * PAGE)
            os.pwrite(m, np.float32(3.0).tobytes(), 64 * PAGE - 4)
            fair = rng.random() < 0.25
            if fair:
                fcntl.fcntl(m, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            try:
                socket.send_fds(b, [description], [m])
            except OSError:
                return 0  # the receiver is done
            if not fair:
                end = time.perf_counter() + rng.uniform(0, 80e-6)
                while time.perf_counter() < end:
                    pass
                os.ftruncate(m, 0)
                fcntl.fcntl(m, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            os.close(m)
            if b.recv(1) != b"k":
                return 0

    pid = _fork(sender)
    b.close()
    opened = refused = wrong = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            t = dlbridge.share_recv(a)
        except dlbridge.Error as e:
            refused += 1
            if e.status_name not in ("DLB_ERR_MALFORMED", "DLB_ERR_INVALID_ARGUMENT"):
                wrong += 1
        else:
            x = np.from_dlpack(t)
            s = float(x[:: PAGE // 4].sum()) + float(x[-1])  # every page, and the last value
            opened += 1
            wrong += s != 3.0
            del x, t
        a.send(b"k")
    a.close()
    os.kill(pid, signal.SIGKILL)
    _exit_status(pid)
    after = settled()
    facts = "%d s: %d files opened and read, %d refused" % (seconds, opened, refused)
    return report("sigbus-race", before, after, facts, ["%d wrong outcomes" % wrong] if wrong else ())


def case_kill_receivers():
    """The issuer (this process) hands tickets to a receiver that opens them
    and writes into them; the receiver is killed at a random point, and the
    issuer withdraws what it had not taken."""
    rounds = LOOPS["kill-receivers"]
    t = _shared(BIG, 0.0)
    _warm()
    before = settled()
    rng = random.Random(11)
    taken = withdrawn = 0
    for i in range(rounds):
        r, w = os.pipe()

        def receiver():
            os.close(w)
            with os.fdopen(r, "rb") as f:
                while True:
                    head = f.read(4)
                    if len(head) < 4:
                        return 0
                    u = _unpickled(f.read(int.from_bytes(head, "little")))
                    _set_element(u, 1, float(i))
                    del u

        pid = _fork(receiver)
        os.close(r)
        try:
            for _ in range(3):
                data = _pickled(t)
                os.write(w, len(data).to_bytes(4, "little") + data)
        except BrokenPipeError:
            pass
        time.sleep(rng.uniform(0, 0.004))
        os.kill(pid, signal.SIGKILL)
        _exit_status(pid)
        os.close(w)
        quiet()
        held = dlbridge._glue.share_server_state()[0]
        withdrawn += withdraw()  # its receiver is gone
        taken += 3 - held
    value = _element(t, 1)
    del t
    after = settled()
    facts = "%d receivers killed; %d tickets taken, %d withdrawn after the kill" % (rounds, taken, withdrawn)
    return report("kill-receivers", before, after, facts, [] if value <= rounds else ["bad value %r" % value])


def case_kill_issuers():
    """Issuers stream tickets of tensors they fill; each is killed at a
    random point. The receiver (this process) opens what arrives: a tensor
    with the issuer's values, or (the issuer gone) an Unreceived."""
    rounds = LOOPS["kill-issuers"]
    _warm()
    before = settled()
    rng = random.Random(13)
    got = unreceived = bad = 0
    for i in range(rounds):
        r, w = os.pipe()

        def issuer():
            os.close(r)
            k = 0
            while True:
                data = _pickled(_shared(BIG, float(k)))
                os.write(w, len(data).to_bytes(4, "little") + data)
                k += 1

        pid = _fork(issuer)
        os.close(w)
        kept = []
        deadline = time.monotonic() + rng.uniform(0.0, 0.01)
        with os.fdopen(r, "rb") as f:
            while True:
                if time.monotonic() > deadline and pid:
                    os.kill(pid, signal.SIGKILL)
                    _exit_status(pid)
                    pid = 0
                head = f.read(4)
                if len(head) < 4:
                    break
                data = f.read(int.from_bytes(head, "little"))
                if len(data) < int.from_bytes(head, "little"):
                    break  # cut by the kill
                u = _unpickled(data)
                if isinstance(u, dlbridge._share.Unreceived):
                    unreceived += 1
                    bad += u.error.status_name != "DLB_ERR_DELETED"
                else:
                    got += 1
                    bad += _element(u, BIG - 1) != float(len(kept))
                    kept.append(u)
        if pid:
            os.kill(pid, signal.SIGKILL)
            _exit_status(pid)
        del kept
    u = None  # the last tensor received (the loop's variable) is let go too
    after = settled()
    facts = "%d issuers killed; %d tensors received, %d unreceived (issuer gone)" % (rounds, got, unreceived)
    return report("kill-issuers", before, after, facts, ["%d wrong outcomes" % bad] if bad else ())


def _pool_task(t):
    time.sleep(0.002)
    return _element(t, 0)


def _pool_terminate(method):
    import multiprocessing as mp

    rounds = LOOPS["pool-terminate-" + method]
    ctx = mp.get_context(method)
    _warm()
    rng = random.Random(17)
    before = None
    withdrawn = done = 0
    for i in range(rounds + 1):
        pool = ctx.Pool(2)
        tensors = [_shared(BIG, float(k)) for k in range(20)]
        result = pool.map_async(_pool_task, tensors)
        time.sleep(rng.uniform(0.0, 0.05 if method == "fork" else 0.3))  # a spawned worker starts in 0.1-0.2 s
        pool.terminate()
        pool.join()
        done += result.ready()
        del tensors, result
        n = withdraw()  # what its unstarted tasks never took
        if i == 0:
            before = settled()  # after one round: multiprocessing's own helpers stay
        else:
            withdrawn += n
    after = settled()
    facts = "%d rounds (%d finished before the terminate); %d unopened tickets withdrawn after it" % (
        rounds, done, withdrawn)
    return report("pool-terminate-" + method, before, after, facts)


def case_pool_terminate_fork():
    return _pool_terminate("fork")


def case_pool_terminate_spawn():
    return _pool_terminate("spawn")


def _worker_tensor(i):
    return _shared(BIG, float(i))


_exit_waits = None


def _time_exit_wait(queue):
    # Around dlbridge's exit wait (exit priority -100): its start and end.
    from multiprocessing import util

    global _exit_waits
    _exit_waits = queue
    start = []
    util.Finalize(None, lambda: start.append(time.monotonic()), exitpriority=-99)
    util.Finalize(None, lambda: queue.put(time.monotonic() - start[0]), exitpriority=-101)


def _maxtasks(method):
    import multiprocessing as mp

    rounds = LOOPS["maxtasks-" + method]
    n = 8 if method == "fork" else 4
    ctx = mp.get_context(method)
    _warm()
    waits = ctx.SimpleQueue()
    before = None
    delivered = 0
    problems = []
    for i in range(rounds + 1):
        pool = ctx.Pool(2, maxtasksperchild=1, initializer=_time_exit_wait, initargs=(waits,))
        try:
            got = pool.map_async(_worker_tensor, range(n)).get(timeout=120)
        except mp.TimeoutError:
            problems.append("round %d hung (result handler alive: %s)" % (i, pool._result_handler.is_alive()))
            pool.terminate()
            break
        if [_element(x, BIG - 1) for x in got] != [float(k) for k in range(n)]:
            problems.append("round %d: wrong values" % i)
        delivered += len(got) if i else 0
        pool.close()
        pool.join()
        del got
        if i == 0:
            before = settled()
    measured = []
    while not waits.empty():
        measured.append(waits.get())
    measured.sort()
    after = settled()
    facts = "%d rounds, %d of %d results delivered; workers' exit wait median %.1f ms, max %.1f ms (%d)" % (
        rounds, delivered, rounds * n, 1000 * measured[len(measured) // 2] if measured else -1,
        1000 * measured[-1] if measured else -1, len(measured))
    if delivered != rounds * n:
        problems.append("%d results missing" % (rounds * n - delivered))
    return report("maxtasks-" + method, before or after, after, facts, problems)


def case_maxtasks_fork():
    return _maxtasks("fork")


def case_maxtasks_spawn():
    return _maxtasks("spawn")


def _never_read(q):
    dlbridge._share.EXIT_WAIT = 1.0
    for k in range(3):
        q.put(_shared(BIG, float(k)))


def case_unopened():
    """Tickets nobody opens: bounded at half the descriptor limit (here
    1024), withdrawn on request; copies of unshared tensors freed with them;
    a child whose tickets nobody opens exits after its exit wait."""
    import multiprocessing as mp
    import resource

    import numpy as np

    n = LOOPS["unopened"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    t = _shared(BIG, 1.0)
    _warm()
    before = settled()
    problems = []
    most_fds = most_held = 0
    for i in range(n):
        _pickled(t)
        most_held = max(most_held, dlbridge._glue.share_server_state()[0])
        if i % 64 == 0:
            most_fds = max(most_fds, figures()["fds"])
    if most_held > 512:
        problems.append("%d tickets held, past the bound 512" % most_held)
    withdrawn = dlbridge.withdraw_tickets()
    # 20 pickles of a 4 MiB tensor not in shared memory: 20 copies.
    plain = dlbridge.from_dlpack(np.ones(1 << 20, dtype=np.float32))
    for _ in range(20):
        _pickled(plain)
    copies = dlbridge._glue.share_server_state()[0]
    withdrawn_copies = dlbridge.withdraw_tickets()
    del plain
    # A child that puts tickets on a queue nobody reads.
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_never_read, args=(q,))
    start = time.monotonic()
    p.start()
    p.join(30)
    exited = time.monotonic() - start
    if p.exitcode != 0 or exited > 10:
        problems.append("the child with unopened tickets took %.1f s to exit (code %s)" % (exited, p.exitcode))
    q.close()
    q.cancel_join_thread()
    del q, p
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    after = settled()
    facts = ("%d unopened: at most %d held, %d descriptors; %d withdrawn; 20 x 4 MiB copies held %d, withdrawn %d; "
             "a child with 3 unopened exited after %.1f s (its exit wait 1 s)") % (
        n, most_held, most_fds, withdrawn, copies, withdrawn_copies, exited)
    return report("unopened", before, after, facts, problems)


def case_forged():
    """Replays at once and from racing threads; tickets edited to another
    token, another server, another process's file: nothing opens that the
    issuer did not hand over once."""
    import threading

    n = LOOPS["forged"]
    t = _shared(BIG, 5.0)
    _warm()
    before = settled()
    problems = []
    replays = races = forged = 0

    def ticket():
        from dlbridge._share import _reduce

        return _reduce(t)[1][0]

    for _ in range(n):  # a replay at once
        tk = ticket()
        u = dlbridge._share._rebuild(tk)
        again = dlbridge._share._rebuild(tk)
        replays += isinstance(again, dlbridge._share.Unreceived) and "opened already" in str(again.error)
        del u, again
    for _ in range(n // 4):  # four threads for one ticket
        tk = ticket()
        out = []
        threads = [threading.Thread(target=lambda: out.append(dlbridge._share._rebuild(tk))) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        races += sum(not isinstance(u, dlbridge._share.Unreceived) for u in out) == 1
        del out
    rng = random.Random(19)

    def reseal(b):
        h = 2166136261
        for i, c in enumerate(b):
            h = ((h ^ (0 if 12 <= i < 16 else c)) * 16777619) & 0xFFFFFFFF
        b[12:16] = h.to_bytes(4, "little")
        return bytes(b)

    other = _fork(lambda: (time.sleep(30), 0)[1])
    for _ in range(n):
        tk = bytearray(ticket())
        kinds = [
            lambda b: b.__setitem__(slice(48, 64), rng.randbytes(16)),  # a made-up token
            lambda b: b.__setitem__(48, b[48] ^ 1),  # one bit of it
            lambda b: b.__setitem__(slice(40, 48), rng.randbytes(8)),  # another server
            lambda b: b.__setitem__(slice(16, 20), other.to_bytes(4, "little")),  # another process
        ]
        for k in kinds:
            b = bytearray(tk)
            k(b)
            u = dlbridge._share._rebuild(reseal(b))
            forged += isinstance(u, dlbridge._share.Unreceived)
        real = dlbridge._share._rebuild(bytes(tk))  # still opens, once
        if isinstance(real, dlbridge._share.Unreceived) or _element(real, 0) != 5.0:
            problems.append("a real ticket did not open after forgeries")
            break
        del real
    os.kill(other, signal.SIGKILL)
    _exit_status(other)
    if replays != n:
        problems.append("%d of %d replays opened" % (n - replays, n))
    if races != n // 4:
        problems.append("%d of %d races gave other than one open" % (n // 4 - races, n // 4))
    if forged != 4 * n:
        problems.append("%d of %d forgeries opened" % (4 * n - forged, 4 * n))
    del t
    after = settled()
    facts = "%d replays refused, %d four-thread races opened once, %d forgeries opened nothing" % (
        replays, races, forged)
    return report("forged", before, after, facts, problems)


def case_another_user():
    """A throwaway user (made by the stage) gets neither the file nor an
    answer with one: its open is a permission refusal, and /proc and
    pidfd_getfd are closed to it."""
    import ctypes
    import pwd

    name = os.environ.get("DLB_FAULT_USER")
    if os.geteuid() != 0 or not name:
        print("%-22s skipped: needs root and DLB_FAULT_USER (the stage makes the user)" % "another-user")
        return 77
    user = pwd.getpwnam(name)
    t = _shared(BIG, 2.0)
    _warm()
    before = settled()
    data = _pickled(t)
    fd = int.from_bytes(data[data.index(b"DLBS") + 20:][:4], "little")  # the ticket's descriptor number
    me = os.getpid()
    r, w = os.pipe()

    def stranger():
        os.close(r)
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
        seen = []
        for _ in range(50):
            u = _unpickled(data)
            e = getattr(u, "error", None)
            seen.append("refused" if e is not None and e.status_name == "DLB_ERR_INVALID_ARGUMENT"
                        and "permission denied" in str(e) else "OPENED" if e is None else str(e))
        try:
            os.open("/proc/%d/fd/%d" % (me, fd), os.O_RDONLY)
            seen.append("PROC OPENED")
        except OSError:
            seen.append("proc refused")
        libc = ctypes.CDLL(None, use_errno=True)
        pidfd = libc.syscall(434, me, 0)  # pidfd_open
        got = libc.syscall(438, pidfd, fd, 0) if pidfd >= 0 else -1  # pidfd_getfd
        seen.append("pidfd refused" if got < 0 else "PIDFD OPENED")
        os.write(w, ("\n".join(seen)).encode())
        return 0

    pid = _fork(stranger)
    os.close(w)
    with os.fdopen(r) as f:
        seen = f.read().split("\n")
    code = _exit_status(pid)
    problems = []
    if code != 0 or any(s.isupper() or s.startswith("DLB") for s in seen) or len(seen) != 52:
        problems.append("the other user got: %s (exit %s)" % (sorted(set(seen)), code))
    held = dlbridge._glue.share_server_state()[0]
    mine = _unpickled(data)  # still there for this user's receiver
    if isinstance(mine, dlbridge._share.Unreceived) or held != 1:
        problems.append("the ticket did not wait for its own user's receiver")
    del mine, t
    after = settled()
    facts = "user %s: 50 opens refused as permission denied, /proc and pidfd_getfd refused" % name
    return report("another-user", before, after, facts, problems)


CASES = {
    "sigbus": case_sigbus,
    "kill-receivers": case_kill_receivers,
    "kill-issuers": case_kill_issuers,
    "pool-terminate-fork": case_pool_terminate_fork,
    "pool-terminate-spawn": case_pool_terminate_spawn,
    "maxtasks-fork": case_maxtasks_fork,
    "maxtasks-spawn": case_maxtasks_spawn,
    "unopened": case_unopened,
    "forged": case_forged,
    "another-user": case_another_user,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: share_faults.py {%s}" % ",".join(CASES), file=sys.stderr)
        sys.exit(2)
    sys.exit(CASES[sys.argv[1]]())
