#!/usr/bin/env python3
"""Handing a float32 tensor to a worker process and getting its sum back:
dlbridge sharing beside pickling a copy, multiprocessing.shared_memory with a
numpy view, and torch.multiprocessing, in one run, as ratios.

    PYTHONPATH=build/bench/python /usr/bin/python3 bench/bench_share.py [--rounds R]

Each way has its own worker process (forked before timing) that receives a
tensor, sums it with numpy (the same code for every way), and sends the float back;
a figure is the median round trip over R rounds (a fifth of them for 128
MiB), in milliseconds. The ways take turns: in each round every way hands
a tensor over once, in an order rotated from round to round, so that
all of them meet the machine in the same state. Every round makes every
way's tensor anew before the clock starts, in that round's order, in the
form each way sends: a dlbridge tensor in shared memory
(dlbridge.share), the numpy array, a SharedMemory block holding the data,
a torch tensor moved to shared memory (share_memory_()); the previous
round's are gone by then. The receiving side maps or attaches it, as a
consumer of a new tensor (a data loader's next batch) would. A new
tensor each round matters at 128 MiB: how long the worker takes to map
and unmap a file's pages depends on how scattered they are in physical
memory (--breakdown shows it), which depends on what the kernel had free
when the tensor was made; making them anew in rotated order gives every
way the same luck.

  dlbridge-queue   a dlbridge.Tensor in shared memory (dlbridge.share) on a
                   multiprocessing queue (the ForkingPickler reducer: a
                   ticket for the sender's file, dlb_share_ticket_issue,
                   handed to the worker by the sender's ticket server)
  dlbridge-plain   a dlbridge.Tensor of the numpy array (not shared) on the
                   queue: the reducer's copy, by value up to 64 KiB, into
                   a memory file above
  dlbridge-socket  dlbridge.share_send / share_recv over a Unix socket
  pickle-copy      the numpy array on a multiprocessing queue (its bytes
                   pickled and piped)
  shm-numpy        SharedMemory's name, shape and dtype on a queue; the
                   worker attaches and views it with numpy
  torch-mp         the torch tensor on a torch.multiprocessing queue

The machine's load is printed (uptime) before and after: other processes
share its cores.

--same-tensors makes each way's tensor once, before the first round, and
hands the same one over every round (dlbridge's made first, then
SharedMemory's, then torch's; --reverse-setup the other way round).

--breakdown instead times the worker's side at 128 MiB step by step, for
dlbridge over a socket and for SharedMemory, both tensors made anew every
round, which of the two is made first and which the worker takes first
alternating: receiving (or attaching), the
DLPack import, a first sum (which faults the freshly mapped pages in), a
second sum over the same mapping (pages already mapped), and the release
(unmapping), in milliseconds, then the page faults of each first sum and
how scattered each tensor's pages are in physical memory: the number of
physically contiguous runs its 32768 pages form (32768: no two pages
adjacent; read from /proc/self/pagemap, which gives page frame numbers
to root only: "-" otherwise). One line per round, then each way's median
first sum and release when the worker took it first and when second.
--steps times the 4 KiB hand-over step by step, dlbridge through a queue
(shared, and not shared: by value) beside pickling a copy, in rotated
order, ten times --rounds rounds: the round
trip, a ForkingPickler.dumps of the payload (in the parent, after the
round trip), and in the worker the unpickling, the sum (for dlbridge with
its DLPack import into numpy) and the release (del), medians in
microseconds, and their differences from pickling.

--worker-exit asks whether a tensor a worker returns arrives when the
worker exits right after returning it: Pool(2, maxtasksperchild=1) rounds
of 8 tasks (--rounds of them, at most 20), each task making and returning a
128 KiB tensor, under fork and spawn, each way in a fresh process bounded
in time: dlbridge, dlbridge with its exit wait switched off
(dlbridge._share.EXIT_WAIT = 0 in the workers), torch.multiprocessing. For
each: rounds delivered whole, results that did not arrive (dlbridge:
unpickled as Unreceived), and whether the pool hung (its result handler
thread dead), with the median round's time.

With --reopen the parent closes the mapping it filled the SharedMemory
block through and attaches the block anew before handing it over, as
dlbridge.share once did with the shared copy it made (its pages then
come to the worker marked as used: see docs/sharing.md, "A copy's pages").
"""

