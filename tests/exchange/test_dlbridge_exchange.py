"""dlbridge on both sides of the DLPack 1.3 C exchange API: its table on
dlbridge.Tensor (driven directly, and by the example consumer), and
dlbridge.from_dlpack taking tensors through the independent test
producer's table without calling its __dlpack__."""

import ctypes as ct
import gc

import numpy as np
import pytest

import dlbridge  # the package under test (scripts/test.d/45-exchange.sh sets the path)
import exchange_consumer
import xproducer
import xtable
from xproducer import XTensor


@pytest.fixture(autouse=True)
def dlbridge_released():
    gc.collect()
    start = dlbridge.live_exports()
    yield
    gc.collect()
    assert dlbridge.live_exports() == start, "dlbridge exports leaked"


def counts():
    return xproducer.counts()


def values_of(t):
    """The elements of a float64 dlbridge.Tensor in row-major order, read
    through numpy (legacy protocol)."""
    return np.from_dlpack(t).ravel().tolist()


# -- consumer: dlbridge.from_dlpack through another producer's table ---------


def test_from_dlpack_uses_the_table_not_dunder_dlpack():
    x = XTensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3))
    t = dlbridge.from_dlpack(x)
    assert isinstance(t, dlbridge.Tensor)
    assert t.data_ptr == x.data_ptr  # zero-copy
    assert t.shape == (2, 3) and t.strides == (3, 1) and t.dtype == "float64"
    assert values_of(t) == x.tolist()
    c = counts()
    assert c["dlpack"] == 0 and c["from_py"] == 1 and c["exports"] == 1
    x.set(0, -1.0)  # the producer's memory, seen through dlbridge
    assert values_of(t)[0] == -1.0
    del t
    gc.collect()
    assert counts()["deleters"] == 1


def test_from_dlpack_keeps_strides_offset_and_read_only():
    x = XTensor([float(i) for i in range(7)], (3, 2), strides=(1, 3), offset=1, readonly=True)
    t = dlbridge.from_dlpack(x)
    assert t.strides == (1, 3) and t.shape == (3, 2)
    assert t.data_ptr == x.data_ptr
    assert t.readonly is True
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False)  # the legacy struct cannot carry READ_ONLY
    c = dlbridge.from_dlpack(t.__dlpack__())  # ...so without copy=False it is a copy
    assert c.copied and c.data_ptr != x.data_ptr
    del c
    assert counts()["dlpack"] == 0


def test_from_dlpack_honours_copy_and_device_on_the_result():
    x = XTensor([1.0, 2.0, 3.0], (3,))
    c = dlbridge.from_dlpack(x, copy=True)
    assert c.data_ptr != x.data_ptr and values_of(c) == [1.0, 2.0, 3.0]
    same = dlbridge.from_dlpack(x, device=(1, 0), copy=False)
    assert same.data_ptr == x.data_ptr
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(x, device=(2, 0))
    assert counts()["dlpack"] == 0
    del c, same
    gc.collect()
    counts_now = counts()
    assert counts_now["deleters"] == counts_now["exports"] == 3


def test_a_changed_type_attribute_is_read_again():
    x = XTensor([1.0, 2.0], (2,))
    dlbridge.from_dlpack(x)
    assert counts()["from_py"] == 1
    # A capsule of another name: not a table; __dlpack__ instead.
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule("bad_name")
    t = dlbridge.from_dlpack(x)
    assert values_of(t) == [1.0, 2.0]
    assert counts()["from_py"] == 1 and counts()["dlpack"] == 1
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule("ok")
    dlbridge.from_dlpack(x)
    assert counts()["from_py"] == 2 and counts()["dlpack"] == 1


def test_the_earlier_attribute_name_is_a_fallback():
    cap = XTensor.__dlpack_c_exchange_api__
    del XTensor.__dlpack_c_exchange_api__
    XTensor.__c_dlpack_exchange_api__ = cap
    x = XTensor([3.0], (1,))
    assert dlbridge.from_dlpack(x).data_ptr == x.data_ptr
    assert counts()["from_py"] == 1 and counts()["dlpack"] == 0


def test_prev_api_leads_past_a_major_dlbridge_does_not_speak():
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule("major2_prev")
    x = XTensor([3.0], (1,))
    assert dlbridge.from_dlpack(x).data_ptr == x.data_ptr
    c = counts()
    assert c["major2"] == 0 and c["from_py"] == 1 and c["dlpack"] == 0


