"""from_dlpack through another producer's exchange table for CUDA memory,
against the fake CUDA driver (see test_cuda_fake.py, which loads it the
same way): the table's current_work_stream is asked for the stream the
buffer then carries; when it fails, the table's tensor is freed and a
BufferError says so."""

import fake_cuda_fixtures
from fake_cuda_fixtures import _balanced, driver  # noqa: F401 (fixtures of this module)

fake_cuda_fixtures.load()

import ctypes as ct  # noqa: E402

import pytest  # noqa: E402

import dlbridge  # noqa: E402
from ext_tables import KDLCUDA, HandMade, producer_type  # noqa: E402


@pytest.fixture
def device_memory(driver):
    """A HandMade tensor over 16 bytes of the fake driver's device memory."""
    ptr = driver.alloc(16)
    made = HandMade((0.0, 0.0), device=(KDLCUDA, 0))
    made.managed.dl_tensor.data = ptr
    yield made
    driver.free(ptr)


def test_the_tables_current_stream_is_the_buffers(driver, device_memory):
    stream = driver.stream_create()
    asked = []

    def current(device_type, device_id, out):
        asked.append((device_type, device_id))
        out[0] = stream
        return 0

    try:
        t = dlbridge.from_dlpack(producer_type(lambda obj: device_memory, current)())
        assert asked == [(KDLCUDA, 0)]
        assert t.device == (KDLCUDA, 0) and t.stream == stream
        del t
        assert device_memory.freed == 1
    finally:
        driver.stream_destroy(stream)


def test_a_failing_current_work_stream_frees_the_tensor(driver, device_memory):
    """(A ctypes callback cannot leave an exception set, so the table here
    fails without one.)"""
    asked = []

    def fails(device_type, device_id, out):
        asked.append((device_type, device_id))
        return -1

    with pytest.raises(BufferError, match="current_work_stream failed without an exception"):
        dlbridge.from_dlpack(producer_type(lambda obj: device_memory, fails)())
    assert asked == [(KDLCUDA, 0)] and device_memory.freed == 1


def test_host_memory_is_not_asked_for_a_stream():
    asked = []

    def current(device_type, device_id, out):
        asked.append(device_type)
        return -1

    made = HandMade((4.0,))
    t = dlbridge.from_dlpack(producer_type(lambda obj: made, current)())
    assert asked == [] and t.stream is None and t.data_ptr == ct.addressof(made.memory)
