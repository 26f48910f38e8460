"""The DLPack C exchange API between C extensions: the example consumer
(examples/exchange_consumer.c) against the independent test producer
(xproducer), the producer's table driven directly, and dlbridge's
allocator (dlb_managed_tensor_alloc) feeding the producer's
to-py-object."""

import ctypes as ct
import gc

import pytest

import exchange_consumer
import xproducer
import xtable
from xproducer import XTensor


def counts():
    return xproducer.counts()


def test_example_takes_the_tensor_through_the_table_zero_copy():
    x = XTensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3))
    info = exchange_consumer.take(x)
    assert info["version"] == (1, 3)
    assert info["shape"] == (2, 3)
    assert info["strides"] == (3, 1)
    assert info["dtype"] == (2, 64, 1)
    assert info["data"] == x.data_ptr  # zero-copy
    assert info["readonly"] is False
    assert info["sum"] == 21.0
    c = counts()
    assert c["from_py"] == 1
    assert c["dlpack"] == 0  # __dlpack__ never called
    assert c["exports"] == 1 and c["deleters"] == 1  # the example ran the deleter


def test_example_keeps_strides_offsets_and_read_only():
    # A transposed 3x2 view of a 2x3 block, starting at element 1.
    values = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    x = XTensor(values, (3, 2), strides=(1, 3), offset=1, readonly=True)
    info = exchange_consumer.take(x)
    assert info["shape"] == (3, 2)
    assert info["strides"] == (1, 3)
    assert info["data"] == x.data_ptr
    assert info["readonly"] is True
    assert info["sum"] == sum(x.tolist()) == 1.0 + 2 + 3 + 4 + 5 + 6
    assert counts()["dlpack"] == 0


def test_example_reads_what_the_producer_wrote_after_the_call():
    x = XTensor([0.0] * 4, (4,))
    x.set(2, 7.5)
    assert exchange_consumer.take(x)["sum"] == 7.5


def test_example_falls_back_to_the_earlier_attribute_name():
    cap = XTensor.__dlpack_c_exchange_api__
    del XTensor.__dlpack_c_exchange_api__
    XTensor.__c_dlpack_exchange_api__ = cap
    x = XTensor([1.0, 2.0], (2,))
    assert exchange_consumer.take(x)["sum"] == 3.0
    assert counts()["from_py"] == 1


def test_example_walks_prev_api_past_a_major_it_does_not_speak():
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule("major2_prev")
    x = XTensor([1.0, 2.0], (2,))
    assert exchange_consumer.take(x)["sum"] == 3.0
    c = counts()
    assert c["major2"] == 0 and c["from_py"] == 1


def test_example_refuses_a_table_of_another_major_only():
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule("major2")
    with pytest.raises(TypeError, match="no DLPack 1.x exchange table"):
        exchange_consumer.take(XTensor([1.0], (1,)))
    assert counts()["major2"] == 0


def test_example_checks_the_capsule_name():
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule("bad_name")
    with pytest.raises(ValueError):
        exchange_consumer.take(XTensor([1.0], (1,)))
    assert counts()["from_py"] == 0


def test_example_refuses_a_table_without_from_py_object():
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule("null_from_py")
    with pytest.raises(TypeError, match="managed_tensor_from_py_object_no_sync"):
        exchange_consumer.take(XTensor([1.0], (1,)))


def test_example_raises_the_producers_exception():
    xproducer.set_failing(True)
    with pytest.raises(RuntimeError, match="failure requested"):
        exchange_consumer.take(XTensor([1.0], (1,)))
    c = counts()
    assert c["from_py"] == 1 and c["exports"] == 0


def test_example_refuses_a_type_without_a_table():
    with pytest.raises(TypeError, match="publishes no DLPack exchange table"):
        exchange_consumer.take(bytearray(8))


def test_producer_protocol_path_is_counted_separately():
    np = pytest.importorskip("numpy")
    x = XTensor([1.0, 2.0, 3.0], (3,))
    a = np.from_dlpack(x)
    assert a.__array_interface__["data"][0] == x.data_ptr
    assert a.tolist() == [1.0, 2.0, 3.0]
    c = counts()
    assert c["dlpack"] == 1 and c["from_py"] == 0
    del a
    gc.collect()