@pytest.mark.parametrize("kind", ["major2", "null_from_py", "bad_name"])
def test_an_unusable_table_falls_back_to_dunder_dlpack(kind):
    XTensor.__dlpack_c_exchange_api__ = xproducer.capsule(kind)
    x = XTensor([1.0, 2.0, 3.0], (3,))
    t = dlbridge.from_dlpack(x)
    assert values_of(t) == [1.0, 2.0, 3.0]
    assert t.data_ptr == x.data_ptr
    c = counts()
    assert c["dlpack"] == 1 and c["from_py"] == 0 and c["major2"] == 0
    del t
    gc.collect()
    assert counts()["deleters"] == counts()["exports"] == 1


def test_a_refused_table_call_hands_over_to_dunder_dlpack():
    # The refusal rule is one for every producer: a table that refuses the
    # array (RuntimeError) is not the last word; __dlpack__ is asked, as
    # for a producer without a table, and answers here.
    xproducer.set_failing(True)
    t = dlbridge.from_dlpack(XTensor([1.0, 2.0], (2,)))
    assert (t.shape, t.copied) == ((2,), False)
    c = counts()
    assert c["from_py"] == 1 and c["dlpack"] == 1
    del t
    gc.collect()
    assert dlbridge.live_exports() == 0


def test_a_table_failing_with_memory_error_is_not_a_refusal():
    # MemoryError is not about the array: raised as it is, __dlpack__ not asked.
    xproducer.set_failing(MemoryError)
    with pytest.raises(MemoryError):
        dlbridge.from_dlpack(XTensor([1.0], (1,)))
    c = counts()
    assert c["from_py"] == 1 and c["dlpack"] == 0 and c["exports"] == 0


def test_numpy_still_goes_through_dunder_dlpack():
    a = np.arange(6.0)
    for _ in range(3):
        t = dlbridge.from_dlpack(a)
        assert t.data_ptr == a.ctypes.data


# -- producer: dlbridge.Tensor's table ---------------------------------------


def dlbridge_table():
    return xtable.table(dlbridge.Tensor)


def test_the_table_is_a_class_attribute_with_version_and_no_chain():
    # On the class (inherited from a base on CPython 3.10 and 3.11, from the
    # metaclass on 3.12 and later: never written into the immutable type's
    # own dictionary), the same capsule on every look, and on instances.
    cap = dlbridge.Tensor.__dlpack_c_exchange_api__
    assert dlbridge.Tensor.__dict__.get("__dlpack_c_exchange_api__") is not cap  # at most a getter
    assert xtable.capsule_name(cap) == "dlpack_exchange_api"
    assert dlbridge.Tensor.__dlpack_c_exchange_api__ is cap
    assert dlbridge.empty((1,), "int8").__dlpack_c_exchange_api__ is cap
    api = dlbridge_table()
    assert api.header.version.major == 1 and api.header.version.minor >= 3
    assert not api.header.prev_api
    for name, _ in xtable.ExchangeAPI._fields_[1:]:
        assert ct.cast(getattr(api, name), ct.c_void_p).value, name


def test_from_py_object_is_what_dunder_dlpack_gives():
    t = dlbridge.from_dlpack(np.arange(12.0).reshape(3, 4)[:, ::2])
    start = dlbridge.live_exports()
    mt = xtable.from_py(dlbridge_table(), t)
    assert dlbridge.live_exports() == start + 1
    m = mt.contents
    assert (m.version.major, m.version.minor) == (1, dlbridge_table().header.version.minor)
    assert m.dl_tensor.data + m.dl_tensor.byte_offset == t.data_ptr
    assert xtable.shape_of(m.dl_tensor) == (3, 2) and xtable.strides_of(m.dl_tensor) == (4, 2)
    assert m.flags & 1 == 0
    m.deleter(mt)
    assert dlbridge.live_exports() == start


def test_from_py_object_keeps_read_only():
    t = dlbridge.from_buffer(b"\x01\x02\x03\x04")
    mt = xtable.from_py(dlbridge_table(), t)
    assert mt.contents.flags & 1 == 1
    mt.contents.deleter(mt)


def test_from_py_object_refuses_another_object():
    api = dlbridge_table()
    out = xtable.MT_P()
    with pytest.raises(TypeError):
        api.managed_tensor_from_py_object_no_sync(XTensor([1.0], (1,)), ct.byref(out))
    assert not out


def test_to_py_object_takes_another_producers_tensor():
    x = XTensor([1.0, 2.0, 3.0, 4.0], (2, 2), strides=(1, 2))
    mt = xtable.from_py(xtable.table(XTensor), x)
    t = xtable.to_py(dlbridge_table(), mt)
    assert isinstance(t, dlbridge.Tensor)
    assert t.data_ptr == x.data_ptr and t.strides == (1, 2)
    assert values_of(t) == x.tolist()
    assert counts()["deleters"] == 0
    del t
    gc.collect()
    assert counts()["deleters"] == 1


