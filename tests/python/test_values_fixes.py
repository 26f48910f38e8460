"""A consumer receives the producer's values, or the call raises: byte order,
torch's conjugate and negative bits, refusals as BufferError, a dtype the
cure cannot establish, copy=True, padded sub-byte tensors through pickle,
copy and sharing, the __array_interface__ step, and producers that lie.

Every value is read from the tensor's own memory (ctypes over data_ptr),
never through another DLPack consumer, and compared with the producer's own
values (np.asarray of a resolved copy). Runs with numpy 1.24 and torch 1.13
(Debian) and with numpy 2 and torch 2 (the peer environment; the peers'
own cases are in test_peers_values.py)."""

import copy
import io
import pickle

import pytest

import dlbridge
from raw_memory import raw_values

np = pytest.importorskip("numpy")

REFUSAL = "no DLPack export of this one"


def same(got, want):
    """Equal values, and equal dtypes once byte order is left aside."""
    want = np.asarray(want)
    return got.shape == want.shape and got.dtype == want.dtype.newbyteorder("=") and np.array_equal(got, want)


class Refuser:
    """A producer whose __dlpack__ refuses; what the cure may ask of it is
    set per test (shape, dtype, __array__, __array_interface__)."""

    def __init__(self, **attrs):
        for name, value in attrs.items():
            setattr(self, name, value)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        raise BufferError(REFUSAL)

    def __dlpack_device__(self):
        return (1, 0)


# -- 1. byte order -------------------------------------------------------------

BIG_DTYPES = ["int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
              "complex64", "complex128"]


def big_endian(values, dtype):
    return np.asarray(values).astype(np.dtype(dtype).newbyteorder(">"))


def layouts(dtype):
    """(name, a big-endian array of `dtype` in that layout)."""
    base = big_endian(np.arange(1, 13).reshape(3, 4) * 97 - 300, dtype) if not dtype.startswith("u") else \
        big_endian(np.arange(1, 13).reshape(3, 4) * 4099 + 1, dtype)
    unaligned_memory = np.zeros(5 * np.dtype(dtype).itemsize + 1, np.uint8)
    unaligned = np.ndarray((5,), dtype=base.dtype, buffer=unaligned_memory, offset=1)
    unaligned[:] = base.ravel()[:5]
    return [
        ("C", base),
        ("F", np.asfortranarray(base)),
        ("sliced", base[::2, 1:]),
        ("reversed", base[::-1, ::-1]),
        ("transposed", base.T),
        ("broadcast", np.broadcast_to(base[:1], (3, 4))),
        ("0-d", base[1, 2:3].reshape(())),
        ("unaligned", unaligned),
    ]


@pytest.mark.parametrize("dtype", BIG_DTYPES)
def test_big_endian_arrays_arrive_in_native_order(dtype):
    for name, x in layouts(dtype):
        t = dlbridge.from_dlpack(x)
        assert t.copied and t.dtype == dtype, name
        assert same(raw_values(t), x), (name, raw_values(t), x)
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(x, copy=False)


def test_big_endian_through_array_and_array_interface():
    x = big_endian([[1.5, -2.25, 3.0], [4.0, 5.5, -6.0]], "float64")
    # A producer whose only host memory is its __array__(), a big-endian array.
    p = Refuser(shape=x.shape, dtype=np.dtype("float64"))
    p.__array__ = lambda *args, **kwargs: x
    t = dlbridge.from_dlpack(p)
    assert t.copied and same(raw_values(t), x)
    # One whose only host memory is its __array_interface__ ('>f8').
    q = Refuser(shape=x.shape, dtype=np.dtype("float64"), __array_interface__=x.__array_interface__)
    assert q.__array_interface__["typestr"] == ">f8"
    t = dlbridge.from_dlpack(q)
    assert t.copied and same(raw_values(t), x)
    # __array__() of another producer dtype's bytes in the other order: int32.
    y = big_endian([7, -8, 70000], "int32")
    r = Refuser(shape=y.shape, dtype=np.dtype("int32"))
    r.__array__ = lambda *args, **kwargs: y
    assert same(raw_values(dlbridge.from_dlpack(r)), y)


