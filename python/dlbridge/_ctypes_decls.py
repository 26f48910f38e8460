"""The DLPack structs as ctypes declarations, written once for the package:
``dlbridge._lib`` (ctypes callers of libdlbridge) and the conformance
checker (``dlbridge.check._native``) both take them from here.

Field names and types are those of ``dlpack/dlpack.h`` (1.x); the tests
compare every size and offset with the cffi cdef compiled against the
header (tests/python/test_cffi.py). This module imports nothing of the
package, so that importing it loads no library.
"""

import ctypes

__all__ = ["DLDevice", "DLDataType", "DLTensor", "DLPackVersion", "DLManagedTensor",
           "DLManagedTensorVersioned"]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    """The legacy (0.x) managed tensor; `deleter` as an address."""

    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLManagedTensorVersioned(ctypes.Structure):
    """The 1.x managed tensor; `deleter` as an address. Past `flags`, only a
    tensor whose version.major is 1 may be read."""

    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]
