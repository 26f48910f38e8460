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

Steadiness (--steady): the 4096 x 4096 float64 cases of the goals
(contiguous, transposed, reversed), each in --processes fresh processes
(default 10) of --calls timed calls per method (default 7, after one
untimed call of each, which also checks dlbridge's result), the methods
interleaved call by call, their order rotated every round. Processes run
under this interpreter (numpy and torch of this environment) and, when
the modern peer environment exists (scripts/peers-env --path, or
--peer-python), under its interpreter too (numpy 2; torch when it has one),
each method beside dlbridge in the same processes (--only this|peer: one
of the two). numpy 2 honours copy=True in its __dlpack__, so there
dlbridge's method imports the view first and then copies it,
dlbridge.from_dlpack(dlbridge.from_dlpack(v), copy=True), which reaches the
library's copy engine. Printed per view and
interpreter: every method's median and 90th percentile over all timed calls
of all processes, dlbridge's spread (p90 / median), and the fastest peer's
time over dlbridge's at the median and at the 90th percentile. --busy keeps
one core busy meanwhile with a spinning process it starts and stops. The
load average (os.getloadavg) is printed before and after. Then, per
process in the order run: the source array's share in transparent huge
pages, the medians of dlbridge and numpy, and dlbridge's spread among its
own calls there (a machine that slows down for a while slows every
method in the processes of that while).

Usage:
  PYTHONPATH=build/bench/python \\
    /usr/bin/python3 bench/copy_peers.py [--quick] [--reps N]
      [--sizes 256,1024,4096,8192x4096] [--dtypes float64,...]
      [--views transposed,...] [--json build/bench-results/copy-peers.json]
  PYTHONPATH=build/bench/python \\
    /usr/bin/python3 bench/copy_peers.py --steady [--busy] [--processes N]
      [--calls N] [--peer-python PATH] [--json build/bench-results/copy-steady.json]
"""

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
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


STEADY_VIEWS = ["contiguous", "transposed", "reversed"]


def percentile(values, q):
    """The q-quantile (0..1) of values, nearest rank."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 1)) - 1))
    return v[k]


def huge_fraction(address):
    """The share of the mapping holding `address` that is in transparent
    huge pages (AnonHugePages / Size in /proc/self/smaps); None if unknown."""
    try:
        with open("/proc/self/smaps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    inside, size = False, 0
    for line in lines:
        head = line.split()[0] if line else ""
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "Size:":
            size = int(line.split()[1])
        elif inside and head == "AnonHugePages:":
            return int(line.split()[1]) / size if size else None
    return None


def steady_child(args):
    """One fresh process of --steady: prints its timings as JSON."""
    import dlbridge

    torch = None
    try:
        import torch  # noqa: F811
    except ImportError:
        pass
    a = make_source((4096, 4096), "float64")
    t = torch.from_numpy(a) if torch is not None else None
    engine_first = args.engine_first
    out = {"python": platform.python_version(), "numpy": np.__version__,
           "torch": torch.__version__ if torch else None, "views": {}, "mismatches": 0,
           "source_huge": huge_fraction(a.ctypes.data)}
    for view in args.views.split(",") if args.views else STEADY_VIEWS:
        v = numpy_view(a, view)
        if engine_first and int(np.__version__.split(".")[0]) >= 2:
            # numpy 2 honours copy=True in __dlpack__: from_dlpack(v,
            # copy=True) would time numpy's own copy. Imported first, the
            # view is copied by the library's engine.
            ours = lambda v=v: dlbridge.from_dlpack(dlbridge.from_dlpack(v), copy=True)  # noqa: E731
        else:
            ours = lambda v=v: dlbridge.from_dlpack(v, copy=True)  # noqa: E731
        methods = [("numpy", lambda v=v: np.array(v, order="C")), ("dlbridge", ours)]
        if t is not None:
            methods.append(("torch", torch_copy(torch, t, view)))
        got = np.from_dlpack(dlbridge.from_dlpack(v, copy=True))
        if got.shape != v.shape or not np.array_equal(got, v):
            out["mismatches"] += 1
        del got
        for _, fn in methods:
            timed(fn)
        times = {m: [] for m, _ in methods}
        for c in range(args.calls):
            k = c % len(methods)
            for m, fn in methods[k:] + methods[:k]:
                times[m].append(timed(fn))
            gc.collect()
        out["views"][view] = times
    json.dump(out, sys.stdout)
    return 0


def steady(args):
    """--steady: fresh processes, call-by-call interleaving, median and p90."""
    import dlbridge

    python_dir = os.path.dirname(os.path.dirname(os.path.abspath(dlbridge.__file__)))
    env = dict(os.environ, PYTHONPATH=python_dir)
    interpreters = [] if args.only == "peer" else [sys.executable]
    peer = args.peer_python if args.only != "this" else ""
    if peer is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        try:
            d = subprocess.run([os.path.join(root, "scripts", "peers-env"), "--path"], capture_output=True,
                               text=True, check=True).stdout.strip()
            peer = os.path.join(d, "bin", "python")
        except (OSError, subprocess.CalledProcessError):
            peer = ""
    if peer and os.access(peer, os.X_OK):
        interpreters.append(peer)
    elif args.only != "this":
        print("copy_peers.py: numpy 2: skipped: the modern peer environment is not installed here")
    spinner = None
    if args.busy:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)
    load0 = os.getloadavg()
    runs = {}
    per_process = {}
    mismatches = 0
    try:
        for _ in range(args.processes):
            for py in interpreters:
                cmd = [py, os.path.abspath(__file__), "--steady-child", "--engine-first", "--calls", str(args.calls)]
                if args.views:
                    cmd += ["--views", args.views]
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if r.returncode != 0:
                    print("copy_peers.py: child %s failed:\n%s" % (py, r.stderr))
                    return 1
                child = json.loads(r.stdout)
                mismatches += child["mismatches"]
                key = "python %s, numpy %s%s" % (child["python"], child["numpy"],
                                                 ", torch %s" % child["torch"] if child["torch"] else "")
                for view, times in child["views"].items():
                    for m, ts in times.items():
                        runs.setdefault(key, {}).setdefault(view, {}).setdefault(m, []).extend(ts)
                    per_process.setdefault(key, {}).setdefault(view, []).append(
                        {"source_huge": child.get("source_huge"),
                         "median_s": {m: statistics.median(ts) for m, ts in times.items()},
                         "spread": percentile(times["dlbridge"], 0.9) / statistics.median(times["dlbridge"])})
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    load1 = os.getloadavg()
    print("copy_peers.py --steady: 4096x4096 float64, %d fresh processes per interpreter, %d calls each, "
          "interleaved; %sload average %.2f before, %.2f after (1 min)"
          % (args.processes, args.calls, "one core kept busy by a spinning process; " if args.busy else "",
             load0[0], load1[0]))
    header = "%-28s %-11s %-9s %9s %9s" % ("environment", "view", "method", "median ms", "p90 ms")
    print(header)
    print("-" * len(header))
    summary = []
    for key, views in runs.items():
        for view, methods in views.items():
            stats = {m: (statistics.median(ts), percentile(ts, 0.9)) for m, ts in methods.items()}
            for m, (med, p90) in stats.items():
                print("%-28s %-11s %-9s %9.2f %9.2f" % (key[:28], view, m, med * 1e3, p90 * 1e3))
            peers = [m for m in stats if m != "dlbridge"]
            best_med = min(stats[m][0] for m in peers)
            best_p90 = min(stats[m][1] for m in peers)
            ours = stats["dlbridge"]
            row = {"environment": key, "view": view, "ratio_median": best_med / ours[0],
                   "ratio_p90": best_p90 / ours[1], "spread": ours[1] / ours[0],
                   "stats_s": {m: {"median": a, "p90": b} for m, (a, b) in stats.items()}}
            summary.append(row)
            print("%-28s %-11s fastest peer / dlbridge: median %.2f, p90 %.2f; dlbridge p90 / median %.2f"
                  % (key[:28], view, row["ratio_median"], row["ratio_p90"], row["spread"]))
    print()
    print("per process (in the order run): the source's share in huge pages, medians in ms of dlbridge and numpy, "
          "and dlbridge's spread (p90 / median) among its own calls")
    for key, views in per_process.items():
        for view, procs in views.items():
            cells = ["%s %.0f/%.0f %.2f" % ("?" if p["source_huge"] is None else "%.0f%%" % (100 * p["source_huge"]),
                                           p["median_s"]["dlbridge"] * 1e3, p["median_s"]["numpy"] * 1e3, p["spread"])
                     for p in procs]
            print("%-28s %-11s %s" % (key[:28], view, "  ".join(cells)))
            print("%-28s %-11s dlbridge's spread within a process, median over processes: %.2f; "
                  "dlbridge / numpy per process: %.2f to %.2f"
                  % (key[:28], view, statistics.median(p["spread"] for p in procs),
                     min(p["median_s"]["dlbridge"] / p["median_s"]["numpy"] for p in procs),
                     max(p["median_s"]["dlbridge"] / p["median_s"]["numpy"] for p in procs)))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"busy": args.busy, "processes": args.processes, "calls": args.calls,
                       "load": [load0[0], load1[0]], "summary": summary, "runs_s": runs,
                       "per_process": per_process}, f, indent=1)
    if mismatches:
        print("copy_peers.py: %d dlbridge copies differed from numpy's" % mismatches)
        return 1
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="256^2 and 1024^2, 3 repetitions (a smoke test)")
    p.add_argument("--reps", type=int, default=0, help="repetitions per case (default 7; 3 with --quick)")
    p.add_argument("--sizes", help="comma-separated sizes: k (square) or RxC")
    p.add_argument("--dtypes", help="comma-separated dtypes (default: float32,float64,complex128)")
    p.add_argument("--views", help="comma-separated views (default: all four)")
    p.add_argument("--no-torch", action="store_true", help="leave torch out")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--steady", action="store_true", help="the steadiness benchmark (see above)")
    p.add_argument("--busy", action="store_true", help="--steady with one core kept busy")
    p.add_argument("--processes", type=int, default=10, help="--steady: fresh processes per interpreter")
    p.add_argument("--calls", type=int, default=7, help="--steady: timed calls per method and process")
    p.add_argument("--peer-python", help="--steady: the modern peers' interpreter (default: scripts/peers-env)")
    p.add_argument("--steady-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--engine-first", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--only", choices=["this", "peer"], help="--steady: only this interpreter, or only the peers'")
    args = p.parse_args()
    if args.steady_child:
        return steady_child(args)
    if args.steady:
        return steady(args)

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
