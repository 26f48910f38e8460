"""More of the extension's refusals and corners, through its module
functions as the package's Python calls them: sharing functions given the
wrong arguments, payload rebuilds of too many dimensions, the tensor's
properties of a 0-d or deleted tensor, buffers whose strides are not whole
elements, and capsules of a DLPack major version dlbridge does not read."""

import ctypes
import pickle

import pytest

import dlbridge
from dlbridge import _glue
from dlbridge._ctypes_decls import DLDataType, DLDevice, DLPackVersion, DLTensor

np = pytest.importorskip("numpy")

base = np.arange(6, dtype=np.float32)


class Untruthful:
    def __bool__(self):
        raise RuntimeError("no truth")


REFUSALS = [
    (lambda: _glue.share_descriptor(), TypeError),
    (lambda: _glue.share_descriptor(base), TypeError),
    (lambda: _glue.share_descriptor(dlbridge.empty((2,), "float32"), copy=Untruthful()), RuntimeError),
    (lambda: _glue.share_descriptor(dlbridge.empty((2,), "float32"), read_only=Untruthful()), RuntimeError),
    (lambda: _glue.share_descriptor(dlbridge.empty((2,), "float32")), dlbridge.Error),
    (lambda: _glue.share_copy(), TypeError),
    (lambda: _glue.share_copy(dlbridge.empty((2,), "float32"), colour=1), TypeError),
    (lambda: _glue.share_copy(base), TypeError),
    (lambda: _glue.is_shared(base), TypeError),
    (lambda: _glue.open_shared(0), TypeError),
    (lambda: _glue.open_shared("fd", b""), TypeError),
    (lambda: _glue.open_shared(-5, b"\0" * 64), dlbridge.Error),
    (lambda: _glue.open_shared(0, b"", colour=1), TypeError),
    (lambda: _glue.share_send(0), TypeError),
    (lambda: _glue.share_send("s", dlbridge.empty((2,), "float32")), TypeError),
    (lambda: _glue.share_send(-1, dlbridge.empty((2,), "float32")), dlbridge.Error),
    (lambda: _glue.share_recv("s"), TypeError),
    (lambda: _glue.share_recv(-1), dlbridge.Error),
    (lambda: _glue.share_ticket(base), TypeError),
    (lambda: _glue.share_ticket_open(), TypeError),
    (lambda: _glue.share_ticket_open("ticket"), TypeError),
    (lambda: _glue.share_ticket_open(b"ticket", via_server=Untruthful()), RuntimeError),
    (lambda: _glue.share_ticket_open(b"ticket", read_only=Untruthful()), RuntimeError),
    (lambda: _glue.share_ticket_open(b"not a ticket"), dlbridge.Error),
    (lambda: _glue.tensor_payload(base), TypeError),
    (lambda: _glue.tensor_from_payload(b"", (1,) * 65, (2, 32, 1), False), dlbridge.Error),
    (lambda: _glue.tensor_from_payload(b"", ("a",), (2, 32, 1), False), TypeError),
    (lambda: _glue.tensor_from_payload(b"", (1,), ("a", 32, 1), False), TypeError),
]


def test_module_functions_refuse_what_they_cannot_take():
    for i, (call, error) in enumerate(REFUSALS):
        with pytest.raises(error):
            call()
            pytest.fail("call %d did not raise" % i)


def test_tensor_properties_at_their_corners():
    t = dlbridge.empty((), "float32")
    assert t.ndim == 0 and t.size == 1 and t.shape == ()
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(t)
    u = dlbridge.empty((2, 3), "int16")
    assert len(u) == 2 and u.size == 6 and u.ndim == 2
    with pytest.raises(TypeError, match="cannot be pickled or copied here"):
        u.__reduce__()
    # Deleted, it remembers what it was (delete() keeps it), and says so.
    v = dlbridge.empty((4,), "uint8")
    v.delete()
    assert repr(v) == "dlbridge.Tensor(shape=(4,), dtype=uint8, device=(1, 0), deleted=True)"
    assert v.shape == (4,) and len(v) == 4 and v.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="DLB_ERR_DELETED"):
        v.__dlpack__()
    ro = _glue.tensor_from_pickle((1, 1, 8, 1, (4,), (1,), True), b"abcd")
    assert repr(ro) == "dlbridge.Tensor(shape=(4,), dtype=uint8, device=(1, 0), readonly=True)"


def test_a_buffer_whose_strides_reach_past_any_address_space():
    """numpy lets as_strided describe a view of 2^60-byte strides; from_buffer
    refuses it with the layout rule's overflow, reading nothing."""
    one = np.zeros(1)
    view = np.lib.stride_tricks.as_strided(one, shape=(2,), strides=(1 << 60,))
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer(view)
    assert info.value.status_name == "DLB_ERR_OVERFLOW"
    assert "2^57" in str(info.value)


def test_buffers_whose_strides_are_not_whole_elements_or_formats_dlpack_lacks():
    record = np.zeros(4, dtype=[("a", "<i4"), ("b", "i1")])
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_buffer(record["a"])
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_LAYOUT"
    assert "not a multiple of the item size" in str(info.value)
    for dtype in ([("a", "<i4")], "V3", "U2"):
        with pytest.raises((dlbridge.Error, ValueError, BufferError)):
            dlbridge.from_buffer(np.zeros(2, dtype=dtype))
    if hasattr(np, "float128"):
        for dtype in (np.float128, np.complex256):
            with pytest.raises(dlbridge.Error, match="DLB_ERR_UNSUPPORTED_DTYPE"):
                dlbridge.from_buffer(np.zeros(2, dtype=dtype))


class DLManagedTensorVersioned(ctypes.Structure):
    pass


Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion),
                                     ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter),
                                     ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

_api = ctypes.PyDLL(None)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def test_a_capsule_of_another_major_version_is_refused_and_keeps_its_tensor():
    deleted = []
    deleter = Deleter(lambda m: deleted.append(1))
    shape = (ctypes.c_int64 * 1)(2)
    data = (ctypes.c_float * 2)(1, 2)
    m = DLManagedTensorVersioned(DLPackVersion(2, 0), None, deleter, 0,
                                 DLTensor(ctypes.addressof(data), DLDevice(1, 0), 1, DLDataType(2, 32, 1),
                                          shape, None, 0))

    class Producer:
        def __dlpack__(self, **kwargs):
            return _api.PyCapsule_New(ctypes.addressof(m), b"dltensor_versioned", None)

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(Producer())
    assert info.value.status_name == "DLB_ERR_VERSION"
    assert deleted == []  # the capsule (no destructor) still holds it: the producer's
    with pytest.raises(dlbridge.Error, match="not a DLPack PyCapsule"):
        _glue.from_dlpack(type("P", (), {"__dlpack__": lambda self, **k: 3,
                                          "__dlpack_device__": lambda self: (1, 0)})())


def test_pickling_a_tensor_the_host_reads_through_a_copy():
    """Protocol 5 of a strided view: one compact host copy goes out."""
    a = np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1::2]
    t = dlbridge.from_dlpack(a)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    back = pickle.loads(data, buffers=buffers)
    np.testing.assert_array_equal(np.from_dlpack(back), a)
    ro = _glue.tensor_from_pickle((1, 2, 32, 1, (2,), (1,), True), bytearray(8))
    buffers = []
    back = pickle.loads(pickle.dumps(ro, protocol=5, buffer_callback=buffers.append), buffers=buffers)
    assert ro.readonly and back.readonly
