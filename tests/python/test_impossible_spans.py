"""Producers' tensors whose memory cannot exist, through from_dlpack: a
span or byte_offset past any address space (2^57 bytes) is a
dlbridge.Error with DLB_ERR_OVERFLOW before anything reads the memory,
whatever `copy` asks; the producer's deleter still runs exactly once. The
first test is the reproducer of a crash: a capsule of shape [2] and stride
2**62 was accepted, and with copy=True the process died of SIGSEGV.
The producers are ctypes structs, as a foreign library would make them."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap

import pytest

import dlbridge
from dlbridge._ctypes_decls import DLDataType, DLDevice, DLPackVersion, DLTensor

c_int64_p = ctypes.POINTER(ctypes.c_int64)


# The package's managed structs hold their deleters as addresses; these name
# the callback types, so that ctypes keeps the callbacks they are set to.
class DLManagedTensor(ctypes.Structure):
    pass


LegacyDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", LegacyDeleter)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VersionedDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VersionedDeleter), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

# A handle of our own: ctypes.pythonapi's function objects are shared with
# other test modules, which set their own argtypes.
_api = ctypes.PyDLL(None)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

VERSIONED, LEGACY = b"dltensor_versioned", b"dltensor"
_alive = {}  # address of a managed tensor not yet deleted -> (producer, struct, arrays)


def _delete(address):
    entry = _alive.pop(address, None)
    if entry is not None:
        entry[0].deleted += 1


@VersionedDeleter
def _versioned_deleter(managed):
    _delete(ctypes.addressof(managed.contents))


@LegacyDeleter
def _legacy_deleter(managed):
    _delete(ctypes.addressof(managed.contents))


# A capsule nobody took (still named dltensor*) deletes its tensor, as the
# protocol asks of producers; the dying capsule is read only as an address.
@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    for name in (VERSIONED, LEGACY):
        if _api.PyCapsule_IsValid(capsule, name):
            _delete(_api.PyCapsule_GetPointer(capsule, name))


class Producer:
    """One tensor over 64 bytes of its own (data at byte 32), with the
    layout given, exported versioned or legacy; counts its deleter."""

    def __init__(self, shape, strides, byte_offset=0, dtype=(1, 8, 1), versioned=True, data=True):
        self.storage = (ctypes.c_uint8 * 64)(*range(1, 65))
        self.shape = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * max(1, len(strides)))(*strides)
        self.ndim = len(shape)
        self.byte_offset = byte_offset
        self.dtype = dtype
        self.versioned = versioned
        self.data = ctypes.addressof(self.storage) + 32 if data else None
        self.deleted = 0
        self.exported = 0

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        t = DLTensor()
        t.data = self.data
        t.device = DLDevice(1, 0)
        t.ndim = self.ndim
        t.dtype = DLDataType(*self.dtype)
        t.shape = ctypes.cast(self.shape, c_int64_p)
        t.strides = None if self.strides is None else ctypes.cast(self.strides, c_int64_p)
        t.byte_offset = self.byte_offset
        if self.versioned:
            m = DLManagedTensorVersioned()
            m.version = DLPackVersion(1, 3)
            m.deleter = _versioned_deleter
            name = VERSIONED
        else:
            m = DLManagedTensor()
            m.deleter = _legacy_deleter
            name = LEGACY
        m.dl_tensor = t
        _alive[ctypes.addressof(m)] = (self, m, (self.shape, self.strides))
        self.exported += 1
        return _api.PyCapsule_New(ctypes.addressof(m), name, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def refused(producer, copy, status):
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(producer, copy=copy)
    assert info.value.status_name == status, str(info.value)
    return str(info.value)


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("copy", [None, True, False])
def test_stride_two_to_the_62_is_refused_whatever_copy_asks(versioned, copy):
    live = dlbridge.live_exports()
    p = Producer([2], [2 ** 62], versioned=versioned)
    words = refused(p, copy, "DLB_ERR_OVERFLOW")
    assert "spans 4611686018427387905 bytes" in words
    assert "2^57" in words
    gc.collect()
    assert p.deleted == p.exported >= 1
    assert dlbridge.live_exports() == live


@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("copy", [None, True])
def test_byte_offset_two_to_the_63_is_refused(versioned, copy):
    p = Producer([2], [1], byte_offset=2 ** 63, versioned=versioned)
    words = refused(p, copy, "DLB_ERR_OVERFLOW")
    assert "byte_offset 9223372036854775808" in words
    gc.collect()
    assert p.deleted == p.exported >= 1


def test_negative_strides_past_the_bound_are_refused():
    p = Producer([2, 3], [-(2 ** 60), 1], dtype=(2, 32, 1))
    assert "spans" in refused(p, True, "DLB_ERR_OVERFLOW")
    gc.collect()
    assert p.deleted == p.exported


def test_negative_extent_against_a_huge_stride_is_malformed():
    p = Producer([3, -1], [1, 2 ** 62])
    assert "shape[1] is -1" in refused(p, True, "DLB_ERR_MALFORMED")
    gc.collect()
    assert p.deleted == p.exported


def test_null_data_with_elements_is_malformed():
    p = Producer([2, 3], [3, 1], data=False)
    assert "data is NULL" in refused(p, True, "DLB_ERR_MALFORMED")
    gc.collect()
    assert p.deleted == p.exported


def test_a_possible_neighbour_still_copies_its_values():
    """The bound refuses nothing real: [2] with stride 30 and byte_offset
    1 copies the producer's bytes 33 and 63 (values 34 and 64)."""
    np = pytest.importorskip("numpy")
    p = Producer([2], [30], byte_offset=1)
    got = dlbridge.from_dlpack(p, copy=True)
    assert np.from_dlpack(got).tolist() == [34, 64]
    del got
    gc.collect()
    assert p.deleted == p.exported


def test_ndim_zero_never_reads_stray_shape_or_strides():
    """torch sends non-NULL shape and strides for 0-d tensors; they are
    never read (pointers to address 8 would fault)."""
    np = pytest.importorskip("numpy")
    p = Producer([], [], dtype=(2, 32, 1))
    p.shape = ctypes.cast(ctypes.c_void_p(8), c_int64_p)
    p.strides = ctypes.cast(ctypes.c_void_p(8), c_int64_p)
    got = dlbridge.from_dlpack(p, copy=True)
    want = np.frombuffer(bytes(range(33, 37)), dtype=np.float32)[0]
    assert np.from_dlpack(got).item() == want
    del got
    gc.collect()
    assert p.deleted == p.exported


def test_the_crash_reproducer_in_a_child_process():
    """The issue's reproducer as written, in a child: before the fix it
    died of SIGSEGV (which would take this test run with it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        import dlbridge
        from test_impossible_spans import Producer
        for copy in (True, None):
            try:
                dlbridge.from_dlpack(Producer([2], [2 ** 62]), copy=copy)
            except dlbridge.Error as e:
                print(e.status_name)
            else:
                print("accepted")
    """ % here)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["DLB_ERR_OVERFLOW", "DLB_ERR_OVERFLOW"]
