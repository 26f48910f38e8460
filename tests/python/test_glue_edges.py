"""The extension's refusals of bad arguments and odd producers, each with
its exception type and words: the protocol's arguments of __dlpack__ and
from_dlpack, producers whose __dlpack__ cannot be read as a signature, the
module's small functions, the buffer protocol's formats, and the pickle
rebuild's refusals of headers and buffers."""

import pickle

import pytest

import dlbridge
from dlbridge import _glue
from raw_memory import raw_values

np = pytest.importorskip("numpy")

base = np.arange(6, dtype=np.float32)


@pytest.fixture
def tensor():
    return dlbridge.from_dlpack(base, copy=True)


DLPACK_REFUSALS = [
    ({"max_version": "x"}, TypeError, "max_version must be a (major, minor) tuple"),
    ({"max_version": (1,)}, TypeError, "max_version must be"),
    ({"max_version": (1, "a")}, TypeError, "max_version must be"),
    ({"max_version": (1 << 70, 0)}, TypeError, "max_version must be"),
    ({"copy": 1}, TypeError, "copy must be True, False or None"),
    ({"dl_device": (1 << 40, 0)}, ValueError, "out of range"),
    ({"dl_device": (1, -(1 << 40))}, ValueError, "out of range"),
    ({"dl_device": "cpu"}, TypeError, "dl_device must be a (device_type, device_id) tuple"),
    ({"stream": "s"}, TypeError, "stream must be an int or None"),
    ({"stream": 1 << 70}, OverflowError, ""),
    ({"stream": 5}, ValueError, "no streams"),
    ({"color": 1}, TypeError, "unexpected keyword argument 'color'"),
]


def test_dlpack_arguments_are_refused_precisely(tensor):
    for kwargs, error, words in DLPACK_REFUSALS:
        with pytest.raises(error) as info:
            tensor.__dlpack__(**kwargs)
        assert words in str(info.value), kwargs


def test_dlpack_takes_no_positional_arguments(tensor):
    with pytest.raises(TypeError, match="takes no positional arguments"):
        tensor.__dlpack__(None)


def test_a_deleted_tensor_still_says_where_it_was(tensor):
    tensor.shape  # cached metadata
    tensor.delete()
    assert tensor.__dlpack_device__() == (1, 0)
    fresh = dlbridge.from_dlpack(base, copy=True)
    fresh.delete()
    assert fresh.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="DLB_ERR_DELETED"):
        fresh.__dlpack__(max_version=(1, 0))


def test_set_stream_of_host_memory(tensor):
    with pytest.raises(TypeError, match="stream must be an int"):
        tensor.set_stream(True)
    with pytest.raises(TypeError):
        tensor.set_stream("1")
    with pytest.raises(OverflowError):
        tensor.set_stream(1 << 70)
    with pytest.raises(dlbridge.Error, match="not CUDA memory"):
        tensor.set_stream(1)
    assert tensor.stream is None


FROM_DLPACK_REFUSALS = [
    ({"device": "cpu"}, TypeError, "device must be a (device_type, device_id) tuple"),
    ({"device": (1, 2, 3)}, TypeError, "device must be"),
    ({"copy": "yes"}, TypeError, "copy must be True, False or None"),
    ({"stream": "s"}, TypeError, "stream"),
    ({"stream": True}, TypeError, "stream"),
    ({"stream": 1 << 70}, OverflowError, ""),
    ({"device": (1 << 40, 0)}, ValueError, "out of range"),
    ({"colour": 1}, TypeError, "unexpected keyword argument 'colour'"),
]


def test_from_dlpack_arguments_are_refused_precisely():
    for kwargs, error, words in FROM_DLPACK_REFUSALS:
        with pytest.raises(error) as info:
            dlbridge.from_dlpack(base, **kwargs)
        assert words in str(info.value), kwargs


def test_from_dlpack_takes_one_object():
    with pytest.raises(TypeError):
        _glue.from_dlpack()
    with pytest.raises(TypeError):
        _glue.from_dlpack(base, base)


class CallableDlpack:
    """A __dlpack__ that is an object with __call__: no code object, no text
    signature; dlbridge asks the modern way first, then the legacy one."""

    def __init__(self, modern):
        self.modern = modern
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append(kwargs)
        if kwargs and not self.modern:
            raise TypeError("__call__() got an unexpected keyword argument 'max_version'")
        return base.__dlpack__()


@pytest.mark.parametrize("modern", [True, False])
def test_a_dlpack_without_a_readable_signature(modern):
    call = CallableDlpack(modern)

    class Producer:
        __dlpack__ = call

        def __dlpack_device__(self):
            return (1, 0)

    t = dlbridge.from_dlpack(Producer())
    assert raw_values(t).tolist() == base.tolist()
    assert call.calls[0] != {}  # asked with the 1.x keywords first
    if not modern:
        assert call.calls[-1] == {}  # then the legacy way, remembered
        assert _glue.is_legacy_producer(Producer)
        dlbridge.from_dlpack(Producer())
        assert call.calls[-1] == {}


