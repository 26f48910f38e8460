"""Storage rules decided in the core, seen through the public Python API:
managed (unified) memory is host-readable, IS_COPIED only on an export that
copied, and a producer's byte_offset folded into `data` for consumers such
as torch that ignore it. The producers are small ctypes objects speaking
the legacy or versioned protocol, as a foreign library would."""

import ctypes
import gc

import numpy as np
import pytest

import dlbridge

kDLCPU = 1
kDLCUDAManaged = 13
IS_COPIED = 1 << 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", LEGACY_DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _ForeignProducer:
    """A float32 vector over a numpy array, exported with any device type,
    byte_offset and flags, through the legacy protocol (``__dlpack__()``
    without max_version) or the versioned one. Counts its deleter calls."""

    def __init__(self, values, count, byte_offset=0, device_type=kDLCPU, flags=0, versioned=False):
        self.array = np.ascontiguousarray(values, dtype=np.float32)
        self.shape = (ctypes.c_int64 * 1)(count)
        self.strides = (ctypes.c_int64 * 1)(1)
        self.device_type = device_type
        self.byte_offset = byte_offset
        self.flags = flags
        self.versioned = versioned
        self.deleted = 0
        self._keep = []

    def _tensor(self):
        return DLTensor(self.array.ctypes.data, DLDevice(self.device_type, 0), 1, DLDataType(2, 32, 1),
                        self.shape, self.strides, self.byte_offset)

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, **kwargs):
        if self.versioned:
            def deleter(_m):
                self.deleted += 1

            fn = VERSIONED_DELETER(deleter)
            m = DLManagedTensorVersioned(DLPackVersion(1, 3), None, fn, self.flags, self._tensor())
            name = b"dltensor_versioned"
        else:
            def deleter(_m):
                self.deleted += 1

            fn = LEGACY_DELETER(deleter)
            m = DLManagedTensor(self._tensor(), None, fn)
            name = b"dltensor"
        self._keep.append((m, fn))
        # No capsule destructor: every capsule here is consumed by dlbridge.
        return _capsule_new(ctypes.addressof(m), name, None)


class _LegacyForeignProducer(_ForeignProducer):
    """The same with the signature of a __dlpack__ of before DLPack 1.0
    (dlbridge reads that from the signature and never passes max_version)."""

    def __dlpack__(self, stream=None):
        return super().__dlpack__(stream)


def ForeignProducer(*args, versioned=False, **kwargs):
    kind = _ForeignProducer if versioned else _LegacyForeignProducer
    return kind(*args, versioned=versioned, **kwargs)


def versioned_flags(capsule):
    m = DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
    return m.flags, m.dl_tensor


def test_a_foreign_byte_offset_reads_right_through_torch():
    torch = pytest.importorskip("torch")
    values = np.arange(16, dtype=np.float32)
    producer = ForeignProducer(values, 4, byte_offset=3 * 4)
    t = dlbridge.from_dlpack(producer)
    # dlbridge's own view keeps the producer's offset...
    assert t.data_ptr == producer.array.ctypes.data + 12
    # ...and torch, which ignores byte_offset, reads elements 3..6.
    got = torch.from_dlpack(t)
    assert got.tolist() == [3.0, 4.0, 5.0, 6.0]
    assert got.data_ptr() == producer.array.ctypes.data + 12  # zero-copy
    del got, t
    gc.collect()
    assert producer.deleted == 1


def test_managed_memory_copies_to_host_and_exports_to_the_cpu():
    values = np.arange(6, dtype=np.float32) * 2
    producer = ForeignProducer(values, 6, device_type=kDLCUDAManaged)
    # A legacy producer cannot be asked for the CPU: the library decides on
    # what it handed over. Managed memory is host-readable, so the result is
    # the same memory described as CPU memory, no copy.
    on_host = dlbridge.from_dlpack(producer, device=(kDLCPU, 0))
    assert on_host.device == (kDLCPU, 0)
    assert on_host.data_ptr == producer.array.ctypes.data
    assert np.from_dlpack(on_host).tolist() == values.tolist()
    copied = dlbridge.from_dlpack(producer, device=(kDLCPU, 0), copy=True)
    assert copied.device == (kDLCPU, 0)
    assert copied.data_ptr != producer.array.ctypes.data
    assert np.from_dlpack(copied).tolist() == values.tolist()
    # The imported tensor itself exports to the CPU.
    t = dlbridge.from_dlpack(producer)
    assert t.device == (kDLCUDAManaged, 0)
    capsule = t.__dlpack__(max_version=(1, 3), dl_device=(kDLCPU, 0))
    flags, view = versioned_flags(capsule)
    assert view.device.device_type == kDLCPU
    assert view.data == producer.array.ctypes.data  # host-readable: no copy needed
    assert flags & IS_COPIED == 0
    on_cpu = dlbridge.from_dlpack(capsule)
    assert np.from_dlpack(on_cpu).tolist() == values.tolist()
    del on_host, copied, t, capsule, on_cpu
    gc.collect()
    assert producer.deleted == 3


def test_a_reexport_of_an_imported_copy_is_not_flagged_copied():
    values = np.arange(5, dtype=np.float32)
    producer = ForeignProducer(values, 5, flags=IS_COPIED, versioned=True)
    t = dlbridge.from_dlpack(producer)
    shared = t.__dlpack__(max_version=(1, 3))
    flags, view = versioned_flags(shared)
    assert view.data == producer.array.ctypes.data  # shared memory...
    assert flags & IS_COPIED == 0  # ...is not the consumer's alone
    never = t.__dlpack__(max_version=(1, 3), copy=False)
    assert versioned_flags(never)[0] & IS_COPIED == 0
    made = t.__dlpack__(max_version=(1, 3), copy=True)
    flags, view = versioned_flags(made)
    assert view.data != producer.array.ctypes.data
    assert flags & IS_COPIED == IS_COPIED  # this export made the copy
    del shared, never, made, t
    gc.collect()
    assert producer.deleted == 1