def test_to_py_object_refuses_another_major_and_still_frees_it():
    calls = []
    deleter = xtable.DELETER(lambda p: calls.append(1))
    mt = xtable.DLManagedTensorVersioned()
    mt.version = xtable.DLPackVersion(2, 0)
    mt.deleter = deleter
    with pytest.raises(BufferError, match="DLB_ERR_VERSION"):
        dlbridge_table().managed_tensor_to_py_object_no_sync(ct.pointer(mt), ct.byref(ct.c_void_p()))
    assert calls == [1]


def test_borrowed_view_makes_no_export():
    t = dlbridge.from_dlpack(np.arange(6.0).reshape(2, 3))
    start = dlbridge.live_exports()
    view = xtable.DLTensor()
    assert dlbridge_table().dltensor_from_py_object_no_sync(t, ct.byref(view)) == 0
    assert view.data + view.byte_offset == t.data_ptr
    assert xtable.shape_of(view) == (2, 3) and xtable.strides_of(view) == (3, 1)
    assert dlbridge.live_exports() == start


def test_borrowed_view_of_read_only_data_is_refused():
    t = dlbridge.from_buffer(b"abcd")
    view = xtable.DLTensor()
    with pytest.raises(BufferError, match="^DLB_ERR_READ_ONLY: .*read-only"):
        dlbridge_table().dltensor_from_py_object_no_sync(t, ct.byref(view))


def test_borrowed_view_of_padded_sub_byte_data_is_refused():
    # One int4 element a byte: a flagless DLTensor would be read as packed.
    from dlbridge import _glue

    header = (2, 0, 4, 1, (2, 3), (3, 1), False, True)
    t = _glue.tensor_from_pickle(header, bytearray(b"\x01\x02\x03\x0d\x0e\x0f"))
    view = xtable.DLTensor()
    with pytest.raises(BufferError, match="^DLB_ERR_UNSUPPORTED_LAYOUT: .*padded to a byte each"):
        dlbridge_table().dltensor_from_py_object_no_sync(t, ct.byref(view))
    start = dlbridge.live_exports()
    mt = xtable.from_py(dlbridge_table(), t)
    assert mt.contents.flags & (1 << 2)  # IS_SUBBYTE_TYPE_PADDED: the owning export says it
    mt.contents.deleter(mt)
    assert dlbridge.live_exports() == start


def test_current_work_stream_is_null():
    stream = ct.c_void_p(1)
    assert dlbridge_table().current_work_stream(1, 0, ct.byref(stream)) == 0
    assert stream.value is None


def test_allocator_and_to_py_object_make_a_dlbridge_tensor():
    api = dlbridge_table()
    rc, mt, errors = xtable.allocate(api, (2, 3), (2, 32, 1))
    assert rc == 0 and errors.calls == []
    t = xtable.to_py(api, mt)
    assert t.shape == (2, 3) and t.dtype == "float32" and t.readonly is False
    assert np.from_dlpack(t).tolist() == [[0.0] * 3] * 2
    rc, mt, errors = xtable.allocate(api, (2, -1))
    assert rc == -1 and mt is None
    assert errors.calls == [("ValueError", "prototype shape[1] is -1 (extents must be >= 0)")]


def test_round_trip_dlbridge_table_dlbridge():
    a = np.arange(8.0)
    t = dlbridge.from_dlpack(a)
    start = dlbridge.live_exports()
    u = dlbridge.from_dlpack(t)  # through dlbridge's own table
    assert u.data_ptr == t.data_ptr == a.ctypes.data
    assert dlbridge.live_exports() == start + 1
    del u
    gc.collect()
    assert dlbridge.live_exports() == start


def test_the_example_consumer_takes_a_dlbridge_tensor():
    t = dlbridge.from_dlpack(np.arange(6.0).reshape(2, 3))
    info = exchange_consumer.take(t)
    assert info["data"] == t.data_ptr
    assert info["shape"] == (2, 3) and info["strides"] == (3, 1)
    assert info["sum"] == 15.0
    assert info["version"][0] == 1


def test_a_type_that_gains_a_table_is_looked_at_again():
    """A type found without a table is remembered as such, and looked at
    again within 256 of its exchanges (docs/exchange-api.md)."""

    class Sub(XTensor):
        pass

    cap = XTensor.__dlpack_c_exchange_api__
    del XTensor.__dlpack_c_exchange_api__  # Sub has none along its MRO now
    s = Sub([1.0, 2.0], (2,))
    assert dlbridge.from_dlpack(s).data_ptr == s.data_ptr
    assert counts()["dlpack"] == 1 and counts()["from_py"] == 0
    XTensor.__dlpack_c_exchange_api__ = cap  # inherited by Sub from here on
    for _ in range(256):
        dlbridge.from_dlpack(s)
    c = counts()
    assert c["from_py"] >= 1  # the table was found again
    assert c["dlpack"] + c["from_py"] == 257
    before = c["from_py"]
    dlbridge.from_dlpack(s)
    assert counts()["from_py"] == before + 1 and counts()["dlpack"] == c["dlpack"]


