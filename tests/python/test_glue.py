"""The package's C side (the dlbridge._glue extension): a Tensor owns one
reference to its buffer, released by the object's deallocator; metadata is
read in C; the extension is built for the limited API and the C library has
no Python in it."""

import ctypes
import gc
import os
import subprocess
import sys

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
    assert issubclass(dlbridge.Tensor, _glue.TensorBase)


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


def test_tensor_base_is_not_constructed_directly():
    with pytest.raises(TypeError, match="dlbridge.empty"):
        _glue.TensorBase()
    with pytest.raises(TypeError, match="dlbridge.empty"):
        dlbridge.Tensor()


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
        _glue.register(int, dlbridge.Error)
    with pytest.raises(TypeError):
        _glue.register(dlbridge.Tensor)
