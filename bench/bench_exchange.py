"""Per-tensor cost of taking a tensor from a Python object in C: the DLPack
1.3 exchange table against the capsule protocol, beside numpy's own
np.from_dlpack, all in one process, printed with ratios.

    /usr/bin/python3 bench/bench_exchange.py [--repeat 7] [--n 200000]

Producers: the independent test producer (tests/exchange/xproducer.c, its
own table; XTensor a mutable type, whose attribute dlbridge looks up on
every exchange, FrozenXTensor the same as an immutable type, whose table is
cached for good) and, when the dlbridge package is importable and publishes a
table, dlbridge.Tensor. C loops (bench/exchange_loops.c) time
from-py-object + deleter, the borrowed view, and __dlpack__ + capsule +
deleter inside C; np.from_dlpack and dlbridge.from_dlpack are timed from
Python with timeit. The measures run in --repeat interleaved rounds and
each figure is the median over the rounds (min..max beside it); the
extensions are built with the running interpreter's compiler and headers.

    PYTHONPATH=build/bench/python /usr/bin/python3 bench/bench_exchange.py

With the peer environment's interpreter (numpy 2, tvm-ffi, torch 2, mlx) it
adds tvm_ffi.from_dlpack of numpy, tvm-ffi and dlbridge tensors and dlbridge
taking tvm-ffi's, and torch's and mlx's own from_dlpack beside dlbridge
taking their tensors and they taking dlbridge's (torch 2 through its
exchange table, also driven from the C loop):

    PYTHONPATH=build/bench/python "$(scripts/peers-env --path)"/bin/python bench/bench_exchange.py
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


def timeit_ns(call, arg, number):
    """ns per call of call(arg), timed by timeit's own loop (no wrapper)."""
    return timeit.timeit("f(x)", globals={"f": call, "x": arg}, number=number) / number * 1e9


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
    fx = xproducer.FrozenXTensor([float(i) for i in range(12)], (3, 4))
    t = dlbridge.from_dlpack(a) if dlbridge_table else None

    # (key, label, measure): each measure returns ns per tensor.
    rows = [
        ("np", "np.from_dlpack(numpy array)", lambda: timeit_ns(np.from_dlpack, a, pn)),
        ("np_caps", "C: numpy a.__dlpack__() + capsule + deleter", lambda: loops.capsule_loop(a, n, False)),
        ("x_table", "C: xproducer table from-py-object + deleter", lambda: loops.table_loop(x, n)),
        ("x_view", "C: xproducer table borrowed DLTensor view", lambda: loops.view_loop(x, n)),
        ("x_caps", "C: xproducer __dlpack__(max_version) + capsule + deleter",
         lambda: loops.capsule_loop(x, n, True)),
    ]
    if dlbridge_table:
        f = dlbridge.from_dlpack
        rows += [
            ("d_table", "C: dlbridge.Tensor table from-py-object + deleter", lambda: loops.table_loop(t, n)),
            ("d_view", "C: dlbridge.Tensor table borrowed DLTensor view", lambda: loops.view_loop(t, n)),
            ("d_caps", "C: dlbridge.Tensor __dlpack__(max_version) + capsule + deleter",
             lambda: loops.capsule_loop(t, n, True)),
            ("d_from_x", "dlbridge.from_dlpack(xproducer tensor), its table", lambda: timeit_ns(f, x, pn)),
            ("d_from_fx", "dlbridge.from_dlpack(xproducer immutable type)", lambda: timeit_ns(f, fx, pn)),
            ("d_from_t", "dlbridge.from_dlpack(dlbridge.Tensor), its table", lambda: timeit_ns(f, t, pn)),
            ("d_from_np", "dlbridge.from_dlpack(numpy array), __dlpack__", lambda: timeit_ns(f, a, pn)),
        ]
    try:  # the peer environment (scripts/peers-env) has it
        import tvm_ffi
    except ImportError:
        tvm_ffi = None
    if tvm_ffi is not None:
        v = tvm_ffi.from_dlpack(a)
        tf = tvm_ffi.from_dlpack
        rows += [
            ("tvm_np", "tvm_ffi.from_dlpack(numpy array)", lambda: timeit_ns(tf, a, pn)),
            ("tvm_tvm", "tvm_ffi.from_dlpack(tvm_ffi.Tensor)", lambda: timeit_ns(tf, v, pn)),
        ]
        if dlbridge_table:
            rows += [
                ("tvm_d", "tvm_ffi.from_dlpack(dlbridge.Tensor)", lambda: timeit_ns(tf, t, pn)),
                ("d_from_tvm", "dlbridge.from_dlpack(tvm_ffi.Tensor), __dlpack__",
                 lambda: timeit_ns(dlbridge.from_dlpack, v, pn)),
            ]
    try:  # the peer environment has torch 2 (with its exchange table) and mlx
        import torch
    except ImportError:
        torch = None
    if torch is not None and not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        torch = None  # Debian's torch 1.13: its row is bench_python.py's
    try:
        import mlx.core as mx
    except ImportError:
        mx = None
    if torch is not None and dlbridge_table:
        g = torch.arange(12.0).reshape(3, 4)
        rows += [
            ("torch_own", "torch.from_dlpack(torch tensor)", lambda: timeit_ns(torch.from_dlpack, g, pn // 10)),
            ("torch_table", "C: torch table from-py-object + deleter", lambda: loops.table_loop(g, n)),
            ("d_from_torch", "dlbridge.from_dlpack(torch tensor), its table",
             lambda: timeit_ns(dlbridge.from_dlpack, g, pn)),
            ("torch_d", "torch.from_dlpack(dlbridge.Tensor)", lambda: timeit_ns(torch.from_dlpack, t, pn // 10)),
        ]
    if mx is not None and dlbridge_table:
        m = mx.arange(12.0).reshape(3, 4)
        mx.eval(m)
        rows += [
            ("mx_own", "mx.from_dlpack(mlx array)", lambda: timeit_ns(mx.from_dlpack, m, pn // 10)),
            ("d_from_mx", "dlbridge.from_dlpack(mlx array), __dlpack__",
             lambda: timeit_ns(dlbridge.from_dlpack, m, pn)),
            ("mx_d", "mx.from_dlpack(dlbridge.Tensor)", lambda: timeit_ns(mx.from_dlpack, t, pn // 10)),
        ]
    # Rounds interleave the measures, so that a change in the machine's load
    # shifts all of them alike; each figure is the median over the rounds.
    samples = {key: [] for key, _, _ in rows}
    for _ in range(r):
        for key, _, measure in rows:
            samples[key].append(measure())
    ns = {key: statistics.median(v) for key, v in samples.items()}

    print("numpy %s, Python %s; median of %d interleaved rounds" % (np.__version__, sys.version.split()[0], r))
    for key, label, _ in rows:
        print("%-62s %8.1f ns  (%.1f..%.1f)" % (label, ns[key], min(samples[key]), max(samples[key])))
    def ratio(num, den):
        """Median over the rounds of num / den measured in the same round."""
        return statistics.median(a / b for a, b in zip(samples[num], samples[den]))

    print()
    print("ratios, median of the per-round ratios (lower is faster)")
    print("  xproducer: table / capsule path                     %6.3f" % ratio("x_table", "x_caps"))
    if dlbridge_table:
        print("  dlbridge.Tensor: table / capsule path               %6.3f" % ratio("d_table", "d_caps"))
        print("  dlbridge.from_dlpack(xproducer) / np.from_dlpack    %6.3f  (goal <= 0.5)" % ratio("d_from_x", "np"))
        print("  dlbridge.from_dlpack(FrozenXTensor) / np.from_dlpack %5.3f  (goal <= 0.5)" % ratio("d_from_fx", "np"))
        print("  dlbridge.from_dlpack(dlbridge) / np.from_dlpack     %6.3f  (goal <= 0.5)" % ratio("d_from_t", "np"))
        print("  dlbridge.from_dlpack(numpy) / np.from_dlpack        %6.3f" % ratio("d_from_np", "np"))
        print("  C loop through dlbridge's table: %.1f ns per tensor (goal <= 100)" % ns["d_table"])
    if tvm_ffi is not None:
        print("  tvm_ffi.from_dlpack(tvm_ffi) / np.from_dlpack      %6.3f" % ratio("tvm_tvm", "np"))
        if dlbridge_table:
            print("  tvm_ffi.from_dlpack(dlbridge) / (numpy)            %6.3f" % ratio("tvm_d", "tvm_np"))
            print("  dlbridge.from_dlpack(tvm_ffi) / tvm_ffi.from_dlpack(tvm_ffi) %6.3f"
                  % ratio("d_from_tvm", "tvm_tvm"))
            print("  dlbridge.from_dlpack(dlbridge) / tvm_ffi.from_dlpack(tvm_ffi) %6.3f"
                  % ratio("d_from_t", "tvm_tvm"))
        print("  (tvm_ffi %s)" % tvm_ffi.__version__)
    if torch is not None and dlbridge_table:
        print("  dlbridge.from_dlpack(torch) / torch.from_dlpack(torch)  %6.3f  (goal <= 1)"
              % ratio("d_from_torch", "torch_own"))
        print("  torch.from_dlpack(dlbridge) / torch.from_dlpack(torch)  %6.3f  (goal <= 1)"
              % ratio("torch_d", "torch_own"))
        print("  C loop through torch's table: %.1f ns per tensor; dlbridge's: %.1f" % (ns["torch_table"], ns["d_table"]))
        print("  (torch %s)" % torch.__version__)
    if mx is not None and dlbridge_table:
        print("  dlbridge.from_dlpack(mlx) / mx.from_dlpack(mlx)         %6.3f  (goal <= 1)"
              % ratio("d_from_mx", "mx_own"))
        print("  mx.from_dlpack(dlbridge) / mx.from_dlpack(mlx)          %6.3f" % ratio("mx_d", "mx_own"))
        print("  (mlx %s)" % mx.__version__)
    counts = xproducer.counts()
    assert counts["exports"] == counts["deleters"], counts


if __name__ == "__main__":
    main()
