"""dlbridge.Tensor as a DLPack producer: the array API's __dlpack__ rules."""

import ctypes
import gc

try:
    import numpy as np
except ImportError:  # tests that use it are skipped (conftest)
    np = None
import pytest

import dlbridge
from dlbridge import _lib

from conftest import clib
from conftest import capsule_name


def flags(t):
    return clib().dlb_buffer_flags(t._handle)


def test_version_and_errors_are_exposed():
    assert dlbridge.__version__.count(".") == 2
    assert issubclass(dlbridge.Error, Exception)
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.empty((2, -3), "float32")
    assert info.value.status == 11
    assert info.value.status_name == "DLB_ERR_MALFORMED"
    assert "-3" in str(info.value)
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.empty((2,), "float33")
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"


def test_tensor_is_not_constructed_directly():
    with pytest.raises(TypeError):
        dlbridge.Tensor()


def test_properties():
    t = dlbridge.empty((2, 3, 4), "float32")
    assert t.shape == (2, 3, 4)
    assert t.strides == (12, 4, 1)
    assert t.dtype == "float32"
    assert t.device == (1, 0)
    assert t.__dlpack_device__() == (1, 0)
    assert t.readonly is False
    assert t.nbytes == 96
    assert t.ndim == 3 and t.size == 24 and len(t) == 2
    assert t.data_ptr != 0 and t.data_ptr % 64 == 0
    assert "float32" in repr(t) and "(2, 3, 4)" in repr(t)
    z = dlbridge.empty((), "bfloat16")
    assert z.shape == () and z.strides == () and z.dtype == "bfloat16" and z.size == 1


@pytest.mark.parametrize(
    "max_version, name",
    [(None, "dltensor"), ((0, 8), "dltensor"), ((1, 0), "dltensor_versioned"),
     ((1, 3), "dltensor_versioned"), ((2, 0), "dltensor_versioned")],
)
def test_max_version_picks_the_capsule(max_version, name):
    t = dlbridge.empty((2,), "int32")
    cap = t.__dlpack__(max_version=max_version)
    assert capsule_name(cap) == name
    assert dlbridge.live_exports() == 1
    del cap  # never consumed: the destructor runs the deleter once
    assert dlbridge.live_exports() == 0


def test_versioned_capsule_has_version_and_flags():
    t = dlbridge.from_buffer(b"abcdefgh")
    cap = t.__dlpack__(max_version=(1, 0))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get(cap, b"dltensor_versioned")
    version = _lib.DLPackVersion.from_address(address)
    assert (version.major, version.minor) == (1, 3)
    mt_flags = ctypes.c_uint64.from_address(address + 24).value
    assert mt_flags & 1  # READ_ONLY
    del cap


def test_copy_argument():
    t = dlbridge.empty((4,), "float64")
    np.copyto  # noqa: B018 (numpy imported for the views below)
    same = dlbridge.from_dlpack(t, copy=False)
    assert same.data_ptr == t.data_ptr
    assert not flags(same) & _lib.DLB_BUFFER_COPIED
    fresh = dlbridge.from_dlpack(t, copy=True)
    assert fresh.data_ptr != t.data_ptr
    assert flags(fresh) & _lib.DLB_BUFFER_COPIED
    with pytest.raises(TypeError):
        t.__dlpack__(copy="yes")


def test_copy_of_strided_view_is_compact():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2].T
    t = dlbridge.from_dlpack(a)
    c = dlbridge.from_dlpack(t, copy=True)
    assert c.strides == (4, 1)
    np.testing.assert_array_equal(np.from_dlpack(c), a)


def test_dl_device():
    t = dlbridge.empty((2,), "float32")
    same = dlbridge.from_dlpack(t, device=(1, 0))
    assert same.data_ptr == t.data_ptr
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(t, device=(2, 0))
    with pytest.raises(TypeError):
        t.__dlpack__(dl_device="cpu")


