"""dlbridge.from_dlpack with CUDA producers, against the fake CUDA driver.

The fake driver (tests/cuda/fake_cuda.cpp, built by meson as
<build>/tests/cuda/libfake_cuda.so) keeps "device" memory in host memory and
runs every stream on a worker thread, so a write still pending on the
producer's stream is invisible to a reader that was not ordered after it.
DLB_TEST_FAKE_CUDA names the library (scripts/test.d/40-python.sh sets it).
Its SONAME is libcuda.so.1: this module loads it before dlbridge first needs
a driver (no test before this module's collection does), and the dynamic
loader then hands dlbridge's own dlopen("libcuda.so.1") that object. The
library itself reads no environment variable for it.

The producers (tests/python/cuda_producer.py) are ctypes code over the same
driver: device memory from cuMemAlloc_v2, a stream of their own, capsules
with counted deleters.
"""

import gc
import os
import subprocess
import sys
import textwrap

import pytest

import fake_cuda_fixtures  # noqa: E402
from fake_cuda_fixtures import _balanced, driver  # noqa: E402,F401 (fixtures of this module)

FAKE = fake_cuda_fixtures.load()
# The same fake under another SONAME, which dlbridge never finds: a
# producer's driver in a process where dlbridge has none.
FAKE_PRIVATE = os.path.join(os.path.dirname(FAKE), "libfake_cuda_private.so")

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402
import cuda_producer as cp  # noqa: E402

A = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
B = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]


@pytest.fixture
def consumer_stream(driver):
    s = driver.stream_create()
    yield s
    driver.stream_destroy(s)


def host_values(t):
    """The values of a dlbridge tensor of CUDA memory, copied to the host by
    dlbridge (device -> host through the fake driver)."""
    h = dlbridge.from_dlpack(t, device=(1, 0))
    assert h.device == (1, 0)
    assert h.data_ptr != t.data_ptr
    return np.from_dlpack(h).tolist()


def stream_value(name, consumer_stream):
    return {"legacy": 1, "per-thread": 2, "handle": consumer_stream}[name]


@pytest.mark.parametrize("producer_type", [cp.VersionedProducer, cp.LegacyProducer])
@pytest.mark.parametrize("which", ["legacy", "per-thread", "handle"])
def test_stream_orders_the_pending_write(driver, consumer_stream, producer_type, which):
    """A write pending on the producer's stream (after a 200 ms pause) is in
    what dlbridge copies to the host: the producer made the consumer's
    stream wait for it, and dlbridge's buffer carries that stream."""
    stream = stream_value(which, consumer_stream)
    p = producer_type(driver, A)
    try:
        p.write(B, delay_us=200_000)
        t = dlbridge.from_dlpack(p, stream=stream)
        assert p.calls == [stream]
        assert t.device == (2, 0)
        assert t.data_ptr == p.ptr  # zero-copy
        assert t.stream == stream
        assert p.deleted == 0
        assert host_values(t) == B
        del t
        gc.collect()
        assert p.deleted == p.exported == 1
    finally:
        p.close()


@pytest.mark.parametrize("producer_type", [cp.VersionedProducer, cp.LegacyProducer])
def test_no_stream_means_the_legacy_default_stream(driver, producer_type):
    """Without stream=, the producer is asked with stream=None, which the
    protocol makes mean the legacy default stream: dlbridge records 1.
    (A legacy producer's type is known by now: from_dlpack's hot path.)"""
    p = producer_type(driver, A)
    try:
        p.write(B, delay_us=200_000)
        t = dlbridge.from_dlpack(p)
        assert p.calls == [None]
        assert dlbridge._glue.is_legacy_producer(producer_type) == (producer_type is cp.LegacyProducer)
        t2 = dlbridge.from_dlpack(p)  # the type is known now
        assert p.calls == [None, None] and t2.stream == 1 and t2.data_ptr == p.ptr
        del t2
        assert t.stream == 1 and t.data_ptr == p.ptr
        assert host_values(t) == B
        del t
    finally:
        p.close()


def test_stream_minus_one_is_not_synchronised(driver):
    """-1: the producer does nothing and dlbridge records no pending work,
    so a copy reads what is there now; the gate shows the test can see a
    missing ordering (a write held back is not in the copy)."""
    gate = cp.Gate()
    p = cp.VersionedProducer(driver, A)
    try:
        gate.close_on(driver, p.stream)
        p.write(B, delay_us=0)
        t = dlbridge.from_dlpack(p, stream=-1)
        assert p.calls == [-1] and t.stream == -1 and t.data_ptr == p.ptr
        assert host_values(t) == A  # the held-back write is not there
        gate.open()
        driver.synchronize(p.stream)
        assert host_values(t) == B
        del t
    finally:
        gate.open()
        p.close()


def test_set_stream_records_the_last_writer(driver, consumer_stream):
    """After a write enqueued on another stream, set_stream() makes the
    copy wait for it."""
    gate = cp.Gate()
    p = cp.VersionedProducer(driver, A)
    try:
        t = dlbridge.from_dlpack(p, stream=consumer_stream)
        gate.close_on(driver, p.stream)
        p.write(B, delay_us=0)
        assert host_values(t) == A  # t's stream knows nothing of the write yet
        gate.open()
        p2 = cp.VersionedProducer(driver, A)  # a slow write, then set_stream
        p2.write(B, delay_us=200_000)
        t2 = dlbridge.from_dlpack(p2, stream=-1)
        t2.set_stream(p2.stream)
        assert t2.stream == p2.stream
        assert host_values(t2) == B
        with pytest.raises(dlbridge.Error) as e:
            t2.set_stream(-2)
        assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
        with pytest.raises(TypeError):
            t2.set_stream(None)
        del t, t2
        gc.collect()
        p2.close()
    finally:
        gate.open()
        p.close()


