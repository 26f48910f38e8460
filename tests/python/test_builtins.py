"""The builtins made from dlb_py_method_table(), and the ctypes fallback.

With the table, a Tensor owns its handle through an owner capsule whose C
destructor releases it; without it (DLBRIDGE_NO_BUILTINS=1, or a library
without the table), through __del__ and ctypes. Both must behave the same.
"""

import ctypes
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import dlbridge
from dlbridge import _lib

from conftest import capsule_name

HERE = os.path.dirname(os.path.abspath(__file__))

fast_only = pytest.mark.skipif(not dlbridge._FAST, reason="builtins not in use")


def refcount(t_or_handle):
    h = t_or_handle._h if isinstance(t_or_handle, dlbridge.Tensor) else t_or_handle
    return _lib.pydll.dlb_buffer_refcount(h)


def test_the_library_has_a_method_table():
    table = _lib.pydll.dlb_py_method_table
    table.restype = ctypes.c_void_p
    table.argtypes = []
    assert table()
    if not os.environ.get("DLBRIDGE_NO_BUILTINS"):
        assert dlbridge._FAST
        assert set(_lib.builtins) == _lib.BUILTIN_NAMES
        assert type(_lib.builtins["export"]).__name__ == "builtin_function_or_method"


def test_dropping_a_tensor_releases_its_handle():
    t = dlbridge.empty((3,), "int32")
    handle = _lib.cdll.dlb_buffer_retain(t._h)
    assert refcount(handle) == 2
    del t
    assert refcount(handle) == 1  # released at once, no gc needed
    _lib.cdll.dlb_buffer_release(handle)


def test_dropping_an_imported_tensor_runs_the_producers_deleter_once():
    a = np.arange(6, dtype=np.int16)
    base = sys.getrefcount(a)
    t = dlbridge.from_dlpack(a)
    assert sys.getrefcount(a) == base + 1  # numpy's export holds the array
    assert t.data_ptr == a.ctypes.data
    del t
    assert sys.getrefcount(a) == base


def test_tensor_has_no_finalizer_with_builtins():
    # Owners release in C: no Python code runs when a tensor dies.
    assert hasattr(dlbridge.Tensor, "__del__") != dlbridge._FAST


@fast_only
def test_metadata_matches_the_ctypes_reading():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]
    t = dlbridge.from_dlpack(a)
    meta = _lib.builtins["meta"](t._o)
    view = _lib.DLTensor()
    assert _lib.pydll.dlb_buffer_dltensor(t._h, ctypes.byref(view)) == 0
    assert meta[0] == tuple(view.shape[:2]) == (2, 3)
    assert meta[1] == tuple(view.strides[:2]) == (12, 2)
    assert meta[2] == "float32"
    assert meta[3] == (1, 0)
    assert meta[4] == a.ctypes.data
    assert meta[5] is False
    assert meta[6] == 6 * 4
    ro = dlbridge.from_buffer(b"abcd")
    assert _lib.builtins["meta"](ro._o)[5] is True


@fast_only
def test_builtins_refuse_what_is_not_an_owner():
    export = _lib.builtins["export"]
    with pytest.raises(TypeError, match="buffer owner"):
        export(12345)
    with pytest.raises(TypeError, match="buffer owner"):
        export(np.zeros(2).__dlpack__())  # a DLPack capsule is not an owner
    with pytest.raises(TypeError, match="1 or 8"):
        export(dlbridge.empty(1, "int8")._o, 1)
    with pytest.raises(TypeError):
        _lib.builtins["meta"](None)
    with pytest.raises(TypeError):
        _lib.builtins["handle"]("x")


@fast_only
def test_import_failures_raise_error_with_the_status():
    cap = np.zeros(3).__dlpack__()
    t = dlbridge.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor"
    with pytest.raises(dlbridge.Error) as info:
        _lib.builtins["import_capsule"](cap)
    assert info.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    assert "already consumed" in str(info.value)
    with pytest.raises(dlbridge.Error) as info:
        _lib.builtins["import_capsule"](object())
    assert info.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    del t


@fast_only
def test_export_with_options_through_the_builtin():
    t = dlbridge.empty((2, 2), "float64")
    export = _lib.builtins["export"]
    cap = export(t._o, 1, _lib.DLB_COPY_IF_NEEDED, 0, 0, 0, None, 0)
    assert capsule_name(cap) == "dltensor_versioned"
    assert dlbridge.live_exports() >= 1
    del cap
    with pytest.raises(BufferError):
        export(t._o, 1, _lib.DLB_COPY_NEVER, 1, 2, 0, None, 0)  # CPU memory to CUDA, no copy
    with pytest.raises(TypeError):
        export(t._o, 1, "x", 0, 0, 0, None, 0)


def test_the_ctypes_fallback_passes_the_exchange_tests():
    # The same tests again, in a process where the package ignores the table.
    env = dict(os.environ)
    env["DLBRIDGE_NO_BUILTINS"] = "1"
    env["DLBRIDGE_LIBRARY"] = os.path.abspath(_lib.path)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(dlbridge.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in
                                        env.get("PYTHONPATH", "").split(os.pathsep) if p])
    files = [os.path.join(HERE, name) for name in
             ("test_builtins.py", "test_protocol.py", "test_numpy.py", "test_buffer.py")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "-k", "not ctypes_fallback", *files],
        env=env, capture_output=True, text=True, timeout=300, cwd=HERE)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    probe = subprocess.run([sys.executable, "-c", "import dlbridge; print(dlbridge._FAST)"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "False", probe.stderr
