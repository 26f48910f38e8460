"""DLPack producers built with ctypes, each able to break one rule on purpose.

``Producer(*faults)`` exports a float32 tensor of shape (2, 3) holding
0..5 from memory it owns, through the Python protocol (legacy capsules, and
versioned ones when asked with max_version). With no fault it follows every
rule; each fault breaks one:

- ``wrong_name``: legacy capsules are named "DLTensor" instead of "dltensor".
- ``versioned_always``: a versioned capsule even when no max_version was given.
- ``null_strides``: versioned 1.3 tensors with NULL strides.
- ``readonly_as_writable``: the memory is read-only (``__array_interface__``
  says so) but exports carry no READ_ONLY flag, legacy ones included.
- ``is_copied_lie``: zero-copy exports flagged IS_COPIED.
- ``copy_unflagged``: copy=True copies without setting IS_COPIED.
- ``deleter_twice``: the capsule destructor calls the deleter twice.
- ``destructor_leaks``: the capsule destructor never calls the deleter.
- ``ignores_rename``: the destructor calls the deleter of consumed (used_*) capsules.
- ``device_lies``: ``__dlpack_device__`` says CUDA while the data is on the CPU.
- ``ignores_stream``: stream= is accepted on this CPU tensor.
- ``keeps_reference``: every export keeps a reference to the producer forever.
- ``bad_dtype``: the dtype has type code 99, which DLPack does not define.
- ``major_two``: versioned capsules claim DLPack 2.0 to a consumer that asked for 1.3.
- ``abort``: ``__dlpack__`` aborts the process.
- ``legacy_only``: ``__dlpack__`` takes no max_version/dl_device/copy (TypeError).

``deleter_calls`` counts the calls the producer's deleter received and
``double_calls`` the calls for tensors already deleted.
"""

import ctypes
import os

_vp = ctypes.c_void_p
_api = ctypes.pythonapi
_capsule_new = _api["PyCapsule_New"]
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [_vp, ctypes.c_char_p, _vp]
_capsule_get_name = _api["PyCapsule_GetName"]
_capsule_get_name.restype = _vp  # the pointer itself: the name is a static below
_capsule_get_name.argtypes = [_vp]
_capsule_get_pointer = _api["PyCapsule_GetPointer"]
_capsule_get_pointer.restype = _vp
_capsule_get_pointer.argtypes = [_vp, _vp]

# Capsule names: module constants, so the pointers stay valid.
_NAMES = {
    "legacy": ctypes.create_string_buffer(b"dltensor"),
    "versioned": ctypes.create_string_buffer(b"dltensor_versioned"),
    "wrong": ctypes.create_string_buffer(b"DLTensor"),
}
_NAME_ADDRESS = {ctypes.addressof(v): k for k, v in _NAMES.items()}

_DELETER = ctypes.CFUNCTYPE(None, _vp)
_DESTRUCTOR = ctypes.CFUNCTYPE(None, _vp)

FAULTS = frozenset([
    "wrong_name", "versioned_always", "null_strides", "readonly_as_writable", "is_copied_lie",
    "copy_unflagged", "deleter_twice", "destructor_leaks", "ignores_rename", "device_lies",
    "ignores_stream", "keeps_reference", "abort", "legacy_only", "bad_dtype", "major_two",
])


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", _vp),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", _vp), ("deleter", _vp)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", _vp),
        ("deleter", _vp),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


READ_ONLY = 1 << 0
IS_COPIED = 1 << 1

_SHAPE = (2, 3)


