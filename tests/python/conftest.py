"""Shared fixtures: every test must leave no managed tensor alive."""

import gc

import pytest

import dlbridge

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the stdlib-only runs on other interpreters
    pass
else:
    _slow = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
    # "ci": what scripts/test runs, the same examples every time (derandomize)
    # and no example database left behind. "long": random, many more; run it
    # with `pytest --hypothesis-profile=long tests/python/test_properties.py`.
    settings.register_profile("ci", max_examples=40, derandomize=True, deadline=None,
                              database=None, suppress_health_check=_slow)
    settings.register_profile("long", max_examples=5000, deadline=None,
                              suppress_health_check=_slow)
    settings.load_profile("ci")


def _uses(code, name):
    """Whether a function's code (or a function nested in it) reads `name`."""
    if name in code.co_names:
        return True
    return any(_uses(c, name) for c in code.co_consts if hasattr(c, "co_names"))


def _third_party_at_top(path, names=("numpy", "torch")):
    """Whether a test module imports numpy or torch at its top level."""
    import re

    with open(path) as f:
        text = f.read()
    pattern = r"^(import|from) (%s)\b" % "|".join(names)
    return re.search(pattern, text, re.M) is not None


def _missing(name):
    try:
        __import__(name)
    except ImportError:
        return True
    return False


# Without numpy or torch (the runs on other interpreters), a test module
# that imports one of them at its top is not collected at all.
collect_ignore = []
if _missing("numpy") or _missing("torch"):
    import glob
    import os

    _absent = tuple(n for n in ("numpy", "torch") if _missing(n))
    for _path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "test_*.py"))):
        if _third_party_at_top(_path, _absent):
            collect_ignore.append(os.path.basename(_path))


def pytest_collection_modifyitems(config, items):
    """Without numpy (the runs on other interpreters), tests that use the
    module-level name `np` are skipped rather than failed."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        skip = pytest.mark.skip(reason="needs numpy")
        for item in items:
            function = getattr(item, "function", None)
            if function is not None and _uses(function.__code__, "np"):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_leaked_exports():
    # What is alive before the test is frozen (gc.freeze): the collections
    # around each test then examine only what came since, instead of every
    # object of the frameworks loaded (a fifth of a second each with torch,
    # JAX and TensorFlow imported, most of the suite's time).
    gc.collect()
    gc.freeze()
    start = dlbridge.live_exports()
    yield
    gc.collect()
    assert dlbridge.live_exports() == start, "exports leaked by the test"


def capsule_name(capsule):
    """The name of a PyCapsule, read through the C API."""
    import ctypes

    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(capsule).decode("ascii")


def negative_strides_work():
    """Whether the library accepts negative strides (a layout-check bug in
    some builds computes the byte extent of such views as an overflow)."""
    import numpy as np

    try:
        dlbridge.from_dlpack(np.arange(3.0)[::-1])
    except dlbridge.Error as e:
        if e.status_name == "DLB_ERR_OVERFLOW":
            return False
        raise
    return True


def require_negative_strides():
    import pytest

    if not negative_strides_work():
        pytest.xfail("libdlbridge refuses negative strides with DLB_ERR_OVERFLOW (layout check bug)")


_clib = None


def clib():
    """libdlbridge through ctypes (the file the package loaded, so the same
    library in the process), for tests that reach a buffer's C handle."""
    global _clib
    if _clib is None:
        import ctypes

        from dlbridge import _lib

        lib = ctypes.CDLL(_lib.path)
        vp = ctypes.c_void_p
        for name, restype, argtypes in [
            ("dlb_buffer_retain", vp, [vp]),
            ("dlb_buffer_release", None, [vp]),
            ("dlb_buffer_refcount", ctypes.c_int64, [vp]),
            ("dlb_buffer_flags", ctypes.c_uint64, [vp]),
            ("dlb_buffer_dltensor", ctypes.c_int32, [vp, ctypes.POINTER(_lib.DLTensor)]),
        ]:
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = argtypes
        _clib = lib
    return _clib
