"""Property tests (hypothesis): random dtypes, shapes (0-d, zero-size, up to
6-d) and views (sliced with steps, reversed, transposed, broadcast with zero
strides, offset starts) pushed numpy -> dlbridge -> numpy and -> torch and
back, within each peer's known limits (numpy 1.x exports neither bool nor
read-only arrays and imports read-only; torch 1.13 aborts on negative
strides, ignores byte_offset and has no uint16/32/64).

Each example checks the values, zero-copy where promised (the same address),
and that every managed tensor is gone again (live_exports() back to where it
started). scripts/test runs the "ci" profile (fixed seed, a bounded number of
examples); docs/python.md says how to run longer.
"""

import ctypes
import gc

import pytest

np = pytest.importorskip("numpy")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

import dlbridge  # noqa: E402

from conftest import clib  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

NUMPY_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "complex64", "complex128"]
TORCH_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64",
                "complex64", "complex128"}


@st.composite
def views(draw):
    """A numpy view over fresh memory, and how it was made."""
    dtype = draw(st.sampled_from(NUMPY_DTYPES))
    ndim = draw(st.integers(0, 6))
    base_shape = draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim))
    size = int(np.prod(base_shape)) if base_shape else 1
    base = (np.arange(size) % 120 - 20).astype(dtype).reshape(base_shape)
    view = base
    index = []
    for extent in base_shape:
        step = draw(st.sampled_from([1, 1, 2, -1, -2]))
        start = draw(st.integers(0, max(extent - 1, 0)))
        if step < 0:
            start = extent - 1 - start
        index.append(slice(start, None, step))
    view = view[tuple(index)] if ndim else view[...]
    if ndim > 1 and draw(st.booleans()):
        view = view.transpose(draw(st.permutations(range(ndim))))
    if draw(st.booleans()):
        # A writable broadcast: one new leading axis of stride 0.
        count = draw(st.integers(1, 3))
        view = np.lib.stride_tricks.as_strided(view, (count,) + view.shape, (0,) + view.strides,
                                               writeable=True)
    return base, view


def element_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def compact_strides(shape):
    """The library's compact strides (dlb_compact_strides)."""
    n = len(shape)
    dims = (ctypes.c_int64 * max(n, 1))(*shape)
    out = (ctypes.c_int64 * max(n, 1))()
    f = clib().dlb_compact_strides
    f.restype = ctypes.c_int32
    f.argtypes = [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    assert f(n, dims, out) == 0
    return tuple(out[:n])


@given(views())
def test_numpy_to_dlbridge_to_numpy(made):
    base, v = made
    gc.collect()
    start = dlbridge.live_exports()
    t = dlbridge.from_dlpack(v)
    assert t.shape == v.shape
    assert t.dtype == str(v.dtype)
    if v.size:
        assert t.data_ptr == v.ctypes.data  # zero-copy
        assert t.strides == element_strides(v)
    back = np.from_dlpack(t)
    assert back.shape == v.shape and back.dtype == v.dtype
    np.testing.assert_array_equal(back, v)
    if v.size:
        assert back.ctypes.data == v.ctypes.data
        base.reshape(-1)[...] += 1  # one memory: the change shows through both
        np.testing.assert_array_equal(back, v)
    del t, back
    gc.collect()
    assert dlbridge.live_exports() == start


@given(views())
def test_copy_true_gives_compact_independent_memory(made):
    base, v = made
    gc.collect()
    start = dlbridge.live_exports()
    expected = v.copy()
    c = dlbridge.from_dlpack(v, copy=True)
    assert c.shape == v.shape
    assert c.strides == compact_strides(v.shape)
    out = np.from_dlpack(c)
    np.testing.assert_array_equal(out, expected)
    if v.size:
        assert c.data_ptr != v.ctypes.data
        base.reshape(-1)[...] += 1  # the copy does not see it
        np.testing.assert_array_equal(out, expected)
    del c, out
    gc.collect()
    assert dlbridge.live_exports() == start


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@given(views())
def test_numpy_to_dlbridge_to_torch_and_back(made):
    base, v = made
    hypothesis.assume(str(v.dtype) in TORCH_DTYPES)
    hypothesis.assume(all(s >= 0 for s in v.strides))  # torch 1.13 aborts on negative strides
    gc.collect()
    start = dlbridge.live_exports()
    t = dlbridge.from_dlpack(v)
    g = torch.from_dlpack(t)
    assert tuple(g.shape) == v.shape
    np.testing.assert_array_equal(g.numpy(), v)
    if v.size:
        assert g.data_ptr() == v.ctypes.data
        assert tuple(g.stride()) == element_strides(v)
    u = dlbridge.from_dlpack(g)
    assert u.shape == v.shape
    if v.size:
        assert u.data_ptr == v.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(u), v)
    del t, g, u
    gc.collect()
    assert dlbridge.live_exports() == start


@given(st.sampled_from(NUMPY_DTYPES), st.lists(st.integers(0, 4), max_size=6))
def test_empty_round_trips_through_numpy(dtype, shape):
    gc.collect()
    start = dlbridge.live_exports()
    t = dlbridge.empty(shape, dtype)
    assert t.shape == tuple(shape)
    assert t.strides == compact_strides(shape)
    a = np.from_dlpack(t)
    assert a.shape == tuple(shape) and str(a.dtype) == dtype
    assert not a.any()  # zero-filled
    if a.size:
        assert a.ctypes.data == t.data_ptr
    u = dlbridge.from_dlpack(t)  # dlbridge to dlbridge: versioned, zero-copy
    assert u.data_ptr == t.data_ptr
    del t, a, u
    gc.collect()
    assert dlbridge.live_exports() == start
