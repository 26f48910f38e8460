"""Pickle protocol 5 with out-of-band buffers (PEP 574), as Ray and Dask
use it: Tensor.__reduce_ex__ and dlbridge._glue.tensor_from_pickle
(python/dlbridge/_pickle.c)."""

import copy
import gc
import pickle
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dlbridge
from dlbridge import _glue


def address(buffer):
    """The first byte of an object with the buffer protocol."""
    view = memoryview(buffer)
    return np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view, np.uint8).ctypes.data


def out_of_band(tensor):
    buffers = []
    data = pickle.dumps(tensor, protocol=5, buffer_callback=buffers.append)
    return data, buffers


def header(shape, strides, dtype=(2, 32, 1), read_only=False, version=1):
    return (version,) + tuple(dtype) + (tuple(shape), tuple(strides), read_only)


# --- round trips -------------------------------------------------------------


def test_a_compact_tensor_goes_out_as_its_own_memory_and_comes_back_over_the_buffer():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlbridge.from_dlpack(a)
    data, buffers = out_of_band(t)
    assert len(buffers) == 1 and len(data) < 200  # the header alone in-band
    raw = buffers[0].raw()
    assert raw.nbytes == 48 and address(raw) == t.data_ptr == a.ctypes.data
    received = bytearray(raw)  # what another process would get
    u = pickle.loads(data, buffers=[received])
    assert u.data_ptr == address(received)  # laid over the given buffer, no copy
    assert (u.shape, u.strides, u.dtype, u.readonly) == ((3, 4), (4, 1), "float32", False)
    assert np.from_dlpack(u).tolist() == a.tolist()
    np.from_dlpack(u)[0, 0] = 42  # writable: writes reach the buffer
    assert np.frombuffer(received, np.float32)[0] == 42
    del u, t, buffers, raw


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "int64", "bool", "complex64", "float16"])
def test_data_values_of_each_dtype(dtype):
    a = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    t = dlbridge.from_dlpack(a)
    data, buffers = out_of_band(t)
    u = pickle.loads(data, buffers=[bytes(b.raw()) for b in buffers])
    assert u.dtype == dtype and np.array_equal(np.from_dlpack(u), a)
    del t, u


def test_a_strided_view_is_copied_once_to_compact():
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    view = a[::2, ::-2]
    t = dlbridge.from_dlpack(view)
    data, buffers = out_of_band(t)
    raw = buffers[0].raw()
    assert raw.nbytes == view.nbytes and not (a.ctypes.data <= address(raw) < a.ctypes.data + a.nbytes)
    u = pickle.loads(data, buffers=buffers)
    assert u.strides == (3, 1) and np.from_dlpack(u).tolist() == view.tolist()
    del t, u, raw, buffers


def test_a_zero_size_and_a_zero_dimensional_tensor():
    for a in (np.zeros((3, 0), np.float32), np.array(2.5, np.float64)):
        t = dlbridge.from_dlpack(a)
        data, buffers = out_of_band(t)
        u = pickle.loads(data, buffers=[bytearray(b.raw()) for b in buffers])
        assert u.shape == a.shape and np.array_equal(np.from_dlpack(u), a)
        del t, u


def test_without_a_buffer_callback_protocol_5_keeps_the_elements_in_band():
    t = dlbridge.from_dlpack(np.arange(1000, dtype=np.float32))
    data = pickle.dumps(t, protocol=5)
    assert len(data) > 4000
    u = pickle.loads(data)
    assert not u.readonly and np.from_dlpack(u).sum() == sum(range(1000))
    del t, u


