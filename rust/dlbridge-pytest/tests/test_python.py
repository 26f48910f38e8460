"""dlbridge::python (the Rust crate's pyo3 feature) from Python: numpy 2,
torch 2 and JAX as producers and consumers of the test module built from
rust/dlbridge-pytest (imported as dlbridge_pytest).

Zero-copy is pointer identity; lifetimes are dlb_live_exports() back to 0
and the producer's reference count back to where it was (its deleter ran
exactly once); refusals carry the library's status name.
"""
import gc
import sys

import numpy as np
import pytest

import dlbridge_pytest as m


@pytest.fixture(autouse=True)
def no_exports_left():
    gc.collect()
    assert m.live_exports() == 0
    yield
    gc.collect()
    assert m.live_exports() == 0


def test_numpy_in_and_out_without_a_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = sys.getrefcount(a)
    t = m.roundtrip(a)
    assert isinstance(t, m.Tensor)
    assert t.data_ptr == a.ctypes.data == m.data_ptr(a)
    assert t.shape == (3, 4) and t.strides == (4, 1) and t.dtype == "float32"
    assert t.__dlpack_device__() == (1, 0) and not t.readonly
    assert m.values(a) == list(range(12))
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(b, a)
    assert m.live_exports() == 1  # b holds the library's export
    m.fill(a, 2.5)  # written through the library's write view
    assert (b == 2.5).all() and (a == 2.5).all()
    del t, b
    gc.collect()
    assert m.live_exports() == 0
    assert sys.getrefcount(a) == before, "numpy's deleter ran once"


def test_numpy_strided_and_zero_size():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = m.roundtrip(a.T)
    assert t.strides == (1, 4) and t.data_ptr == a.ctypes.data
    assert m.values(a.T) == a.T.ravel().tolist()
    with pytest.raises(m.Error) as e:
        m.fill(a.T, 1.0)
    assert e.value.status_name == "DLB_ERR_UNSUPPORTED_LAYOUT"
    assert m.values(np.zeros((0, 3), dtype=np.float32)) == []


def test_numpy_read_only_is_refused_writes_by_the_library():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    assert m.roundtrip(a).readonly
    for call in (lambda: m.writable(a), lambda: m.fill(a, 9.0)):
        with pytest.raises(m.Error) as e:
            call()
        assert e.value.status_name == "DLB_ERR_READ_ONLY"
        assert "read" in str(e.value).split(": ", 1)[1].lower()  # the library's message
    assert a.tolist() == [0, 1, 2, 3]


def test_torch_in_and_out_without_a_copy():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = m.roundtrip(x)
    assert t.data_ptr == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr()
    m.fill(x, -1.0)
    assert (y == -1.0).all().item()
    assert m.values(x.t()) == x.t().reshape(-1).tolist()
    del t, y
    gc.collect()
    assert m.live_exports() == 0


def test_jax_in_and_out():
    jnp = pytest.importorskip("jax.numpy")
    j = jnp.arange(5, dtype=jnp.float32)
    t = m.roundtrip(j)
    assert t.data_ptr == j.unsafe_buffer_pointer()
    assert m.values(j) == [0.0, 1.0, 2.0, 3.0, 4.0]
    # JAX arrays are immutable: exported READ_ONLY, refused a write view.
    with pytest.raises(m.Error) as e:
        m.fill(j, 1.0)
    assert e.value.status_name == "DLB_ERR_READ_ONLY"
    back = jnp.from_dlpack(m.arange_f32([2, 2]))
    assert back.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    del t, back
    gc.collect()


def test_rust_buffers_go_to_numpy_torch_jax():
    torch = pytest.importorskip("torch")
    t = m.arange_f32([2, 3])
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr and a.tolist() == [[0, 1, 2], [3, 4, 5]]
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr
    assert m.live_exports() == 2
    del a, x
    gc.collect()
    assert m.live_exports() == 0
    assert m.refcount(t) == 1


def test_read_only_rust_buffer():
    t = m.arange_f32([4], read_only=True)
    a = np.from_dlpack(t)  # numpy asks for a versioned capsule: READ_ONLY
    assert not a.flags.writeable and a.ctypes.data == t.data_ptr
    # A legacy capsule cannot say read-only: the library refuses it without a copy.
    with pytest.raises(BufferError) as e:
        t.__dlpack__(copy=False)
    assert isinstance(e.value, m.ExportError)
    assert e.value.status_name == "DLB_ERR_READ_ONLY"
    # ... and copies when allowed.
    c = t.__dlpack__()
    assert type(c).__name__ == "PyCapsule"
    del a, c


def test_export_refusals_are_the_librarys():
    t = m.arange_f32([3])
    with pytest.raises(m.ExportError) as e:
        t.__dlpack__(max_version=(1, 3), stream=5)  # host memory takes no stream
    assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT" and e.value.status == 1
    assert "stream 5" in str(e.value)
    with pytest.raises(m.ExportError) as e:
        t.__dlpack__(max_version=(1, 3), dl_device=(2, 0), copy=False)
    assert e.value.status_name == "DLB_ERR_UNSUPPORTED_DEVICE"
    t.delete()
    with pytest.raises(BufferError) as e:
        np.from_dlpack(t)
    assert e.value.status_name == "DLB_ERR_DELETED"
    with pytest.raises(m.Error) as e:
        m.values(t)
    assert e.value.status_name == "DLB_ERR_DELETED"


def test_bad_producers():
    with pytest.raises(TypeError):
        m.roundtrip(object())
    a = np.arange(3.0)
    capsule = a.__dlpack__(max_version=(1, 0))

    class Same:
        def __dlpack__(self, **kwargs):
            return capsule

    m.roundtrip(Same())
    with pytest.raises(m.Error) as e:
        m.roundtrip(Same())  # the capsule was consumed
    assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT" and "consumed" in str(e.value)

    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(m.Error) as e:
        m.roundtrip(NotACapsule())
    assert "int" in str(e.value)


