"""The host-copy cure of _cure.c on the paths the other cure tests leave:
a layout read from a malformed __array_interface__, the element-type
declarations of producers without a dtype (`type`, data_type()), the last
step (__dlpack__() on the producer's own device, asked when the consumer
named a device), packed elements where padded ones were due, and the
producer's resolve_conj() / resolve_neg() failing or answering wrongly.
Each refusal keeps its status and the producer's words; exceptions that
are not refusals (MemoryError, KeyboardInterrupt) pass through as they are."""

import pytest

import dlbridge

np = pytest.importorskip("numpy")

REFUSAL = "cannot export this"


def refused(producer, status, *words, cause=BufferError, **kwargs):
    with pytest.raises(dlbridge.RefusalError) as info:
        dlbridge.from_dlpack(producer, **kwargs)
    text = str(info.value)
    assert info.value.status_name == status, text
    for w in words:
        assert w in text, text
    if cause is not None:
        assert isinstance(info.value.__cause__, cause), repr(info.value.__cause__)
    return text


# -- a layout from __array_interface__ alone -------------------------------------


class InterfaceOnly:
    """No shape, dtype or __array__: only an __array_interface__, given by
    `face` (a callable, asked on every read)."""

    def __init__(self, face):
        self._face = face

    def __dlpack__(self, **kwargs):
        raise BufferError(REFUSAL)

    def __dlpack_device__(self):
        return (1, 0)

    @property
    def __array_interface__(self):
        return self._face()


def test_an_interface_that_says_no_layout_is_named_in_the_refusal():
    keep = np.arange(4, dtype=np.int16)
    face = dict(keep.__array_interface__, typestr="<i3")
    text = refused(InterfaceOnly(lambda: face), "DLB_ERR_UNSUPPORTED_LAYOUT",
                   "it has no shape attribute, and its __array_interface__ says no layout",
                   "BufferError: typestr '<i3' names no DLPack dtype")
    assert REFUSAL in text
    # Readable, it gives the layout and the values.
    t = dlbridge.from_dlpack(InterfaceOnly(lambda: dict(keep.__array_interface__)))
    assert t.copied and t.shape == (4,) and t.dtype == "int16"
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3]


def test_an_interface_read_that_runs_out_of_memory_is_not_a_refusal():
    reads = []

    def face():
        reads.append(1)
        if len(reads) > 1:  # hasattr's look passes; the read itself fails
            raise MemoryError("no room for the interface")
        return {}

    with pytest.raises(MemoryError, match="no room for the interface"):
        dlbridge.from_dlpack(InterfaceOnly(face))
    assert len(reads) == 2


def test_unsigned_typestrs_are_read():
    keep = np.array([1, 250, 7], dtype=np.uint8)
    t = dlbridge.from_dlpack(InterfaceOnly(lambda: dict(keep.__array_interface__)))
    assert t.dtype == "uint8" and np.from_dlpack(t).tolist() == [1, 250, 7]


# -- what a producer without a dtype declares of its element type ----------------


class Declares:
    """A producer without shape or dtype (pyarrow, onnxruntime): its
    __array__() gives the layout; `type` and data_type() declare what it holds."""

    def __init__(self, array, **declared):
        self._array = array
        for name, value in declared.items():
            setattr(self, name, value)

    def __dlpack__(self, **kwargs):
        raise BufferError(REFUSAL)

    def __dlpack_device__(self):
        return (1, 0)

    def __array__(self, dtype=None):
        return self._array


def test_a_callable_type_attribute_is_no_declaration():
    """`type` that is a method (not pyarrow's DataType) is not read; the
    producer's data_type() is."""
    values = np.array([1.5, 2.5], dtype=np.float32)
    p = Declares(values, type=lambda: "int8", data_type=lambda: "tensor(float32)")
    t = dlbridge.from_dlpack(p)
    assert t.dtype == "float32" and np.from_dlpack(t).tolist() == [1.5, 2.5]
    p = Declares(values, type=lambda: "int8", data_type=lambda: "tensor(float16)")
    refused(p, "DLB_ERR_UNSUPPORTED_DTYPE", "its data_type() is 'tensor(float16)' (float16)",
            "but its __array__() gave float32")


def test_a_data_type_that_is_not_callable_or_raises_declares_nothing():
    values = np.array([3, 4], dtype=np.int64)
    t = dlbridge.from_dlpack(Declares(values, data_type="tensor(int8)"))
    assert np.from_dlpack(t).tolist() == [3, 4]

    def broken():
        raise RuntimeError("no session")

    t = dlbridge.from_dlpack(Declares(values, data_type=broken))
    assert np.from_dlpack(t).tolist() == [3, 4]


def test_a_data_type_that_runs_out_of_memory_is_not_a_refusal():
    def exhausted():
        raise MemoryError("no room for the name")

    with pytest.raises(MemoryError, match="no room for the name"):
        dlbridge.from_dlpack(Declares(np.zeros(2, dtype=np.int8), data_type=exhausted))


def test_parentheses_that_do_not_close_the_name_are_part_of_it():
    values = np.zeros(2, dtype=np.float32)
    for declared in ("tensor(float32", "float32)(", "tensor(float32) x"):
        refused(Declares(values, type=declared), "DLB_ERR_UNSUPPORTED_DTYPE",
                "its type is '%s', which names no dtype dlbridge knows" % declared,
                "its __array__() gave float32")


