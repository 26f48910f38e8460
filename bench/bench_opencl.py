"""The host copy of a strided view of an OpenCL buffer: dlbridge beside
PyOpenCL's enqueue_copy into numpy followed by numpy's own strided copy.

The buffer is a 4096 x 4096 float64 array (128 MiB) in a PyOpenCL Buffer on
the first OpenCL device (PoCL's CPU device here). Cases:

  transposed  the whole array seen transposed (strides 1, 4096)
  box         its middle 2048 x 2048 block (rows of 2048 inside rows of 4096)

For each case and way, a fresh process sets up the buffer, makes one
untimed copy, then times three copies and reports the fastest:

  dlbridge    dlbridge.from_dlpack(t, device=(1, 0)), where t is the view
              taken in from a PyOpenCL producer (rectangular reads of the
              compact blocks, then the strided copy engine where the memory
              order is not the view's)
  pyopencl    np.empty + cl.enqueue_copy of the whole buffer into it, then
              np.ascontiguousarray of numpy's strided view of that

Every copy is checked against the other way's. The parent runs the two ways
in turn, ROUNDS times, and prints each way's median and spread over the
processes and the ratio dlbridge / pyopencl per round (below 1: dlbridge
faster). Run it with the release build and the PyOpenCL environment:

    PYTHONPATH=build/bench/python "$(scripts/opencl-env | tail -n 1)/bin/python" \\
      bench/bench_opencl.py --rounds 7
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

N = 4096
HERE = os.path.dirname(os.path.abspath(__file__))


def child(case, way):
    import numpy as np
    import pyopencl as cl

    sys.path.insert(0, os.path.join(HERE, "..", "tests", "opencl", "python"))
    from cl_dlpack import ClArray  # the tests' PyOpenCL producer

    import dlbridge

    ctx = cl.Context(cl.get_platforms()[0].get_devices()[:1])
    queue = cl.CommandQueue(ctx)
    values = np.arange(N * N, dtype=np.float64)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=values.nbytes)
    cl.enqueue_copy(queue, buf, values, is_blocking=True)
    if case == "transposed":
        shape, strides, offset = (N, N), (1, N), 0
    else:
        h = N // 2
        shape, strides, offset = (h, h), (N, 1), (N // 4) * N + N // 4

    if way == "dlbridge":
        t = dlbridge.from_dlpack(ClArray(buf, shape, strides, offset))

        def copy():
            return np.from_dlpack(dlbridge.from_dlpack(t, device=(1, 0)))
    else:
        def copy():
            whole = np.empty(N * N, np.float64)
            cl.enqueue_copy(queue, whole, buf, is_blocking=True)
            view = np.lib.stride_tricks.as_strided(whole[offset:], shape, tuple(8 * s for s in strides))
            return np.ascontiguousarray(view)

    first = copy()
    expect = np.lib.stride_tricks.as_strided(values[offset:], shape, tuple(8 * s for s in strides))
    if not np.array_equal(first, expect):
        raise SystemExit("%s %s: the copy differs from the values written" % (case, way))
    del first
    best = None
    for _ in range(3):
        start = time.perf_counter()
        out = copy()
        elapsed = time.perf_counter() - start
        del out
        best = elapsed if best is None else min(best, elapsed)
    print("%.6f" % best)


def spread(xs):
    return "%.1f [%.1f..%.1f]" % (statistics.median(xs), min(xs), max(xs))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--case", choices=["transposed", "box", "all"], default="all")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    import dlbridge
    import numpy
    import pyopencl

    print("dlbridge %s, numpy %s, pyopencl %s, %d fresh processes per way and case, ms (median [min..max])"
          % (dlbridge.__version__, numpy.__version__, pyopencl.VERSION_TEXT, args.rounds))
    print("| case | dlbridge ms | pyopencl + numpy ms | ratio dlbridge / pyopencl |")
    print("|---|---|---|---|")
    for case in (["transposed", "box"] if args.case == "all" else [args.case]):
        times = {"dlbridge": [], "pyopencl": []}
        for _ in range(args.rounds):
            for way in times:
                out = subprocess.run([sys.executable, __file__, "--child", case, way], check=True,
                                     capture_output=True, text=True).stdout
                times[way].append(float(out.split()[-1]) * 1e3)
        ratios = [a / b for a, b in zip(times["dlbridge"], times["pyopencl"])]
        print("| %s | %s | %s | %.2f [%.2f..%.2f] |" % (case, spread(times["dlbridge"]), spread(times["pyopencl"]),
                                                       statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