def test_legacy_producer_is_asked_again_without_keywords():
    a = np.arange(4, dtype=np.int64)

    class Legacy:  # the protocol before DLPack 1.0: no max_version
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

    t = m.roundtrip(Legacy())
    assert t.data_ptr == a.ctypes.data and m.values(t) == [0, 1, 2, 3]


def test_a_producers_own_refusal_reaches_python_as_raised():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False

    class Legacy:
        def __dlpack__(self, stream=None):
            return a.__dlpack__()  # numpy refuses read-only memory in a legacy capsule

    with pytest.raises(BufferError) as e:
        m.roundtrip(Legacy())
    assert not isinstance(e.value, m.ExportError)  # numpy's, not the library's


def test_copy_is_passed_to_the_producer():
    a = np.arange(6, dtype=np.float64)
    assert m.copied(a, False).data_ptr == a.ctypes.data
    c = m.copied(a, True)
    assert c.data_ptr != a.ctypes.data and m.values(c) == a.tolist()


def test_zero_dimensional():
    t = m.roundtrip(np.asarray(3.5))
    assert t.shape == () and m.values(t) == [3.5]


def test_the_docs_example_doubles_in_place():
    a = np.arange(4, dtype=np.float32)
    t = m.double(a)
    assert a.tolist() == [0, 2, 4, 6] and t.data_ptr == a.ctypes.data
    torch = pytest.importorskip("torch")
    x = torch.ones(3)
    m.double(x)
    assert x.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError):
        m.double(np.arange(3.0))


def test_deleter_runs_once_when_dropped_on_another_thread():
    a = np.arange(8, dtype=np.float32)
    before = sys.getrefcount(a)
    m.drop_on_thread(a)
    gc.collect()
    assert sys.getrefcount(a) == before
    h = Handmade()
    m.drop_on_thread(h)
    assert h.deleted == 1


# A producer made by hand with ctypes: the library's import checks decide.
import ctypes  # noqa: E402


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Managed(ctypes.Structure):
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Handmade:
    """Four float32 values in a versioned capsule without a destructor;
    the deleter counts its calls."""

    def __init__(self, major=1, ndim=1, code=2, extent=4):
        self.values = (ctypes.c_float * 4)(1, 2, 3, 4)
        self.shape = (ctypes.c_int64 * 1)(extent)
        self.strides = (ctypes.c_int64 * 1)(1)
        self.deleted = 0

        def deleter(_):
            self.deleted += 1

        self.deleter = _DELETER(deleter)
        tensor = _Tensor(ctypes.cast(self.values, ctypes.c_void_p), _Device(1, 0), ndim, _DType(code, 32, 1),
                         self.shape, self.strides, 0)
        self.managed = _Managed(_Version(major, 0), None, self.deleter, 0, tensor)

    def __dlpack__(self, **kwargs):
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor_versioned", None)


def test_a_deleter_run_while_an_exception_is_in_flight_keeps_it():
    h = Handmade()
    with pytest.raises(ValueError, match="kept"):
        m.drop_while_raising(h)
    assert h.deleted == 1


def test_handmade_producer_in_and_its_deleter_once():
    h = Handmade()
    t = m.roundtrip(h)
    assert t.data_ptr == ctypes.addressof(h.values) and m.values(t) == [1, 2, 3, 4]
    assert h.deleted == 0
    del t
    gc.collect()
    assert h.deleted == 1


@pytest.mark.parametrize("kwargs, status", [
    ({"major": 2}, "DLB_ERR_VERSION"),
    ({"ndim": -1}, "DLB_ERR_INVALID_ARGUMENT"),
    ({"extent": -3}, "DLB_ERR_MALFORMED"),
    ({"code": 99}, "DLB_ERR_UNSUPPORTED_DTYPE"),
])
def test_the_library_refuses_bad_tensors(kwargs, status):
    h = Handmade(**kwargs)
    with pytest.raises(m.Error) as e:
        m.roundtrip(h)
    assert e.value.status_name == status, str(e.value)
    assert h.deleted == 0  # refused: the tensor is still the producer's


def test_copy_true_holds_when_a_producer_ignores_it():
    a = np.arange(3.0)

    class Ignores:  # shares its memory whatever copy says
        def __dlpack__(self, **kwargs):
            return a.__dlpack__(max_version=(1, 0))

    class Legacy:  # cannot be asked to copy at all
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

    for producer in (Ignores(), Legacy()):
        c = m.copied(producer, True)
        assert c.data_ptr != a.ctypes.data and m.values(c) == [0.0, 1.0, 2.0]
        assert m.copied(producer, False).data_ptr == a.ctypes.data


def test_a_read_only_tensor_is_refused_where_writable_is_required():
    t = m.arange_f32([2], read_only=True)
    assert m.roundtrip(t).data_ptr == t.data_ptr
    with pytest.raises(m.Error) as e:
        m.writable(t)
    assert e.value.status_name == "DLB_ERR_READ_ONLY"
    w = m.arange_f32([2])
    assert m.writable(w).data_ptr == w.data_ptr


def test_the_dlbridge_python_package_both_ways():
    dlbridge = pytest.importorskip("dlbridge")  # the build's package (the stage puts it on the path)
    a = np.arange(4, dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    assert m.roundtrip(t).data_ptr == t.data_ptr == a.ctypes.data
    r = m.arange_f32([3])
    back = dlbridge.from_dlpack(r)
    assert back.data_ptr == r.data_ptr and back.shape == (3,)
    assert dlbridge.live_exports() == m.live_exports()  # one library
    del t, back
