"""The host-copy cure of from_dlpack at its edges: every step that gives
something unusable (another shape or dtype, packed where padded elements
were due, a dtype the buffer protocol cannot name, a malformed
__array_interface__), layouts that cannot be read, exceptions that are not
refusals, and objects without __dlpack__. Each failure names the step and
what it got; values that do come through are the producer's own."""

import pytest

import dlbridge
from raw_memory import raw_values

np = pytest.importorskip("numpy")

REFUSAL = "cannot export this"


class Producer:
    """Refuses its plain export; offers what each test gives it."""

    def __init__(self, shape=(3,), dtype="float32", again=None, array=None, interface=None, deleted=None):
        self.shape = shape
        self.dtype = dtype
        self._again = again
        self._array = array
        if interface is not None:
            self.__array_interface__ = interface
        if deleted is not None:
            self.is_deleted = deleted

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device == (1, 0) and copy is True and self._again is not None:
            return self._again()
        raise BufferError(REFUSAL)

    def __dlpack_device__(self):
        return (1, 0)

    def __array__(self, dtype=None):
        if self._array is None:
            raise AttributeError("no __array__ here")
        return self._array()


CONTRADICTS = "the producer contradicts itself"


def refused_with(producer, status, *words, copy=None):
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(producer, copy=copy)
    assert info.value.status_name == status, str(info.value)
    for w in words:
        assert w in str(info.value), str(info.value)
    assert isinstance(info.value.__cause__, BufferError)
    return str(info.value)


def test_a_host_copy_of_another_shape_is_a_contradiction():
    p = Producer(shape=(3,), again=lambda: np.arange(4, dtype=np.float32).__dlpack__())
    refused_with(p, "DLB_ERR_MALFORMED", CONTRADICTS,
                 "gave another shape or dtype than the producer's own: float32 of shape (4,)")


def test_a_host_copy_of_another_dtype_stops_the_cure():
    """A producer that contradicts itself is not asked again: its __array__
    would be no more trustworthy than its host copy."""
    p = Producer(shape=(3,), again=lambda: np.arange(3, dtype=np.float64).__dlpack__(),
                 array=lambda: np.array([7, 8, 9], dtype=np.float32))
    refused_with(p, "DLB_ERR_MALFORMED", CONTRADICTS, "float64 of shape (3,), where it says float32")


def test_packed_where_padded_elements_were_due():
    """int4: one element per byte is what the cure copies; a packed host
    copy (no padded flag) is refused, and so is its __array__ in uint8."""
    packed = dlbridge.empty((2,), "int4")
    p = Producer(shape=(4,), dtype="int4", again=lambda: packed.__dlpack__(max_version=(1, 3)))
    refused_with(p, "DLB_ERR_MALFORMED", CONTRADICTS, "int4 of shape (2,), where it says int4 of shape (4,)")


class ElementsOnly:
    """An array whose dtype the buffer protocol cannot name (ml_dtypes'
    bfloat16, int4): a dtype with a name and an itemsize, and view()."""

    class DType:
        def __init__(self, name, itemsize):
            self.name = name
            self.itemsize = itemsize

    def __init__(self, values, name, itemsize, view_as=None, view_raises=False):
        self.values = values
        self.dtype = self.DType(name, itemsize)
        self.view_as = view_as
        self.view_raises = view_raises

    def view(self, as_type):
        if self.view_raises:
            raise ValueError("cannot view")
        assert as_type == self.view_as, as_type
        return self.values


def test_bfloat16_elements_come_through_as_their_bytes():
    bits = np.array([0x3F80, 0x4000, 0x4040], dtype=np.uint16)  # 1.0, 2.0, 3.0 in bfloat16
    p = Producer(shape=(3,), dtype="bfloat16", array=lambda: ElementsOnly(bits, "bfloat16", 2, "uint16"))
    t = dlbridge.from_dlpack(p)
    assert t.dtype == "bfloat16" and t.copied
    raw = np.frombuffer(bytes(dlbridge._glue.tensor_payload(t)[0]), dtype=np.uint16)
    assert raw.tolist() == bits.tolist()


def test_sub_byte_elements_come_through_one_per_byte():
    one_per_byte = np.array([1, 2, 3, 4], dtype=np.uint8)
    p = Producer(shape=(4,), dtype="int4", array=lambda: ElementsOnly(one_per_byte, "int4", 1, "uint8"))
    t = dlbridge.from_dlpack(p)
    assert t.dtype == "int4" and t.copied
    assert bytes(dlbridge._glue.tensor_payload(t)[0]) == bytes([1, 2, 3, 4])


