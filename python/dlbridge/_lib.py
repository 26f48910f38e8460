"""ctypes declarations of the DLPack and dlbridge structs, for tools that
call libdlbridge through ctypes beside the package (the package itself does
not: its C side is the ``dlbridge._glue`` extension).

``path`` is the file of the libdlbridge the package loaded (with the
extension, once), so a ctypes or cffi user gets the same library::

    lib = ctypes.CDLL(dlbridge._lib.path)

Constants are the header's values, checked against it by the tests.
"""

import ctypes
import os

from . import _glue
from ._ctypes_decls import (DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
                            DLPackVersion, DLTensor)

__all__ = ["path", "DLDevice", "DLDataType", "DLTensor", "DLPackVersion", "DLManagedTensor",
           "DLManagedTensorVersioned", "ExportOptions", "ImportOptions"]

path: str = os.path.normpath(_glue.library_path())

# ----------------------------------------------------------------------------
# DLPack structs (declared once, in _ctypes_decls) and dlbridge's own
# (x86-64 / LP64 layouts, checked by the tests)
# ----------------------------------------------------------------------------


class ExportOptions(ctypes.Structure):
    """dlb_export_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("copy", ctypes.c_int32),
        ("has_target_device", ctypes.c_int32),
        ("target_device", DLDevice),
        ("stream", ctypes.c_int64),
        ("flags", ctypes.c_uint64),
    ]


class ImportOptions(ctypes.Structure):
    """dlb_import_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("require_alignment", ctypes.c_uint64),
        ("require_contiguous", ctypes.c_int32),
        ("require_writable", ctypes.c_int32),
        ("flags", ctypes.c_uint64),
    ]


# Constants from dlbridge.h (checked against the header by the tests).
DLB_OK = 0
DLB_ERR_INVALID_ARGUMENT = 1
DLB_ERR_DELETED = 3
DLB_ERR_READ_ONLY = 8

DLB_BUFFER_READ_ONLY = 1 << 0
DLB_BUFFER_DELETED = 1 << 8
DLB_BUFFER_COPIED = 1 << 9
DLB_BUFFER_IMPORTED = 1 << 10

DLB_COPY_IF_NEEDED = 0
DLB_COPY_NEVER = 1
DLB_COPY_ALWAYS = 2

DLB_EXPORT_READ_ONLY = 1 << 0
DLB_EXPORT_ALLOW_READ_ONLY_LEGACY = 1 << 1

kDLCPU = 1