def test_protocols_before_5_and_the_copy_module_copy_the_elements():
    a = np.arange(1000, dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    for protocol in (2, 3, 4):
        data = pickle.dumps(t, protocol=protocol)
        assert len(data) > 4000
        u = pickle.loads(data)
        assert u.data_ptr != t.data_ptr and not u.readonly and np.array_equal(np.from_dlpack(u), a)
    c = copy.deepcopy(t)
    assert c.data_ptr != t.data_ptr and np.array_equal(np.from_dlpack(c), a)
    del t, u, c


def test_a_deleted_tensor_is_refused():
    t = dlbridge.from_dlpack(np.arange(4, dtype=np.float32))
    t.delete()
    with pytest.raises(dlbridge.Error) as e:
        out_of_band(t)
    assert e.value.status_name == "DLB_ERR_DELETED"
    del t


# --- read-only ---------------------------------------------------------------


def test_a_read_only_buffer_gives_a_read_only_tensor():
    t = dlbridge.from_dlpack(np.arange(6, dtype=np.float32))
    data, buffers = out_of_band(t)
    u = pickle.loads(data, buffers=[memoryview(bytearray(buffers[0].raw())).toreadonly()])  # as Ray's store gives
    assert u.readonly
    a = np.from_dlpack(u)
    assert not a.flags.writeable and a.tolist() == [0, 1, 2, 3, 4, 5]
    del t, u, a


def test_a_read_only_tensor_travels_read_only():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    data, buffers = out_of_band(t)
    assert buffers[0].raw().readonly  # the memory is not offered for writing either
    assert pickle.loads(data, buffers=[bytearray(buffers[0].raw())]).readonly  # the header says so
    assert pickle.loads(pickle.dumps(t, protocol=5)).readonly  # in-band: bytes
    assert pickle.loads(pickle.dumps(t, protocol=4)).readonly
    del t


# --- lifetimes ---------------------------------------------------------------


def test_the_buffer_owner_lives_as_long_as_the_tensor_and_its_exports():
    start = dlbridge.live_exports()
    t = dlbridge.from_dlpack(np.arange(8, dtype=np.float64))
    data, buffers = out_of_band(t)
    owner = bytearray(buffers[0].raw())
    del t, buffers
    u = pickle.loads(data, buffers=[owner])
    a = np.from_dlpack(u)  # an export of the rebuilt tensor
    assert dlbridge.live_exports() == start + 1
    with pytest.raises(BufferError):
        owner.extend(b"x")  # exported: the tensor holds the bytearray's buffer
    refs = sys.getrefcount(owner)
    del u
    gc.collect()
    assert a.tolist() == list(range(8))  # the export outlives the tensor
    with pytest.raises(BufferError):
        owner.extend(b"x")
    del a
    gc.collect()
    assert dlbridge.live_exports() == start
    assert sys.getrefcount(owner) == refs - 1  # the buffer export is released with the last user
    owner.extend(b"x")  # no longer exported


def test_the_handed_out_memory_keeps_the_tensor_alive():
    # A pickler may keep the buffers after the tensor is gone (Dask sends
    # its frames later): they hold the tensor's memory.
    t = dlbridge.from_dlpack(np.arange(1024, dtype=np.float32))
    data, buffers = out_of_band(t)
    del t
    gc.collect()
    u = pickle.loads(data, buffers=buffers)
    assert np.from_dlpack(u)[1023] == 1023
    del u, buffers


# --- bad input ---------------------------------------------------------------


def rebuild_error(head, buffer):
    with pytest.raises(dlbridge.Error) as e:
        _glue.tensor_from_pickle(head, buffer)
    return e.value


def test_a_buffer_of_the_wrong_size():
    e = rebuild_error(header((4,), (1,)), bytearray(12))
    assert e.status_name == "DLB_ERR_MALFORMED" and "12 bytes" in str(e) and "need 16" in str(e)
    e = rebuild_error(header((4,), (1,)), bytearray(20))
    assert e.status_name == "DLB_ERR_MALFORMED" and "20 bytes" in str(e)


def test_strides_reaching_outside_the_buffer():
    e = rebuild_error(header((4,), (2,)), bytearray(16))
    assert e.status_name == "DLB_ERR_MALFORMED" and "elements 0 to 6" in str(e) and "4 elements" in str(e)
    e = rebuild_error(header((4,), (-1,)), bytearray(16))
    assert e.status_name == "DLB_ERR_MALFORMED" and "elements -3 to 0" in str(e)
    e = rebuild_error(header((2, 2), (1, 2**40)), bytearray(16))
    assert e.status_name == "DLB_ERR_MALFORMED" and "outside the buffer" in str(e)


def test_negative_and_overflowing_extents():
    e = rebuild_error(header((-1,), (1,)), bytearray(0))
    assert e.status_name == "DLB_ERR_MALFORMED"
    e = rebuild_error(header((2**62, 2**62), (1, 1)), bytearray(16))
    assert e.status_name == "DLB_ERR_OVERFLOW"
    e = rebuild_error(header((2**70,), (1,)), bytearray(16))
    assert e.status_name == "DLB_ERR_OVERFLOW" and "shape[0]" in str(e)
    e = rebuild_error(header((1,), (2**64,)), bytearray(4))
    assert e.status_name == "DLB_ERR_OVERFLOW" and "strides[0]" in str(e)


def test_unknown_dtypes():
    e = rebuild_error(header((4,), (1,), dtype=(200, 8, 1)), bytearray(4))
    assert e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    e = rebuild_error(header((4,), (1,), dtype=(2, 31, 1)), bytearray(16))
    assert e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    e = rebuild_error(header((4,), (1,), dtype=(2, 32, 70000)), bytearray(16))
    assert e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE" and "out of range" in str(e)


def test_a_header_of_another_version_or_shape():
    e = rebuild_error(header((4,), (1,), version=3), bytearray(16))
    assert e.status_name == "DLB_ERR_VERSION" and "version 3" in str(e) and "reads versions 1 and 2" in str(e)
    e = rebuild_error(header((4,), (1,), version=2), bytearray(16))  # version 2 adds the padded field
    assert e.status_name == "DLB_ERR_MALFORMED" and "version 2 header has 8 fields, not 7" in str(e)
    e = rebuild_error((1, 2, 32, 1, (4,), (1,)), bytearray(16))
    assert e.status_name == "DLB_ERR_MALFORMED" and "7 fields" in str(e)
    e = rebuild_error("header", bytearray(16))
    assert e.status_name == "DLB_ERR_MALFORMED"
    e = rebuild_error(header((4,), (1, 1)), bytearray(16))
    assert e.status_name == "DLB_ERR_MALFORMED" and "one length" in str(e)
    e = rebuild_error(header((4,), ("1",)), bytearray(16))
    assert e.status_name == "DLB_ERR_MALFORMED" and "not an int" in str(e)
    e = rebuild_error(header((4,), (1,)), 16)
    assert e.status_name == "DLB_ERR_INVALID_ARGUMENT" and "buffer" in str(e)


# --- property: a rebuilt tensor never reaches outside its buffer ------------

DTYPES = [(2, 32, 1), (0, 8, 1), (1, 16, 1), (2, 64, 1), (5, 64, 1), (6, 8, 1), (17, 4, 1), (2, 16, 2), (200, 8, 1),
          (2, 0, 1), (0, 8, 0)]


@given(
    shape=st.lists(st.integers(-2, 6), max_size=4),
    strides=st.lists(st.integers(-9, 9), max_size=4),
    dtype=st.sampled_from(DTYPES),
    size=st.one_of(st.sampled_from([0, 0, 0, 1, -1]), st.integers(0, 300).map(lambda n: -1000 - n)),
    read_only=st.booleans(),
)
def test_a_rebuild_gives_a_tensor_inside_its_buffer_or_a_precise_error(shape, strides, dtype, size, read_only):
    strides = (strides + [1] * len(shape))[: len(shape)]
    # The buffer: mostly the size the shape and dtype need, give or take a
    # byte; sometimes any size (-1000 - n: n bytes).
    needed = (max(0, int(np.prod(shape))) * dtype[1] * dtype[2] + 7) // 8
    size = -1000 - size if size <= -1000 else max(0, needed + size)
    buffer = bytearray(size)
    try:
        t = _glue.tensor_from_pickle(header(shape, strides, dtype, read_only), buffer)
    except dlbridge.Error as e:
        assert e.status_name in {"DLB_ERR_MALFORMED", "DLB_ERR_UNSUPPORTED_DTYPE", "DLB_ERR_OVERFLOW",
                                 "DLB_ERR_UNSUPPORTED_LAYOUT"}
        return
    assert t.shape == tuple(shape) and t.readonly == read_only
    assert t.nbytes == size and t.data_ptr == (address(buffer) if size else t.data_ptr)
    if 0 not in shape and size:
        item = dtype[1] * dtype[2] // 8 or 1
        low = sum(min(0, (n - 1) * s) for n, s in zip(shape, t.strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(shape, t.strides))
        assert low >= 0 and (high + 1) * item <= size
    del t


@given(
    shape=st.lists(st.integers(0, 5), max_size=4),
    dtype=st.sampled_from(["float32", "int8", "uint64", "complex128", "bool"]),
    step=st.sampled_from([1, 2, -1]),
)
def test_every_pickled_tensor_comes_back_equal(shape, dtype, step):
    a = (np.arange(int(np.prod(shape))) % 5).astype(dtype).reshape(shape)
    if a.ndim:
        a = a[..., ::step]
    t = dlbridge.from_dlpack(a)
    data, buffers = out_of_band(t)
    u = pickle.loads(data, buffers=[bytearray(b.raw()) for b in buffers])
    assert u.shape == a.shape and np.array_equal(np.from_dlpack(u), a)
    del t, u