def test_a_big_endian_buffer_is_converted_by_the_cure_and_refused_by_from_buffer():
    x = big_endian(np.arange(6) * 1000 - 2500, "int32")
    with pytest.raises(dlbridge.Error, match="big-endian"):
        dlbridge.from_buffer(x)  # a view would show other values: refused
    p = Refuser(shape=x.shape, dtype=np.dtype("int32"))
    p.__array__ = lambda *args, **kwargs: np.asarray(memoryview(x))  # a buffer with format '>i'
    t = dlbridge.from_dlpack(p)
    assert same(raw_values(t), x)


# -- 2. torch's conjugate and negative bits -------------------------------------


def torch_cases():
    torch = pytest.importorskip("torch")
    z = torch.tensor([[1 + 2j, -3.5 - 4j], [0.25j, 7 + 0j]], dtype=torch.complex64)
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3) - 2.5
    cases = [("conj", z.conj()), ("conj().imag", z.conj().imag), ("_neg_view", torch._neg_view(x)),
             ("conj of a slice", z[:, 1:].conj()), ("neg view transposed", torch._neg_view(x).t())]
    return torch, cases


def test_torch_bits_are_resolved_by_a_copy():
    torch, cases = torch_cases()
    for name, v in cases:
        assert v.is_conj() or v.is_neg(), name
        want = v.resolve_conj().resolve_neg().numpy()  # the producer's own values
        t = dlbridge.from_dlpack(v)
        assert t.copied, name
        assert same(raw_values(t), want), (name, raw_values(t), want)
        # Through __dlpack__ too (keywords skip no path: device and copy).
        t = dlbridge.from_dlpack(v, device=(1, 0))
        assert t.copied and same(raw_values(t), want), name


def test_torch_bits_under_copy_false_are_refused_by_name():
    torch, cases = torch_cases()
    for name, v in cases:
        with pytest.raises(BufferError) as info:
            dlbridge.from_dlpack(v, copy=False)
        e = info.value
        assert isinstance(e, dlbridge.Error) and e.status_name == "DLB_ERR_NOT_ZERO_COPY", name
        bit = "conjugate bit (is_conj() is True)" if v.is_conj() else "negative bit (is_neg() is True)"
        assert bit in str(e) and "copy=False" in str(e), (name, str(e))


def test_any_producer_with_the_bits_is_asked():
    class Negated:
        """A producer of another library with torch's two queries: its memory
        holds x, its values are -x."""

        resolved = 0

        def __init__(self, x, neg=True):
            self.x = np.asarray(x)
            self.neg = neg

        def __dlpack__(self, **kwargs):
            return self.x.__dlpack__()  # the stored values, as torch's export does

        def is_conj(self):
            return False

        def is_neg(self):
            return self.neg

        def resolve_conj(self):
            return self

        def resolve_neg(self):
            type(self).resolved += 1
            return Negated(-self.x, neg=False) if self.neg else self

    p = Negated([1.0, -2.0, 3.5])
    t = dlbridge.from_dlpack(p)
    assert t.copied and same(raw_values(t), [-1.0, 2.0, -3.5]) and Negated.resolved == 1
    with pytest.raises(dlbridge.RefusalError, match="Negated has its negative bit"):
        dlbridge.from_dlpack(p, copy=False)
    q = Negated([4.0], neg=False)
    t = dlbridge.from_dlpack(q)  # nothing set: no resolution, zero-copy
    assert not t.copied and t.data_ptr == q.x.ctypes.data and Negated.resolved == 1


def test_a_bit_query_that_raises_is_a_refusal():
    class Broken:
        def __dlpack__(self, **kwargs):
            return np.zeros(2).__dlpack__()

        def is_neg(self):
            raise RuntimeError("cannot say")

    with pytest.raises(dlbridge.RefusalError, match=r"Broken\.is_neg\(\) raised RuntimeError: cannot say") as info:
        dlbridge.from_dlpack(Broken())
    assert isinstance(info.value.__cause__, RuntimeError)


# -- 3. refusals are BufferErrors ------------------------------------------------


