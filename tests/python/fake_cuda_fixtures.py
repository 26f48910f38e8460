"""What the test modules over the fake CUDA driver share (test_cuda_fake.py,
test_cuda_share_fake.py): loading the driver, the driver fixture, and the
check that every producer deleter ran and no export is left.

load() takes the fake from DLB_TEST_FAKE_CUDA (scripts/test.d/40-python.sh
sets it) and loads it RTLD_GLOBAL; its SONAME is libcuda.so.1, so
dlbridge's own dlopen("libcuda.so.1"), made when it first needs a driver,
gets this object. A module calls it at import, before dlbridge needs a
driver; unset, the calling module is skipped (and says so).
"""

import ctypes
import gc
import os

import pytest

_loaded = []


def load():
    """The fake driver's path, loaded; skips the calling module when unset."""
    path = os.environ.get("DLB_TEST_FAKE_CUDA", "")
    if not path:
        pytest.skip("DLB_TEST_FAKE_CUDA (the fake CUDA driver, <build>/tests/cuda/libfake_cuda.so) is not set",
                    allow_module_level=True)
    if not os.path.isfile(path):
        raise RuntimeError("DLB_TEST_FAKE_CUDA=%s is not a file" % path)
    if not _loaded:
        _loaded.append(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
    return path


@pytest.fixture(scope="module")
def driver():
    import cuda_producer as cp

    return cp.FakeDriver(load())


@pytest.fixture(autouse=True)
def _balanced():
    import cuda_producer as cp
    import dlbridge

    exports = dlbridge.live_exports()
    alive = cp.alive()
    yield
    gc.collect()
    assert cp.alive() == alive, "a producer's deleter did not run"
    assert dlbridge.live_exports() == exports
