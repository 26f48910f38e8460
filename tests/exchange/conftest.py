"""Builds the test producer (xproducer) and the example consumer
(examples/exchange_consumer.c) with the running interpreter, and checks
after every test that the producer's exports were all released."""

import atexit
import ctypes
import gc
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_ext  # noqa: E402

_outdir = os.environ.get("DLB_EXCHANGE_EXT_DIR")
if not _outdir:
    _outdir = tempfile.mkdtemp(prefix="dlbridge-exchange-")
    atexit.register(shutil.rmtree, _outdir, True)
build_ext.build_all(_outdir, ["xproducer", "exchange_consumer"])

import xproducer  # noqa: E402


def _library_path():
    """DLBRIDGE_LIBRARY, else the library the dlbridge package loaded, else
    build/test's."""
    path = os.environ.get("DLBRIDGE_LIBRARY")
    if path:
        return path
    try:
        import dlbridge._lib

        return dlbridge._lib.path
    except ImportError:
        return os.path.join(build_ext.ROOT, "build", "test", "src", "libdlbridge.so")


@pytest.fixture(scope="session")
def libdlbridge():
    """libdlbridge.so through ctypes (see _library_path)."""
    path = _library_path()
    if not os.path.exists(path):
        pytest.fail("libdlbridge.so not found at %s (set DLBRIDGE_LIBRARY)" % path)
    lib = ctypes.CDLL(path)
    lib.dlb_live_exports.restype = ctypes.c_int64
    return lib


@pytest.fixture(autouse=True)
def producer_released():
    """Every export of the test producer released, the class restored."""
    xproducer.reset()
    saved = {name: xproducer.XTensor.__dict__.get(name)
             for name in ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__")}
    yield
    for name, value in saved.items():
        if value is None:
            if name in xproducer.XTensor.__dict__:
                delattr(xproducer.XTensor, name)
        else:
            setattr(xproducer.XTensor, name, value)
    gc.collect()
    counts = xproducer.counts()
    assert counts["deleters"] == counts["exports"], counts