def test_producer_table_functions_directly():
    api = xtable.table(XTensor)
    assert api.header.version.major == 1 and api.header.version.minor == 3
    assert not api.header.prev_api
    x = XTensor([1.0, 2.0, 3.0, 4.0], (2, 2), strides=(1, 2))
    # Borrowed view: no export made.
    view = xtable.DLTensor()
    assert api.dltensor_from_py_object_no_sync(x, ct.byref(view)) == 0
    assert view.data == x.data_ptr
    assert xtable.shape_of(view) == (2, 2) and xtable.strides_of(view) == (1, 2)
    assert counts()["exports"] == 0
    # Stream of a CPU device: NULL.
    stream = ct.c_void_p(1)
    assert api.current_work_stream(1, 0, ct.byref(stream)) == 0
    assert stream.value is None
    # from-py-object, then to-py-object over the same memory.
    mt = xtable.from_py(api, x)
    y = xtable.to_py(api, mt)
    assert isinstance(y, XTensor)
    assert y.data_ptr == x.data_ptr and y.strides == (1, 2) and y.tolist() == x.tolist()
    assert counts()["deleters"] == 0
    del y
    gc.collect()
    assert counts()["deleters"] == 1


def test_dlbridge_allocator_feeds_the_producers_to_py_object(libdlbridge):
    """A tensor allocated by dlb_managed_tensor_alloc, wrapped into an
    XTensor by the producer's own to-py-object: the producer writes, the
    values stay, and dropping the XTensor runs dlbridge's deleter once."""
    start = libdlbridge.dlb_live_exports()
    alloc = xtable.ALLOCATOR(("dlb_managed_tensor_alloc", libdlbridge))
    rc, mt, errors = xtable.allocate(_AllocOnly(alloc), (2, 3))
    assert rc == 0 and errors.calls == []
    assert libdlbridge.dlb_live_exports() == start + 1
    t = mt.contents
    assert (t.version.major, t.version.minor) == (1, 3)
    assert xtable.shape_of(t.dl_tensor) == (2, 3) and xtable.strides_of(t.dl_tensor) == (3, 1)
    data = t.dl_tensor.data
    y = xtable.to_py(xtable.table(XTensor), mt)
    assert y.data_ptr == data and y.tolist() == [0.0] * 6  # zero-filled
    y.set(4, 2.5)
    assert ct.cast(data, ct.POINTER(ct.c_double))[4] == 2.5
    del y
    gc.collect()
    assert counts()["foreign_freed"] == 1
    assert libdlbridge.dlb_live_exports() == start


@pytest.mark.parametrize(
    "shape, dtype, device, kind, message",
    [
        ((2, -3), (2, 64, 1), (1, 0), "ValueError", "prototype shape[1] is -3 (extents must be >= 0)"),
        ((4,), (99, 32, 1), (1, 0), "TypeError", "99"),
        ((4,), (2, 32, 1), (2, 0), "ValueError", "prototype device is cuda:0"),
        ((1 << 40, 1 << 40), (2, 32, 1), (1, 0), "ValueError", "overflows 64 bits"),
    ],
)
def test_dlbridge_allocator_errors_through_set_error(libdlbridge, shape, dtype, device, kind, message):
    start = libdlbridge.dlb_live_exports()
    alloc = xtable.ALLOCATOR(("dlb_managed_tensor_alloc", libdlbridge))
    rc, mt, errors = xtable.allocate(_AllocOnly(alloc), shape, dtype, device)
    assert rc == -1 and mt is None
    assert len(errors.calls) == 1
    assert errors.calls[0][0] == kind
    assert message in errors.calls[0][1]
    assert libdlbridge.dlb_live_exports() == start


class _AllocOnly:
    """Stands in for a table with just an allocator."""

    def __init__(self, fn):
        self.managed_tensor_allocator = fn
