"""An OpenCL producer and consumer of the DLPack protocol for the tests,
written with PyOpenCL and ctypes, knowing nothing of dlbridge.

The producer (ClArray) hands out a view of a pyopencl Buffer in versioned
or legacy capsules with device kDLOpenCL, `data` the cl_mem handle
(Buffer.int_ptr) and the view's offset in `byte_offset`, as DLPack has it
for OpenCL; it keeps the Buffer alive until the capsule's deleter runs, and
counts the deleter's calls. Its device_id is the index of its device among
every platform's devices, in the ICD loader's order.

The consumer (take_opencl) takes a capsule apart as a consumer does: reads
the DLTensor, wraps its cl_mem with Buffer.from_int_ptr, reads the elements
with enqueue_copy, marks the capsule used and calls the deleter.
"""

import ctypes
from ctypes import POINTER, Structure, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p

import numpy as np
import pyopencl as cl

kDLOpenCL = 4
CAPSULE_VERSIONED = b"dltensor_versioned"
CAPSULE_LEGACY = b"dltensor"


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


LegacyDeleter = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", LegacyDeleter)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    pass


VersionedDeleter = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", VersionedDeleter),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]

_api = ctypes.PyDLL(None)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api_destructor = ctypes.PyDLL(None)
_api_destructor.PyCapsule_GetPointer.restype = c_void_p
_api_destructor.PyCapsule_GetPointer.argtypes = [c_void_p, ctypes.c_char_p]

# Managed tensors not yet deleted, by address: (producer, struct, arrays, buffer).
_alive = {}


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


# A capsule nobody consumed deletes its tensor, as the protocol asks.
@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule):
    for name in (CAPSULE_VERSIONED, CAPSULE_LEGACY):
        if _api.PyCapsule_IsValid(capsule, name):
            _delete(_api_destructor.PyCapsule_GetPointer(capsule, name))


_DESTRUCTOR = ctypes.cast(_capsule_destructor, c_void_p)


def device_index(device):
    """The index of `device` among every platform's devices (the device_id
    of kDLOpenCL memory)."""
    index = 0
    for platform in cl.get_platforms():
        for d in platform.get_devices():
            if d.int_ptr == device.int_ptr:
                return index
            index += 1
    raise LookupError("device not listed")


def refcount(buffer):
    return buffer.get_info(cl.mem_info.REFERENCE_COUNT)


class ClArray:
    """A view (shape, strides in elements, offset in elements) of a float64
    pyopencl Buffer, exported through DLPack. `handle` overrides the cl_mem
    handle handed out (the tests pass a released one), `device_id` the
    device. `dtype` is a numpy dtype, or "int4" / "uint4": sub-byte
    elements, packed two to a byte (the offset an even count), or with
    `padded` one to a byte (a versioned capsule's SUBBYTE_PADDED flag)."""

    def __init__(self, buffer, shape, strides=None, offset=0, dtype=np.float64, handle=None, device_id=None,
                 padded=False):
        self.buffer = buffer
        self.shape = tuple(shape)
        self.strides = None if strides is None else tuple(strides)
        self.offset = offset
        self.subbyte = dtype if dtype in ("int4", "uint4") else None
        self.padded = padded
        if self.subbyte is not None and not padded and offset % 2:
            raise ValueError("packed 4-bit elements start on a byte: an even offset")
        self.dtype = np.dtype(np.uint8 if self.subbyte else dtype)
        self.handle = buffer.int_ptr if handle is None else handle
        self.device_id = device_index(buffer.context.devices[0]) if device_id is None else device_id
        self.deleted = 0
        self.exported = 0

    def __dlpack_device__(self):
        return (kDLOpenCL, self.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None and tuple(dl_device) != (kDLOpenCL, self.device_id):
            raise BufferError("ClArray exports OpenCL memory only")
        if copy:
            raise BufferError("ClArray does not copy")
        versioned = max_version is not None and max_version[0] >= 1
        ndim = len(self.shape)
        shape = (c_int64 * max(ndim, 1))(*self.shape)
        strides = None if self.strides is None else (c_int64 * max(ndim, 1))(*self.strides)
        tensor = DLTensor()
        tensor.data = self.handle
        tensor.device = DLDevice(kDLOpenCL, self.device_id)
        tensor.ndim = ndim
        if self.subbyte is not None:
            tensor.dtype = DLDataType(0 if self.subbyte == "int4" else 1, 4, 1)
            tensor.byte_offset = self.offset if self.padded else self.offset // 2
        else:
            kind = {"f": 2, "i": 0, "u": 1, "c": 5, "b": 6}[self.dtype.kind]
            tensor.dtype = DLDataType(kind, self.dtype.itemsize * 8, 1)
            tensor.byte_offset = self.offset * self.dtype.itemsize
        tensor.shape = shape
        tensor.strides = strides
        if self.padded and not versioned:
            raise BufferError("a legacy capsule cannot say its sub-byte elements are padded")
        if versioned:
            managed = DLManagedTensorVersioned()
            managed.version = DLPackVersion(1, 1)
            managed.flags = 4 if self.padded else 0  # DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
            managed.deleter = _versioned_deleter
            managed.dl_tensor = tensor
            name = CAPSULE_VERSIONED
        else:
            managed = DLManagedTensor()
            managed.deleter = _legacy_deleter
            managed.dl_tensor = tensor
            name = CAPSULE_LEGACY
        address = ctypes.addressof(managed)
        _alive[address] = (self, managed, (shape, strides), self.buffer)
        self.exported += 1
        return _api.PyCapsule_New(address, name, _DESTRUCTOR)


def take_opencl(capsule, queue=None):
    """Consumes a versioned capsule of OpenCL memory: returns (handle,
    byte_offset, shape, strides, values, context), values read with
    enqueue_copy on `queue` (or a queue of the cl_mem's own context), then
    marks the capsule used and calls the deleter."""
    assert _api.PyCapsule_GetName(capsule) == CAPSULE_VERSIONED
    managed = DLManagedTensorVersioned.from_address(_api.PyCapsule_GetPointer(capsule, CAPSULE_VERSIONED))
    t = managed.dl_tensor
    assert t.device.device_type == kDLOpenCL, t.device.device_type
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    strides = tuple(t.strides[i] for i in range(ndim)) if t.strides else None
    buffer = cl.Buffer.from_int_ptr(t.data, retain=True)
    if queue is None:
        queue = cl.CommandQueue(buffer.context)
    itemsize = t.dtype.bits // 8
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1:])) for i in range(ndim))
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(n > 0 for n in shape) else 0
    raw = np.empty(max(extent, 1), np.float64 if itemsize == 8 else np.uint8)
    if extent:
        cl.enqueue_copy(queue, raw, buffer, src_offset=t.byte_offset, is_blocking=True)
    values = np.lib.stride_tricks.as_strided(raw, shape, tuple(s * itemsize for s in strides)).copy()
    result = (t.data, t.byte_offset, shape, strides, values, buffer.context)
    buffer.release()  # the reference from_int_ptr took
    _api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
    managed.deleter(ctypes.pointer(managed))
    return result