import argparse
import multiprocessing as mp
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

import dlbridge

try:
    if os.environ.get("DLB_BENCH_NO_TORCH") == "1":  # --worker-exit's dlbridge runs: spawned workers import this file
        raise ImportError
    import torch
    import torch.multiprocessing as tmp
except ImportError:  # pragma: no cover
    torch = None

SIZES = [("4 KiB", 4 << 10), ("1 MiB", 1 << 20), ("128 MiB", 128 << 20)]


def _worker_queue(kind, inq, outq):
    from multiprocessing import resource_tracker, shared_memory

    while True:
        item = inq.get()
        if item is None:
            return
        if kind in ("dlbridge-queue", "dlbridge-plain"):
            s = float(np.from_dlpack(item).sum())
        elif kind == "pickle-copy":
            s = float(item.sum())
        elif kind == "shm-numpy":
            name, n = item
            block = shared_memory.SharedMemory(name=name)
            # Attaching registers the block with this worker's resource
            # tracker too (Python < 3.13), which would try to remove it
            # again at exit; the sender removes it.
            resource_tracker.unregister(block._name, "shared_memory")
            view = np.ndarray((n,), dtype=np.float32, buffer=block.buf)
            s = float(view.sum())
            del view
            block.close()
        else:  # torch-mp: the same numpy sum over the tensor's memory
            s = float(item.numpy().sum())
        del item
        outq.put(s)


def _worker_socket(sock):
    while True:
        t = dlbridge.share_recv(sock)
        if t is None:
            return
        s = float(np.from_dlpack(t).sum())
        del t
        sock.sendall(np.float64(s).tobytes())


def median_ms(samples):
    return statistics.median(samples) * 1e3


class QueueWay:
    """A worker process fed through multiprocessing queues."""

    def __init__(self, kind, ctx):
        self.inq, self.outq = ctx.Queue(), ctx.Queue()
        self.p = ctx.Process(target=_worker_queue, args=(kind, self.inq, self.outq))
        self.p.start()

    def round_trip(self, payload):
        self.inq.put(payload)
        return self.outq.get()

    def close(self):
        self.inq.put(None)
        self.p.join()


class SocketWay:
    """A forked worker fed through dlbridge.share_send over a Unix socket."""

    def __init__(self):
        self.a, b = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            self.a.close()
            try:
                _worker_socket(b)
            finally:
                os._exit(0)
        b.close()

    def round_trip(self, payload):
        dlbridge.share_send(self.a, payload)
        return float(np.frombuffer(self.a.recv(8, socket.MSG_WAITALL), dtype=np.float64)[0])

    def close(self):
        self.a.close()
        os.waitpid(self.pid, 0)


class Makers:
    """Makes each way's tensor of each size, in the form that way sends, and
    frees what a round's tensors hold once the round is over."""

    def __init__(self, arrays):
        self.arrays = arrays
        self.blocks = []

    def make(self, kind, label):
        a = self.arrays[label]
        if kind in ("dlbridge-queue", "dlbridge-socket"):
            return dlbridge.share(a)
        if kind == "dlbridge-plain":
            return dlbridge.from_dlpack(a)
        if kind == "pickle-copy":
            return a
        if kind == "shm-numpy":
            from multiprocessing import shared_memory

            blk = shared_memory.SharedMemory(create=True, size=a.nbytes)
            np.ndarray(a.shape, dtype=a.dtype, buffer=blk.buf)[:] = a
            self.blocks.append(blk)
            return (blk.name, a.size)
        return torch.from_numpy(a.copy()).share_memory_()

    def done(self):
        for blk in self.blocks:
            blk.close()
            blk.unlink()
        self.blocks = []


