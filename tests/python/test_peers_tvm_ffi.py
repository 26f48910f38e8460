"""The DLPack C exchange API against apache-tvm-ffi (the modern peer
environment, whose run is in scripts/test.d/43-sdist.sh), both directions, each
test showing which path was taken.

tvm-ffi 0.1.15 publishes __dlpack_c_exchange_api__ on
tvm_ffi.core.DLTensorTestWrapper (tvm_ffi.Tensor itself has none, and is
exchanged through __dlpack__); tvm_ffi.from_dlpack reads the table of any
object that has one, and otherwise calls __dlpack__() without arguments."""


import peers  # missing peers: skip here, fail in the peer run
import pytest

try:
    import numpy as np
    import tvm_ffi
    from tvm_ffi.core import DLTensorTestWrapper
except ImportError as e:
    peers.missing(e, "apache-tvm-ffi")

import dlbridge



class TableOnly(DLTensorTestWrapper):
    """tvm-ffi's table, with a __dlpack__ that must not be called."""

    calls = 0

    def __dlpack__(self, **kwargs):
        type(self).calls += 1
        raise AssertionError("__dlpack__ called although the exchange table was there")


def test_dlbridge_reads_tvm_ffis_exchange_table():
    assert "dlpack_exchange_api" in repr(DLTensorTestWrapper.__dlpack_c_exchange_api__)
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    w = TableOnly(tvm_ffi.from_dlpack(a))
    for _ in range(3):
        t = dlbridge.from_dlpack(w)
        assert t.data_ptr == a.ctypes.data and t.shape == (2, 3) and not t.copied
        assert np.from_dlpack(t).tolist() == a.tolist()
    assert TableOnly.calls == 0
    c = dlbridge.from_dlpack(w, copy=True)  # copy= decided by the library on the table's tensor
    assert c.copied and c.data_ptr != a.ctypes.data and TableOnly.calls == 0


def test_a_plain_tvm_ffi_tensor_goes_through_dlpack_versioned():
    a = np.arange(4, dtype=np.int64)
    tt = tvm_ffi.from_dlpack(a)
    assert not hasattr(type(tt), "__dlpack_c_exchange_api__")
    t = dlbridge.from_dlpack(tt)
    assert t.data_ptr == a.ctypes.data
    assert not dlbridge._glue.is_legacy_producer(type(tt))  # its signature takes max_version


def test_tvm_ffi_reads_dlbridges_exchange_table():
    # A read-only tensor: its legacy export (what tvm-ffi's from_dlpack calls
    # when there is no table) is a copy, at another address, so the shared
    # address shows that the table served it.
    t = dlbridge.from_buffer(bytes(range(16)))
    c = dlbridge.from_dlpack(t.__dlpack__())
    assert c.copied and c.data_ptr != t.data_ptr
    del c
    with pytest.raises(BufferError, match="DLB_ERR_READ_ONLY"):
        t.__dlpack__(copy=False)
    r = tvm_ffi.from_dlpack(t)
    assert r.data_ptr() == t.data_ptr and tuple(r.shape) == (16,)
    assert np.from_dlpack(r).tolist() == list(range(16))
    del r
    w = dlbridge.from_buffer(bytearray(8))
    assert tvm_ffi.from_dlpack(w).data_ptr() == w.data_ptr


def test_a_cured_copy_goes_on_to_tvm_ffi():
    class Refuser:
        shape = (3,)
        dtype = "float32"

        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export")

        def __array__(self):
            return np.array([1.0, 2.0, 3.0], dtype=np.float32)

    t = dlbridge.from_dlpack(Refuser())
    assert t.copied
    r = tvm_ffi.from_dlpack(t)
    assert r.data_ptr() == t.data_ptr and np.from_dlpack(r).tolist() == [1.0, 2.0, 3.0]


def test_tvm_ffis_capsules_without_strides_are_taken_as_compact():
    # tvm-ffi's exports of compact tensors may leave strides NULL (allowed
    # before DLPack 1.2): dlbridge takes them as compact row-major.
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    tt = tvm_ffi.from_dlpack(a)
    for capsule in (tt.__dlpack__(), tt.__dlpack__(max_version=(1, 3))):
        t = dlbridge.from_dlpack(capsule)
        assert t.strides == (4, 1) and t.data_ptr == a.ctypes.data
        assert np.from_dlpack(t).tolist() == a.tolist()


def test_an_offset_view_reaches_tvm_ffi_at_its_first_element():
    # Consumers that ignore byte_offset read the right elements: dlbridge
    # folds the offset into data on its exports.
    a = np.arange(10, dtype=np.float64)
    t = dlbridge.from_dlpack(a[3:])
    r = tvm_ffi.from_dlpack(t)
    assert r.data_ptr() == a[3:].ctypes.data and np.from_dlpack(r).tolist() == a[3:].tolist()