# -- the last step: __dlpack__() on the producer's own device ---------------------


class OnlyItsOwn:
    """Refuses every host copy; `own` is what a plain __dlpack__() gives."""

    shape = (3,)
    dtype = "float32"

    def __init__(self, own):
        self._own = own
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append((max_version is not None, dl_device, copy))
        if dl_device is None and copy is None:
            return self._own()
        raise BufferError(REFUSAL)

    def __dlpack_device__(self):
        return (1, 0)

    def __array__(self, dtype=None):
        raise BufferError("no host array")


class LegacyOnlyItsOwn(OnlyItsOwn):
    """The same, speaking only the protocol before DLPack 1.0."""

    def __dlpack__(self, stream=None):
        self.calls.append((False, None, None))
        if len(self.calls) > 1:
            return self._own()
        raise BufferError(REFUSAL)


def test_a_device_request_asks_the_producer_for_its_own_memory_last():
    values = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    p = OnlyItsOwn(lambda: values.__dlpack__())
    t = dlbridge.from_dlpack(p, device=(1, 0))
    assert t.copied and np.from_dlpack(t).tolist() == [1.0, 2.0, 4.0]
    assert t.data_ptr != values.ctypes.data
    # the export, the host copy of step 1, then the plain call of the last step
    assert p.calls == [(True, (1, 0), None), (True, (1, 0), True), (True, None, None)]


def test_a_legacy_producer_is_asked_for_its_own_memory_without_keywords():
    values = np.array([5, 6, 7], dtype=np.float32)
    p = LegacyOnlyItsOwn(lambda: values.__dlpack__())
    t = dlbridge.from_dlpack(p, device=(1, 0))
    assert t.copied and np.from_dlpack(t).tolist() == [5, 6, 7]


def test_the_last_step_refused_too_is_named():
    def refuse():
        raise ValueError("not even on its own device")

    text = refused(OnlyItsOwn(refuse), "DLB_ERR_BACKEND", "no host copy could be made",
                   "__dlpack__() on its own device: ValueError: not even on its own device", device=(1, 0))
    assert REFUSAL in text


def test_packed_sub_byte_elements_are_refused_and_the_next_step_asked():
    """An int4 producer's host copy must hold one element per byte: a packed
    one of the same shape is refused (named), and __array__() is asked."""
    packed = dlbridge.empty((4,), "int4")

    class Int4:
        shape = (4,)
        dtype = "int4"

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            if copy is True:
                return packed.__dlpack__(max_version=(1, 3))
            raise BufferError(REFUSAL)

        def __dlpack_device__(self):
            return (1, 0)

        def __array__(self, dtype=None):
            raise BufferError("no host array")

    refused(Int4(), "DLB_ERR_BACKEND",
            "__dlpack__(dl_device=(1, 0), copy=True): BufferError: it gave packed sub-byte elements, not one per byte",
            "__array__(): BufferError: no host array")


# -- bits a DLPack tensor cannot carry ------------------------------------------


class Conjugated:
    """torch's two queries on another producer: `resolved` is what
    resolve_conj() does."""

    def __init__(self, values, resolved, conj=True):
        self.values = np.asarray(values)
        self._resolved = resolved
        self._conj = conj

    def __dlpack__(self, **kwargs):
        return self.values.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)

    def is_conj(self):
        return self._conj

    def is_neg(self):
        return False

    def resolve_conj(self):
        return self._resolved(self)

    def resolve_neg(self):
        return self


def test_a_resolution_that_raises_is_a_backend_refusal():
    def fails(self):
        raise ValueError("cannot resolve here")

    p = Conjugated([1 + 1j], fails)
    refused(p, "DLB_ERR_BACKEND", "Conjugated has its conjugate bit (is_conj() is True) set",
            "its resolve_conj() raised ValueError: cannot resolve here", cause=ValueError)


def test_a_resolution_interrupted_is_passed_on():
    def interrupted(self):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dlbridge.from_dlpack(Conjugated([1 + 1j], interrupted))


def test_a_resolution_that_changes_nothing_is_refused():
    p = Conjugated([1 + 1j], lambda self: self)
    refused(p, "DLB_ERR_BACKEND", "resolve_conj() / resolve_neg() gave the same tensor back", cause=None)
    q = Conjugated([1 + 1j], lambda self: Conjugated(self.values, None))  # still conjugated
    refused(q, "DLB_ERR_BACKEND", "gave a tensor with a bit still set", cause=None)


def test_a_resolution_whose_bit_query_fails_is_that_refusal():
    class Unsure(Conjugated):
        def is_conj(self):
            raise RuntimeError("cannot say")

    p = Conjugated([1 + 1j], lambda self: Unsure(self.values, None))
    refused(p, "DLB_ERR_BACKEND", "Unsure.is_conj() raised RuntimeError: cannot say", cause=RuntimeError)


def test_bit_queries_answered_with_other_truths_and_failures():
    # 1 and 0 count as True and False; the resolution's values come through.
    p = Conjugated([1 + 2j], lambda self: Conjugated(np.conj(self.values), None, conj=0), conj=1)
    t = dlbridge.from_dlpack(p)
    assert t.copied and np.from_dlpack(t).tolist() == [1 - 2j]

    class Exhausted(Conjugated):
        def is_conj(self):
            raise MemoryError("no room to ask")

    with pytest.raises(MemoryError, match="no room to ask"):
        dlbridge.from_dlpack(Exhausted([1j], None))