def test_host_tensors_have_no_stream():
    t = dlbridge.empty((2,), "float32")
    assert t.stream is None
    with pytest.raises(dlbridge.Error) as e:
        t.set_stream(1)
    assert e.value.status_name == "DLB_ERR_INVALID_ARGUMENT"


def test_refused_streams_never_reach_the_producer(driver):
    p = cp.VersionedProducer(driver, A)
    try:
        for bad in (0, -2):
            with pytest.raises(ValueError, match="stream %d" % bad):
                dlbridge.from_dlpack(p, stream=bad)
        with pytest.raises(TypeError):
            dlbridge.from_dlpack(p, stream=1.5)
        # A stream with a CPU destination: the standard allows only None.
        with pytest.raises(ValueError, match="requested device"):
            dlbridge.from_dlpack(p, stream=1, device=(1, 0))
        assert p.calls == [] and p.exported == 0
    finally:
        p.close()


def test_stream_for_host_memory_is_refused():
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(ValueError, match="has no streams"):
        dlbridge.from_dlpack(a, stream=1)
    with pytest.raises(ValueError, match="has no streams"):
        dlbridge.from_dlpack(dlbridge.from_buffer(bytearray(8)), stream=-1)
    assert np.from_dlpack(dlbridge.from_dlpack(a)).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_export_of_cuda_memory_follows_the_stream_rules(driver, consumer_stream):
    p = cp.VersionedProducer(driver, A)
    try:
        t = dlbridge.from_dlpack(p, stream=consumer_stream)
        with pytest.raises(ValueError, match="DLB_ERR_INVALID_ARGUMENT"):
            t.__dlpack__(stream=0)
        # Re-exported zero-copy to another consumer stream, and taken in again.
        again = dlbridge.from_dlpack(t, stream=2)
        assert again.data_ptr == p.ptr and again.stream == 2
        assert host_values(again) == A
        # Through the exchange table (no stream asked): still CUDA memory.
        table = dlbridge.from_dlpack(t)
        assert table.data_ptr == p.ptr and table.device == (2, 0)
        assert table.stream == 1  # dlbridge's table names no current stream
        assert host_values(table) == A
        assert p.exported == 1
        del t, again, table
        gc.collect()
        assert p.deleted == 1
    finally:
        p.close()


def test_memory_the_driver_does_not_know_comes_in_plain(driver):
    """A capsule saying kDLCUDA over memory the driver does not know: the
    CUDA backend does not take it, so it comes in as plain memory, as
    without a driver: zero-copy, no stream, deleted once."""
    host = (cp.ctypes.c_float * 6)()
    p = cp.VersionedProducer(driver, A, data=cp.ctypes.addressof(host))
    try:
        t = dlbridge.from_dlpack(p, stream=1)
        assert p.calls == [1]
        assert t.device == (2, 0) and t.data_ptr == cp.ctypes.addressof(host)
        assert t.stream is None
        with pytest.raises(dlbridge.Error):
            t.set_stream(1)
        del t
        gc.collect()
        assert p.exported == 1 and p.deleted == 1
    finally:
        p.close()


def test_capsule_is_renamed_only_on_success(driver):
    p = cp.VersionedProducer(driver, A)
    try:
        capsule = p.capsule(versioned=True)
        t = dlbridge.from_dlpack(capsule)
        assert cp._api.PyCapsule_GetName(capsule) == b"used_dltensor_versioned"
        assert t.stream == 1 and t.data_ptr == p.ptr
        # (kept in a variable: CPython would drop a temporary with the
        # exception pending, which a ctypes destructor cannot run under)
        unused = p.capsule(versioned=True)
        with pytest.raises(ValueError, match="capsule"):
            dlbridge.from_dlpack(unused, stream=1)
        assert cp._api.PyCapsule_GetName(unused) == b"dltensor_versioned"
        del t, capsule, unused
        gc.collect()
        assert p.deleted == p.exported == 2
    finally:
        p.close()


NO_DRIVER = textwrap.dedent("""
    import gc, sys
    sys.path.insert(0, sys.argv[1])
    import dlbridge, cuda_producer as cp
    driver = cp.FakeDriver(sys.argv[2])  # the producer's own driver
    for kind in (cp.VersionedProducer, cp.LegacyProducer):
        p = kind(driver, [1.0, 2.0])
        for stream in (None, 1, 2, -1):
            t = dlbridge.from_dlpack(p, stream=stream)
            assert t.device == (2, 0) and t.data_ptr == p.ptr, (t.device, t.data_ptr)
            assert t.stream is None  # plain memory: dlbridge has no driver
            try:
                dlbridge.from_dlpack(t, device=(1, 0))
            except BufferError as e:
                assert "DLB_ERR_UNSUPPORTED_DEVICE" in str(e), e
            else:
                raise AssertionError("a host copy without a driver")
            del t
            gc.collect()
        assert p.deleted == p.exported == 4, (p.deleted, p.exported)
        p.close()
    assert dlbridge.live_exports() == 0 and cp.alive() == 0
    print("no-driver ok")
""")


def test_without_a_driver_cuda_memory_comes_in_plain():
    if not os.path.isfile(FAKE_PRIVATE):
        pytest.skip("%s is missing (build the tests)" % FAKE_PRIVATE)
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", NO_DRIVER, here, FAKE_PRIVATE],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "no-driver ok"
