"""dlbridge.from_buffer: the Python buffer protocol, zero-copy."""

import array
import ctypes
import gc
import weakref

try:
    import numpy as np
except ImportError:  # tests that use it are skipped (conftest)
    np = None
import pytest

import dlbridge


def address_of_bytes(b):
    return ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value


def address_of_writable(obj):
    return ctypes.addressof((ctypes.c_char * len(obj)).from_buffer(obj))


def test_bytes_read_only_zero_copy():
    b = b"0123456789"
    t = dlbridge.from_buffer(b)
    assert t.readonly
    assert t.dtype == "uint8" and t.shape == (10,) and t.strides == (1,)
    assert t.data_ptr == address_of_bytes(b)
    v = dlbridge.from_dlpack(t)  # versioned: read-only carried
    assert v.readonly
    if int(np.__version__.split(".")[0]) < 2:
        a = np.from_dlpack(t)  # numpy 1.x asks for a legacy capsule: a copy
        assert a.ctypes.data != t.data_ptr and a.tobytes() == b
    else:
        a = np.from_dlpack(t)  # numpy 2 asks for a versioned one, which says READ_ONLY
        assert not a.flags.writeable and a.ctypes.data == t.data_ptr


def test_bytearray_writable_zero_copy_and_not_resizable():
    ba = bytearray(16)
    t = dlbridge.from_buffer(ba)
    assert not t.readonly
    assert t.data_ptr == address_of_writable(ba)
    a = np.from_dlpack(t)
    ba[3] = 99
    assert a[3] == 99
    del t
    gc.collect()
    with pytest.raises(BufferError):
        ba.append(1)  # numpy's view still holds the export
    del a
    gc.collect()
    ba.append(1)  # all exports gone
    assert len(ba) == 17


def test_array_array_dtypes():
    for code, dtype in [("b", "int8"), ("B", "uint8"), ("h", "int16"), ("H", "uint16"),
                        ("i", "int32"), ("I", "uint32"), ("q", "int64"), ("Q", "uint64"),
                        ("l", "int64"), ("L", "uint64"), ("f", "float32"), ("d", "float64")]:
        arr = array.array(code, [1, 2, 3])
        t = dlbridge.from_buffer(arr)
        assert t.dtype == dtype, code
        assert t.data_ptr == arr.buffer_info()[0]
        np.testing.assert_array_equal(np.from_dlpack(t), [1, 2, 3])


def test_array_array_kept_alive_until_last_export():
    arr = array.array("d", [1.5, 2.5])
    ref = weakref.ref(arr)
    t = dlbridge.from_buffer(arr)
    a = np.from_dlpack(t)
    del arr, t
    gc.collect()
    assert ref() is not None
    assert a.tolist() == [1.5, 2.5]
    del a
    gc.collect()
    assert ref() is None


def test_memoryview_shapes_and_strides():
    ba = bytearray(range(24))
    mv = memoryview(ba).cast("B", (4, 6))
    t = dlbridge.from_buffer(mv)
    assert t.shape == (4, 6) and t.strides == (6, 1)
    s = dlbridge.from_buffer(memoryview(ba)[1::3])  # 1-d slicing with a step
    assert s.shape == (8,) and s.strides == (3,)
    assert s.data_ptr == address_of_writable(ba) + 1
    np.testing.assert_array_equal(np.from_dlpack(s), np.arange(24)[1::3])
    f = dlbridge.from_buffer(memoryview(bytearray(16)).cast("f"))
    assert f.dtype == "float32" and f.shape == (4,)
    r = dlbridge.from_buffer(memoryview(b"abcd"))
    assert r.readonly


def test_numpy_arrays_through_buffer_protocol():
    cases = {"bool": np.array([True, False, True]), "float16": np.arange(3, dtype=np.float16),
             "complex64": np.arange(3, dtype=np.complex64),
             "complex128": np.arange(3, dtype=np.complex128),
             "int64": np.arange(3, dtype=np.int64)}
    for name, a in cases.items():
        t = dlbridge.from_buffer(a)
        assert t.dtype == name
        assert t.data_ptr == a.ctypes.data
    torch = pytest.importorskip("torch")
    g = torch.from_dlpack(dlbridge.from_buffer(cases["int64"]))
    g[1] = 40
    assert cases["int64"][1] == 40


def test_transposed_and_reversed_numpy_views():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = dlbridge.from_buffer(a.T)
    assert t.shape == (4, 3) and t.strides == (1, 4)
    assert t.data_ptr == a.ctypes.data
    from conftest import require_negative_strides

    require_negative_strides()
    r = dlbridge.from_buffer(a[:, ::-1])
    assert r.strides == (4, -1)
    assert r.data_ptr == a.ctypes.data + 3 * 4
    np.testing.assert_array_equal(np.from_dlpack(r), a[:, ::-1])


def test_refused_formats_and_layouts():
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer([1, 2])
    assert info.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer(np.arange(3, dtype=">f4"))
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer(np.zeros(2, dtype=[("a", "<i4"), ("b", "u1")]))
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    packed = np.zeros(4, dtype=[("a", "<i4"), ("b", "u1")])["a"]  # byte stride 5
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer(packed)
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_LAYOUT"
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer(np.zeros(2, dtype=np.longdouble))
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    # The exporter itself refuses the view (numpy has no buffer letter for
    # datetime64; before, its ValueError came through unnamed).
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer(np.zeros(2, dtype="M8[s]"))
    assert info.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    assert "cannot include dtype" in str(info.value), info.value


def test_failed_wrap_releases_the_buffer_export():
    ba = bytearray(8)
    bad = memoryview(ba).cast("B", (2, 4))
    # A format the library refuses: the export must be released again.
    arr = np.frombuffer(ba, dtype=">i2")
    with pytest.raises(dlbridge.Error):
        dlbridge.from_buffer(arr)
    del arr, bad
    gc.collect()
    ba.append(0)  # no buffer export left behind
