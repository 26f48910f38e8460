#!/usr/bin/env python3
"""Cost of a DLPack exchange through the Python package, as ratios against
the same exchange between numpy (or torch, or mlx) and itself, measured in
the same process with timeit.

    PYTHONPATH=build/bench/python /usr/bin/python3 bench/bench_python.py [--number N] [--repeat R]

(the package as the build directory holds it; or without PYTHONPATH in a
virtual environment where the wheel is installed). With the peer
environment's interpreter the numpy rows are numpy 2's, the torch rows
torch 2's, and tvm-ffi's and mlx's from_dlpack are measured too; with
--nanobind-sum DIR (where examples/nanobind_sum/build.py put the example
extension) the example's call through dlbridge is timed beside the same
function taking nb::ndarray:

    PYTHONPATH=build/bench/python "$(scripts/peers-env --path)"/bin/python bench/bench_python.py \
        --nanobind-sum build/nanobind_sum

Each figure is the best of R repeats of N calls (the least disturbed run),
per call in microseconds; a call includes dropping its result, so deleters
and destructors are counted too. The pairs are measured interleaved, so
that load from other processes hits baseline and candidate alike. Exit
status 1 when a ratio misses its goal.
"""

import argparse
import sys
import timeit

import numpy as np

import dlbridge

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

try:  # the peer environment (scripts/peers-env) has it
    import tvm_ffi
except ImportError:  # pragma: no cover
    tvm_ffi = None

try:  # the peer environment has it
    import mlx.core as mx
except ImportError:  # pragma: no cover
    mx = None


def best_per_call(stmt, number, repeat):
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e6


