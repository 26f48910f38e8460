"""Reading a dlbridge.Tensor's elements straight from its memory, for tests
that compare what crossed a route with the producer's own values without
another DLPack consumer in between."""

import ctypes


def raw_values(t, dtype=None):
    """The elements of `t` read from its memory at data_ptr, by its shape and
    strides, as a numpy array of `dtype` (t.dtype by default) that owns a
    copy of them."""
    import numpy as np

    dt = np.dtype(dtype if dtype is not None else t.dtype)
    shape, strides = t.shape, t.strides
    if 0 in shape:
        return np.empty(shape, dt)
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    memory = (ctypes.c_char * ((hi - lo + 1) * dt.itemsize)).from_address(t.data_ptr + lo * dt.itemsize)
    base = np.frombuffer(memory, dtype=dt)[-lo:]
    view = np.lib.stride_tricks.as_strided(base, shape, [s * dt.itemsize for s in strides])
    return np.array(view)