def test_stream_must_be_none_on_cpu():
    # The library's export planner decides (a given stream on host memory is
    # an invalid argument: ValueError, not BufferError); 0 counts as given.
    t = dlbridge.empty((2,), "float32")
    assert capsule_name(t.__dlpack__(stream=None)) == "dltensor"
    for stream in (1, -1, 0, 2):
        with pytest.raises(ValueError, match="DLB_ERR_INVALID_ARGUMENT: stream .* host memory"):
            t.__dlpack__(stream=stream, max_version=(1, 0))
    with pytest.raises(TypeError, match="stream must be an int"):
        t.__dlpack__(stream="default")
    assert dlbridge.live_exports() == 0


def test_bad_max_version():
    t = dlbridge.empty((2,), "float32")
    with pytest.raises(TypeError):
        t.__dlpack__(max_version=1)


def test_deleted_tensor():
    t = dlbridge.empty((3,), "float32")
    before = np.from_dlpack(t)
    torch = pytest.importorskip("torch")
    torch.from_dlpack(t)[:] = 4.0
    t.delete()
    assert t.deleted
    with pytest.raises(BufferError, match="delet"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="delet"):
        t.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError):
        np.from_dlpack(t)
    # The refusal rule's deleted case, as for a deleted JAX array.
    with pytest.raises(dlbridge.Error, match="DLB_ERR_DELETED") as e:
        dlbridge.from_dlpack(t)
    assert e.value.status_name == "DLB_ERR_DELETED" and isinstance(e.value.__cause__, BufferError)
    # Metadata stays readable; the export made before stays valid.
    assert t.shape == (3,) and t.dtype == "float32"
    assert before.tolist() == [4.0, 4.0, 4.0]
    assert "deleted" in repr(t)
    t.delete()  # twice is harmless


def test_read_only_legacy_export_is_a_copy_versioned_shares():
    data = bytearray(b"\x01\x02\x03\x04")
    t = dlbridge.from_buffer(bytes(data))
    assert t.readonly
    # The legacy struct cannot say READ_ONLY: with copy=None (and copy=True)
    # the capsule holds a writable copy, which dlbridge knows on import.
    for kwargs in ({}, {"copy": None}, {"copy": True}, {"max_version": (0, 8)}):
        c = dlbridge.from_dlpack(t.__dlpack__(**kwargs))
        assert c.copied and not c.readonly and c.data_ptr != t.data_ptr
        a = np.from_dlpack(c)
        assert a.tolist() == [1, 2, 3, 4]
        assert dlbridge.live_exports() == 2  # the copy's export and numpy's
        del a, c
        assert dlbridge.live_exports() == 0
    if int(np.__version__.split(".")[0]) < 2:
        a = np.from_dlpack(t)  # numpy 1.24 asks for a legacy capsule: a copy
        assert a.ctypes.data != t.data_ptr and a.tolist() == [1, 2, 3, 4]
    else:
        a = np.from_dlpack(t)  # numpy 2: a versioned one, shared
        assert not a.flags.writeable and a.ctypes.data == t.data_ptr
    del a
    v = dlbridge.from_dlpack(t)  # versioned: carries READ_ONLY
    assert v.readonly and v.data_ptr == t.data_ptr and not v.copied
    del v
    assert dlbridge.live_exports() == 0


def test_read_only_legacy_export_with_copy_false_is_refused():
    t = dlbridge.from_buffer(b"\x01\x02\x03\x04")
    with pytest.raises(BufferError, match=r"DLB_ERR_READ_ONLY: .*copy was forbidden .*copy=None in Python"):
        t.__dlpack__(copy=False)
    assert dlbridge.live_exports() == 0
    cap = t.__dlpack__(max_version=(1, 0), copy=False)  # versioned: no copy needed
    v = dlbridge.from_dlpack(cap)
    assert v.readonly and v.data_ptr == t.data_ptr
    # A writable tensor's legacy export is shared as before.
    w = dlbridge.from_buffer(bytearray(4))
    u = dlbridge.from_dlpack(w.__dlpack__(copy=False))
    assert u.data_ptr == w.data_ptr and not u.copied and not u.readonly


