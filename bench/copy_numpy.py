#!/usr/bin/python3
"""Copy bandwidth of dlbridge's copy engine beside numpy and memcpy.

Everything is measured in this one process, on the same arrays:

  memcpy        ctypes.memmove of the same number of bytes (the baseline)
  numpy         numpy's own copy of the view into a new compact array:
                np.ascontiguousarray(view) for the strided views; for the
                compact view ascontiguousarray returns its input without
                copying, so view.copy() stands in for it
  numpy_into    np.copyto(out, view) into a preallocated compact array
                (no allocation or page faults in the timing)
  dlbridge      dlb_copy_to_contiguous(view, out) through ctypes, into a
                preallocated compact array

Views, all float64 k x k matrices (k*k*8 bytes copied):
  contiguous    a
  transposed    a.T
  reversed      a[::-1, ::-1]

Every timing is the best of several runs; the methods are run in turn
inside each repetition so that a noisy neighbour affects them alike. The
engine's output is compared with numpy's for every case. Exit status: 0
when every copy succeeded and matched numpy, 1 when any output differed,
2 when outputs matched but dlb_copy_to_contiguous refused some view.

Usage:
  /usr/bin/python3 bench/copy_numpy.py [--lib build/src/libdlbridge.so]
      [--out build/bench-results/copy] [--quick] [--reps N] [--sizes 256,4096]
The library is found through --lib, then DLBRIDGE_LIBRARY, then
build/src/libdlbridge.so. Writes <out>.csv and <out>.json.
"""

import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np


# The package's ctypes declarations of the DLPack structs, bound once the
# library to measure is known (the package loads it on import).
_lib = None
KDL_FLOAT = 2


def load_library(path):
    candidates = [path, os.environ.get("DLBRIDGE_LIBRARY"), "build/src/libdlbridge.so"]
    for c in candidates:
        if c and os.path.exists(c):
            global _lib
            os.environ["DLBRIDGE_LIBRARY"] = os.path.abspath(c)
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
            from dlbridge import _lib as package_lib
            _lib = package_lib
            lib = ctypes.CDLL(os.path.abspath(c))
            lib.dlb_copy_to_contiguous.argtypes = [ctypes.POINTER(_lib.DLTensor), ctypes.c_void_p,
                                                   ctypes.c_uint64]
            lib.dlb_copy_to_contiguous.restype = ctypes.c_int32
            lib.dlb_last_error_message.argtypes = []
            lib.dlb_last_error_message.restype = ctypes.c_char_p
            return lib, os.path.abspath(c)
    sys.exit("copy_numpy.py: libdlbridge.so not found (pass --lib or set DLBRIDGE_LIBRARY)")