def test_refusals_are_buffer_errors_and_dlbridge_errors():
    assert issubclass(dlbridge.RefusalError, BufferError) and issubclass(dlbridge.RefusalError, dlbridge.Error)
    cause = None
    try:
        dlbridge.from_dlpack(Refuser(shape=(2,), dtype=np.dtype("float32")))
    except BufferError as e:  # the array API standard's except clause
        assert isinstance(e, dlbridge.Error) and e.status_name == "DLB_ERR_BACKEND"
        assert "Refuser.__dlpack__ raised BufferError: " + REFUSAL in str(e)
        cause = e.__cause__
    assert isinstance(cause, BufferError) and str(cause) == REFUSAL
    # A dtype DLPack cannot describe (numpy datetime64) and an object
    # without a shape: refusals too, with the producer's words.
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(np.array(["2020-01-01"], dtype="datetime64[D]"))
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE" and info.value.__cause__ is not None
    with pytest.raises(BufferError, match="no shape"):
        dlbridge.from_dlpack(Refuser())
    # A malformed capsule is refused as such (the library's refusal).
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(Refuser(__dlpack__=lambda **kwargs: [1, 2]))
    assert info.value.status_name == "DLB_ERR_MALFORMED" and isinstance(info.value, dlbridge.Error)
    # Not refusals: other failures of the library stay dlbridge.Error only.
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.empty((2,), "float99")
    assert not isinstance(info.value, BufferError)


def test_torch_requires_grad_refusal_is_a_buffer_error():
    torch = pytest.importorskip("torch")
    x = torch.ones(3, requires_grad=True)
    try:
        t = dlbridge.from_dlpack(x)
    except BufferError as e:  # torch 1.13 refuses, and so does its numpy()
        assert isinstance(e, dlbridge.RefusalError) and "gradient" in str(e) and e.__cause__ is not None
    else:  # torch 2 exports it
        assert same(raw_values(t), x.detach().numpy())


# -- 4. a dtype the cure cannot establish ----------------------------------------


class Declaring(Refuser):
    """A producer without shape or dtype of its own (as onnxruntime's OrtValue
    and pyarrow's arrays), whose __array__() is its host memory."""

    def __init__(self, host, **attrs):
        super().__init__(**attrs)
        self.host = host

    def __array__(self, *args, **kwargs):
        return self.host


def test_a_dtype_the_producer_declares_otherwise_is_refused_not_relabelled():
    # onnxruntime's float8: data_type() "tensor(float8e4m3fn)", __array__() its bytes as uint8.
    ort_like = Declaring(np.arange(6, dtype=np.uint8), data_type=lambda: "tensor(float8e4m3fn)")
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(ort_like)
    e = info.value
    assert e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert "tensor(float8e4m3fn)" in str(e) and "gave uint8" in str(e) and "does not relabel" in str(e)
    # A declared dtype that differs from __array__()'s (int64 shown as float64, as nulls would make it).
    with pytest.raises(dlbridge.RefusalError, match=r"its type is 'int64' \(int64\), but its __array__\(\) gave "
                                                    "float64"):
        dlbridge.from_dlpack(Declaring(np.array([1.0, np.nan]), type="int64"))
    # What it declares agrees (pyarrow's bit-packed booleans): copied.
    t = dlbridge.from_dlpack(Declaring(np.array([True, False, True]), type="bool"))
    assert t.copied and same(raw_values(t), [True, False, True])
    t = dlbridge.from_dlpack(Declaring(np.arange(3.0), data_type=lambda: "tensor(double)"))
    assert same(raw_values(t), np.arange(3.0))
    # ONNX's "float" is float32 (numpy's and dlbridge's "float" is float64).
    t = dlbridge.from_dlpack(Declaring(np.arange(3, dtype=np.float32), data_type=lambda: "tensor(float)"))
    assert t.dtype == "float32" and same(raw_values(t), np.arange(3, dtype=np.float32))
    with pytest.raises(dlbridge.RefusalError, match=r"'tensor\(float\)' \(float32\), but its __array__\(\) gave float64"):
        dlbridge.from_dlpack(Declaring(np.arange(3.0), data_type=lambda: "tensor(float)"))
    with pytest.raises(dlbridge.RefusalError, match=r"'tensor\(float8e5m2\)' \(float8_e5m2\), but"):
        dlbridge.from_dlpack(Declaring(np.arange(3, dtype=np.uint8), data_type=lambda: "tensor(float8e5m2)"))
    # Declaring nothing: __array__()'s word stands.
    x = np.arange(4, dtype=np.int16)
    assert same(raw_values(dlbridge.from_dlpack(Declaring(x))), x)


# -- 5. copy=True ------------------------------------------------------------------


