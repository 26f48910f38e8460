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


def test_a_table_without_current_work_stream_leaves_the_default_stream(device_memory):
    t = dlbridge.from_dlpack(producer_type(lambda obj: device_memory, stream=False)())
    assert t.device == (KDLCUDA, 0) and t.stream == 1  # the legacy default stream
    del t
    assert device_memory.freed == 1


_get_pointer = ct.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ct.c_void_p
_get_pointer.argtypes = [ct.py_object, ct.c_char_p]
VIEW = ct.PYFUNCTYPE(ct.c_int, ct.py_object, ct.c_void_p)


def test_dlbridges_table_lends_no_view_of_backend_memory(device_memory):
    """dltensor_from_py_object_no_sync of a tensor held by the CUDA backend:
    refused (a DLTensor view would name no host address to read)."""
    t = dlbridge.from_dlpack(producer_type(lambda obj: device_memory)())
    table = _get_pointer(dlbridge.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    view = VIEW((ct.c_void_p * 7).from_address(table)[5])
    out = (ct.c_byte * 48)()
    with pytest.raises(BufferError, match="^DLB_ERR_NOT_ZERO_COPY: the tensor lives on a backend without a view to lend"):
        view(t, ct.addressof(out))
    del t
    assert device_memory.freed == 1