def interleaved(ways, makers, sizes, rounds, same):
    """Median round trip (ms) of every way at every size; in each round
    every way goes once, their order rotated from round to round, so that
    all of them meet the machine in the same state. Each round's tensors
    are made before its clock starts, in its order (`same`: one set, made
    before the first round, serves every round)."""
    results = {k: {} for k in ways}
    names = list(ways)
    for label, expect in sizes:
        samples = {k: [] for k in ways}
        payloads = {k: makers.make(k, label) for k in names} if same else None
        for i in range(rounds[label] + 1):
            order = names[i % len(names):] + names[:i % len(names)]
            if not same:  # the last round's are gone (below)
                payloads = {k: makers.make(k, label) for k in order}
            for k in order:
                t0 = time.perf_counter()
                s = ways[k].round_trip(payloads[k])
                dt = time.perf_counter() - t0
                assert abs(s - expect) <= 1e-3 * max(1.0, abs(expect)), (k, label, s, expect)
                if i > 0:  # the first round warms the workers up
                    samples[k].append(dt)
            if not same:
                payloads = None
                makers.done()
        payloads = None
        makers.done()
        for k in ways:
            results[k][label] = median_ms(samples[k])
    return results


def physical_runs(addr, nbytes):
    """How many physically contiguous runs the (mapped-in) pages of
    [addr, addr + nbytes) form, or None where page frame numbers cannot be
    read (they are given to root only)."""
    page = os.sysconf("SC_PAGE_SIZE")
    first, count = addr // page, (addr + nbytes + page - 1) // page - addr // page
    try:
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(first * 8)
            raw = f.read(count * 8)
    except OSError:
        return None
    entries = np.frombuffer(raw, dtype=np.uint64)
    frames = (entries & np.uint64((1 << 55) - 1)).astype(np.int64)
    if len(frames) != count or not frames.any():
        return None
    return int(np.count_nonzero(np.diff(frames) != 1)) + 1


def breakdown(rounds, reopen=False):
    from multiprocessing import shared_memory

    n = (128 << 20) // 4
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    x, y = socket.socketpair()

    def steps(get, view_of):
        """[get, import, sum1, sum2, release] ms, sum1's faults, runs."""
        c = [time.perf_counter()]
        u = get()
        c.append(time.perf_counter())
        v = view_of(u)
        c.append(time.perf_counter())
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        v.sum()
        f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        c.append(time.perf_counter())
        v.sum()
        c.append(time.perf_counter())
        runs = physical_runs(v.ctypes.data, v.nbytes)  # outside the clock
        r0 = time.perf_counter()
        del v
        if isinstance(u, shared_memory.SharedMemory):
            u.close()
        del u
        c.append(time.perf_counter())
        d = [1e3 * (c[i + 1] - c[i]) for i in range(4)] + [1e3 * (c[5] - r0)]
        return d, f1 - f0, runs

    # One resource tracker for both sides (else the worker's would remove the
    # parent's blocks when the worker exits).
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    pid = os.fork()
    if pid == 0:
        x.close()
        try:
            print("ms per step, dlbridge: recv import sum1 sum2 release | SharedMemory: attach view sum1 sum2 close"
                  " | page faults of each sum1 | physically contiguous runs of each tensor's 32768 pages"
                  " | which went first")
            firsts = {"dlbridge": [], "shm": []}
            seconds = {"dlbridge": [], "shm": []}
            for i in range(rounds):
                name = y.recv(64, socket.MSG_WAITALL).rstrip(b"\0").decode()
                got = {}
                order = ("dlbridge", "shm") if i % 2 == 0 else ("shm", "dlbridge")
                for k in order:
                    if k == "dlbridge":
                        got[k] = steps(lambda: dlbridge.share_recv(y), np.from_dlpack)
                    else:
                        got[k] = steps(lambda: shared_memory.SharedMemory(name=name),
                                       lambda b: np.ndarray((n,), dtype=np.float32, buffer=b.buf))
                (dd, fd_, rd), (ds, fs, rs) = got["dlbridge"], got["shm"]
                print("dlbridge %6.2f %6.3f %6.1f %6.1f %6.2f | shm %6.2f %6.3f %6.1f %6.1f %6.2f" % tuple(dd + ds)
                      + " | faults %d %d | runs %s %s | %s" % (fd_, fs, rd if rd is not None else "-",
                                                              rs if rs is not None else "-", order[0]), flush=True)
                if i > 0:  # the first round warms up
                    firsts[order[0]].append(got[order[0]][0])
                    seconds[order[1]].append(got[order[1]][0])
                y.sendall(b"k")
            print("medians, ms: first sum / release, of the tensor the worker took first and of the one it took second")
            for k in ("dlbridge", "shm"):
                med = [("%.1f / %.1f" % (statistics.median(d[2] for d in v), statistics.median(d[4] for d in v))
                        if v else "-") for v in (firsts[k], seconds[k])]
                print("%-9s first: %s   second: %s" % (k, med[0], med[1]))
        finally:
            os._exit(0)
    y.close()
    for i in range(rounds):
        # both tensors made anew, which first alternating; the last round's gone first
        t = blk = None
        for which in (("d", "s") if i % 2 == 0 else ("s", "d")):
            if which == "d":
                t = dlbridge.share(a)
            else:
                blk = shared_memory.SharedMemory(create=True, size=a.nbytes)
                np.ndarray(a.shape, dtype=np.float32, buffer=blk.buf)[:] = a
                if reopen:  # the mapping that wrote it goes; the block is attached anew
                    name = blk.name
                    blk.close()
                    blk = shared_memory.SharedMemory(name=name)
        x.sendall(blk.name.encode().ljust(64, b"\0"))
        dlbridge.share_send(x, t)
        x.recv(1)
        del t
        blk.close()
        blk.unlink()
    os.waitpid(pid, 0)


