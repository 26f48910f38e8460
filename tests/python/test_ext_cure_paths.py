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
from raw_memory import raw_values

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
    assert raw_values(t).tolist() == [0, 1, 2, 3]


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
    assert t.dtype == "uint8" and raw_values(t).tolist() == [1, 250, 7]


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
    assert t.dtype == "float32" and raw_values(t).tolist() == [1.5, 2.5]
    p = Declares(values, type=lambda: "int8", data_type=lambda: "tensor(float16)")
    refused(p, "DLB_ERR_UNSUPPORTED_DTYPE", "its data_type() is 'tensor(float16)' (float16)",
            "but its __array__() gave float32")


def test_a_data_type_that_is_not_callable_or_raises_declares_nothing():
    values = np.array([3, 4], dtype=np.int64)
    t = dlbridge.from_dlpack(Declares(values, data_type="tensor(int8)"))
    assert raw_values(t).tolist() == [3, 4]

    def broken():
        raise RuntimeError("no session")

    t = dlbridge.from_dlpack(Declares(values, data_type=broken))
    assert raw_values(t).tolist() == [3, 4]


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
    assert t.copied and raw_values(t).tolist() == [1.0, 2.0, 4.0]
    assert t.data_ptr != values.ctypes.data
    # the export, the host copy of step 1, then the plain call of the last step
    assert p.calls == [(True, (1, 0), None), (True, (1, 0), True), (True, None, None)]


def test_a_legacy_producer_is_asked_for_its_own_memory_without_keywords():
    values = np.array([5, 6, 7], dtype=np.float32)
    p = LegacyOnlyItsOwn(lambda: values.__dlpack__())
    t = dlbridge.from_dlpack(p, device=(1, 0))
    assert t.copied and raw_values(t).tolist() == [5, 6, 7]


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
    assert t.copied and raw_values(t).tolist() == [1 - 2j]

    class Exhausted(Conjugated):
        def is_conj(self):
            raise MemoryError("no room to ask")

    with pytest.raises(MemoryError, match="no room to ask"):
        dlbridge.from_dlpack(Exhausted([1j], None))


# -- messages and steps at their edges --------------------------------------------


class Refuses:
    """Refuses its export with `error`; a host copy from `array`."""

    def __init__(self, shape=(3,), dtype="float32", error=None, array=None, interface=None):
        self.shape = shape
        self.dtype = dtype
        self._error = error or BufferError(REFUSAL)
        self._array = array
        if interface is not None:
            self.__array_interface__ = interface

    def __dlpack__(self, **kwargs):
        raise self._error

    def __dlpack_device__(self):
        return (1, 0)

    def __array__(self, dtype=None):
        if self._array is None:
            raise BufferError("no host array")
        return self._array()


def test_a_refusal_message_loses_its_trailing_blanks():
    p = Refuses(error=BufferError("cannot export this \n \n"), array=lambda: np.zeros(3, np.float32))
    t = dlbridge.from_dlpack(p, copy=True)
    assert t.copied
    text = refused(Refuses(error=BufferError("cannot export this \n \n")), "DLB_ERR_BACKEND")
    assert "raised BufferError: cannot export this;" in text


def test_a_two_dimensional_contradiction_is_described():
    p = Refuses(shape=(2, 3), array=lambda: np.zeros((3, 2), np.float32))
    refused(p, "DLB_ERR_MALFORMED", "float32 of shape (3, 2), where it says float32 of shape (2, 3)")


def test_a_dtype_without_a_name_or_a_string():
    class Unprintable:
        def __str__(self):
            raise ValueError("no words for it")

    refused(Refuses(dtype=Unprintable()), "DLB_ERR_UNSUPPORTED_DTYPE", "its dtype (unnamed) has no DLPack equivalent")


class Elements:
    """An array the buffer protocol cannot read (no buffer of its own), with
    a dtype name and itemsize, and view() giving `view`."""

    class DType:
        def __init__(self, name, itemsize):
            self.name = name
            self.itemsize = itemsize

    def __init__(self, name, itemsize, view):
        self.dtype = self.DType(name, itemsize)
        self._view = view

    def view(self, as_type):
        return self._view


