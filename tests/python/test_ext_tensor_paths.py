"""dlbridge.Tensor and the module's own functions (_tensor.c, _module.c,
_pickle.c's reduction) on the paths the other tests leave: a tensor whose
buffer was deleted in C before its metadata was ever read, memory on a
device dlbridge has no backend for (it can be exported, not read), values
out of range, and the registration of the exception classes."""

import ctypes
import pickle

import pytest

import dlbridge
from dlbridge import _glue, _lib
from ext_tables import KDLCUDA, HandMade, producer_type

_libdlbridge = ctypes.CDLL(_lib.path)
_libdlbridge.dlb_buffer_delete.restype = ctypes.c_int32
_libdlbridge.dlb_buffer_delete.argtypes = [ctypes.c_void_p]


def deleted_unread():
    """A tensor deleted through the C API (another holder of its buffer)
    before Python read anything of it."""
    t = dlbridge.empty((3,), "int32")
    assert _libdlbridge.dlb_buffer_delete(t._handle) == 0
    return t


def test_a_tensor_deleted_before_it_was_read_says_so():
    t = deleted_unread()
    assert repr(t) == "dlbridge.Tensor(<deleted>)"
    assert t.deleted
    for read in (lambda: t.shape, lambda: t.ndim, lambda: t.size, lambda: len(t), lambda: t._m,
                 t.__dlpack_device__, t.delete):
        with pytest.raises(dlbridge.Error) as info:
            read()
        assert info.value.status_name == "DLB_ERR_DELETED", read


def test_memory_without_a_backend_is_exported_but_not_read():
    """CUDA memory taken in without a driver that knows it: from_dlpack
    keeps it as it is (zero-copy); what needs its bytes is refused with
    DLB_ERR_UNSUPPORTED_DEVICE, and the producer's tensor is freed once."""
    made = HandMade(device=(KDLCUDA, 0))
    t = dlbridge.from_dlpack(producer_type(lambda obj: made)())
    assert t.device == (KDLCUDA, 0) and t.data_ptr == ctypes.addressof(made.memory)
    for read in (lambda: pickle.dumps(t, protocol=5), lambda: pickle.dumps(t, protocol=4),
                 lambda: _glue.share_copy(t), lambda: _glue.share_ticket(t)):
        with pytest.raises(dlbridge.Error) as info:
            read()
        assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DEVICE", read
        assert "cannot read it" in str(info.value)
    assert not _glue.is_shared(t)
    t = None  # (the lambdas above read it)
    assert made.freed == 1


def test_values_out_of_range():
    t = dlbridge.empty((2,), "float32")
    with pytest.raises(OverflowError):
        t.set_stream(2 ** 70)
    for device in [(1, -2 ** 31 - 1), (1, 2 ** 31), (-2 ** 31 - 1, 0)]:
        with pytest.raises(ValueError, match=r"dl_device \(.*\) is out of range"):
            t.__dlpack__(max_version=(1, 3), dl_device=device)
    with pytest.raises(OverflowError):
        _glue.status_name(2 ** 70)
    assert _glue.status_name(-1) == "DLB_UNKNOWN_STATUS"  # -1 is an int, not an error


def test_a_protocol_of_minus_one_is_an_early_protocol():
    """__reduce_ex__(-1) (an int, however odd) reduces as before protocol
    5: the elements copied into bytes."""
    t = dlbridge.from_buffer(bytearray(b"\x01\x02\x03\x04"))
    rebuild, (data, shape, dtype, read_only) = t.__reduce_ex__(-1)
    assert rebuild is _glue.tensor_from_payload
    assert data == b"\x01\x02\x03\x04" and shape == (4,) and not read_only


class Error2(dlbridge.Error):
    pass


class Refusal2(Error2, BufferError):
    pass


def test_register_checks_its_classes():
    words = "register\\(error_class, refusal_class=None\\)"
    try:
        for args in [(), (dlbridge.Error, dlbridge.RefusalError, BufferError), ("Error",), (int,),
                     (dlbridge.Error, ValueError), (Error2, dlbridge.RefusalError), (Error2, Error2)]:
            with pytest.raises(TypeError, match=words):
                _glue.register(*args)
    finally:  # a refused call changes nothing; restored should one not be refused
        _glue.register(dlbridge.Error, dlbridge.RefusalError)


def test_registered_classes_are_what_failures_raise():
    class Producer:
        shape = None

        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export this")

        def __dlpack_device__(self):
            return (1, 0)

    try:
        _glue.register(Error2, Refusal2)
        with pytest.raises(Error2) as info:
            dlbridge.empty((-1,), "float32")
        assert type(info.value) is Error2
        with pytest.raises(Refusal2):
            dlbridge.from_dlpack(Producer())
        # Without a refusal class, a refusal is a plain BufferError naming its status.
        _glue.register(Error2)
        with pytest.raises(BufferError) as info:
            dlbridge.from_dlpack(Producer())
        assert type(info.value) is BufferError
        text = str(info.value)
        assert text.startswith("DLB_ERR_UNSUPPORTED_LAYOUT: ") and "Producer.__dlpack__ raised BufferError" in text
    finally:
        _glue.register(dlbridge.Error, dlbridge.RefusalError)
    with pytest.raises(dlbridge.RefusalError):
        dlbridge.from_dlpack(Producer())