class Producer:
    """A CPU float32 (2, 3) tensor with the faults named (see the module doc)."""

    def __init__(self, *faults):
        unknown = set(faults) - FAULTS
        if unknown:
            raise ValueError("unknown faults %s" % sorted(unknown))
        self.faults = frozenset(faults)
        self.data = (ctypes.c_float * 6)(*range(6))
        self.readonly = "readonly_as_writable" in self.faults
        self.deleter_calls = 0
        self.double_calls = 0
        self.kept = []
        # managed address -> (struct, shape, strides, data, versioned, name key)
        self._alive = {}
        self._deleter = _DELETER(self._delete)
        self._destructor = _DESTRUCTOR(self._destroy)

    @property
    def shape(self):
        return _SHAPE

    @property
    def __array_interface__(self):
        return {
            "data": (ctypes.addressof(self.data), self.readonly),
            "shape": _SHAPE,
            "typestr": "<f4",
            "version": 3,
        }

    def __dlpack_device__(self):
        return (2, 0) if "device_lies" in self.faults else (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if "abort" in self.faults:
            os.abort()
        if "legacy_only" in self.faults and (max_version, dl_device, copy) != (None, None, None):
            raise TypeError("__dlpack__() got an unexpected keyword argument")
        if stream is not None and "ignores_stream" not in self.faults:
            raise BufferError("stream must be None for a CPU tensor")
        versioned = max_version is not None and max_version[0] >= 1
        if "versioned_always" in self.faults:
            versioned = True
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError("only the CPU device (1, 0) is served")
        if self.readonly and not versioned and "readonly_as_writable" not in self.faults:
            raise BufferError("read-only memory needs a versioned capsule")
        if "keeps_reference" in self.faults:
            self.kept.append((self, object()))
        data = self.data
        flags = 0
        if copy is True:
            data = (ctypes.c_float * 6)(*self.data)
            if "copy_unflagged" not in self.faults:
                flags |= IS_COPIED
        if "is_copied_lie" in self.faults:
            flags |= IS_COPIED
        if self.readonly and "readonly_as_writable" not in self.faults:
            flags |= READ_ONLY
        return self._capsule(data, versioned, flags)

    def _capsule(self, data, versioned, flags):
        shape = (ctypes.c_int64 * 2)(*_SHAPE)
        strides = (ctypes.c_int64 * 2)(3, 1)
        if versioned:
            m = DLManagedTensorVersioned()
            m.major, m.minor = (2, 0) if "major_two" in self.faults else (1, 3)
            m.flags = flags
            key = "versioned"
        else:
            m = DLManagedTensor()
            key = "wrong" if "wrong_name" in self.faults else "legacy"
        t = m.dl_tensor
        t.data = ctypes.addressof(data)
        t.device = DLDevice(1, 0)
        t.ndim = 2
        t.dtype = DLDataType(99 if "bad_dtype" in self.faults else 2, 32, 1)
        t.shape = shape
        t.strides = None if (versioned and "null_strides" in self.faults) else strides
        t.byte_offset = 0
        m.deleter = ctypes.cast(self._deleter, _vp).value
        address = ctypes.addressof(m)
        self._alive[address] = (m, shape, strides, data, versioned, key)
        return _capsule_new(address, _NAMES[key], ctypes.cast(self._destructor, _vp).value)

    # The deleter: frees what the export holds (drops the ctypes objects).
    def _delete(self, address):
        self.deleter_calls += 1
        if self._alive.pop(address, None) is None:
            self.double_calls += 1

    # The capsule destructor, as a C producer writes it: read the deleter
    # from the struct and call it while the capsule has its unused name.
    def _destroy(self, capsule):
        name_address = _capsule_get_name(capsule)
        key = _NAME_ADDRESS.get(name_address)
        if key is None and "ignores_rename" not in self.faults:
            return  # renamed used_*: the consumer owns the tensor
        if "destructor_leaks" in self.faults:
            return
        managed = _capsule_get_pointer(capsule, name_address)
        if not managed:
            return
        entry = self._alive.get(managed)
        if entry is None:
            return
        struct, versioned = entry[0], entry[4]
        deleter = _DELETER(struct.deleter)
        deleter(managed)
        if "deleter_twice" in self.faults:
            deleter(managed)

    def live(self):
        """Exports whose deleter has not run."""
        return len(self._alive)