def test_element_bytes_of_other_widths_or_no_buffer():
    refused(Refuses(dtype="float16", array=lambda: Elements("float32", 4, None)), "DLB_ERR_BACKEND",
            "__array__(): BufferError: the buffer protocol cannot read it, and its dtype is not the producer's")
    refused(Refuses(dtype="complex128", array=lambda: Elements("complex128", 16, None)), "DLB_ERR_BACKEND",
            "its elements are 16 bytes, not 128 bits")
    refused(Refuses(dtype="bfloat16", array=lambda: Elements("bfloat16", 2, ["not", "a", "buffer"])),
            "DLB_ERR_BACKEND", "__array__(): ")


def interface_of(values, **changes):
    face = dict(values.__array_interface__)
    face.update(changes)
    return face


def test_interfaces_that_are_not_dicts_or_say_too_much():
    keep = np.arange(3, dtype=np.float32)
    for face, words in [([("data", (0, False))], "not a version 3 __array_interface__ with a data tuple"),
                        (interface_of(keep, data=(keep.ctypes.data, False, 0)), "not a version 3"),
                        (interface_of(keep, typestr="^f4"), "typestr '^f4' names no DLPack dtype"),
                        (interface_of(keep, typestr="<f+4"), "typestr '<f+4' names no DLPack dtype"),
                        (interface_of(keep, strides=[4]), "its strides are not a tuple of 1 ints"),
                        (interface_of(keep, strides=("a",)), "its shape, strides or data address are not ints"),
                        (interface_of(keep, shape=(-3,)), "__array_interface__: dlbridge.Error: DLB_ERR_")]:
        refused(Refuses(interface=face), "DLB_ERR_BACKEND", "__array_interface__", words)


def test_zero_dimensional_interfaces():
    keep = np.array(2.5, dtype=np.float64)
    for face in (interface_of(keep), interface_of(keep, strides=())):
        t = dlbridge.from_dlpack(Refuses(shape=(), dtype="float64", interface=face))
        assert t.shape == () and raw_values(t).tolist() == 2.5


def test_a_c_method_refusing_without_a_traceback():
    """str.format raising KeyError from C: an exception without a
    traceback, cured as any other."""
    p = Refuses(array=lambda: np.ones(3, np.float32))
    p.__dlpack__ = "{missing}".format
    t = dlbridge.from_dlpack(p)
    assert t.copied and raw_values(t).tolist() == [1.0, 1.0, 1.0]
    q = Refuses()
    q.__dlpack__ = "{missing}".format
    refused(q, "DLB_ERR_BACKEND", "raised KeyError: 'missing'", cause=KeyError)


def test_an_array_without_a_shape_of_its_own():
    class Listish:
        def __dlpack__(self, **kwargs):
            raise BufferError(REFUSAL)

        def __dlpack_device__(self):
            return (1, 0)

        def __array__(self, dtype=None):
            return [1.0, 2.0]  # no shape, no dtype

    refused(Listish(), "DLB_ERR_UNSUPPORTED_LAYOUT", "it has no shape attribute")


def test_objects_without_dlpack_that_are_not_key_arrays():
    class DtypeOnly:
        dtype = "key<fry>"

    class Supported:
        shape = (2,)
        dtype = "float32"

    for obj in (DtypeOnly(), Supported()):
        with pytest.raises(AttributeError, match="does not implement the DLPack protocol"):
            dlbridge.from_dlpack(obj)

    class KeyArray:
        shape = (2,)
        dtype = "key<fry>"

        def __array__(self, dtype=None):
            return [0, 0]

    with pytest.raises(dlbridge.RefusalError) as info:
        dlbridge.from_dlpack(KeyArray())
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE" and info.value.__cause__ is None
    assert str(info.value).endswith("KeyArray has no __dlpack__, and its dtype key<fry> has no DLPack equivalent")


def test_a_declared_type_that_cannot_be_encoded():
    p = Declares(np.zeros(2, dtype=np.float32), type="\udcff")
    refused(p, "DLB_ERR_UNSUPPORTED_DTYPE", "its type is '', which names no dtype dlbridge knows")
