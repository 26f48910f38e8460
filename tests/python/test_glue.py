"""The package's C side (the dlbridge._glue extension): a Tensor owns one
reference to its buffer, released by the object's deallocator; metadata is
read in C; the extension is built for the limited API and the C library has
no Python in it."""

import copy
import ctypes
import gc
import os
import subprocess
import sys
import weakref

try:
    import numpy as np
except ImportError:  # tests that use it are skipped (conftest)
    np = None
import pytest

import dlbridge
from dlbridge import _glue, _lib

from conftest import capsule_name, clib


def refcount(t_or_handle):
    h = t_or_handle._handle if isinstance(t_or_handle, dlbridge.Tensor) else t_or_handle
    return clib().dlb_buffer_refcount(h)


def test_the_extension_is_a_limited_api_module_beside_the_package():
    assert os.path.basename(_glue.__file__) == "_glue.abi3.so"
    assert os.path.dirname(_glue.__file__) == os.path.dirname(dlbridge.__file__)
    assert type(_glue.from_dlpack).__name__ == "builtin_function_or_method"
    assert dlbridge.from_dlpack is _glue.from_dlpack
    assert dlbridge.Tensor is _glue.Tensor


def test_the_c_library_exports_nothing_for_python():
    nm = subprocess.run(["nm", "-D", _lib.path], capture_output=True, text=True)
    if nm.returncode != 0:
        pytest.skip("nm is not available")
    names = [line.split()[-1] for line in nm.stdout.splitlines() if line.strip()]
    python_names = [n for n in names if n.startswith(("Py", "_Py", "dlb_py_"))]
    assert names and python_names == []


def test_dropping_a_tensor_releases_its_handle():
    t = dlbridge.empty((3,), "int32")
    handle = clib().dlb_buffer_retain(t._handle)
    assert refcount(handle) == 2
    del t
    assert refcount(handle) == 1  # released at once, no gc needed
    clib().dlb_buffer_release(handle)


def test_dropping_an_imported_tensor_runs_the_producers_deleter_once():
    a = np.arange(6, dtype=np.int16)
    base = sys.getrefcount(a)
    t = dlbridge.from_dlpack(a)
    assert sys.getrefcount(a) == base + 1  # numpy's export holds the array
    assert t.data_ptr == a.ctypes.data
    del t
    assert sys.getrefcount(a) == base


def test_tensor_has_no_finalizer_and_no_dict():
    # The C deallocator releases the buffer: no Python code runs when a tensor dies.
    assert not hasattr(dlbridge.Tensor, "__del__")
    t = dlbridge.empty(1, "int8")
    with pytest.raises(AttributeError):
        t.anything = 1


def test_weak_references_to_tensors():
    import weakref

    t = dlbridge.empty(2, "int8")
    r = weakref.ref(t)
    assert r() is t
    del t
    assert r() is None


def test_metadata_matches_the_library_reading():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]
    t = dlbridge.from_dlpack(a)
    meta = t._m
    view = _lib.DLTensor()
    assert clib().dlb_buffer_dltensor(t._handle, ctypes.byref(view)) == 0
    assert meta[0] == tuple(view.shape[:2]) == (2, 3)
    assert meta[1] == tuple(view.strides[:2]) == (12, 2)
    assert meta[2] == "float32"
    assert meta[3] == (1, 0)
    assert meta[4] == a.ctypes.data
    assert meta[5] is False
    assert meta[6] == 6 * 4
    assert t._m is meta  # read once, cached
    assert dlbridge.from_buffer(b"abcd")._m[5] is True


def test_tensor_is_not_constructed_directly():
    with pytest.raises(TypeError, match="dlbridge.empty"):
        dlbridge.Tensor()


def test_tensor_type_is_immutable_final_and_untracked():
    t = dlbridge.from_buffer(bytearray(8))
    assert dlbridge.Tensor.__module__ == "dlbridge" and dlbridge.Tensor.__name__ == "Tensor"
    with pytest.raises(TypeError, match="immutable"):
        dlbridge.Tensor.shape = None
    with pytest.raises(TypeError, match="immutable"):
        del dlbridge.Tensor.__dlpack_c_exchange_api__
    with pytest.raises(TypeError):
        type("Sub", (dlbridge.Tensor,), {})
    with pytest.raises(AttributeError):
        t.anything = 1  # no instance dictionary
    assert not gc.is_tracked(t)  # no reference to anything that could lead back to it
    r = weakref.ref(t)
    assert r() is t
    del t
    assert r() is None


def test_tensor_properties_repr_and_len():
    t = dlbridge.from_dlpack(np.zeros((3, 4), dtype=np.float32)[:, ::2])
    assert (t.shape, t.strides, t.dtype, t.device) == ((3, 2), (4, 2), "float32", (1, 0))
    assert (t.ndim, t.size, len(t), t.nbytes, t.readonly) == (2, 6, 3, 24, False)
    assert repr(t) == "dlbridge.Tensor(shape=(3, 2), dtype=float32, device=(1, 0))"
    ro = dlbridge.from_buffer(b"abcd")
    assert repr(ro) == "dlbridge.Tensor(shape=(4,), dtype=uint8, device=(1, 0), readonly=True)"
    s = dlbridge.empty((), "int64")
    assert (s.ndim, s.size) == (0, 1)
    with pytest.raises(TypeError, match="0-d"):
        len(s)
    assert dlbridge.empty((0, 5), "int8").size == 0
    ro.delete()
    assert repr(ro).endswith("readonly=True, deleted=True)")
    gone = dlbridge.empty((2,), "int8")
    gone.delete()  # metadata read at the delete: the properties keep working
    assert gone.shape == (2,)
    c = copy.copy(t)  # a copy of the elements (Tensor.__reduce_ex__, protocol < 5)
    assert c.shape == t.shape and c.data_ptr != t.data_ptr


