"""Per-tensor cost of taking a tensor from a Python object in C: the DLPack
1.3 exchange table against the capsule protocol, beside numpy's own
np.from_dlpack, all in one process, printed with ratios.

    /usr/bin/python3 bench/bench_exchange.py [--repeat 7] [--n 200000]

Producers: the independent test producer (tests/exchange/xproducer.c, its
own table) and, when the dlbridge package is importable and publishes a
table, dlbridge.Tensor. C loops (bench/exchange_loops.c) time
from-py-object + deleter, the borrowed view, and __dlpack__ + capsule +
deleter inside C; np.from_dlpack and dlbridge.from_dlpack are timed from
Python with timeit. Each figure is the median of --repeat runs; the
extensions are built with the running interpreter's compiler and headers.
"""

import argparse
import os
import statistics
import sys
import tempfile
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "exchange"))
import build_ext  # noqa: E402


def median_of(repeat, fn):
    return statistics.median(fn() for _ in range(repeat))


def timeit_ns(stmt, number):
    return timeit.timeit(stmt, number=number) / number * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--n", type=int, default=200000, help="tensors per C loop")
    ap.add_argument("--py-n", type=int, default=100000, help="calls per Python timing")
    ap.add_argument("--build-dir", default=None)
    args = ap.parse_args()

    outdir = args.build_dir or tempfile.mkdtemp(prefix="dlbridge-bench-exchange-")
    build_ext.build_all(outdir, ["xproducer", "exchange_loops"])
    import exchange_loops as loops
    import numpy as np
    import xproducer

    try:
        import dlbridge
    except Exception as e:  # the package is optional here
        dlbridge = None
        print("dlbridge not importable (%s); its rows are skipped" % e)
    if dlbridge is not None and "__dlpack_c_exchange_api__" not in getattr(dlbridge.Tensor, "__dict__", {}):
        print("dlbridge.Tensor publishes no exchange table; its rows are skipped")
        dlbridge_table = False
    else:
        dlbridge_table = dlbridge is not None

    r, n, pn = args.repeat, args.n, args.py_n
    a = np.arange(12.0).reshape(3, 4)
    x = xproducer.XTensor([float(i) for i in range(12)], (3, 4))

    rows = []

    def row(name, ns):
        rows.append((name, ns))
        print("%-58s %9.1f ns" % (name, ns), flush=True)

    print("numpy %s, Python %s; median of %d runs" % (np.__version__, sys.version.split()[0], r))
    np_from = median_of(r, lambda: timeit_ns(lambda: np.from_dlpack(a), pn))
    row("np.from_dlpack(numpy array)", np_from)
    np_caps = median_of(r, lambda: loops.capsule_loop(a, n, False))
    row("C: numpy a.__dlpack__() + capsule + deleter", np_caps)
    x_table = median_of(r, lambda: loops.table_loop(x, n))
    row("C: xproducer table from-py-object + deleter", x_table)
    x_view = median_of(r, lambda: loops.view_loop(x, n))
    row("C: xproducer table borrowed DLTensor view", x_view)
    x_caps = median_of(r, lambda: loops.capsule_loop(x, n, True))
    row("C: xproducer __dlpack__(max_version) + capsule + deleter", x_caps)

    print()
    print("ratios (lower is faster)")
    print("  xproducer: table / capsule path                 %6.3f" % (x_table / x_caps))
    print("  xproducer table (C) / np.from_dlpack(numpy)     %6.3f" % (x_table / np_from))

    if dlbridge_table:
        t = dlbridge.from_dlpack(a)
        d_table = median_of(r, lambda: loops.table_loop(t, n))
        row("C: dlbridge.Tensor table from-py-object + deleter", d_table)
        d_view = median_of(r, lambda: loops.view_loop(t, n))
        row("C: dlbridge.Tensor table borrowed DLTensor view", d_view)
        d_caps = median_of(r, lambda: loops.capsule_loop(t, n, True))
        row("C: dlbridge.Tensor __dlpack__(max_version) + capsule + deleter", d_caps)
        d_from_x = median_of(r, lambda: timeit_ns(lambda: dlbridge.from_dlpack(x), pn))
        row("dlbridge.from_dlpack(xproducer tensor) [its table]", d_from_x)
        d_from_t = median_of(r, lambda: timeit_ns(lambda: dlbridge.from_dlpack(t), pn))
        row("dlbridge.from_dlpack(dlbridge.Tensor) [its table]", d_from_t)
        print("  dlbridge.Tensor: table / capsule path           %6.3f" % (d_table / d_caps))
        print("  dlbridge.from_dlpack(xproducer) / np.from_dlpack %6.3f  (goal <= 0.5)" % (d_from_x / np_from))
        print("  dlbridge.from_dlpack(dlbridge) / np.from_dlpack  %6.3f  (goal <= 0.5)" % (d_from_t / np_from))
        print("  C loop through dlbridge's table: %.1f ns per tensor (goal <= 100)" % d_table)
    counts = xproducer.counts()
    assert counts["exports"] == counts["deleters"], counts


if __name__ == "__main__":
    main()
