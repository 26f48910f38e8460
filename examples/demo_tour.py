"""The dlbridge tour that scripts/demo runs: five short steps, plain text.

Run it through scripts/demo (which builds the library and the package
first), by hand against that build:

    PYTHONPATH=build/demo/python /usr/bin/python3 examples/demo_tour.py build/demo/backend_fallback

or with the package installed (pip install .) in the running interpreter.

The optional argument is the compiled examples/backend_fallback.c, which
step 4 runs. Step 3 needs an OpenCL driver (scripts/install-deps installs
PoCL, whose CPU device is one).
"""

import ctypes
import gc
import subprocess
import sys

import numpy as np
import torch

import dlbridge


def step(title):
    print()
    print(title)


def say(text):
    print("   " + text)


def same(a, b):
    return "same address" if a == b else "DIFFERENT address"


def main():
    fallback = sys.argv[1] if len(sys.argv) > 1 else None
    print("dlbridge %s, numpy %s, torch %s" % (dlbridge.__version__, np.__version__, torch.__version__))

    # 1 ---------------------------------------------------------------------
    step("1. C memory handed to numpy and torch, zero-copy")
    c_array = ((ctypes.c_float * 3) * 2)()  # a 2x3 float array in C memory
    t = dlbridge.from_buffer(c_array)
    say("dlbridge.from_buffer(ctypes 2x3 float array) -> %r" % (t,))
    a = np.from_dlpack(t)
    g = torch.from_dlpack(t)
    c_addr = ctypes.addressof(c_array)
    a_addr = a.__array_interface__["data"][0]
    say("C array at   0x%x" % c_addr)
    say("numpy sees   0x%x  (%s)" % (a_addr, same(a_addr, c_addr)))
    say("torch sees   0x%x  (%s)" % (g.data_ptr(), same(g.data_ptr(), c_addr)))
    g[0, 1] = 42.0
    say("torch writes g[0, 1] = 42  -> numpy a[0, 1] = %g, C array[0][1] = %g" % (a[0, 1], c_array[0][1]))
    c_array[1][2] = -7.5
    say("C writes array[1][2] = -7.5 -> numpy a[1, 2] = %g, torch g[1, 2] = %g" % (a[1, 2], g[1, 2].item()))
    say("live exports while numpy and torch hold views: %d" % dlbridge.live_exports())

    # 2 ---------------------------------------------------------------------
    step("2. A strided numpy view taken in by dlbridge and handed to torch")
    base = np.arange(12, dtype=np.int64).reshape(3, 4)
    view = base.T[1:, :]  # transposed, then sliced: not contiguous
    elem = view.itemsize
    v_addr = view.__array_interface__["data"][0]
    say("numpy view = np.arange(12).reshape(3, 4).T[1:, :]")
    say("numpy:                      shape %s, strides %s elements, data 0x%x"
        % (view.shape, tuple(s // elem for s in view.strides), v_addr))
    d = dlbridge.from_dlpack(view)
    say("dlbridge.from_dlpack(view): shape %s, strides %s, data 0x%x  (%s)"
        % (d.shape, d.strides, d.data_ptr, same(d.data_ptr, v_addr)))
    tt = torch.from_dlpack(d)
    say("torch.from_dlpack(tensor):  shape %s, strides %s, data 0x%x  (%s)"
        % (tuple(tt.shape), tt.stride(), tt.data_ptr(), same(tt.data_ptr(), v_addr)))
    say("torch tt[2, 1] = %d, numpy view[2, 1] = %d; torch sum %d == numpy sum %d"
        % (tt[2, 1].item(), view[2, 1], tt.sum().item(), view.sum()))

    # 3 ---------------------------------------------------------------------
    step("3. Device memory on a real OpenCL driver: refused zero-copy to numpy, cured into numpy")
    opencl_ok = opencl_step()

    # 4 ---------------------------------------------------------------------
    step("4. A backend of your own without zero-copy access: host-copy fallback, then refusals "
         "(C, examples/backend_fallback.c)")
    if fallback is None:
        say("(skipped: pass the compiled examples/backend_fallback.c)")
        c_ok = True
        c_live = None
    else:
        run = subprocess.run([fallback], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in run.stdout.splitlines():
            say(line)
        c_ok = run.returncode == 0
        lines = run.stdout.splitlines()
        c_live = 0 if lines and lines[-1].strip() == "live exports: 0" else None
        if not c_ok:
            say("(backend_fallback exited with status %d)" % run.returncode)

    # 5 ---------------------------------------------------------------------
    step("5. Everything released")
    del a, g, t, tt, d
    gc.collect()
    live = dlbridge.live_exports()
    say("dlbridge.live_exports() = %d in this process" % live)
    if c_live == 0:
        say("and 0 in the C program above, after its last release")
    return 0 if live == 0 and c_ok and opencl_ok else 1


def opencl_step():
    """A numpy array copied into OpenCL device memory (a cl_mem of the
    driver's), which numpy cannot read; dlbridge names why a zero-copy
    hand-over is impossible, then copies it back into host memory
    (clEnqueueReadBuffer), and the values are checked against the original."""
    host = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
    say("a = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5")
    try:
        dev = dlbridge.from_dlpack(host, device=(4, 0))
    except BufferError as e:
        say("(no OpenCL device here: %s)" % e)
        return False
    say("dlbridge.from_dlpack(a, device=(4, 0)) -> %r" % (dev,))
    say("  in OpenCL device memory (kDLOpenCL = 4): its exports carry a cl_mem handle, not an address")
    try:
        np.from_dlpack(dev)
        say("np.from_dlpack(tensor) took it?")
        return False
    except Exception as e:  # numpy 1.x: RuntimeError, 2.x: BufferError
        say("np.from_dlpack(tensor) raised %s: %s" % (type(e).__name__, e))
    try:
        dev.__dlpack__(dl_device=(1, 0), copy=False)
    except BufferError as e:
        say("tensor.__dlpack__(dl_device=(1, 0), copy=False) raised BufferError:")
        say("  " + str(e).split("; allow a copy")[0])
    cured = dlbridge.from_dlpack(dev, device=(1, 0))
    back = np.from_dlpack(cured)
    say("dlbridge.from_dlpack(tensor, device=(1, 0)) -> %r, copied %s" % (cured, cured.copied))
    same_values = bool(np.array_equal(back, host))
    say("np.from_dlpack(that): %s == a: %s" % (back.tolist(), same_values))
    del dev, cured, back
    return same_values


if __name__ == "__main__":
    sys.exit(main())
