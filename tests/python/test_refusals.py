"""The one refusal rule of from_dlpack against broken producers, and the
legacy retry for wrappers (Debian's numpy 1.24 and torch 1.13): a precise
dlbridge error for each bad input, nothing leaked (live_exports() back to
its start, the producer's object released). Real producers' refusals (JAX,
TensorFlow, pyarrow) are in test_peers_refusals.py."""

import ctypes
import gc
import weakref

import pytest

import dlbridge

np = pytest.importorskip("numpy")

REFUSAL = "cannot export this"


class ProducerError(Exception):
    """A framework's own exception class, not BufferError."""


@pytest.fixture
def clean():
    """Yields a function that checks, for a producer built in the test,
    that everything it made is gone once the test drops it."""
    gc.collect()
    before = dlbridge.live_exports()
    refs = []
    yield refs.append
    gc.collect()
    assert dlbridge.live_exports() == before
    for r in refs:
        assert r() is None, "the producer's object is still alive"


class Broken:
    """Refuses its plain export with ProducerError; what the cure's steps
    get is given per test."""

    def __init__(self, values, again=None, array=None):
        self.values = np.asarray(values, dtype=np.float32)
        self.shape = self.values.shape
        self.dtype = self.values.dtype
        self.again = again  # called for __dlpack__(dl_device=(1, 0), copy=True)
        self.array = array  # called for __array__()
        self.calls = 0

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls += 1
        if dl_device == (1, 0) and copy is True and self.again is not None:
            return self.again(self)
        raise ProducerError(REFUSAL)

    def __array__(self, dtype=None):
        if self.array is None:
            raise AttributeError("no __array__ here")
        return self.array(self)

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_raising_in_the_middle_of_the_cure(clean):
    def again(p):
        raise ProducerError("and again, mid-cure")

    p = Broken([1.0, 2.0], again=again)
    clean(weakref.ref(p))
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(p)
    e = info.value
    assert e.status_name == "DLB_ERR_BACKEND"
    assert "Broken.__dlpack__ raised test_refusals.ProducerError: " + REFUSAL in e.message
    assert "__dlpack__(dl_device=(1, 0), copy=True): test_refusals.ProducerError: and again, mid-cure" in e.message
    assert "__array__(): AttributeError: no __array__ here" in e.message
    assert isinstance(e.__cause__, ProducerError) and str(e.__cause__) == REFUSAL
    assert p.calls == 2
    del p, e, info


def test_dlpack_returning_a_non_capsule(clean):
    class NotCapsule(Broken):
        def __dlpack__(self, **kwargs):
            return [1, 2]

    p = NotCapsule([1.0])
    clean(weakref.ref(p))
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(p)
    assert info.value.status_name == "DLB_ERR_MALFORMED"
    assert "gave an object of type list, not a DLPack PyCapsule" in info.value.message
    del p, info


def test_the_cure_refusing_a_non_capsule_and_going_on(clean):
    p = Broken([3.0, 4.0], again=lambda p: "not a capsule", array=lambda p: p.values.copy())
    clean(weakref.ref(p))
    t = dlbridge.from_dlpack(p)
    assert t.copied and np.from_dlpack(t).tolist() == [3.0, 4.0]
    del p, t


@pytest.mark.parametrize("other", [np.zeros(3, np.float32), np.zeros(2, np.int32), np.zeros((2, 1), np.float32)])
def test_a_capsule_of_another_shape_or_dtype_than_claimed(clean, other):
    made = []

    def again(p):
        t = dlbridge.from_buffer(other.copy())
        made.append(weakref.ref(t))
        return t.__dlpack__(max_version=(1, 3))

    p = Broken([1.0, 2.0], again=again)
    clean(weakref.ref(p))
    with pytest.raises(dlbridge.RefusalError) as info:
        dlbridge.from_dlpack(p)
    # A producer contradicting itself: nothing more is asked of it.
    assert info.value.status_name == "DLB_ERR_MALFORMED"
    assert ("the producer contradicts itself, so nothing was copied from it: __dlpack__(dl_device=(1, 0), "
            "copy=True) gave another shape or dtype than the producer's own") in info.value.message
    gc.collect()
    assert made and made[0]() is None  # the capsule's tensor was freed (its deleter ran)
    del p, info


def test_array_raising(clean):
    def array(p):
        raise ProducerError("__array__ is broken too")

    p = Broken([1.0], array=array)
    clean(weakref.ref(p))
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(p)
    assert info.value.status_name == "DLB_ERR_BACKEND"
    assert "__array__(): test_refusals.ProducerError: __array__ is broken too" in info.value.message
    del p, info


