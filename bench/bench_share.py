#!/usr/bin/env python3
"""Handing a float32 tensor to a worker process and getting its sum back:
dlbridge sharing beside pickling a copy, multiprocessing.shared_memory with a
numpy view, and torch.multiprocessing, in one run, as ratios.

    PYTHONPATH=build/dev/python /usr/bin/python3 bench/bench_share.py [--rounds R]

Each way has its own worker process (forked before timing) that receives a
tensor, sums it with numpy (the same code for every way), and sends the float back;
a figure is the median round trip over R rounds (a fifth of them for 128
MiB), in milliseconds. The ways take turns: in each round every way hands
its tensor over once, in an order rotated from round to round, so that
all of them meet the machine in the same state. The tensor exists before the clock starts in the form each
way sends: a dlbridge tensor in shared memory, a numpy array, a
SharedMemory block holding the data, a torch tensor already moved to shared
memory (share_memory_()). The receiving side maps or attaches it every
round, as a consumer of a new tensor would.

  dlbridge-queue   a dlbridge.Tensor on a multiprocessing queue (the
                   ForkingPickler reducer: a ticket for the sender's file,
                   opened by the worker through /proc)
  dlbridge-socket  dlbridge.share_send / share_recv over a Unix socket
  pickle-copy      the numpy array on a multiprocessing queue (its bytes
                   pickled and piped)
  shm-numpy        SharedMemory's name, shape and dtype on a queue; the
                   worker attaches and views it with numpy
  torch-mp         the torch tensor on a torch.multiprocessing queue

The machine's load is printed (uptime) before and after: other processes
share its cores.

--reverse-setup makes the tensors in the opposite order (torch's first, dlbridge's
last).

--breakdown instead times the worker's side at 128 MiB step by step, for
dlbridge over a socket and for SharedMemory: receiving (or attaching), the
DLPack import, a first sum (which faults the freshly mapped pages in), a
second sum over the same mapping (pages already mapped), and the release
(unmapping), in milliseconds, and the page faults of each first sum, one
line per round.
"""

import argparse
import multiprocessing as mp
import os
import resource
import socket
import statistics
import subprocess
import time

import numpy as np

import dlbridge

try:
    import torch
    import torch.multiprocessing as tmp
except ImportError:  # pragma: no cover
    torch = None

SIZES = [("4 KiB", 4 << 10), ("1 MiB", 1 << 20), ("128 MiB", 128 << 20)]


def _worker_queue(kind, inq, outq):
    from multiprocessing import shared_memory

    while True:
        item = inq.get()
        if item is None:
            return
        if kind == "dlbridge-queue":
            s = float(np.from_dlpack(item).sum())
        elif kind == "pickle-copy":
            s = float(item.sum())
        elif kind == "shm-numpy":
            name, n = item
            block = shared_memory.SharedMemory(name=name)
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


def interleaved(ways, payloads, rounds):
    """Median round trip (ms) of every way at every size; in each round
    every way goes once, their order rotated from round to round, so that
    all of them meet the machine in the same state."""
    results = {k: {} for k in ways}
    for label, expect in payloads["sizes"]:
        samples = {k: [] for k in ways}
        names = list(ways)
        for i in range(rounds[label] + 1):
            order = names[i % len(names):] + names[:i % len(names)]
            for k in order:
                payload = payloads[k][label]
                t0 = time.perf_counter()
                s = ways[k].round_trip(payload)
                dt = time.perf_counter() - t0
                assert abs(s - expect) <= 1e-3 * max(1.0, abs(expect)), (k, label, s, expect)
                if i > 0:  # the first round warms the workers up
                    samples[k].append(dt)
        for k in ways:
            results[k][label] = median_ms(samples[k])
    return results


