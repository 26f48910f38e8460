"""from_dlpack's consumer side (_consumer.c) on the paths the protocol
tests leave: how the protocol of a __dlpack__ without a Python signature
is learnt (a text signature, an object that is not a code object), a
producer type the protocol cache cannot hold (its metaclass's __hash__
raises), keyword arguments at their edges, copy=True refused with an
exception that is not a refusal, and a consumer stream checked against
a device out of range."""

import pytest

import dlbridge
from raw_memory import raw_values

np = pytest.importorskip("numpy")


class Exporter:
    """A callable standing in for a C-implemented __dlpack__ (no __code__):
    `legacy` refuses the 1.x keywords with TypeError, as a producer written
    before DLPack 1.0 does."""

    def __init__(self, values, legacy=False, text_signature=None, code=None):
        self.values = values
        self.legacy = legacy
        self.calls = []
        if text_signature is not None:
            self.__text_signature__ = text_signature
        if code is not None:
            self.__code__ = code

    def __call__(self, **kwargs):
        self.calls.append(sorted(kwargs))
        if self.legacy and "max_version" in kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.values.__dlpack__()


def producer_class(name="Producer", metaclass=type):
    def __dlpack_device__(self):
        return (1, 0)

    return metaclass(name, (), {"__dlpack_device__": __dlpack_device__})


def with_exporter(exporter, cls=None):
    obj = (cls or producer_class())()
    obj.__dlpack__ = exporter
    return obj


def learnt(cls):
    return dlbridge._glue.is_legacy_producer(cls)


def test_a_text_signature_says_whether_max_version_is_taken():
    values = np.arange(3.0)
    for signature, legacy in [("($self, /, *, stream=None, max_version=None)", False),
                              ("($self, /, **kwargs)", False),
                              ("($self, /, stream=None)", True)]:
        cls = producer_class()
        e = Exporter(values, legacy=legacy, text_signature=signature)
        t = dlbridge.from_dlpack(with_exporter(e, cls))
        assert raw_values(t).tolist() == [0.0, 1.0, 2.0]
        assert learnt(cls) is legacy, signature
        assert e.calls == [[]] if legacy else [["max_version"]], (signature, e.calls)


def test_a_text_signature_that_is_not_a_string_is_no_answer():
    cls = producer_class()
    e = Exporter(np.arange(2.0), legacy=True, text_signature=42)
    t = dlbridge.from_dlpack(with_exporter(e, cls))
    assert raw_values(t).tolist() == [0.0, 1.0]
    assert e.calls == [["max_version"], []] and learnt(cls) is True  # learnt from the retry


class FakeCode:
    """Something with a code object's attribute names that is not one."""

    def __init__(self, **attrs):
        self.co_flags = 0
        self.co_argcount = 1
        self.co_posonlyargcount = 0
        self.co_kwonlyargcount = 1
        self.co_varnames = ("self", "max_version")
        self.__dict__.update(attrs)


def test_a_code_attribute_that_is_not_a_code_object_is_read_with_care():
    values = np.arange(2.0)
    # Readable: a parameter named max_version, so the 1.x call.
    cls = producer_class()
    e = Exporter(values, code=FakeCode())
    dlbridge.from_dlpack(with_exporter(e, cls))
    assert e.calls == [["max_version"]] and learnt(cls) is False
    # Names that are not strings: none is max_version, so legacy.
    cls = producer_class()
    e = Exporter(values, legacy=True, code=FakeCode(co_varnames=("self", 7)))
    dlbridge.from_dlpack(with_exporter(e, cls))
    assert e.calls == [[]] and learnt(cls) is True
    # Unreadable (a count that is not an int, one past the names, one too
    # large for C): no answer, so learnt from the calls.
    for broken in (FakeCode(co_flags="8"), FakeCode(co_argcount=5), FakeCode(co_kwonlyargcount=2 ** 70),
                   FakeCode(co_varnames=["self", "max_version"])):
        cls = producer_class()
        e = Exporter(values, code=broken)
        dlbridge.from_dlpack(with_exporter(e, cls))
        assert e.calls == [["max_version"]] and learnt(cls) is False, vars(broken)


class Unhashable(type):
    """A metaclass whose classes cannot be dictionary keys."""

    def __hash__(cls):
        raise TypeError("this class is not hashable")

    def __eq__(cls, other):
        return cls is other


def test_a_producer_type_that_cannot_be_remembered_raises_its_own_error():
    values = np.arange(3.0)
    # A signature to read: remembering its answer fails.
    cls = Unhashable("Producer", (), {"__dlpack__": lambda self, max_version=None: values.__dlpack__()})
    with pytest.raises(TypeError, match="this class is not hashable"):
        dlbridge.from_dlpack(cls())
    # No signature: learnt from the call that took the keywords, or from
    # the legacy retry; remembering either fails, and the capsule is freed.
    for legacy in (False, True):
        e = Exporter(values, legacy=legacy)
        with pytest.raises(TypeError, match="this class is not hashable"):
            dlbridge.from_dlpack(with_exporter(e, producer_class(metaclass=Unhashable)))
        assert len(e.calls) == (2 if legacy else 1)
    assert dlbridge.live_exports() == 0


def test_keyword_arguments_at_their_edges():
    x = np.arange(3.0)
    t = dlbridge.from_dlpack(x, device=None, copy=None, stream=None)
    assert t.data_ptr == x.ctypes.data and not t.copied
    with pytest.raises(ValueError, match=r"device \(1, 4294967296\) is out of range"):
        dlbridge.from_dlpack(x, device=(1, 2 ** 32))
    with pytest.raises(ValueError, match=r"device \(1, -2147483649\) is out of range"):
        dlbridge.from_dlpack(x, device=(1, -2 ** 31 - 1))


class OnDevice:
    def __init__(self, device):
        self.device = device

    def __dlpack__(self, **kwargs):
        return np.zeros(2).__dlpack__()

    def __dlpack_device__(self):
        return self.device


def test_a_stream_for_memory_on_a_device_out_of_range():
    for device in [(2 ** 31, 0), (-2 ** 31 - 1, 0), (2, 2 ** 31), (2, -2 ** 31 - 1)]:
        with pytest.raises(ValueError, match=r"the producer's memory \(%d, %d\)" % device) as info:
            dlbridge.from_dlpack(OnDevice(device), stream=2)
        assert "DLB_ERR_UNSUPPORTED_DEVICE" in str(info.value)
    with pytest.raises(TypeError, match=r"__dlpack_device__\(\) must be a \(device_type, device_id\) tuple"):
        dlbridge.from_dlpack(OnDevice("cpu"), stream=2)


def test_copy_true_refused_with_memory_error_is_passed_on():
    class Exhausted:
        shape = (2,)
        dtype = "float64"

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            if copy:
                raise MemoryError("no room for a copy")
            return np.zeros(2).__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(MemoryError, match="no room for a copy"):
        dlbridge.from_dlpack(Exhausted(), copy=True)