def test_dlbridge_to_dlbridge_is_zero_copy_and_versioned():
    t = dlbridge.empty((5,), "uint16")
    u = dlbridge.from_dlpack(t)
    assert u.data_ptr == t.data_ptr
    assert flags(u) & _lib.DLB_BUFFER_IMPORTED
    assert not dlbridge._glue.is_legacy_producer(type(t))
    assert dlbridge.live_exports() == 1
    del u
    gc.collect()
    assert dlbridge.live_exports() == 0


def test_capsule_not_consumed_is_freed_once():
    t = dlbridge.empty((8,), "float32")
    before = clib().dlb_buffer_refcount(t._handle)
    for _ in range(100):
        t.__dlpack__()
        t.__dlpack__(max_version=(1, 0))
    assert dlbridge.live_exports() == 0
    assert clib().dlb_buffer_refcount(t._handle) == before


def test_capsule_consumed_twice_fails_cleanly():
    t = dlbridge.empty((2,), "float32")
    for max_version in (None, (1, 0)):
        cap = t.__dlpack__(max_version=max_version)
        first = dlbridge.from_dlpack(cap)
        assert capsule_name(cap).startswith("used_")
        with pytest.raises(dlbridge.Error, match="already consumed") as info:
            dlbridge.from_dlpack(cap)
        assert info.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
        assert dlbridge.live_exports() == 1
        del cap
        gc.collect()
        assert dlbridge.live_exports() == 1  # first still holds it
        assert first.data_ptr == t.data_ptr
        del first
        gc.collect()
        assert dlbridge.live_exports() == 0


def test_failed_import_leaves_capsule_unconsumed():
    # A versioned capsule with an unknown major version: the import fails,
    # the capsule keeps its name and its destructor frees the tensor.
    t = dlbridge.empty((2,), "float32")
    cap = t.__dlpack__(max_version=(1, 0))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    version = _lib.DLPackVersion.from_address(get(cap, b"dltensor_versioned"))
    version.major = 2
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(cap)
    assert info.value.status_name == "DLB_ERR_VERSION"
    del info  # its traceback holds the capsule
    assert capsule_name(cap) == "dltensor_versioned"
    assert dlbridge.live_exports() == 1
    del cap
    gc.collect()
    assert dlbridge.live_exports() == 0


def test_from_dlpack_rejects_non_producers():
    # The array API standard: AttributeError when __dlpack__ is missing.
    with pytest.raises(AttributeError, match="no __dlpack__"):
        dlbridge.from_dlpack(object())
    with pytest.raises(AttributeError, match="no __dlpack__"):
        dlbridge.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(dlbridge.empty((1,), "int8"), device="cpu")
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(dlbridge.empty((1,), "int8"), copy=1)


def test_legacy_producer_with_copy_and_device():
    a = np.arange(6, dtype=np.float32)
    c = dlbridge.from_dlpack(a, copy=True)
    assert c.data_ptr != a.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(c), a)
    same = dlbridge.from_dlpack(a, device=(1, 0), copy=False)
    assert same.data_ptr == a.ctypes.data
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(a, device=(2, 0))


def test_dtype_arguments():
    torch = pytest.importorskip("torch")
    assert dlbridge.empty(3, np.dtype("int16")).dtype == "int16"
    assert dlbridge.empty(3, np.complex64).dtype == "complex64"
    assert dlbridge.empty(3, torch.bfloat16).dtype == "bfloat16"
    assert dlbridge.empty(3, float).dtype == "float64"
    assert dlbridge.empty(3, "bool").dtype == "bool"