class IgnoresCopy:
    """A 1.x producer that takes copy= and ignores it: its memory, no IS_COPIED."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return dlbridge.from_buffer(self.x).__dlpack__(max_version=max_version)


class LegacyAnswer:
    """A 1.x producer that copies on copy=True but answers with a legacy
    capsule, which cannot say so (mlx)."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return dlbridge.from_buffer(self.x.copy() if copy else self.x).__dlpack__()


class CannotCopy:
    """A producer that refuses copy=True (tvm-ffi: "copy not yet supported")."""

    calls = []

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        type(self).calls.append(copy)
        if copy:
            raise BufferError("copy not yet supported")
        return dlbridge.from_buffer(self.x).__dlpack__(max_version=max_version)


@pytest.mark.parametrize("producer", [IgnoresCopy, LegacyAnswer, CannotCopy])
def test_copy_true_gives_a_copy_whatever_the_producer_answers(producer):
    x = np.arange(5.0)
    CannotCopy.calls = []
    t = dlbridge.from_dlpack(producer(x), copy=True)
    assert t.copied and t.data_ptr != x.ctypes.data
    x[:] = -1.0  # a later write into the producer does not show through
    assert same(raw_values(t), np.arange(5.0))
    if producer is CannotCopy:
        assert CannotCopy.calls == [True, None]
    # Without copy=True the producer's memory, as it was.
    u = dlbridge.from_dlpack(producer(x))
    assert not u.copied and u.data_ptr == x.ctypes.data


def test_copy_true_of_a_copy_is_not_copied_twice():
    class Copies:
        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            return dlbridge.from_buffer(np.arange(3.0)).__dlpack__(max_version=max_version, copy=copy)

    t = dlbridge.from_dlpack(Copies(), copy=True)
    assert t.copied and same(raw_values(t), np.arange(3.0))


# -- 6. padded sub-byte tensors ------------------------------------------------------


class _Int4:
    name = "int4"
    itemsize = 1
    isnative = True


class Int4Array:
    """What ml_dtypes' int4 array offers the cure: a one-byte dtype named
    int4 and view() as uint8, no buffer protocol."""

    dtype = _Int4()

    def __init__(self, values):
        self.values = np.asarray(values, np.int8)
        self.shape = self.values.shape

    def view(self, as_):
        assert as_ == "uint8"
        return self.values.view(np.uint8)


def padded_int4(values):
    """A padded int4 dlbridge tensor (one element a byte), made by the cure
    as it makes one of JAX's int4 arrays."""
    host = Int4Array(values)
    t = dlbridge.from_dlpack(Declaring(host, shape=host.shape, dtype=_Int4()))
    assert t.dtype == "int4" and t.nbytes == host.values.size and t.copied
    assert raw_values(t, np.int8).tolist() == host.values.tolist()
    return t


def check_int4(u, values):
    assert u.dtype == "int4" and u.shape == np.shape(values) and u.nbytes == np.size(values)
    assert raw_values(u, np.int8).tolist() == np.asarray(values).tolist()


def test_padded_sub_byte_tensors_survive_pickling_copying_and_sharing():
    values = [[-8, -1, 0, 7], [3, -4, 5, 1]]
    t = padded_int4(values)
    check_int4(pickle.loads(pickle.dumps(t, protocol=5)), values)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and buffers[0].raw().nbytes == 8
    check_int4(pickle.loads(data, buffers=buffers), values)
    check_int4(pickle.loads(pickle.dumps(t, protocol=4)), values)
    check_int4(copy.deepcopy(t), values)
    check_int4(copy.copy(t), values)
    shared = dlbridge.share(t)
    check_int4(shared, values)
    assert dlbridge._glue.is_shared(shared)
    # A view of it laid out otherwise is pickled through one compact copy.
    f = io.BytesIO()
    pickle.dump(shared, f, protocol=5)
    check_int4(pickle.loads(f.getvalue()), values)


def test_a_padded_header_is_checked_by_the_same_rule():
    from dlbridge import _glue

    header = (2, 0, 4, 1, (2, 3), (3, 1), False, True)  # int4, padded: 6 bytes
    check_int4(_glue.tensor_from_pickle(header, bytearray(b"\x01\x02\x03\x0d\x0e\x0f")), [[1, 2, 3], [13, 14, 15]])
    with pytest.raises(dlbridge.Error, match="has 3 bytes, the header's shape and dtype need 6"):
        _glue.tensor_from_pickle(header, bytearray(3))  # the packed size is no padded one
    with pytest.raises(dlbridge.Error, match="7 bytes, but the shape and dtype need 6"):
        _glue.tensor_from_payload(b"\x00" * 7, (2, 3), (0, 4, 1), False, True)


