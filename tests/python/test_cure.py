"""from_dlpack's answer to a producer that refuses: the host-copy cure, its
refusal under copy=False, deleted arrays, and the legacy fallback that
reads signatures instead of error text. Stdlib and numpy fakes of each
producer behaviour (tests/python/test_peers_jax.py drives real JAX)."""

import array

import pytest

import dlbridge

np = pytest.importorskip("numpy")

REFUSAL = "cannot export: sharded over 4 devices"



class Refuser:
    """A 1.x producer whose plain export refuses with BufferError; what it
    offers instead is chosen per test: a host copy when asked with
    dl_device=(1, 0), copy=True (`copy_ok`), the buffer protocol (`buf`),
    __array__ (`arr`), __array_interface__ (`iface`); never the buffer
    protocol (test_refusal_cured_through_the_buffer_protocol has that)."""

    def __init__(self, values, copy_ok=False, arr=None, iface=None, dtype="float64"):
        self.values = np.asarray(values, dtype=dtype)
        self.shape = self.values.shape
        self.dtype = self.values.dtype
        self.copy_ok = copy_ok
        self.calls = []
        self.array_calls = 0
        if arr is not None:
            self.__array__ = self._array
        if iface is not None:
            self.__array_interface__ = iface

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"dl_device": dl_device, "copy": copy})
        if self.copy_ok and dl_device == (1, 0) and copy is True:
            return dlbridge.from_buffer(self.values.copy()).__dlpack__(max_version=max_version)
        raise BufferError(REFUSAL)

    def __dlpack_device__(self):
        return (1, 0)

    def _array(self):
        self.array_calls += 1
        return self.values.copy()


def values_of(t):
    return np.from_dlpack(t).tolist()


def test_refusal_cured_by_asking_again_for_a_host_copy():
    p = Refuser([[1.0, 2.0], [3.0, 4.0]], copy_ok=True)
    t = dlbridge.from_dlpack(p)
    assert t.copied and t.device == (1, 0) and t.shape == (2, 2)
    assert values_of(t) == [[1.0, 2.0], [3.0, 4.0]]
    assert p.calls == [{"dl_device": None, "copy": None}, {"dl_device": (1, 0), "copy": True}]
    assert t.data_ptr != p.values.ctypes.data


def test_refusal_cured_through_the_buffer_protocol():
    src = array.array("d", [5.0, 6.0, 7.0])

    # A producer that exports a buffer (an array.array) but refuses DLPack:
    class Both(array.array):
        shape = (3,)
        dtype = "float64"
        calls = 0

        def __dlpack__(self, **kwargs):
            type(self).calls += 1
            raise BufferError(REFUSAL)

    b = Both("d", src)
    t = dlbridge.from_dlpack(b)
    assert t.copied and values_of(t) == [5.0, 6.0, 7.0]
    assert Both.calls == 2  # the refusal, then asked again for a host copy
    b[0] = 50.0  # a copy: the producer's later writes do not show
    assert values_of(t)[0] == 5.0


def test_refusal_cured_through_array():
    p = Refuser([1, 2, 3], arr=True, dtype="int32")
    t = dlbridge.from_dlpack(p)
    assert t.copied and t.dtype == "int32" and values_of(t) == [1, 2, 3]
    assert p.array_calls == 1 and len(p.calls) == 2


def test_refusal_cured_through_array_interface():
    keep = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::2]  # strided
    p = Refuser(keep, iface=keep.__array_interface__, dtype="float32")
    t = dlbridge.from_dlpack(p)
    assert t.copied and values_of(t) == keep.tolist()
    assert t.strides == (2, 1)  # compact


def test_copy_false_forbids_the_cure_and_names_the_refusal():
    p = Refuser([1.0], copy_ok=True, arr=True)
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(p, copy=False)
    text = str(info.value)
    assert text.startswith("DLB_ERR_NOT_ZERO_COPY: ")
    assert "Refuser.__dlpack__ raised BufferError: " + REFUSAL in text
    assert "copy was forbidden" in text
    assert isinstance(info.value.__cause__, BufferError) and str(info.value.__cause__) == REFUSAL
    assert p.calls == [{"dl_device": None, "copy": False}] and p.array_calls == 0


def test_a_device_the_copy_cannot_reach_is_refused():
    p = Refuser([1.0], copy_ok=True)
    with pytest.raises(BufferError, match="DLB_ERR_UNSUPPORTED_DEVICE"):
        dlbridge.from_dlpack(p, device=(2, 0))