def test_an_immutable_type_is_served_by_its_kept_table():
    """FrozenXTensor is an immutable type (its attribute cannot change), so
    dlbridge keeps its table after the first lookup; every exchange must
    still go through that table. (How often the attribute is looked up is
    not visible from here; bench/bench_exchange.py shows the cost.)"""
    f = xproducer.FrozenXTensor([1.0, 2.0, 3.0], (3,))
    with pytest.raises(TypeError):
        type(f).__dlpack_c_exchange_api__ = None
    for _ in range(300):
        t = dlbridge.from_dlpack(f)
        assert t.data_ptr == f.data_ptr and values_of(t) == [1.0, 2.0, 3.0]
    del t
    gc.collect()
    c = counts()
    assert c["from_py"] == 300 and c["dlpack"] == 0 and c["deleters"] == 300


def test_dlbridge_tensor_publishes_its_table_on_an_immutable_type():
    cap = dlbridge.Tensor.__dlpack_c_exchange_api__
    assert "dlpack_exchange_api" in repr(cap)
    with pytest.raises(TypeError, match="immutable"):
        dlbridge.Tensor.__dlpack_c_exchange_api__ = None
    assert dlbridge.Tensor.__dlpack_c_exchange_api__ is cap


def test_to_py_object_refuses_a_malformed_tensor_and_still_frees_it():
    calls = []
    deleter = xtable.DELETER(lambda p: calls.append(1))
    shape = (ct.c_int64 * 1)(-2)
    mt = xtable.DLManagedTensorVersioned()
    mt.version = xtable.DLPackVersion(1, 3)
    mt.deleter = deleter
    mt.dl_tensor.data = ct.addressof(shape)
    mt.dl_tensor.device = xtable.DLDevice(1, 0)
    mt.dl_tensor.ndim = 1
    mt.dl_tensor.dtype = xtable.DLDataType(2, 64, 1)
    mt.dl_tensor.shape = ct.cast(shape, ct.POINTER(ct.c_int64))
    mt.dl_tensor.strides = ct.cast(shape, ct.POINTER(ct.c_int64))
    with pytest.raises(BufferError, match="DLB_ERR_MALFORMED"):
        dlbridge_table().managed_tensor_to_py_object_no_sync(ct.pointer(mt), ct.byref(ct.c_void_p()))
    assert calls == [1]


def test_many_producer_types_each_keep_their_table():
    """More types than the cache holds: entries are reused, never mixed up."""
    classes = [type("S%d" % i, (XTensor,), {}) for i in range(100)]
    objs = [cls([float(i)], (1,)) for i, cls in enumerate(classes)]
    for _ in range(2):
        for i, o in enumerate(objs):
            t = dlbridge.from_dlpack(o)
            assert t.data_ptr == o.data_ptr
            assert values_of(t) == [float(i)]
    c = counts()
    assert c["from_py"] == 200 and c["dlpack"] == 0


# -- a C __dlpack__ bound the way pybind11 and nanobind bind one ---------------


def test_a_binding_style_c_method_falls_back_once_and_is_remembered():
    """BoundXTensor.__dlpack__ is a C method without a text signature that
    refuses keywords with "incompatible function arguments" (a binding
    library's words, not CPython's): dlbridge asks it once with the 1.x
    keywords, then without, and calls it without keywords from then on."""
    method = xproducer.BoundXTensor.__dlpack__
    assert method.__text_signature__ is None and not hasattr(method, "__code__")
    x = xproducer.BoundXTensor([1.0, 2.0, 3.0], (3,))
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.data_ptr and values_of(t) == [1.0, 2.0, 3.0]
    c = counts()
    assert c["bound_calls"] == 2 and c["bound_refusals"] == 1  # asked once with the keywords
    assert dlbridge._glue.is_legacy_producer(xproducer.BoundXTensor)
    u = dlbridge.from_dlpack(x)
    v = dlbridge.from_dlpack(x, copy=True)  # the copy is the library's, not asked of the producer
    assert u.data_ptr == x.data_ptr and v.copied and v.data_ptr != x.data_ptr
    c = counts()
    assert c["bound_calls"] == 4 and c["bound_refusals"] == 1
    del t, u, v
    gc.collect()
    assert counts()["deleters"] == counts()["exports"]