def measure_pair(baseline, candidate, number, repeat, rounds=3):
    """Best per-call times of two statements, alternating between them."""
    b = c = float("inf")
    for _ in range(rounds):
        b = min(b, best_per_call(baseline, number, repeat))
        c = min(c, best_per_call(candidate, number, repeat))
    return b, c


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=100000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=5, help="repeats per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of each pair")
    parser.add_argument("--nanobind-sum", metavar="DIR", help="where the nanobind_sum example was built")
    args = parser.parse_args(argv)
    n, r = args.number, args.repeat

    def measure(baseline, candidate, number=n):
        return measure_pair(baseline, candidate, number, r, args.rounds)

    a = np.zeros((16, 16), np.float32)
    t = dlbridge.empty((16, 16), "float32")
    rows = []

    base, cand = measure(lambda: np.from_dlpack(a), lambda: np.from_dlpack(t))
    rows.append(("np.from_dlpack(dlbridge tensor)", "np.from_dlpack(numpy array)", cand, base, 1.3))

    dlbridge.from_dlpack(a)  # learns once that numpy 1.x takes no max_version
    base, cand = measure(lambda: np.from_dlpack(a), lambda: dlbridge.from_dlpack(a))
    rows.append(("dlbridge.from_dlpack(numpy array)", "np.from_dlpack(numpy array)", cand, base, 1.3))

    if torch is not None:
        g = torch.zeros(16, 16)
        tn = max(n // 10, 1000)  # torch's own exchange is slower
        base, cand = measure(lambda: torch.from_dlpack(g), lambda: torch.from_dlpack(t), tn)
        rows.append(("torch.from_dlpack(dlbridge tensor)", "torch.from_dlpack(torch tensor)", cand,
                     base, 1.0))
        if hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):  # torch 2: dlbridge takes its table
            # goal 0.1: the table path asks is_conj() and is_neg() too (a
            # conjugate or negative view must not arrive as its memory).
            base, cand = measure(lambda: torch.from_dlpack(g), lambda: dlbridge.from_dlpack(g), tn)
            rows.append(("dlbridge.from_dlpack(torch tensor)", "torch.from_dlpack(torch tensor)", cand,
                         base, 0.1))

    if mx is not None:
        m = mx.zeros((16, 16))
        mx.eval(m)
        mn = max(n // 10, 1000)
        base, cand = measure(lambda: mx.from_dlpack(m), lambda: dlbridge.from_dlpack(m), mn)
        rows.append(("dlbridge.from_dlpack(mlx array)", "mx.from_dlpack(mlx array)", cand, base, 1.0))
        base, cand = measure(lambda: mx.from_dlpack(m), lambda: mx.from_dlpack(t), mn)
        rows.append(("mx.from_dlpack(dlbridge tensor)", "mx.from_dlpack(mlx array)", cand, base, None))

    if tvm_ffi is not None:
        # tvm-ffi's own from_dlpack beside it taking dlbridge's tensors, and
        # dlbridge taking tvm-ffi's; no goal: for the record.
        v = tvm_ffi.from_dlpack(a)
        base, cand = measure(lambda: tvm_ffi.from_dlpack(a), lambda: tvm_ffi.from_dlpack(t))
        rows.append(("tvm_ffi.from_dlpack(dlbridge tensor)", "tvm_ffi.from_dlpack(numpy array)", cand,
                     base, None))
        base, cand = measure(lambda: tvm_ffi.from_dlpack(v), lambda: dlbridge.from_dlpack(v))
        rows.append(("dlbridge.from_dlpack(tvm_ffi tensor)", "tvm_ffi.from_dlpack(tvm_ffi tensor)", cand,
                     base, None))

    if args.nanobind_sum:
        # The example extension: the same C++ sum reached through dlbridge
        # (dlbridge.from_dlpack, its table, dlb_import_versioned) and through
        # nb::ndarray; no goal: the price of what dlbridge adds.
        sys.path.insert(0, args.nanobind_sum)
        import nanobind_sum as ns

        base, cand = measure(lambda: ns.sum_ndarray(a), lambda: ns.sum(a))
        rows.append(("nanobind_sum.sum(numpy array)", "nanobind_sum.sum_ndarray(numpy array)", cand, base,
                     None))
        if torch is not None:
            base, cand = measure(lambda: ns.sum_ndarray(g), lambda: ns.sum(g), max(n // 10, 1000))
            rows.append(("nanobind_sum.sum(torch tensor)", "nanobind_sum.sum_ndarray(torch tensor)", cand,
                         base, None))
        base, cand = measure(lambda: ns.sum_ndarray(t), lambda: ns.sum(t))
        rows.append(("nanobind_sum.sum(dlbridge tensor)", "nanobind_sum.sum_ndarray(dlbridge tensor)", cand,
                     base, None))

    # Pieces, for the analysis in bench/README.md.
    pieces = [
        ("dlbridge tensor.__dlpack__() (export + capsule, dropped)", lambda: t.__dlpack__()),
        ("numpy array.__dlpack__() (dropped)", lambda: a.__dlpack__()),
        ("dlbridge.live_exports() (an extension function, no arguments)", dlbridge.live_exports),
        ("dlbridge tensor.shape (cached metadata)", lambda: t.shape),
    ]

    width = max(len(row[0]) for row in rows)
    print("%-*s  %9s  %9s  %6s  %5s" % (width, "exchange", "us/call", "base us", "ratio", "goal"))
    missed = 0
    for name, _base_name, cand_us, base_us, goal in rows:
        ratio = cand_us / base_us
        if goal is None:
            print("%-*s  %9.3f  %9.3f  %5.2fx" % (width, name, cand_us, base_us, ratio))
            continue
        mark = "ok" if ratio <= goal else "MISSED"
        missed += ratio > goal
        print("%-*s  %9.3f  %9.3f  %5.2fx  <=%.1fx %s" % (width, name, cand_us, base_us, ratio,
                                                          goal, mark))
    print("baselines: " + "; ".join("%s = %s" % (row[1], "%.3f us" % row[3]) for row in rows))
    print()
    for name, stmt in pieces:
        print("%-60s %7.3f us" % (name, best_per_call(stmt, n, r)))
    print("python %s, numpy %s, torch %s, tvm_ffi %s, mlx %s, dlbridge %s (%s)" % (
        sys.version.split()[0], np.__version__, torch.__version__ if torch else "-",
        tvm_ffi.__version__ if tvm_ffi else "-", mx.__version__ if mx else "-",
        dlbridge.__version__, dlbridge._glue.__file__))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
