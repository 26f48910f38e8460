"""dlbridge's own DLPack 1.3 exchange table, called as a C consumer would,
at its edges: NULL arguments refused with ValueError (never a crash), a
tensor handed to managed_tensor_to_py_object_no_sync freed exactly once
even when refused, borrowed views refused for memory that has no host
view. The table is read from the capsule dlbridge.Tensor publishes
(tests/exchange drives the same table from C)."""

import ctypes

import pytest

import dlbridge

np = pytest.importorskip("numpy")

_api = ctypes.PyDLL(None)
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Called with the GIL held; a -1 with a Python exception set raises it.
FromPy = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
ToPy = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
View = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
Stream = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)


def table():
    capsule = dlbridge.Tensor.__dlpack_c_exchange_api__
    address = _api.PyCapsule_GetPointer(capsule, b"dlpack_exchange_api")
    slots = (ctypes.c_void_p * 7).from_address(address)  # version, prev_api, then five functions
    return {
        "from_py": FromPy(slots[3]),
        "to_py": ToPy(slots[4]),
        "view": View(slots[5]),
        "stream": Stream(slots[6]),
    }


def test_null_arguments_are_refused_with_value_error():
    t = table()
    tensor = dlbridge.empty((2,), "float32")
    out = ctypes.c_void_p()
    with pytest.raises(ValueError, match="must not be NULL"):
        t["from_py"](None, ctypes.addressof(out))
    with pytest.raises(ValueError, match="must not be NULL"):
        t["from_py"](id(tensor), None)
    with pytest.raises(ValueError, match="tensor is NULL"):
        t["to_py"](None, ctypes.addressof(out))
    with pytest.raises(ValueError, match="must not be NULL"):
        t["view"](None, ctypes.addressof(out))
    with pytest.raises(ValueError, match="must not be NULL"):
        t["view"](id(tensor), None)
    with pytest.raises(ValueError, match="out_current_stream is NULL"):
        t["stream"](2, 0, None)
    stream = ctypes.c_void_p(7)
    assert t["stream"](2, 0, ctypes.addressof(stream)) == 0
    assert stream.value is None


def test_a_tensor_given_with_no_place_for_the_result_is_still_freed():
    t = table()
    tensor = dlbridge.empty((3,), "int32")
    live = dlbridge.live_exports()
    managed = ctypes.c_void_p()
    assert t["from_py"](id(tensor), ctypes.addressof(managed)) == 0
    assert dlbridge.live_exports() == live + 1
    with pytest.raises(ValueError, match="out_py_object is NULL"):
        t["to_py"](managed.value, None)
    assert dlbridge.live_exports() == live  # its deleter ran


def test_objects_that_are_not_tensors_are_refused():
    t = table()
    managed = ctypes.c_void_p()
    array, items = np.zeros(2), [1, 2]  # alive for the calls: they get only the addresses
    with pytest.raises(TypeError):
        t["from_py"](id(array), ctypes.addressof(managed))
    view = (ctypes.c_byte * 48)()
    with pytest.raises(TypeError):
        t["view"](id(items), ctypes.addressof(view))


def test_a_deleted_tensor_has_no_view_and_no_export():
    t = table()
    tensor = dlbridge.empty((3,), "int32")
    tensor.delete()
    view = (ctypes.c_byte * 48)()
    with pytest.raises(BufferError, match="DLB_ERR_DELETED"):
        t["view"](id(tensor), ctypes.addressof(view))
    managed = ctypes.c_void_p()
    with pytest.raises(BufferError, match="DLB_ERR_DELETED"):
        t["from_py"](id(tensor), ctypes.addressof(managed))