def _worker_steps(kind, inq, outq):
    from multiprocessing.reduction import ForkingPickler

    while True:
        data = inq._reader.recv_bytes()  # what Queue.get does before unpickling
        t1 = time.perf_counter()
        item = ForkingPickler.loads(data)
        t2 = time.perf_counter()
        if item is None:
            return
        s = float(np.from_dlpack(item).sum()) if kind.startswith("dlbridge") else float(item.sum())
        t3 = time.perf_counter()
        del item
        t4 = time.perf_counter()
        outq.put((s, (t2 - t1, t3 - t2, t4 - t3)))


def steps(rounds):
    """The 4 KiB hand-over step by step: dlbridge-queue beside pickle-copy,
    alternating, a new tensor each round. In the worker: unpickling (the
    bytes already read from the queue's pipe), the sum (with the DLPack
    import for dlbridge), the release (del); in the parent: the round trip
    and, after it, a ForkingPickler.dumps of the same payload."""
    from multiprocessing.reduction import ForkingPickler

    ctx = mp.get_context("fork")
    a = np.random.default_rng(0).random(1024, dtype=np.float32)
    expect = float(a.sum())
    kinds = ("dlbridge-queue", "dlbridge-plain", "pickle-copy")
    ways = {}
    for k in kinds:
        inq, outq = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=_worker_steps, args=(k, inq, outq))
        p.start()
        ways[k] = (inq, outq, p)
    got = {k: [] for k in kinds}
    try:
        for i in range(rounds + 20):
            for k in kinds[i % 3:] + kinds[:i % 3]:
                inq, outq, _ = ways[k]
                if k == "dlbridge-queue":
                    payload = dlbridge.share(a)
                elif k == "dlbridge-plain":
                    payload = dlbridge.from_dlpack(a)
                else:
                    payload = a
                t0 = time.perf_counter()
                inq.put(payload)
                s, worker = outq.get()
                trip = time.perf_counter() - t0
                assert abs(s - expect) <= 1e-3 * max(1.0, abs(expect)), (k, s, expect)
                t0 = time.perf_counter()
                ForkingPickler.dumps(payload)
                dumped = time.perf_counter() - t0
                del payload
                if i >= 20:  # warm-up rounds
                    got[k].append((trip, dumped) + tuple(worker))
    finally:
        for inq, _, p in ways.values():
            inq.put(None)
            p.join()
    names = ("round trip", "dumps", "loads", "sum", "release")
    print("4 KiB float32, %d rounds each, medians in microseconds" % rounds)
    print("%-16s" % "" + "".join("%12s" % n for n in names))
    med = {k: [statistics.median(r[j] for r in got[k]) * 1e6 for j in range(len(names))] for k in kinds}
    for k in kinds:
        print("%-16s" % k + "".join("%12.1f" % v for v in med[k]))
    for k in kinds[:2]:
        print("%-16s" % ("%s - pickle" % k.split("-")[1]) +
              "".join("%12.1f" % (x - y) for x, y in zip(med[k], med["pickle-copy"])))
    print("round trip, pickle-copy's over dlbridge-queue's: %.2f, over dlbridge-plain's: %.2f"
          % (med["pickle-copy"][0] / med["dlbridge-queue"][0], med["pickle-copy"][0] / med["dlbridge-plain"][0]))