class FakeCode:
    """A __code__ that is not a code object."""
    co_flags = -1
    co_argcount = 1
    co_posonlyargcount = 0
    co_kwonlyargcount = 0
    co_varnames = ("self",)


def odd_function():
    def __dlpack__(self, *args, **kwargs):
        if kwargs:
            raise TypeError("unexpected keyword argument 'max_version'")
        return base.__dlpack__()

    return __dlpack__


@pytest.mark.parametrize("code", [FakeCode(), None, 42])
def test_a_dlpack_whose_code_object_is_odd(code):
    method = odd_function()

    class Producer:
        def __dlpack_device__(self):
            return (1, 0)

    Producer.__dlpack__ = method
    try:
        method.__code__ = code
    except (TypeError, ValueError):
        class Wrapped:
            __code__ = code
            __text_signature__ = "($self, /, *, stream=None, max_version=None)"

            def __get__(self, obj, cls):
                return lambda **kw: method(obj, **kw)

        Producer.__dlpack__ = Wrapped()
    t = dlbridge.from_dlpack(Producer())
    assert raw_values(t).tolist() == base.tolist()


def test_a_producer_whose_positional_only_parameter_is_max_version():
    class Producer:
        def __dlpack__(self, max_version=None, /, stream=None):
            return base.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    t = dlbridge.from_dlpack(Producer())
    assert raw_values(t).tolist() == base.tolist()
    assert _glue.is_legacy_producer(Producer)


def test_module_functions_refuse_bad_arguments():
    with pytest.raises(TypeError):
        _glue.status_name("x")
    with pytest.raises(OverflowError):
        _glue.status_name(1 << 70)
    with pytest.raises(TypeError, match="Exception subclasses, the second one a subclass of the first and of BufferError"):
        _glue.register(int)
    with pytest.raises(TypeError):
        _glue.register(42)
    with pytest.raises(TypeError, match="empty\\(\\) takes a shape and a dtype name"):
        _glue.empty((2,))
    with pytest.raises(TypeError):
        _glue.empty(3, "float32")
    with pytest.raises(dlbridge.Error, match="ndim 65 is more than 64"):
        _glue.empty((1,) * 65, "float32")
    with pytest.raises(TypeError):
        _glue.empty(("a",), "float32")
    with pytest.raises(OverflowError):
        _glue.empty((1 << 70,), "float32")
    with pytest.raises(TypeError):
        _glue.empty((2,), 7)
    with pytest.raises(dlbridge.Error, match="DLB_ERR_MALFORMED"):
        _glue.empty((-1,), "float32")
    with pytest.raises(TypeError):
        _glue.device_info("cuda")
    with pytest.raises(OverflowError):
        _glue.device_info(1 << 70)
    assert _glue.status_name(99) == "DLB_UNKNOWN_STATUS"
    assert _glue.library_path().endswith(".so") or ".so." in _glue.library_path()


def test_buffer_formats():
    """from_buffer reads the struct format a buffer gives (native or
    little-endian, complex as Z) and names what it cannot take."""
    for dtype, name in [("<i4", "int32"), ("=f4", "float32"), ("f8", "float64"), ("c8", "complex64"),
                        ("c16", "complex128"), ("?", "bool"), ("f2", "float16"), ("u1", "uint8"), ("i8", "int64"),
                        ("u2", "uint16")]:
        t = dlbridge.from_buffer(np.zeros(3, dtype=dtype))
        assert t.shape == (3,) and t.dtype == name, dtype
    for dtype in [">i4", ">f8", "O", "V3", "U2", "M8[s]"]:
        with pytest.raises((BufferError, dlbridge.Error, ValueError, TypeError)) as info:
            dlbridge.from_buffer(np.zeros(3, dtype=dtype))
        assert str(info.value), dtype


def test_buffers_the_protocol_cannot_take():
    with pytest.raises(dlbridge.Error, match="a bytes-like object is required"):
        dlbridge.from_buffer(3)
    big = np.zeros((1,) * 32, dtype=np.uint8)
    assert dlbridge.from_buffer(big).shape == (1,) * 32
    strided = dlbridge.from_buffer(np.zeros((4, 6), dtype=np.int16)[:, ::3])
    assert strided.shape == (4, 2) and strided.strides == (6, 3)