ELEMENTS_THAT_DO_NOT_FIT = [
    (lambda: ElementsOnly(None, "float16", 2, "uint16"), "its dtype is not the producer's"),
    (lambda: ElementsOnly(None, "bfloat16", 4, "uint32"), "its elements are 4 bytes, not 16 bits"),
    (lambda: ElementsOnly(None, "bfloat16", 2, view_raises=True), "cannot view"),
    (lambda: ElementsOnly(None, "complex", 16, "uint128"), "its dtype is not the producer's"),
]


def test_element_bytes_that_do_not_fit():
    for elements, words in ELEMENTS_THAT_DO_NOT_FIT:
        p = Producer(shape=(3,), dtype="bfloat16", array=elements)
        refused_with(p, "DLB_ERR_BACKEND", "__array__()", words)


def interface(**changes):
    keep = np.arange(6, dtype=np.float32)
    face = dict(keep.__array_interface__)
    face.update(changes)
    return keep, face


UNREADABLE_INTERFACES = [
    ({"data": "nope"}, "not a version 3 __array_interface__"),
    ({"shape": [6]}, "not a version 3 __array_interface__"),
    ({"typestr": 3}, "not a version 3 __array_interface__"),
    ({"typestr": "<f"}, "typestr '<f' names no DLPack dtype"),
    ({"typestr": "<U4"}, "typestr '<U4' names no DLPack dtype"),
    ({"typestr": "<f0"}, "typestr '<f0' names no DLPack dtype"),
    ({"typestr": "<f32"}, "typestr '<f32' names no DLPack dtype"),
    ({"shape": (1,) * 65}, "not a version 3 __array_interface__"),
    ({"shape": ("a",)}, ""),
]


def test_array_interfaces_that_cannot_be_read():
    for changes, words in UNREADABLE_INTERFACES:
        keep, face = interface(**changes)
        p = Producer(shape=(6,), interface=face)
        text = refused_with(p, "DLB_ERR_BACKEND", "__array_interface__", words)
        assert REFUSAL in text
        del keep


def test_array_interfaces_with_strides_and_read_only_data():
    keep = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    face = dict(keep.__array_interface__)
    face["data"] = (face["data"][0], True)
    p = Producer(shape=(3, 2), dtype="int32", interface=face)
    t = dlbridge.from_dlpack(p)
    assert raw_values(t).tolist() == keep.tolist()
    face["strides"] = (8,)  # wrong length: refused, never guessed
    p = Producer(shape=(3, 2), dtype="int32", interface=face)
    refused_with(p, "DLB_ERR_BACKEND", "its strides are not a tuple of 2 ints")
    bools = np.array([True, False])
    p = Producer(shape=(2,), dtype="bool", interface=dict(bools.__array_interface__))
    assert bytes(dlbridge._glue.tensor_payload(dlbridge.from_dlpack(p))[0]) == bools.tobytes()
    complexes = np.array([1 + 2j], dtype=np.complex64)
    p = Producer(shape=(1,), dtype="complex64", interface=dict(complexes.__array_interface__))
    assert bytes(dlbridge._glue.tensor_payload(dlbridge.from_dlpack(p))[0]) == complexes.tobytes()
    del keep


UNREADABLE_LAYOUTS = [
    (None, "float32", "DLB_ERR_UNSUPPORTED_LAYOUT", "no shape attribute"),
    (("a",), "float32", "DLB_ERR_UNSUPPORTED_LAYOUT", "not a tuple of ints"),
    ((1,) * 65, "float32", "DLB_ERR_UNSUPPORTED_LAYOUT", "at most 64 extents"),
    ((3,), "string", "DLB_ERR_UNSUPPORTED_DTYPE", "has no DLPack equivalent"),
    ((3,), None, "DLB_ERR_UNSUPPORTED_LAYOUT", "it has no dtype attribute"),
]


def test_layouts_the_cure_cannot_read():
    for shape, dtype, status, words in UNREADABLE_LAYOUTS:
        p = Producer(shape=shape, dtype=dtype)
        if shape is None:
            del p.shape
        if dtype is None:
            del p.dtype
        refused_with(p, status, words)