class TensorView:
    """A DLTensor describing a numpy array's view, keeping its arrays alive."""

    def __init__(self, arr):
        item = arr.itemsize
        self.shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        self.strides = (ctypes.c_int64 * arr.ndim)(*[s // item for s in arr.strides])
        # Describe the view as (base of the underlying allocation, byte_offset)
        # so that the byte_offset path is exercised too.
        base = arr
        while isinstance(base.base, np.ndarray):
            base = base.base
        lowest = arr.ctypes.data
        for n, s in zip(arr.shape, arr.strides):
            if n > 0 and s < 0:
                lowest += (n - 1) * s
        start = min(base.ctypes.data, lowest)
        self.t = _lib.DLTensor()
        self.t.data = start
        self.t.byte_offset = arr.ctypes.data - start
        self.t.device = _lib.DLDevice(_lib.kDLCPU, 0)
        self.t.ndim = arr.ndim
        self.t.dtype = _lib.DLDataType(KDL_FLOAT, item * 8, 1)
        self.t.shape = self.shape
        self.t.strides = self.strides


def make_views(a):
    return {
        "contiguous": a,
        "transposed": a.T,
        "reversed": a[::-1, ::-1],
    }


def best_of(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(lib, k, reps):
    a = np.random.default_rng(k).standard_normal((k, k))
    nbytes = a.nbytes
    out = np.empty_like(a)
    src_ptr = a.ctypes.data
    out_ptr = out.ctypes.data
    results = []
    mismatches = []
    refusals = []
    for kind, view in make_views(a).items():
        tv = TensorView(view)
        ptr = ctypes.byref(tv.t)
        errors = []

        def engine():
            st = lib.dlb_copy_to_contiguous(ptr, out_ptr, nbytes)
            if st != 0:
                errors.append("status %d: %s" % (st, lib.dlb_last_error_message().decode()))

        def numpy_copy():
            if kind == "contiguous":
                view.copy()
            else:
                np.ascontiguousarray(view)

        methods = {
            "memcpy": lambda: ctypes.memmove(out_ptr, src_ptr, nbytes),
            "numpy": numpy_copy,
            "numpy_into": lambda: np.copyto(out, view),
            "dlbridge": engine,
        }
        best = {m: float("inf") for m in methods}
        # Warm up every method once (page faults of fresh numpy outputs
        # still count: allocating is part of what ascontiguousarray does).
        for fn in methods.values():
            fn()
        for _ in range(reps):
            for m, fn in methods.items():
                best[m] = min(best[m], best_of(fn, 1))
        if errors:
            refusals.append("%s k=%d: dlb_copy_to_contiguous failed: %s" % (kind, k, errors[0]))
        else:
            out.fill(0.0)
            engine()
            if not np.array_equal(out, np.ascontiguousarray(view)):
                mismatches.append("%s k=%d: engine output differs from numpy" % (kind, k))
        for m, s in best.items():
            ok = not (m == "dlbridge" and errors)
            results.append({
                "view": kind,
                "k": k,
                "bytes": nbytes,
                "method": m,
                "seconds": s if ok else None,
                "gb_per_s": nbytes / s / 1e9 if ok else None,
            })
    return results, mismatches, refusals


def reps_for(nbytes, quick):
    if quick:
        return 3
    if nbytes >= 64 << 20:
        return 15
    if nbytes >= 4 << 20:
        return 30
    return 200


def ratio(results, view, k, num, den):
    t = {r["method"]: r["seconds"] for r in results if r["view"] == view and r["k"] == k}
    if t.get(num) is None or t.get(den) is None:
        return None
    return t[num] / t[den]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", help="path of libdlbridge.so")
    p.add_argument("--out", default="build/bench-results/copy", help="output path without extension")
    p.add_argument("--quick", action="store_true", help="small sizes, few runs (a smoke test)")
    p.add_argument("--reps", type=int, default=0, help="repetitions per case (default: by size)")
    p.add_argument("--sizes", help="comma-separated matrix sides k (default: 64..4096)")
    args = p.parse_args()

    lib, libpath = load_library(args.lib)
    sizes = [16, 64, 200] if args.quick else [64, 128, 256, 512, 1024, 2048, 4096]
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    results = []
    mismatches = []
    refusals = []
    for k in sizes:
        reps = args.reps or reps_for(k * k * 8, args.quick)
        r, bad, refused = measure(lib, k, reps)
        results.extend(r)
        mismatches.extend(bad)
        refusals.extend(refused)
        for row in r:
            if row["method"] == "dlbridge" and row["seconds"] is not None:
                print("%-10s k=%-5d %9.1f KiB  dlbridge %7.2f GB/s  of memcpy %.2f  numpy time/dlbridge time %.2f" % (
                    row["view"], k, row["bytes"] / 1024, row["gb_per_s"],
                    ratio(r, row["view"], k, "memcpy", "dlbridge"),
                    ratio(r, row["view"], k, "numpy", "dlbridge")), flush=True)

    kmax = sizes[-1]
    summary = {
        "library": libpath,
        "numpy": np.__version__,
        "largest_k": kmax,
        # memcpy time / engine time: the engine's share of memcpy bandwidth.
        "contiguous_engine_vs_memcpy": ratio(results, "contiguous", kmax, "memcpy", "dlbridge"),
        # numpy time / engine time: how many times faster the engine is.
        "transposed_numpy_over_engine": ratio(results, "transposed", kmax, "numpy", "dlbridge"),
        "transposed_numpy_into_over_engine": ratio(results, "transposed", kmax, "numpy_into", "dlbridge"),
        "reversed_numpy_over_engine": ratio(results, "reversed", kmax, "numpy", "dlbridge"),
        "mismatches": mismatches,
        "refusals": refusals,
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".csv", "w") as f:
        f.write("view,k,bytes,method,seconds,gb_per_s\n")
        for r in results:
            f.write("%s,%d,%d,%s,%s,%s\n" % (r["view"], r["k"], r["bytes"], r["method"],
                                             "" if r["seconds"] is None else "%.9f" % r["seconds"],
                                             "" if r["gb_per_s"] is None else "%.4f" % r["gb_per_s"]))
    with open(args.out + ".json", "w") as f:
        json.dump({"summary": summary, "results": results}, f, indent=1)

    def fmt(x):
        return "n/a" if x is None else "%.2f" % x

    print("summary (k=%d, float64):" % kmax)
    print("  contiguous: engine bandwidth / memcpy bandwidth = %s" % fmt(summary["contiguous_engine_vs_memcpy"]))
    print("  transposed: numpy.ascontiguousarray time / engine time = %s" %
          fmt(summary["transposed_numpy_over_engine"]))
    print("  transposed: np.copyto (preallocated) time / engine time = %s" %
          fmt(summary["transposed_numpy_into_over_engine"]))
    print("  reversed:   numpy.ascontiguousarray time / engine time = %s" %
          fmt(summary["reversed_numpy_over_engine"]))
    print("wrote %s.csv and %s.json" % (args.out, args.out))
    for m in mismatches:
        print("ERROR: " + m, file=sys.stderr)
    for m in refusals:
        print("ERROR: " + m, file=sys.stderr)
    if mismatches:
        return 1
    if refusals:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