# -- 7. the __array_interface__ step ----------------------------------------------------


def test_the_array_interface_carries_the_layout():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-2]  # strided, negative steps

    class Interfaced:
        def __dlpack__(self, **kwargs):
            raise BufferError(REFUSAL)

        @property
        def __array_interface__(self):
            return x.__array_interface__

    p = Interfaced()
    assert not hasattr(p, "shape") and not hasattr(p, "dtype")
    t = dlbridge.from_dlpack(p)
    assert t.copied and t.shape == x.shape and t.dtype == "float32" and same(raw_values(t), x)


# -- bad input: producers that lie --------------------------------------------------


def refused(p, match, status="DLB_ERR_MALFORMED"):
    with pytest.raises(dlbridge.RefusalError, match=match) as info:
        dlbridge.from_dlpack(p)
    assert info.value.status_name == status
    assert dlbridge.live_exports() == 0
    return info.value


def test_an_array_of_another_dtype_or_shape_is_a_named_refusal():
    for other in (np.arange(3, dtype=np.int32), np.arange(4.0), np.zeros((3, 1))):
        p = Refuser(shape=(3,), dtype=np.dtype("float64"))
        p.__array__ = lambda *args, other=other, **kwargs: other
        e = refused(p, r"contradicts itself.*__array__\(\) gave another shape or dtype")
        assert "where it says float64 of shape (3,)" in str(e)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_an_ndarray_subclass_from_array_is_refused():
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    p = Refuser(shape=(2, 2), dtype=np.dtype("float64"))
    p.__array__ = lambda *args, **kwargs: m
    refused(p, r"__array__\(\) gave a numpy\.matrix, a subclass of numpy\.ndarray")
    refused(Declaring(m), r"__array__\(\) gave a numpy\.matrix")


@pytest.mark.parametrize("typestr,match", [("<x8", "typestr '<x8' names no DLPack dtype"),
                                           ("<f3", "typestr '<f3' names no DLPack dtype"),
                                           ("<f8junk", "typestr '<f8junk'"), ("<b2", "typestr '<b2'"),
                                           ("~f8", "typestr '~f8'")])
def test_a_bad_typestr_is_a_named_refusal(typestr, match):
    x = np.arange(4.0)
    face = dict(x.__array_interface__, typestr=typestr)
    p = Refuser(shape=(4,), dtype=np.dtype("float64"), __array_interface__=face)
    e = refused(p, match, status="DLB_ERR_BACKEND")
    assert "__array_interface__: BufferError" in str(e)


def test_array_interface_strides_that_are_not_whole_elements_are_refused():
    x = np.arange(8.0)
    face = dict(x.__array_interface__, shape=(3,), strides=(12,))
    refused(Refuser(shape=(3,), dtype=np.dtype("float64"), __array_interface__=face),
            r"strides\[0\] is 12 bytes, not a whole number of 8-byte elements", status="DLB_ERR_BACKEND")
    face = dict(x.__array_interface__, shape=(3,), strides=(8, 8))
    refused(Refuser(shape=(3,), dtype=np.dtype("float64"), __array_interface__=face),
            "strides are not a tuple of 1 ints", status="DLB_ERR_BACKEND")


def test_an_interface_of_another_dtype_is_a_named_refusal():
    x = np.arange(4, dtype=np.int64)
    p = Refuser(shape=(4,), dtype=np.dtype("float64"), __array_interface__=x.__array_interface__)
    refused(p, r"__array_interface__ gave another shape or dtype.*int64 of shape \(4,\), where it says float64")


def test_a_producer_raising_in_the_middle_of_the_copy():
    class MidCure(Refuser):
        def __array__(self, *args, **kwargs):
            raise RuntimeError("gone mid-copy")

    e = refused(MidCure(shape=(2,), dtype=np.dtype("float32")), "__array__\\(\\): RuntimeError: gone mid-copy",
                status="DLB_ERR_BACKEND")
    assert isinstance(e.__cause__, BufferError)

    class Interrupted(Refuser):
        def __array__(self, *args, **kwargs):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dlbridge.from_dlpack(Interrupted(shape=(2,), dtype=np.dtype("float32")))
    assert dlbridge.live_exports() == 0