def test_a_dtype_named_like_torch_and_one_without_a_name():
    class TorchLike:
        def __str__(self):
            return "torch.float32"

    class Nameless:
        name = 7

        def __str__(self):
            return "float32"

    for dt in (TorchLike(), Nameless()):
        p = Producer(shape=(2,), dtype=dt, array=lambda: np.array([1.5, 2.5], dtype=np.float32))
        assert raw_values(dlbridge.from_dlpack(p)).tolist() == [1.5, 2.5]


def test_no_layout_of_its_own_and_an_array_that_refuses_too():
    class Arrowish:
        def __dlpack__(self, **kwargs):
            raise BufferError(REFUSAL)

        def __dlpack_device__(self):
            return (1, 0)

        def __array__(self, dtype=None):
            raise ValueError("no host array either")

    text = refused_with(Arrowish(), "DLB_ERR_UNSUPPORTED_LAYOUT", "and __array__() raised ValueError: no host array")
    assert REFUSAL in text

    class Interrupting(Arrowish):
        def __array__(self, dtype=None):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dlbridge.from_dlpack(Interrupting())


def test_a_step_that_raises_what_is_not_a_refusal_stops_the_cure():
    def interrupt():
        raise KeyboardInterrupt

    p = Producer(shape=(3,), again=interrupt, array=lambda: np.zeros(3, dtype=np.float32))
    with pytest.raises(KeyboardInterrupt):
        dlbridge.from_dlpack(p)

    def recursion():
        raise RecursionError("deep")

    p = Producer(shape=(3,), array=recursion)
    with pytest.raises(RecursionError):
        dlbridge.from_dlpack(p)


def test_a_producer_that_says_it_was_deleted():
    p = Producer(deleted=lambda: True)
    refused_with(p, "DLB_ERR_DELETED", REFUSAL)
    p = Producer(deleted=lambda: 1 / 0, array=lambda: np.zeros(3, dtype=np.float32))  # the question fails: cured
    assert dlbridge.from_dlpack(p).shape == (3,)
    p = Producer(deleted="not callable", array=lambda: np.zeros(3, dtype=np.float32))
    assert dlbridge.from_dlpack(p).shape == (3,)


def test_copy_false_and_devices_the_cure_cannot_reach():
    p = Producer(array=lambda: np.zeros(3, dtype=np.float32))
    with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY"):
        dlbridge.from_dlpack(p, copy=False)
    with pytest.raises(BufferError, match="DLB_ERR_UNSUPPORTED_DEVICE"):
        dlbridge.from_dlpack(p, device=(2, 0))
    with pytest.raises(ValueError, match="has no streams"):
        dlbridge.from_dlpack(p, device=(1, 0), stream=3)
    q = Producer(shape=None)
    del q.shape
    with pytest.raises(BufferError, match="DLB_ERR_UNSUPPORTED_LAYOUT"):
        dlbridge.from_dlpack(q, copy=False)


def test_objects_without_dlpack():
    class KeyArray:
        """A JAX PRNG key array: array-like, a dtype DLPack cannot describe."""
        shape = (2,)
        dtype = "key<fry>"

        def __array__(self, dtype=None):
            raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array")

    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(KeyArray())
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert "KeyArray has no __dlpack__" in str(info.value) and "PRNGKey" in str(info.value)

    class Plain:
        pass

    with pytest.raises(AttributeError, match="does not implement the DLPack protocol"):
        dlbridge.from_dlpack(Plain())

    class KeyArrayInterrupting(KeyArray):
        def __array__(self, dtype=None):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dlbridge.from_dlpack(KeyArrayInterrupting())

    class KeyArrayWithoutArray:
        shape = (2,)
        dtype = "key<fry>"

    with pytest.raises(dlbridge.Error, match="KeyArrayWithoutArray has no __dlpack__"):
        dlbridge.from_dlpack(KeyArrayWithoutArray())


def test_an_exception_class_of_another_module_is_named_with_it():
    class ArrowTypeError(TypeError):
        __module__ = "pyarrow.lib"
        __qualname__ = "ArrowTypeError"

    class Refuses:
        shape = (1,)
        dtype = "float32"

        def __dlpack__(self, **kwargs):
            raise ArrowTypeError("not on this type")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(Refuses())
    assert "pyarrow.lib.ArrowTypeError: not on this type" in str(info.value)