def test_copy_true_and_cpu_device_are_cured_too():
    p = Refuser([1.0, 2.0], arr=True)
    t = dlbridge.from_dlpack(p, device=(1, 0), copy=True)
    assert t.copied and values_of(t) == [1.0, 2.0]
    # copy=True refused, then asked without copy= (a producer that cannot
    # copy but may export), refused again, then the cure's own request.
    assert p.calls == [{"dl_device": (1, 0), "copy": True}, {"dl_device": (1, 0), "copy": None},
                       {"dl_device": (1, 0), "copy": True}] and p.array_calls == 1


def test_nothing_to_copy_from_says_every_step():
    p = Refuser([1.0])
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(p)
    assert info.value.status_name == "DLB_ERR_BACKEND"  # the cure's copy failed
    text = str(info.value)
    assert "Refuser.__dlpack__ raised BufferError: " + REFUSAL in text
    assert "no host copy could be made instead" in text
    for step in ("__dlpack__(dl_device=(1, 0), copy=True)", "the buffer protocol", "__array__()",
                 "__array_interface__"):
        assert step in text
    assert isinstance(info.value.__cause__, BufferError)


def test_a_step_giving_the_wrong_shape_is_not_taken():
    p = Refuser([1.0, 2.0], arr=True)
    p._array = lambda: np.zeros(3)  # the producer's __array__ disagrees with its shape
    p.__array__ = p._array
    with pytest.raises(dlbridge.RefusalError, match="another shape or dtype") as info:
        dlbridge.from_dlpack(p)
    assert info.value.status_name == "DLB_ERR_MALFORMED"  # the producer contradicts itself


def test_no_shape_no_cure():
    class Bare:
        def __dlpack__(self, **kwargs):
            raise BufferError(REFUSAL)

    with pytest.raises(dlbridge.Error, match="cannot copy it to the host either: it has no shape") as info:
        dlbridge.from_dlpack(Bare())
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_LAYOUT"
    assert str(info.value.__cause__) == REFUSAL
    with pytest.raises(BufferError, match=r"^DLB_ERR_UNSUPPORTED_LAYOUT: .*Bare\.__dlpack__ raised BufferError"):
        dlbridge.from_dlpack(Bare(), copy=False)


class ProducerError(Exception):
    """A framework's own exception class (JaxRuntimeError, ArrowTypeError...)."""


def test_any_exception_is_a_refusal_the_cure_answers():
    class Wrong(Refuser):
        def __dlpack__(self, **kwargs):
            raise ProducerError("not a BufferError")

    p = Wrong([1.0, 2.0], arr=True)
    t = dlbridge.from_dlpack(p)
    assert t.copied and values_of(t) == [1.0, 2.0] and p.array_calls == 1
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(p, copy=False)
    text = str(info.value)
    assert text.startswith("DLB_ERR_NOT_ZERO_COPY: ")
    assert ".Wrong.__dlpack__ raised test_cure.ProducerError: not a BufferError; " in text
    assert isinstance(info.value.__cause__, ProducerError) and p.array_calls == 1


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt, SystemExit, RecursionError])
def test_exceptions_not_about_the_array_pass_unchanged(error):
    raised = error("not about the array")

    class Wrong(Refuser):
        def __dlpack__(self, **kwargs):
            raise raised

    p = Wrong([1.0], arr=True)
    with pytest.raises(error) as info:
        dlbridge.from_dlpack(p)
    assert info.value is raised and p.array_calls == 0


def test_an_exception_not_about_the_array_in_a_step_stops_the_cure():
    class Wrong(Refuser):
        def _array(self):
            raise KeyboardInterrupt

    p = Wrong([1.0], arr=True)
    with pytest.raises(KeyboardInterrupt):
        dlbridge.from_dlpack(p)


def test_a_deleted_array_raises_deleted_with_the_producers_message():
    class Deleted(Refuser):
        def is_deleted(self):
            return True

        def __dlpack__(self, **kwargs):
            raise RuntimeError("Array has been deleted with shape=float32[4].")

    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(Deleted([1.0], arr=True))
    e = info.value
    assert e.status_name == "DLB_ERR_DELETED"
    assert "Array has been deleted with shape=float32[4]." in e.message
    assert isinstance(e.__cause__, RuntimeError)