PICKLE_REFUSALS = [
    ("not a tuple", b"", "DLB_ERR_MALFORMED"),
    ((), b"", "DLB_ERR_MALFORMED"),
    ((3, 2, 32, 1, (1,), (1,), False), b"\0" * 4, "DLB_ERR_VERSION"),
    ((2, 2, 32, 1, (1,), (1,), False), b"\0" * 4, "DLB_ERR_MALFORMED"),  # version 2 has 8 fields
    (("1", 2, 32, 1, (1,), (1,), False), b"\0" * 4, "DLB_ERR_VERSION"),
    ((1, 2, 32, 1, (1,), (1,)), b"\0" * 4, "DLB_ERR_MALFORMED"),
    ((1, 300, 32, 1, (1,), (1,), False), b"\0" * 4, "DLB_ERR_UNSUPPORTED_DTYPE"),
    ((1, 2, 32, 70000, (1,), (1,), False), b"\0" * 4, "DLB_ERR_UNSUPPORTED_DTYPE"),
    ((1, 2, "32", 1, (1,), (1,), False), b"\0" * 4, "DLB_ERR_UNSUPPORTED_DTYPE"),
    ((1, 2, 32, 1, [1], (1,), False), b"\0" * 4, "DLB_ERR_MALFORMED"),
    ((1, 2, 32, 1, (1, 1), (1,), False), b"\0" * 4, "DLB_ERR_MALFORMED"),
    ((1, 2, 32, 1, (1,) * 65, (1,) * 65, False), b"\0" * 4, "DLB_ERR_INVALID_ARGUMENT"),
    ((1, 2, 32, 1, ("a",), (1,), False), b"\0" * 4, "DLB_ERR_MALFORMED"),
    ((1, 2, 32, 1, (1 << 70,), (1,), False), b"\0" * 4, "DLB_ERR_OVERFLOW"),
    ((1, 2, 32, 1, (2,), ("b",), False), b"\0" * 8, "DLB_ERR_MALFORMED"),
    ((1, 2, 32, 1, (3,), (1,), False), b"\0" * 8, "DLB_ERR_MALFORMED"),
    ((1, 17, 4, 1, (2, 2), (1, 2), False), b"\0" * 2, "DLB_ERR_UNSUPPORTED_LAYOUT"),
    ((1, 2, 32, 1, (2,), (3,), False), b"\0" * 8, "DLB_ERR_MALFORMED"),
    ((1, 2, 32, 1, (2,), (-1,), False), b"\0" * 8, "DLB_ERR_MALFORMED"),
    ((1, 2, 32, 1, (2,), (1,), False), 42, "DLB_ERR_INVALID_ARGUMENT"),
    ((1, 2, 32, 1, (-2,), (1,), False), b"", "DLB_ERR_MALFORMED"),
]


def test_pickle_rebuilds_refuse_what_does_not_fit():
    for header, data, status in PICKLE_REFUSALS:
        with pytest.raises(dlbridge.Error) as info:
            _glue.tensor_from_pickle(header, data)
        assert info.value.status_name == status, (header, str(info.value))


def test_pickle_rebuild_arguments_and_truth():
    with pytest.raises(TypeError, match="takes a header and a buffer"):
        _glue.tensor_from_pickle((1,))

    class Untruthful:
        def __bool__(self):
            raise RuntimeError("no truth")

    with pytest.raises(RuntimeError, match="no truth"):
        _glue.tensor_from_pickle((1, 2, 32, 1, (1,), (1,), Untruthful()), b"\0" * 4)
    # A read-only buffer gives a read-only tensor; a broadcast layout within it.
    t = _glue.tensor_from_pickle((1, 2, 32, 1, (2,), (0,), False), bytes(range(8)))
    assert t.readonly and t.strides == (0,)
    t = _glue.tensor_from_pickle((1, 2, 32, 1, (2,), (1,), True), bytearray(8))
    assert t.readonly


def test_pickle_round_trips_of_other_layouts():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view in (a.T, a[:, ::2], a[::-1]):
        t = dlbridge.from_dlpack(view)
        for protocol in (4, 5):
            back = pickle.loads(pickle.dumps(t, protocol=protocol))
            np.testing.assert_array_equal(np.from_dlpack(back), view)
    deleted = dlbridge.from_dlpack(a, copy=True)
    deleted.delete()
    for protocol in (4, 5):
        with pytest.raises((dlbridge.Error, BufferError)):
            pickle.dumps(deleted, protocol=protocol)
    with pytest.raises(TypeError):
        deleted.__reduce_ex__("5")


def test_payload_rebuild_refusals():
    t = dlbridge.from_dlpack(base, copy=True)
    data, shape, dtype, read_only = _glue.tensor_payload(t)
    back = _glue.tensor_from_payload(data, shape, dtype, read_only)
    assert np.from_dlpack(back).tolist() == base.tolist()
    for bad in [(data[:-1], shape, dtype, read_only), (data, (7,), dtype, read_only), (data, shape, (2, 32), False),
                (data, "x", dtype, False), (42, shape, dtype, False), (data, shape, (300, 32, 1), False)]:
        with pytest.raises((dlbridge.Error, TypeError, ValueError)):
            _glue.tensor_from_payload(*bad)
    with pytest.raises(TypeError):
        _glue.tensor_from_payload(data)
    with pytest.raises((TypeError, dlbridge.Error)):
        _glue.tensor_payload(base)