def test_array_raising_when_it_is_the_only_layout(clean):
    class NoShape:
        def __dlpack__(self, **kwargs):
            raise ProducerError(REFUSAL)

        def __array__(self, dtype=None):
            raise ProducerError("no host copy either")

    p = NoShape()
    clean(weakref.ref(p))
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(p)
    e = info.value
    assert e.status_name == "DLB_ERR_UNSUPPORTED_LAYOUT"
    assert "NoShape.__dlpack__ raised test_refusals.ProducerError: " + REFUSAL in e.message
    assert "__array__() raised test_refusals.ProducerError: no host copy either" in e.message
    del p, e, info


def test_a_shapeless_producer_takes_its_layout_from_array(clean):
    class Arrowish:  # as a pyarrow array: no shape, no dtype, an __array__
        def __dlpack__(self, stream=None):
            raise ProducerError("bit-packed")

        def __array__(self, dtype=None):
            return np.array([True, False, True])

    p = Arrowish()
    clean(weakref.ref(p))
    t = dlbridge.from_dlpack(p)
    assert t.copied and t.dtype == "bool" and ctypes.string_at(t.data_ptr, t.nbytes) == b"\x01\x00\x01"
    with pytest.raises(BufferError, match="^DLB_ERR_UNSUPPORTED_LAYOUT: .*raised test_refusals.ProducerError: "
                       "bit-packed"):
        dlbridge.from_dlpack(p, copy=False)
    del p, t


def test_a_dtype_dlpack_cannot_describe_is_named(clean):
    p = Broken([1.0])
    p.dtype = np.dtype(object)
    clean(weakref.ref(p))
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(p)
    e = info.value
    assert e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert e.message.endswith("dlbridge cannot copy it to the host either: its dtype object has no DLPack "
                              "equivalent")
    assert p.calls == 1  # nothing more asked of it
    with pytest.raises(BufferError, match="^DLB_ERR_UNSUPPORTED_DTYPE: "):
        dlbridge.from_dlpack(p, copy=False)
    del p, e, info


def test_an_array_like_without_dlpack_and_an_unknown_dtype():
    class Key:  # as a JAX PRNG key array
        shape = ()
        dtype = "key<fry>"

        def __array__(self, dtype=None):
            raise TypeError("keys cannot be converted")

    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(Key())
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert info.value.message.endswith(".Key has no __dlpack__, and its dtype key<fry> has no DLPack equivalent; "
                                  "its __array__() raised TypeError: keys cannot be converted")
    assert isinstance(info.value.__cause__, TypeError)
    with pytest.raises(AttributeError, match="does not implement the DLPack protocol"):
        dlbridge.from_dlpack(object())


def test_dlpack_device_raising_is_a_refusal_too(clean):
    class NoDevice(Broken):
        def __dlpack_device__(self):
            raise ProducerError("no device to say")

    p = NoDevice([1.0], array=lambda p: p.values.copy())
    clean(weakref.ref(p))
    t = dlbridge.from_dlpack(p, stream=1)
    assert t.copied and np.from_dlpack(t).tolist() == [1.0]
    p.array = None
    with pytest.raises(dlbridge.Error, match="NoDevice.__dlpack_device__ raised "
                       "test_refusals.ProducerError: no device to say"):
        dlbridge.from_dlpack(p, stream=1)
    del p, t


# -- the legacy retry --------------------------------------------------------------


class Forwarding:
    """torch's TensorDLPackWrapper test pattern: the protocol forwarded to
    another object, whatever it takes."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, *args, **kwargs):
        return self.inner.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


def test_a_wrapper_around_a_torch_1_13_tensor_earns_the_legacy_retry():
    torch = pytest.importorskip("torch")
    if int(torch.__version__.split(".")[0]) >= 2:
        pytest.skip("torch %s speaks DLPack 1.x: the legacy producer here is torch 1.13 (Debian's run)"
                    % torch.__version__)
    x = torch.arange(6.0)
    with pytest.raises(TypeError, match="max_version"):
        x.__dlpack__(max_version=(1, 0))  # a legacy producer: the 1.x keywords refused
    w = Forwarding(x)
    for _ in range(2):  # the second time on the hot path of a type known modern
        t = dlbridge.from_dlpack(w)
        assert t.data_ptr == x.data_ptr() and not t.copied
        assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        del t
    c = dlbridge.from_dlpack(w, copy=True)  # the copy made by the library
    assert c.copied and c.data_ptr != x.data_ptr()
    assert not dlbridge._glue.is_legacy_producer(Forwarding)  # its signature still says modern


def test_a_wrapper_whose_inner_producer_refuses_is_cured():
    class Inner:
        shape = (2,)
        dtype = "float64"

        def __dlpack__(self, stream=None):
            raise ProducerError(REFUSAL)

        def __array__(self, dtype=None):
            return np.array([5.0, 6.0])

    class Outer(Forwarding):
        shape = (2,)
        dtype = "float64"

        def __array__(self, dtype=None):
            return self.inner.__array__()

    t = dlbridge.from_dlpack(Outer(Inner()))
    assert t.copied and np.from_dlpack(t).tolist() == [5.0, 6.0]