def test_a_legacy_refuser_is_cured_without_keywords():
    calls = []

    class Old:
        shape = (2,)
        dtype = "int16"

        def __dlpack__(self, stream=None):
            calls.append(stream)
            raise BufferError(REFUSAL)

        def __array__(self):
            return np.array([7, 8], dtype=np.int16)

    t = dlbridge.from_dlpack(Old())
    assert t.copied and values_of(t) == [7, 8] and calls == [None]
    assert dlbridge._glue.is_legacy_producer(Old)


def test_copied_is_false_for_zero_copy_and_true_for_copies():
    a = np.arange(4.0)
    assert not dlbridge.from_dlpack(a).copied
    assert dlbridge.from_dlpack(a, copy=True).copied
    assert not dlbridge.empty((2,), "float32").copied


# -- the legacy fallback without reading error text ---------------------------------


class BindingMethod:
    """What pybind11 or nanobind make of a __dlpack__ bound without keyword
    arguments: a callable without __code__ or __text_signature__ that
    refuses keywords with its own wording."""

    def __init__(self, target):
        self.target = target
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append(sorted(kwargs))
        if args or kwargs:
            raise TypeError("__dlpack__(): incompatible function arguments. The following argument types "
                            "are supported:\n    1. (self: Tensor) -> capsule\n\nInvoked with: kwargs: "
                            + ", ".join("%s=%r" % kv for kv in kwargs.items()))
        return self.target.__dlpack__()


def test_a_binding_style_refusal_falls_back_and_is_remembered():
    a = np.arange(3.0)
    method = BindingMethod(a)

    class Bound:
        @property
        def __dlpack__(self):
            return method

        def __dlpack_device__(self):
            return (1, 0)

    assert not hasattr(method, "__code__") and not hasattr(method, "__text_signature__")
    t = dlbridge.from_dlpack(Bound())
    assert t.data_ptr == a.ctypes.data
    assert method.calls == [["max_version"], []]  # asked once with the keywords
    assert dlbridge._glue.is_legacy_producer(Bound)
    del t
    t = dlbridge.from_dlpack(Bound())
    assert method.calls[2:] == [[]]  # straight to the legacy call
    c = dlbridge.from_dlpack(Bound(), copy=True)  # copied by the library
    assert c.copied and c.data_ptr != a.ctypes.data and method.calls[3:] == [[]]


def test_a_binding_whose_legacy_call_fails_too_keeps_the_first_error():
    class Broken:
        def __call__(self, *args, **kwargs):
            raise TypeError("incompatible function arguments")

    class P:
        __dlpack__ = property(lambda self: Broken())

    with pytest.raises(TypeError, match="incompatible function arguments"):
        dlbridge.from_dlpack(P())
    assert not dlbridge._glue.is_legacy_producer(P)


def test_signatures_decide_without_a_call():
    t = dlbridge.empty((2,), "int8")
    seen = []

    class Modern:
        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            seen.append("modern")
            raise TypeError("my own error")  # not a refusal of the keywords

    class Kwargs:
        def __dlpack__(self, **kwargs):
            seen.append(sorted(kwargs))
            return t.__dlpack__(**kwargs)

    class Legacy:
        def __dlpack__(self, stream=None):
            seen.append("legacy")
            return t.__dlpack__()

    with pytest.raises(TypeError, match="my own error"):
        dlbridge.from_dlpack(Modern())
    # a TypeError earns one legacy retry; a TypeError again: the first, as it is
    assert seen == ["modern", "modern"] and not dlbridge._glue.is_legacy_producer(Modern)
    assert dlbridge.from_dlpack(Kwargs()).data_ptr == t.data_ptr
    assert seen[-1] == ["max_version"]
    assert dlbridge.from_dlpack(Legacy()).data_ptr == t.data_ptr
    assert seen[-1] == "legacy" and dlbridge._glue.is_legacy_producer(Legacy)


def test_a_builtin_with_a_text_signature_is_read():
    # dlbridge.Tensor's own __dlpack__ is a builtin with a text signature.
    assert "max_version" in dlbridge.Tensor.__dlpack__.__text_signature__
    t = dlbridge.empty((2,), "int8")
    assert dlbridge.from_dlpack(t).data_ptr == t.data_ptr
    assert not dlbridge._glue.is_legacy_producer(dlbridge.Tensor)
