#!/usr/bin/env python3
"""A data-loader-like stream: two worker processes produce tensors into one
consumer through multiprocessing queues, dlbridge beside
torch.multiprocessing and plain pickling, in one run, as ratios.

    PYTHONPATH=build/bench/python /usr/bin/python3 bench/bench_loader.py [--reps R]

Each worker makes its share of the stream (float32 tensors, each filled
with its index), hands each one to its queue as the way sends it, and
drops it; the consumer (this process) takes them from both queues as they
come, sums each one with numpy (the same code for every way), and drops
it. The workers stay until the consumer has taken everything (a sender
keeps the files of what it sent until they are taken, as torch's does).
A figure is the time from the workers' start signal until the consumer
has summed the last tensor, in milliseconds: the median over R repetitions
(fresh worker processes each time, the ways taking turns in an order
rotated from repetition to repetition) with the smallest and largest.

Streams:

  small   10,000 tensors of 4 KiB (5,000 per worker)
  mixed   10,000 of 4 KiB and 1,000 of 1 MiB, interleaved (every eleventh
          tensor of a worker is the large one)

Ways:

  dlbridge        a dlbridge.Tensor of the array (dlbridge.from_dlpack) on a
                  multiprocessing queue: the reducer's choice for memory
                  that is not shared yet (a copy either way)
  dlbridge-split  the large tensors shared in the worker (dlbridge.share),
                  the small ones as above: the copy into shared memory made
                  in the worker's own thread rather than the queue's
  dlbridge-shared dlbridge.share(array) on the queue: in shared memory
                  first (a memory file each), then handed over as it is
  torch-mp        torch.from_numpy(array) on a torch.multiprocessing queue
                  (torch moves it into shared memory and passes the file)
  pickle          the numpy array on a multiprocessing queue (its bytes
                  pickled and piped)

The machine's load is printed (uptime) before and after.
"""

import argparse
import multiprocessing as mp
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

SMALL = (4 << 10) // 4  # float32 elements
LARGE = (1 << 20) // 4
STREAMS = {"small": (10_000, 0), "mixed": (10_000, 1_000)}


def _plan(n_small, n_large, worker, workers=2):
    """The sizes worker `worker` sends, in order."""
    small, large = n_small // workers, n_large // workers
    sizes = []
    while small or large:
        if large and (small == 0 or len(sizes) % 11 == 10):
            sizes.append(LARGE)
            large -= 1
        else:
            sizes.append(SMALL)
            small -= 1
    return sizes


def _producer(way, worker, n_small, n_large, start, done, q):
    if way == "torch-mp":
        torch.set_num_threads(1)
    sizes = _plan(n_small, n_large, worker)
    start.wait()
    for i, n in enumerate(sizes):
        a = np.full(n, float(i), dtype=np.float32)
        if way == "dlbridge":
            item = dlbridge.from_dlpack(a)
        elif way == "dlbridge-split":
            item = dlbridge.share(a) if n == LARGE else dlbridge.from_dlpack(a)
        elif way == "dlbridge-shared":
            item = dlbridge.share(a)
        elif way == "torch-mp":
            item = torch.from_numpy(a)
        else:
            item = a
        q.put(item)
        del item, a
    q.put(None)
    done.wait()  # a sender keeps what it sent until it is taken (as torch's does)


def _view(way, item):
    if way == "torch-mp":
        return item.numpy()
    if way.startswith("dlbridge"):
        return np.from_dlpack(item)
    return item


def one(way, stream):
    n_small, n_large = STREAMS[stream]
    ctx = (tmp if way == "torch-mp" else mp).get_context("fork")
    start, done = ctx.Event(), ctx.Event()
    queues = [ctx.Queue() for _ in range(2)]
    procs = [ctx.Process(target=_producer, args=(way, w, n_small, n_large, start, done, queues[w])) for w in range(2)]
    for p in procs:
        p.start()
    time.sleep(0.2)  # both workers waiting on the signal
    t0 = time.perf_counter()
    start.set()
    live = [0, 1]
    total = 0.0
    count = 0
    while live:
        for w in list(live):
            item = queues[w].get()
            if item is None:
                live.remove(w)
                continue
            total += float(_view(way, item).sum())
            count += 1
            del item
    elapsed = time.perf_counter() - t0
    done.set()
    for p in procs:
        p.join()
    if count != n_small + n_large:
        raise SystemExit(f"{way}: {count} tensors arrived, {n_small + n_large} were sent")
    return elapsed * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions per stream and way")
    ap.add_argument("--streams", default="small,mixed")
    args = ap.parse_args()
    ways = ["dlbridge", "dlbridge-split", "dlbridge-shared"] + (["torch-mp"] if torch else []) + ["pickle"]
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for stream in args.streams.split(","):
        times = {w: [] for w in ways}
        for r in range(args.reps):
            order = ways[r % len(ways):] + ways[:r % len(ways)]
            for w in order:
                times[w].append(one(w, stream))
        n_small, n_large = STREAMS[stream]
        print(f"\n{stream}: {n_small} x 4 KiB + {n_large} x 1 MiB, ms (median [min, max] of {args.reps})")
        base = statistics.median(times["dlbridge"])
        for w in ways:
            med = statistics.median(times[w])
            print(f"  {w:14s} {med:9.1f} [{min(times[w]):.1f}, {max(times[w]):.1f}]  time / dlbridge's {med / base:5.2f}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