def test_plain_pickling_and_copying_copy_the_elements():
    import copy
    import pickle

    if np is None:
        pytest.skip("needs numpy")
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    t = dlbridge.from_dlpack(a.T)  # strided: the bytes are the compact copy's
    for u in (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(t)):
        assert (u.shape, u.dtype, u.device) == ((4, 3), "int16", (1, 0))
        assert u.data_ptr != t.data_ptr and u.strides == (3, 1) and not u.readonly
        assert np.from_dlpack(u).tolist() == a.T.tolist()
    ro = pickle.loads(pickle.dumps(dlbridge.from_dlpack(np.arange(3.0)[::-1])))
    assert np.from_dlpack(ro).tolist() == [2.0, 1.0, 0.0]
    gone = dlbridge.empty((2,), "int8")
    gone.delete()
    with pytest.raises(dlbridge.Error) as e:
        pickle.dumps(gone)
    assert e.value.status_name == "DLB_ERR_DELETED"
    from dlbridge import _glue

    with pytest.raises(dlbridge.Error) as e:  # bytes that do not fit the shape
        _glue.tensor_from_payload(b"abc", (2,), (0, 16, 1), False)
    assert e.value.status_name == "DLB_ERR_MALFORMED"
    with pytest.raises(dlbridge.Error) as e:
        _glue.tensor_from_payload(b"", (0,), (200, 8, 1), False)
    assert e.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    frozen = _glue.tensor_from_payload(b"\x01\x02", (2,), (1, 8, 1), True)
    assert frozen.readonly and pickle.loads(pickle.dumps(frozen)).readonly


class NewStyleProducer:
    """A producer of the 2023 protocol, delegating to a dlbridge tensor and
    recording what it was asked."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"max_version": max_version, "dl_device": dl_device, "copy": copy})
        return self.tensor.__dlpack__(stream=stream, max_version=max_version,
                                      dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


class OldStyleProducer(NewStyleProducer):
    def __dlpack__(self, stream=None):
        self.calls.append({})
        return self.tensor.__dlpack__()


def test_from_dlpack_asks_for_a_versioned_capsule_first():
    t = dlbridge.empty((3,), "float32")
    p = NewStyleProducer(t)
    u = dlbridge.from_dlpack(p)
    assert p.calls == [{"max_version": (1, 3), "dl_device": None, "copy": None}]
    assert u.data_ptr == t.data_ptr
    c = dlbridge.from_dlpack(p, device=(1, 0), copy=True)
    assert p.calls[-1] == {"max_version": (1, 3), "dl_device": (1, 0), "copy": True}
    assert c.data_ptr != t.data_ptr
    assert flags(c) & _lib.DLB_BUFFER_COPIED


def test_from_dlpack_falls_back_to_the_legacy_call():
    t = dlbridge.empty((3,), "float32")
    p = OldStyleProducer(t)
    u = dlbridge.from_dlpack(p)
    assert u.data_ptr == t.data_ptr
    assert dlbridge._glue.is_legacy_producer(OldStyleProducer)
    assert dlbridge.from_dlpack(p).data_ptr == t.data_ptr  # straight to the legacy call
    assert len(p.calls) == 2
    c = dlbridge.from_dlpack(p, copy=True)  # copied here, by the library
    assert c.data_ptr != t.data_ptr
    np.testing.assert_array_equal(np.from_dlpack(c), np.zeros(3, np.float32))


def test_from_dlpack_checks_what_it_got():
    class Liar:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(dlbridge.Error, match="not a DLPack PyCapsule"):
        dlbridge.from_dlpack(Liar())

    class WrongCapsule:
        def __dlpack__(self, **kwargs):
            make = ctypes.pythonapi.PyCapsule_New
            make.restype = ctypes.py_object
            make.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
            return make(1, b"something_else", None)

    with pytest.raises(dlbridge.Error, match="not a DLPack capsule"):
        dlbridge.from_dlpack(WrongCapsule())


class FailingModernProducer:
    """Takes the 1.x keywords, but fails with a TypeError of its own."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.fail = True
        self.calls = 0

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls += 1
        if self.fail:
            raise TypeError("unsupported dtype for export")
        return self.tensor.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_a_typeerror_inside_a_modern_producer_is_its_own():
    t = dlbridge.empty((2,), "int8")
    p = FailingModernProducer(t)
    with pytest.raises(TypeError, match="unsupported dtype for export"):
        dlbridge.from_dlpack(p)
    assert p.calls == 2  # the one legacy retry, refused with a TypeError too
    assert not dlbridge._glue.is_legacy_producer(FailingModernProducer)
    p.fail = False
    u = dlbridge.from_dlpack(p)  # still asked with max_version: a versioned export
    assert u.data_ptr == t.data_ptr and p.calls == 3
    assert not dlbridge._glue.is_legacy_producer(FailingModernProducer)


