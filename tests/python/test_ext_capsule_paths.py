"""Capsules from producers (_capsule.c) on the paths the protocol tests
leave: a tensor without a deleter (DLPack allows NULL: nothing to free),
versioned and legacy, taken in and released; a capsule without a name;
an object whose type gives no name. Standard library only."""

import ctypes as ct
import struct

import pytest

import dlbridge
from dlbridge._ctypes_decls import DLDataType, DLDevice, DLPackVersion, DLTensor
from ext_tables import DELETER, Managed

_capsule_new = ct.pythonapi.PyCapsule_New
_capsule_new.restype = ct.py_object
_capsule_new.argtypes = [ct.c_void_p, ct.c_char_p, ct.c_void_p]
_capsule_name = ct.pythonapi.PyCapsule_GetName
_capsule_name.restype = ct.c_char_p
_capsule_name.argtypes = [ct.py_object]


class Legacy(ct.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ct.c_void_p), ("deleter", ct.c_void_p)]


class Static:
    """Three doubles in memory that lives as long as this object, described
    by a DLPack tensor without a deleter (a producer's static memory)."""

    def __init__(self, versioned):
        self.memory = (ct.c_double * 3)(1.5, -2.0, 8.25)
        self.shape = (ct.c_int64 * 1)(3)
        t = DLTensor()
        t.data = ct.addressof(self.memory)
        t.device = DLDevice(1, 0)
        t.ndim = 1
        t.dtype = DLDataType(2, 64, 1)
        t.shape = self.shape
        if versioned:
            self.managed = Managed()
            self.managed.version = DLPackVersion(1, 0)
            self.managed.deleter = DELETER()  # NULL
            self.managed.dl_tensor = t
        else:
            self.managed = Legacy()
            self.managed.dl_tensor = t
        self.name = b"dltensor_versioned" if versioned else b"dltensor"

    def capsule(self):
        return _capsule_new(ct.addressof(self.managed), self.name, None)


def values_of(t):
    return struct.unpack("=3d", bytes(dlbridge._glue.tensor_payload(t)[0]))


@pytest.mark.parametrize("versioned", [True, False])
def test_a_tensor_without_a_deleter_is_taken_in_and_let_go(versioned):
    static = Static(versioned)
    for _ in range(3):
        capsule = static.capsule()
        t = dlbridge.from_dlpack(capsule)
        assert t.data_ptr == ct.addressof(static.memory) and values_of(t) == (1.5, -2.0, 8.25)
        assert _capsule_name(capsule) == b"used_" + static.name
        del t  # nothing of the producer's to free; the import's own wrapper is freed
    assert dlbridge.live_exports() == 0


def test_a_capsule_without_a_name_is_refused():
    static = Static(True)
    capsule = _capsule_new(ct.addressof(static.managed), None, None)
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(capsule)
    assert info.value.status_name == "DLB_ERR_INVALID_ARGUMENT"
    assert "capsule named '(null)' is not a DLPack capsule" in str(info.value)


def test_an_object_whose_type_has_no_name_to_give():
    class Nameless(type):
        @property
        def __name__(cls):
            raise AttributeError("no name here")

    odd = Nameless("Odd", (), {})

    class Producer:
        def __dlpack__(self, **kwargs):
            return odd()

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(Producer())
    assert info.value.status_name == "DLB_ERR_MALFORMED"
    assert "__dlpack__ gave an object of type (unnamed), not a DLPack PyCapsule" in str(info.value)
