"""The rebuilds of pickling (_pickle.c's tensor_from_pickle, _share.c's
tensor_from_payload) and the sharing functions of _share.c on the paths
the other tests leave: header fields too large for C, truth values that
raise, a released buffer, padded sub-byte payloads, and sharing what
cannot be shared. Standard library only."""

import os
import socket

import pytest

import dlbridge
from dlbridge import _glue


class Untruthful:
    def __bool__(self):
        raise RuntimeError("no truth")


def status_of(call):
    with pytest.raises(dlbridge.Error) as info:
        call()
    return info.value.status_name, str(info.value)


# -- tensor_from_pickle ---------------------------------------------------------


def test_pickle_header_fields_too_large_for_c():
    status, text = status_of(lambda: _glue.tensor_from_pickle((2 ** 70, 2, 32, 1, (1,), (1,), False), bytes(4)))
    assert status == "DLB_ERR_VERSION" and "a header of version -1" in text
    status, text = status_of(lambda: _glue.tensor_from_pickle((1, 2, 2 ** 70, 1, (1,), (1,), False), bytes(4)))
    assert status == "DLB_ERR_UNSUPPORTED_DTYPE" and "out of range" in text
    status, text = status_of(lambda: _glue.tensor_from_pickle((1, 2, 32, 1, (1,), [1], False), bytes(4)))
    assert status == "DLB_ERR_MALFORMED" and "shape and strides are tuples of one length" in text


def test_pickle_padded_field_that_raises():
    with pytest.raises(RuntimeError, match="no truth"):
        _glue.tensor_from_pickle((2, 0, 4, 1, (2,), (1,), False, Untruthful()), bytes(2))
    t = _glue.tensor_from_pickle((2, 0, 4, 1, (2,), (1,), False, True), bytes([3, 250]))
    assert t.dtype == "int4" and t.shape == (2,)


def test_pickle_data_whose_buffer_cannot_be_taken():
    """A released memoryview raises ValueError when its buffer is asked for:
    passed on as it is (only TypeError and BufferError mean "not a
    buffer")."""
    view = memoryview(bytearray(4))
    view.release()
    with pytest.raises(ValueError, match="released memoryview"):
        _glue.tensor_from_pickle((1, 2, 32, 1, (1,), (1,), False), view)


# -- tensor_from_payload ----------------------------------------------------------


def test_payload_fields_out_of_range_and_truths_that_raise():
    for shape, dtype, error in [((2 ** 70,), (2, 32, 1), OverflowError), ((1,), (2, 2 ** 70, 1), OverflowError),
                                ((1,), (-1, 32, 1), dlbridge.Error), ((1,), (2, 32, 70000), dlbridge.Error),
                                ((1,), [2, 32, 1], TypeError), ([1], (2, 32, 1), TypeError)]:
        with pytest.raises(error):
            _glue.tensor_from_payload(bytes(4), shape, dtype, False)
    with pytest.raises(RuntimeError, match="no truth"):
        _glue.tensor_from_payload(bytes(4), (1,), (2, 32, 1), Untruthful())
    with pytest.raises(RuntimeError, match="no truth"):
        _glue.tensor_from_payload(bytes(4), (1,), (2, 32, 1), False, Untruthful())


def test_padded_payloads():
    t = _glue.tensor_from_payload(bytes([1, 2, 3]), (3,), (0, 4, 1), True, True)
    assert t.dtype == "int4" and t.readonly and t.shape == (3,)
    assert _glue.tensor_payload(t) == (bytes([1, 2, 3]), (3,), (0, 4, 1), True, True)
    t = _glue.tensor_from_payload(bytes([7]), (), (1, 2, 1), False, True)
    assert t.dtype == "uint2" and t.shape == () and _glue.tensor_payload(t)[0] == bytes([7])
    status, text = status_of(lambda: _glue.tensor_from_payload(bytes(2), (3,), (0, 4, 1), False, True))
    assert status == "DLB_ERR_MALFORMED" and "2 bytes, but the shape and dtype need 3" in text


def test_an_empty_payload():
    t = _glue.tensor_from_payload(b"", (0, 3), (2, 32, 1), False)
    assert t.shape == (0, 3) and t.nbytes == 0 and _glue.tensor_payload(t)[0] == b""


# -- sharing ----------------------------------------------------------------------


def test_sharing_what_cannot_be_shared():
    t = dlbridge.empty((2,), "float32")
    t.delete()
    for call in (lambda: _glue.share_copy(t), lambda: _glue.share_ticket(t), lambda: _glue.is_shared(t)):
        assert status_of(call)[0] == "DLB_ERR_DELETED"
    u = dlbridge.empty((2,), "float32")
    with pytest.raises(RuntimeError, match="no truth"):
        _glue.share_copy(u, read_only=Untruthful())
    with pytest.raises(RuntimeError, match="no truth"):
        _glue.open_shared(0, b"", read_only=Untruthful())
    with pytest.raises(TypeError, match="unexpected keyword argument 'copy'"):
        _glue.share_ticket_open(b"ticket", copy=True)
    with pytest.raises(TypeError):
        _glue.share_ticket_withdraw(12)
    with pytest.raises(TypeError):
        _glue.share_ticket_wait("soon")
    assert _glue.share_ticket_wait(-1) == 0  # nothing issued here is pending: no wait


def test_sending_over_a_socket_what_is_not_shared_or_not_a_tensor():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
            _glue.share_send(a.fileno(), b"not a tensor")
        status, text = status_of(lambda: _glue.share_send(a.fileno(), dlbridge.empty((2,), "float32")))
        assert status == "DLB_ERR_NOT_ZERO_COPY"
        b.sendall(b"this is no descriptor at all")
        b.shutdown(socket.SHUT_WR)
        status, text = status_of(lambda: _glue.share_recv(a.fileno()))
        assert status == "DLB_ERR_MALFORMED" and "does not carry a share description" in text
    finally:
        a.close()
        b.close()


def test_receiving_from_what_is_not_a_socket():
    r, w = os.pipe()
    try:
        os.write(w, b"x")
        status, text = status_of(lambda: _glue.share_recv(r))
        assert status == "DLB_ERR_INVALID_ARGUMENT" and "getsockopt(SO_TYPE) failed" in text
    finally:
        os.close(r)
        os.close(w)