def test_only_cpythons_keyword_refusal_means_legacy():
    t = dlbridge.empty((2,), "int8")

    class Producer:  # CPython: "got an unexpected keyword argument"
        def __dlpack__(self, stream=None):
            return t.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    u = dlbridge.from_dlpack(Producer())
    assert u.data_ptr == t.data_ptr
    assert dlbridge._glue.is_legacy_producer(Producer)
    if tuple(int(x) for x in np.__version__.split(".")[:2]) < (2, 1):
        # numpy 1.x's C __dlpack__ refuses max_version in its own words.
        with pytest.raises(TypeError) as info:
            np.zeros(1).__dlpack__(max_version=(1, 0))
        print(info.value)
        a = np.zeros(2)
        assert dlbridge.from_dlpack(a).data_ptr == a.ctypes.data
        assert dlbridge._glue.is_legacy_producer(np.ndarray)


def test_a_failing_legacy_call_raises_its_own_error():
    calls = []

    class Broken:
        def __dlpack__(self, stream=None):
            calls.append(stream)
            raise TypeError("broken for good")

    with pytest.raises(TypeError, match="broken for good"):
        dlbridge.from_dlpack(Broken())
    # Known as legacy from its signature, so asked only without keywords.
    assert calls == [None] and dlbridge._glue.is_legacy_producer(Broken)


def test_data_ptr_of_a_zero_size_tensor_is_its_address():
    # As the docstring says: the buffer's data pointer plus byte offset,
    # never 0 (DLPack consumers skip the deleter of a NULL-data tensor).
    t = dlbridge.empty((0, 3), "float32")
    assert t.size == 0 and t.data_ptr != 0
    assert "zero-size tensor has an address too" in " ".join(dlbridge.Tensor.data_ptr.__doc__.split())
    if np is not None:
        a = np.from_dlpack(t)
        assert a.shape == (0, 3) and a.ctypes.data == t.data_ptr


def test_known_1x_producer_is_called_once_per_import_and_cured_when_it_refuses():
    # After the first call a 1.x producer type is known, and from_dlpack
    # calls its __dlpack__ once per import with max_version alone; a refusal
    # on that path still reaches the host-copy cure.
    class Producer:
        shape = (4,)
        dtype = "int32"

        def __init__(self, t):
            self.t = t
            self.calls = []
            self.refuse = False

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            self.calls.append((stream, max_version, dl_device, copy))
            if self.refuse and copy is not True:
                raise BufferError("cannot export now")
            return self.t.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)

        def __dlpack_device__(self):
            return (1, 0)

    t = dlbridge.empty((4,), "int32")
    p = Producer(t)
    for i in range(3):
        u = dlbridge.from_dlpack(p)
        assert u.data_ptr == t.data_ptr and not u.copied
        assert len(p.calls) == i + 1 and p.calls[-1] == (None, (1, 3), None, None)
        del u
    p.refuse = True
    c = dlbridge.from_dlpack(p)
    assert c.copied and c.data_ptr != t.data_ptr
    assert p.calls[3] == (None, (1, 3), None, None) and p.calls[4][3] is True
    del c
    with pytest.raises(BufferError, match="cannot export now"):
        dlbridge.from_dlpack(p, copy=False)
    gc.collect()
    assert dlbridge.live_exports() == 0


def test_a_bare_capsule_is_taken_without_looking_for_dlpack():
    t = dlbridge.empty((3,), "float32")
    u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert u.data_ptr == t.data_ptr
    with pytest.raises(ValueError, match="capsule is made already"):
        dlbridge.from_dlpack(t.__dlpack__(), stream=1)