# ---- --worker-exit --------------------------------------------------------

EXIT_N = 1 << 15  # float32 elements: 128 KiB, past what dlbridge sends by value


def _exit_task_dlbridge(i):
    return dlbridge.share(np.full(EXIT_N, float(i), dtype=np.float32))


def _exit_task_torch(i):
    return torch.full((EXIT_N,), float(i))


def _no_exit_wait():
    dlbridge._share.EXIT_WAIT = 0.0


def worker_exit_child(way, method, rounds):
    """One way's Pool rounds in this (fresh) process; prints one line."""
    import json

    if way == "torch":
        ctx = tmp.get_context(method)
        task, init = _exit_task_torch, None
    else:
        ctx = mp.get_context(method)
        task, init = _exit_task_dlbridge, (_no_exit_wait if way == "dlbridge-nowait" else None)
    delivered = missing = 0
    hung = False
    times = []
    for _ in range(rounds):
        pool = ctx.Pool(2, maxtasksperchild=1, initializer=init)
        start = time.perf_counter()
        try:
            got = pool.map_async(task, range(8)).get(timeout=30)
        except mp.TimeoutError:
            hung = not pool._result_handler.is_alive()
            break
        times.append(time.perf_counter() - start)
        arrived = [x for x in got if not isinstance(x, dlbridge._share.Unreceived)]
        missing += len(got) - len(arrived)
        delivered += len(arrived) == len(got) and all(
            float(np.from_dlpack(x)[-1] if way != "torch" else x[-1]) == i for i, x in enumerate(got))
        pool.close()
        pool.join()
        del got, arrived
    print(json.dumps({"delivered": delivered, "missing": missing, "hung": hung,
                      "ms": 1000 * statistics.median(times) if times else None}), flush=True)
    os._exit(0)  # a hung pool's threads would hold the exit


