#!/usr/bin/python3
"""Allocate + copy into a new compact array: dlbridge beside numpy and torch.

Everything runs in this one process, on the same source arrays. For each
dtype (float32, float64, complex128), size (256^2, 1024^2, 4096^2 and
8192 x 4096) and view of a compact row-major matrix `a`:

  contiguous    a
  transposed    a.T
  reversed      a[::-1, ::-1]
  every-other   a[::2, ::2]

each method makes a fresh compact row-major copy (allocation included):

  numpy     np.array(view, order="C")  (np.ascontiguousarray for the
            strided views, a plain copy for the compact one)
  torch     on torch.from_numpy(a): clone(memory_format=contiguous_format)
            for the compact view, t.t().contiguous(), torch.flip(t, (0, 1))
            (torch has no negative strides: a flip is how it reverses), and
            t[::2, ::2].contiguous(); torch at its default thread count
  dlbridge  dlbridge.from_dlpack(view, copy=True): imports numpy's view and
            copies it through the library's copy engine

The methods run in turn inside every repetition, so that a noisy neighbour
slows them alike; each figure is the median of the repetitions. Printed per
case: the three times and peer/ours = fastest peer's time / dlbridge's time
(above 1: dlbridge is faster). Every dlbridge result is compared with numpy's
copy once per case. Exit status: 0 when every copy matched, 1 otherwise.

Usage:
  PYTHONPATH=build/dev/python \\
    /usr/bin/python3 bench/copy_peers.py [--quick] [--reps N]
      [--sizes 256,1024,4096,8192x4096] [--dtypes float64,...]
      [--views transposed,...] [--json build/bench-results/copy-peers.json]
"""

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

VIEWS = ["contiguous", "transposed", "reversed", "every-other"]
DTYPES = ["float32", "float64", "complex128"]
SIZES = [(256, 256), (1024, 1024), (4096, 4096), (8192, 4096)]


def parse_size(text):
    if "x" in text:
        r, c = text.split("x")
        return int(r), int(c)
    return int(text), int(text)


def numpy_view(a, view):
    return {
        "contiguous": lambda: a,
        "transposed": lambda: a.T,
        "reversed": lambda: a[::-1, ::-1],
        "every-other": lambda: a[::2, ::2],
    }[view]()


def torch_copy(torch, t, view):
    if view == "contiguous":
        return lambda: t.clone(memory_format=torch.contiguous_format)
    if view == "transposed":
        return lambda: t.t().contiguous()
    if view == "reversed":
        return lambda: torch.flip(t, (0, 1))
    return lambda: t[::2, ::2].contiguous()


def make_source(shape, dtype):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shape, dtype=np.float64)
    if dtype == "complex128":
        return a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    dt = time.perf_counter() - t0
    del r
    return dt


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="256^2 and 1024^2, 3 repetitions (a smoke test)")
    p.add_argument("--reps", type=int, default=0, help="repetitions per case (default 7; 3 with --quick)")
    p.add_argument("--sizes", help="comma-separated sizes: k (square) or RxC")
    p.add_argument("--dtypes", help="comma-separated dtypes (default: float32,float64,complex128)")
    p.add_argument("--views", help="comma-separated views (default: all four)")
    p.add_argument("--no-torch", action="store_true", help="leave torch out")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()

    import dlbridge

    torch = None
    if not args.no_torch:
        try:
            import torch  # noqa: F811
        except ImportError:
            print("copy_peers.py: torch not importable; measuring numpy and dlbridge only")
    sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else (
        [(256, 256), (1024, 1024)] if args.quick else SIZES)
    dtypes = args.dtypes.split(",") if args.dtypes else DTYPES
    views = args.views.split(",") if args.views else VIEWS
    reps = args.reps or (3 if args.quick else 7)

    lib = os.path.dirname(dlbridge.__file__)
    print("copy_peers.py: numpy %s, torch %s (%s threads), dlbridge %s, %d repetitions, median"
          % (np.__version__, torch.__version__ if torch else "-", torch.get_num_threads() if torch else "-",
             lib, reps))
    header = "%-11s %-10s %-11s %10s %10s %10s %9s" % ("dtype", "size", "view", "numpy ms", "torch ms",
                                                       "ours ms", "peer/ours")
    print(header)
    print("-" * len(header))
    results = []
    failures = 0
    for dtype in dtypes:
        for shape in sizes:
            a = make_source(shape, dtype)
            t = torch.from_numpy(a) if torch is not None else None
            for view in views:
                v = numpy_view(a, view)
                methods = {
                    "numpy": lambda v=v: np.array(v, order="C"),
                    "dlbridge": lambda v=v: dlbridge.from_dlpack(v, copy=True),
                }
                if t is not None:
                    methods["torch"] = torch_copy(torch, t, view)
                # Correctness first (also a warm-up of every method).
                got = np.from_dlpack(dlbridge.from_dlpack(v, copy=True))
                if got.shape != v.shape or not np.array_equal(got, v):
                    print("MISMATCH: %s %s %s: dlbridge's copy differs from numpy's" % (dtype, shape, view))
                    failures += 1
                del got
                for fn in methods.values():
                    timed(fn)
                times = {m: [] for m in methods}
                for _ in range(reps):
                    for m, fn in methods.items():
                        times[m].append(timed(fn))
                    gc.collect()
                med = {m: statistics.median(ts) for m, ts in times.items()}
                peers = [med[m] for m in ("numpy", "torch") if m in med]
                ratio = min(peers) / med["dlbridge"]
                nbytes = v.size * v.itemsize
                results.append({"dtype": dtype, "shape": list(shape), "view": view, "bytes": nbytes,
                                "median_s": med, "runs_s": times, "peer_over_ours": ratio})
                print("%-11s %-10s %-11s %10.3f %10s %10.3f %9.2f" % (
                    dtype, "%dx%d" % shape, view, med["numpy"] * 1e3,
                    "%.3f" % (med["torch"] * 1e3) if "torch" in med else "-", med["dlbridge"] * 1e3, ratio))
            del a, t
            gc.collect()
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                       "reps": reps, "results": results}, f, indent=1)
    if failures:
        print("copy_peers.py: %d case(s) differed from numpy" % failures)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