def breakdown(rounds):
    from multiprocessing import shared_memory

    n = (128 << 20) // 4
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    t = dlbridge.share(a)
    blk = shared_memory.SharedMemory(create=True, size=a.nbytes)
    np.ndarray(a.shape, dtype=np.float32, buffer=blk.buf)[:] = a
    x, y = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        x.close()
        try:
            print("ms per step  dlbridge: recv import sum1 sum2 release | SharedMemory: attach sum1 sum2 close"
                  " | page faults of each sum1")
            for _ in range(rounds):
                c = [time.perf_counter()]
                u = dlbridge.share_recv(y)
                c.append(time.perf_counter())
                v = np.from_dlpack(u)
                c.append(time.perf_counter())
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                v.sum()
                f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                c.append(time.perf_counter())
                v.sum()
                c.append(time.perf_counter())
                del v, u
                c.append(time.perf_counter())
                b = shared_memory.SharedMemory(name=blk.name)
                w = np.ndarray((n,), dtype=np.float32, buffer=b.buf)
                c.append(time.perf_counter())
                f2 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                w.sum()
                f3 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                c.append(time.perf_counter())
                w.sum()
                c.append(time.perf_counter())
                del w
                b.close()
                c.append(time.perf_counter())
                d = [1e3 * (c[i + 1] - c[i]) for i in range(len(c) - 1)]
                print("dlbridge %6.2f %6.3f %6.1f %6.1f %6.2f | shm %6.2f %6.1f %6.1f %6.2f" % tuple(d)
                      + " | faults %d %d" % (f1 - f0, f3 - f2), flush=True)
                y.sendall(b"k")
        finally:
            os._exit(0)
    y.close()
    for _ in range(rounds):
        dlbridge.share_send(x, t)
        x.recv(1)
    os.waitpid(pid, 0)
    blk.close()
    blk.unlink()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100, help="rounds at 4 KiB and 1 MiB (128 MiB: a fifth)")
    ap.add_argument("--breakdown", action="store_true", help="the worker's steps at 128 MiB (see above)")
    ap.add_argument("--reverse-setup", action="store_true",
                    help="make the tensors torch's first and dlbridge's last (default: the other way round)")
    args = ap.parse_args()
    if args.breakdown:
        print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        breakdown(max(3, args.rounds // 5))
        return
    rounds = {"4 KiB": args.rounds, "1 MiB": args.rounds, "128 MiB": max(3, args.rounds // 5)}
    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    from multiprocessing import shared_memory

    arrays = {label: np.random.default_rng(0).random(n // 4, dtype=np.float32) for label, n in SIZES}
    payloads = {"sizes": [(label, float(a.sum())) for label, a in arrays.items()]}
    ctx = mp.get_context("fork")
    # The tensors are made dlbridge's first, then SharedMemory's, then
    # torch's; --reverse-setup makes them the other way round (where the
    # pages of each come from may depend on it).
    def make_shared():
        return {label: dlbridge.share(a) for label, a in arrays.items()}

    def make_torch():
        return {label: torch.from_numpy(a.copy()).share_memory_() for label, a in arrays.items()}

    tensors = make_torch() if args.reverse_setup and torch is not None else None
    shared = None if args.reverse_setup else make_shared()
    blocks = {}
    for label, a in arrays.items():
        blocks[label] = shared_memory.SharedMemory(create=True, size=a.nbytes)
        np.ndarray(a.shape, dtype=a.dtype, buffer=blocks[label].buf)[:] = a
    if shared is None:
        shared = make_shared()
    if tensors is None and torch is not None:
        tensors = make_torch()
    payloads["dlbridge-queue"] = shared
    payloads["dlbridge-socket"] = shared
    payloads["pickle-copy"] = arrays
    payloads["shm-numpy"] = {label: (blocks[label].name, arrays[label].size) for label in arrays}
    ways = {"dlbridge-queue": QueueWay("dlbridge-queue", ctx), "dlbridge-socket": SocketWay(),
            "pickle-copy": QueueWay("pickle-copy", ctx), "shm-numpy": QueueWay("shm-numpy", ctx)}
    if torch is not None:
        payloads["torch-mp"] = tensors
        ways["torch-mp"] = QueueWay("torch-mp", tmp.get_context("fork"))
    try:
        results = interleaved(ways, payloads, rounds)
    finally:
        # The queue workers, forked after the socket's, hold its parent end
        # too: they go first, so that the socket's worker sees the end.
        for w in sorted(ways.values(), key=lambda w: isinstance(w, SocketWay)):
            w.close()
        for b in blocks.values():
            b.close()
            b.unlink()

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
    del shared


if __name__ == "__main__":
    main()