def worker_exit(rounds):
    import json

    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print("Pool(2, maxtasksperchild=1), %d rounds of 8 tasks, each returning a 128 KiB tensor" % rounds)
    print("%-18s %-7s %10s %10s %8s %10s" % ("way", "start", "delivered", "missing", "hung", "round ms"))
    ways = ["dlbridge", "dlbridge-nowait"] + (["torch"] if torch is not None else [])
    for method in ("fork", "spawn"):
        for way in ways:
            try:
                env = dict(os.environ, DLB_BENCH_NO_TORCH="0" if way == "torch" else "1")
                out = subprocess.run([sys.executable, __file__, "--worker-exit-child", way, method, str(rounds)],
                                     capture_output=True, text=True, timeout=60 + 30 * rounds, env=env)
                r = json.loads(out.stdout.strip().splitlines()[-1])
            except (subprocess.TimeoutExpired, IndexError, ValueError) as e:
                r = {"delivered": "?", "missing": "?", "hung": "? (%s)" % type(e).__name__, "ms": None}
            print("%-18s %-7s %10s %10s %8s %10s" % (way, method, "%s/%d" % (r["delivered"], rounds), r["missing"],
                                                    r["hung"], "%.1f" % r["ms"] if r["ms"] else "-"), flush=True)
    print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--worker-exit-child":
        worker_exit_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100, help="rounds at 4 KiB and 1 MiB (128 MiB: a fifth)")
    ap.add_argument("--breakdown", action="store_true", help="the worker's steps at 128 MiB (see above)")
    ap.add_argument("--steps", action="store_true", help="the 4 KiB hand-over step by step (see above)")
    ap.add_argument("--reopen", action="store_true",
                    help="with --breakdown: the SharedMemory block's writing mapping is closed and the block attached anew")
    ap.add_argument("--same-tensors", action="store_true",
                    help="make each way's tensor once and hand the same one over every round")
    ap.add_argument("--reverse-setup", action="store_true",
                    help="with --same-tensors: make the tensors torch's first and dlbridge's last")
    ap.add_argument("--worker-exit", action="store_true",
                    help="whether tensors returned by exiting pool workers arrive (see above)")
    args = ap.parse_args()
    if args.worker_exit:
        worker_exit(min(20, args.rounds))
        return
    if args.steps:
        print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        steps(max(100, args.rounds * 10))
        print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        return
    if args.breakdown:
        print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        breakdown(max(3, args.rounds // 5), args.reopen)
        return
    rounds = {"4 KiB": args.rounds, "1 MiB": args.rounds, "128 MiB": max(3, args.rounds // 5)}
    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print("tensors:", "the same ones every round" if args.same_tensors else "made anew every round")

    arrays = {label: np.random.default_rng(0).random(n // 4, dtype=np.float32) for label, n in SIZES}
    sizes = [(label, float(a.sum())) for label, a in arrays.items()]
    ctx = mp.get_context("fork")
    ways = {"dlbridge-queue": QueueWay("dlbridge-queue", ctx), "dlbridge-plain": QueueWay("dlbridge-plain", ctx),
            "dlbridge-socket": SocketWay(),
            "pickle-copy": QueueWay("pickle-copy", ctx), "shm-numpy": QueueWay("shm-numpy", ctx)}
    if torch is not None:
        ways["torch-mp"] = QueueWay("torch-mp", tmp.get_context("fork"))
    makers = Makers(arrays)
    if args.reverse_setup:
        ways = dict(reversed(list(ways.items())))  # with --same-tensors the tensors are made in this order
    try:
        results = interleaved(ways, makers, sizes, rounds, args.same_tensors)
    finally:
        # The queue workers, forked after the socket's, hold its parent end
        # too: they go first, so that the socket's worker sees the end.
        for w in sorted(ways.values(), key=lambda w: isinstance(w, SocketWay)):
            w.close()
        makers.done()

    kinds = list(results)
    print()
    print("median round trip, ms (rounds: %s)" % ", ".join("%s %d" % (l, rounds[l]) for l, _ in SIZES))
    print("%-16s" % "" + "".join("%12s" % l for l, _ in SIZES))
    for k in kinds:
        print("%-16s" % k + "".join("%12.3f" % results[k][l] for l, _ in SIZES))
    print()
    print("ratios: other way's time / dlbridge-queue's (above 1: dlbridge faster)")
    for k in kinds:
        if k == "dlbridge-queue":
            continue
        print("%-16s" % k + "".join("%12.2f" % (results[k][l] / results["dlbridge-queue"][l]) for l, _ in SIZES))
    print()
    print("ratios: other way's time / dlbridge-socket's")
    for k in kinds:
        if k == "dlbridge-socket":
            continue
        print("%-16s" % k + "".join("%12.2f" % (results[k][l] / results["dlbridge-socket"][l]) for l, _ in SIZES))
    print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