def test_import_failures_raise_error_with_the_status():
    cap = np.zeros(3).__dlpack__()
    t = dlbridge.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor"
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(cap)
    assert info.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    assert "already consumed" in str(info.value)
    del t


def test_register_checks_its_arguments():
    with pytest.raises(TypeError):
        _glue.register(dlbridge.Error, dlbridge.Error)
    with pytest.raises(TypeError, match="Exception subclass"):
        _glue.register(int)
    with pytest.raises(TypeError, match="Exception subclass"):
        _glue.register(dlbridge.Tensor)


class DeviceInfoStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("device_type", ctypes.c_int32),
                ("flags", ctypes.c_uint32), ("name", ctypes.c_char_p)]


def test_device_info_is_the_librarys_table():
    # Every device type 0..255 (and a few far ones): the package answers
    # exactly what dlb_device_type_info answers, asked here directly.
    f = clib().dlb_device_type_info
    f.restype = ctypes.c_int32
    f.argtypes = [ctypes.c_int32, ctypes.POINTER(DeviceInfoStruct)]
    known = 0
    for device_type in list(range(256)) + [-1, 2 ** 31 - 1, -2 ** 31]:
        info = DeviceInfoStruct(ctypes.sizeof(DeviceInfoStruct))
        status = f(device_type, ctypes.byref(info))
        if status != 0:
            with pytest.raises(dlbridge.Error) as caught:
                dlbridge.device_info(device_type)
            assert caught.value.status == status
            assert caught.value.status_name == "DLB_ERR_UNSUPPORTED_DEVICE"
            assert str(device_type) in str(caught.value)
            continue
        known += 1
        got = dlbridge.device_info(device_type)
        assert got == (device_type, info.name.decode(), bool(info.flags & 2), bool(info.flags & 4),
                       bool(info.flags & 8))
    assert known >= 18  # DLPack 1.3 defines 1..20 minus 5 and 6
    cpu = dlbridge.device_info(dlbridge.empty(1, "int8").device[0])
    assert (cpu.name, cpu.host_readable, cpu.address, cpu.has_streams) == ("cpu", True, True, False)
    with pytest.raises(dlbridge.Error):
        dlbridge.device_info(2 ** 40)


def test_from_dlpack_of_a_tensor_goes_through_its_exchange_table():
    """No numpy needed: runs on every interpreter of 41-python-versions."""
    t = dlbridge.from_buffer(bytearray(b"abcdefgh"))
    start = dlbridge.live_exports()
    for _ in range(3):  # the first exchange fills the cache, the others use it
        u = dlbridge.from_dlpack(t)
        assert u.data_ptr == t.data_ptr and u.shape == (8,) and u.dtype == "uint8"
        assert dlbridge.live_exports() == start + 1
        del u
    assert dlbridge.live_exports() == start


def test_import_dlbridge_loads_neither_the_checker_nor_ctypes():
    code = ("import sys, dlbridge\n"
            "assert 'dlbridge.check' not in sys.modules, 'checker'\n"
            "assert 'ctypes' not in sys.modules, 'ctypes'\n"
            "assert callable(dlbridge.check) and 'dlbridge.check' in sys.modules\n"
            "print('ok')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_exchange_table_is_on_the_class_without_a_write_into_its_dict():
    cap = dlbridge.Tensor.__dlpack_c_exchange_api__
    # the type's own dictionary holds at most the instances' getter
    assert dlbridge.Tensor.__dict__.get("__dlpack_c_exchange_api__") is not cap
    assert dlbridge.from_buffer(bytearray(4)).__dlpack_c_exchange_api__ is cap
    if sys.version_info >= (3, 12):
        # from the metaclass, immutable as well
        meta = type(dlbridge.Tensor)
        assert meta.__name__ == "TensorType" and issubclass(meta, type)
        with pytest.raises(TypeError, match="immutable"):
            meta.__dlpack_c_exchange_api__ = None
    else:
        # from a plain base class; with the table taken away from_dlpack still works
        # (through __dlpack__), and with it back again
        base = dlbridge.Tensor.__mro__[1]
        assert base.__dict__["__dlpack_c_exchange_api__"] is cap
        t = dlbridge.from_buffer(bytearray(4))
        try:
            base.__dlpack_c_exchange_api__ = None  # no table: __dlpack__ is used
            assert dlbridge.from_dlpack(t).data_ptr == t.data_ptr
        finally:
            base.__dlpack_c_exchange_api__ = cap
        assert dlbridge.from_dlpack(t).data_ptr == t.data_ptr
