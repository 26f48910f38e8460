"""Exchanges with numpy 1.24 in both directions (legacy DLPack protocol)."""

import gc
import sys
import weakref

import pytest

np = pytest.importorskip("numpy")

import dlbridge
from conftest import capsule_name, require_negative_strides


# numpy 1.x speaks only the legacy protocol (no max_version); numpy 2 asks
# for versioned capsules, carries READ_ONLY and exchanges bool. The tests
# that pin numpy 1.x's limits run only against it.
numpy1_only = pytest.mark.skipif(int(np.__version__.split(".")[0]) >= 2,
                                 reason="asserts numpy 1.x's legacy-only behaviour; numpy %s is newer" % np.__version__)


def ptr(a):
    return a.__array_interface__["data"][0]


NUMPY_DTYPES = [
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
    "complex64", "complex128",
]


def sample(dtype, shape=(3, 4)):
    n = int(np.prod(shape))
    a = (np.arange(n) % 7 + 1).astype(dtype)
    if np.issubdtype(a.dtype, np.complexfloating):
        a = a + 1j * a[::-1]
    return a.reshape(shape)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_to_dlbridge_to_numpy_every_dtype(dtype):
    a = sample(dtype)
    t = dlbridge.from_dlpack(a)
    assert t.dtype == dtype
    assert t.shape == a.shape
    assert t.strides == tuple(s // a.itemsize for s in a.strides)
    assert t.data_ptr == ptr(a)
    assert not t.readonly
    back = np.from_dlpack(t)
    assert back.dtype == a.dtype
    assert ptr(back) == ptr(a)
    np.testing.assert_array_equal(back, a)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_dlbridge_empty_to_numpy_every_dtype(dtype):
    t = dlbridge.empty((2, 5), dtype)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(dtype)
    assert a.shape == (2, 5)
    assert ptr(a) == t.data_ptr
    assert ptr(a) % 64 == 0
    assert not a.any()  # zero-filled


def test_writes_to_numpy_source_seen_through_dlbridge():
    a = np.zeros((4, 4), np.float32)
    t = dlbridge.from_dlpack(a)
    view = np.from_dlpack(t)
    a[2, 3] = 42.0
    assert view[2, 3] == 42.0
    assert ptr(view) == ptr(a)


def test_writes_through_dlbridge_buffer_seen_by_numpy():
    # numpy 1.24 makes arrays from DLPack read-only, so write through torch.
    torch = pytest.importorskip("torch")
    t = dlbridge.empty((3,), "int32")
    a = np.from_dlpack(t)
    torch.from_dlpack(t)[1] = 7
    assert a.tolist() == [0, 7, 0]


@numpy1_only
def test_numpy_1_24_marks_dlpack_imports_read_only():
    a = np.from_dlpack(dlbridge.empty((2,), "float32"))
    assert not a.flags.writeable


def _views():
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    return {
        "transposed": base.transpose(2, 0, 1),
        "sliced": base[1:, ::2, 1:4],
        "reversed": base[::-1, :, ::-1],
        "size1": base[1:2, :, 3:4],
        "zero_size": base[:, 2:2, :],
        "zero_d": np.array(3.25),
        "scalar_view": base[1, 2, 3:4].reshape(()),
    }


@pytest.mark.parametrize("kind", list(_views()))
def test_numpy_views_round_trip(kind):
    v = _views()[kind]
    if kind == "reversed":
        require_negative_strides()
    t = dlbridge.from_dlpack(v)
    assert t.shape == v.shape
    assert t.ndim == v.ndim
    # Kept as the producer wrote them; numpy's own round trip shows what it
    # wrote (it rewrites the strides of zero-size views).
    exported = np.from_dlpack(v).strides
    assert t.strides == tuple(s // v.itemsize for s in exported)
    if v.size:
        assert exported == v.strides
    if v.size:
        assert t.data_ptr == ptr(v)
    back = np.from_dlpack(t)
    assert back.shape == v.shape
    np.testing.assert_array_equal(back, v)
    if v.size:
        assert ptr(back) == ptr(v)
    # And through a versioned export of the same tensor.
    again = dlbridge.from_dlpack(t)
    assert again.shape == v.shape and again.strides == t.strides
    # A copy is compact and equal.
    c = dlbridge.from_dlpack(t, copy=True)
    assert c.shape == v.shape
    np.testing.assert_array_equal(np.from_dlpack(c), v)
    if v.size > 1:
        assert c.data_ptr != t.data_ptr


@numpy1_only
def test_numpy_cannot_export_bool_and_is_copied_instead():
    # numpy 1.x refuses bool with BufferError: dlbridge copies it through the
    # buffer protocol, unless copy=False forbids it.
    a = np.array([True, False, True])
    with pytest.raises(BufferError) as info:
        a.__dlpack__()
    t = dlbridge.from_dlpack(a)
    assert t.copied and t.dtype == "bool" and t.data_ptr != ptr(a)
    with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY: .*ndarray.__dlpack__ raised BufferError: "):
        dlbridge.from_dlpack(a, copy=False)
    del info


@numpy1_only
def test_numpy_cannot_import_bool():
    t = dlbridge.empty((3,), "bool")
    assert t.dtype == "bool"
    with pytest.raises(RuntimeError):
        np.from_dlpack(t)


@numpy1_only
def test_numpy_read_only_array_is_refused_by_numpy():
    a = np.arange(4.0)
    a.flags.writeable = False
    with pytest.raises(BufferError):
        a.__dlpack__()
    # dlbridge.from_dlpack cures the refusal with a copy of its own.
    c = dlbridge.from_dlpack(a)
    assert c.copied and c.data_ptr != ptr(a) and np.from_dlpack(c).tolist() == a.tolist()
    with pytest.raises(BufferError, match="copy was forbidden"):
        dlbridge.from_dlpack(a, copy=False)
    # Through the buffer protocol the read-only array can be wrapped; it is
    # read-only, so its legacy export (what numpy 1.x asks for) is a copy and
    # the versioned one says so.
    t = dlbridge.from_buffer(a)
    assert t.readonly
    n = np.from_dlpack(t)
    assert n.ctypes.data != ptr(a) and n.tolist() == a.tolist()
    with pytest.raises(BufferError, match="DLB_ERR_READ_ONLY"):
        t.__dlpack__(copy=False)
    v = dlbridge.from_dlpack(t)
    assert v.readonly and v.data_ptr == ptr(a)


def test_numpy_consumes_capsule_and_renames_it():
    t = dlbridge.empty((2,), "float64")
    cap = t.__dlpack__()
    assert capsule_name(cap) == "dltensor"
    assert dlbridge.live_exports() == 1

    class Holder:
        def __init__(self, capsule):
            self.capsule = capsule

        def __dlpack__(self, stream=None):
            return self.capsule

        def __dlpack_device__(self):
            return (1, 0)

    holder = Holder(cap)
    a = np.from_dlpack(holder)
    assert capsule_name(cap) == "used_dltensor"
    del cap, holder
    gc.collect()
    assert dlbridge.live_exports() == 1  # numpy's array holds it
    assert ptr(a) == t.data_ptr
    del a
    gc.collect()
    assert dlbridge.live_exports() == 0


def test_numpy_array_kept_alive_by_import():
    a = np.arange(5.0)
    ref = weakref.ref(a)
    t = dlbridge.from_dlpack(a)
    del a
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(5.0))
    del t
    gc.collect()
    assert ref() is None


def test_imported_numpy_re_exported_to_numpy_keeps_source():
    a = np.arange(6, dtype=np.int16)
    ref = weakref.ref(a)
    b = np.from_dlpack(dlbridge.from_dlpack(a))
    del a
    gc.collect()
    assert ref() is not None
    assert b.tolist() == list(range(6))
    del b
    gc.collect()
    assert ref() is None


def test_device_and_copy_for_a_legacy_producer_are_the_librarys_decision():
    # numpy 1.x cannot be asked for a device or a copy: the library's planner
    # (dlb_buffer_resolve) decides on what numpy handed over.
    a = np.arange(6.0)
    base = sys.getrefcount(a)
    with pytest.raises(BufferError, match="DLB_ERR_"):
        dlbridge.from_dlpack(a, device=(2, 0))  # host memory to CUDA: no
    assert sys.getrefcount(a) == base  # numpy's export was released again
    same = dlbridge.from_dlpack(a, device=(1, 0), copy=None)
    assert same.data_ptr == a.ctypes.data
    copied = dlbridge.from_dlpack(a, device=(1, 0), copy=True)
    assert copied.data_ptr != a.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(copied), a)
    del same, copied
    assert sys.getrefcount(a) == base
