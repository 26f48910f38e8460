"""Finding and loading libdlbridge, and the ctypes declarations of its C API.

The library is looked for, in this order:

1. the path in the environment variable ``DLBRIDGE_LIBRARY``;
2. ``libdlbridge.so*`` next to this package (a wheel-style layout);
3. the library directory recorded when meson installed the package
   (``_install_paths.LIBDIR``);
4. the system's library path (``ctypes.util.find_library``, then
   ``libdlbridge.so.0``).

It is loaded twice over the same handle: as ``ctypes.CDLL`` (calls release
the GIL; used for the calls that may run long, such as allocating or
copying) and as ``ctypes.PyDLL`` (calls keep the GIL; used for everything
that may drop a reference, since a producer's deleter may need the GIL, and
for the ``dlb_py_*`` functions, which take and return Python objects).
"""

import ctypes
import ctypes.util
import glob
import os

__all__ = ["cdll", "pydll", "path"]

# ----------------------------------------------------------------------------
# DLPack and dlbridge structs (x86-64 / LP64 layouts, checked by the tests)
# ----------------------------------------------------------------------------


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
kDLCUDA = 2
kDLCUDAHost = 3
kDLROCM = 10
kDLROCMHost = 11
kDLCUDAManaged = 13

# ----------------------------------------------------------------------------
# Finding the library
# ----------------------------------------------------------------------------


def _candidates():
    env = os.environ.get("DLBRIDGE_LIBRARY")
    if env:
        yield env
        return  # an explicit choice is not second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    for found in sorted(glob.glob(os.path.join(here, "libdlbridge.so*"))):
        yield found
    try:
        from . import _install_paths  # written by meson at install time
    except ImportError:
        _install_paths = None
    if _install_paths is not None:
        yield os.path.join(_install_paths.LIBDIR, "libdlbridge.so.0")
    found = ctypes.util.find_library("dlbridge")
    if found:
        yield found
    yield "libdlbridge.so.0"


def _load():
    tried = []
    for candidate in _candidates():
        try:
            return candidate, ctypes.CDLL(candidate), ctypes.PyDLL(candidate)
        except OSError as e:
            tried.append("%s (%s)" % (candidate, e))
    raise ImportError(
        "dlbridge: cannot load libdlbridge; set DLBRIDGE_LIBRARY to its path. Tried: "
        + "; ".join(tried)
    )


path, cdll, pydll = _load()

# ----------------------------------------------------------------------------
# Declarations
# ----------------------------------------------------------------------------

_vp = ctypes.c_void_p
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_u64 = ctypes.c_uint64


def _declare(lib, name, restype, argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


for _each in (cdll, pydll):
    _declare(_each, "dlb_version_string", ctypes.c_char_p, [])
    _declare(_each, "dlb_status_name", ctypes.c_char_p, [_i32])
    _declare(_each, "dlb_last_error_message", ctypes.c_char_p, [])
    _declare(_each, "dlb_last_error_code", _i32, [])
    _declare(_each, "dlb_clear_last_error", None, [])
    _declare(_each, "dlb_dtype_name", _i32, [DLDataType, ctypes.c_char_p, ctypes.c_size_t])
    _declare(_each, "dlb_dtype_from_name", _i32, [ctypes.c_char_p, ctypes.POINTER(DLDataType)])
    _declare(
        _each,
        "dlb_buffer_alloc",
        _i32,
        [DLDevice, DLDataType, _i32, ctypes.POINTER(_i64), ctypes.POINTER(_vp)],
    )
    _declare(_each, "dlb_buffer_release", None, [_vp])
    _declare(_each, "dlb_buffer_retain", _vp, [_vp])
    _declare(_each, "dlb_buffer_delete", _i32, [_vp])
    _declare(_each, "dlb_buffer_dltensor", _i32, [_vp, ctypes.POINTER(DLTensor)])
    _declare(_each, "dlb_buffer_flags", _u64, [_vp])
    _declare(_each, "dlb_buffer_nbytes", _u64, [_vp])
    _declare(_each, "dlb_buffer_refcount", _i64, [_vp])
    _declare(_each, "dlb_buffer_to_host", _i32, [_vp, ctypes.POINTER(_vp)])
    _declare(_each, "dlb_live_exports", _i64, [])
    _declare(_each, "dlb_export_options_init", None, [ctypes.POINTER(ExportOptions)])
    _declare(_each, "dlb_import_options_init", None, [ctypes.POINTER(ImportOptions)])

# The Python-support functions: only through PyDLL (they need the GIL).
# No argtypes on the export: the hot path passes a c_void_p, None and an int,
# which ctypes converts without a from_param round trip.
export_capsule = pydll.dlb_py_export_capsule
export_capsule.restype = ctypes.py_object
export_capsule.argtypes = None

import_capsule = _declare(
    pydll, "dlb_py_import_capsule", _i32, [ctypes.py_object, _vp, ctypes.POINTER(_vp)]
)
wrap_buffer = _declare(pydll, "dlb_py_wrap_buffer", _i32, [ctypes.py_object, ctypes.POINTER(_vp)])
release_object = pydll.dlb_py_release_object

# Called from Tensor.__del__ with a c_void_p: no argtypes, so no from_param.
buffer_release = ctypes.PyDLL(path).dlb_buffer_release
buffer_release.restype = None
buffer_release.argtypes = None

# ----------------------------------------------------------------------------
# Builtins from dlb_py_method_table()
# ----------------------------------------------------------------------------
#
# The hot calls as CPython builtin functions, made once here from the
# library's PyMethodDef table: a builtin call costs a fraction of a ctypes
# call. ``builtins`` is None when the library has no table (an older
# library, or no usable CPython API), or when the environment variable
# DLBRIDGE_NO_BUILTINS is set to a non-empty value; the package then keeps
# to the ctypes calls above.


class PyMethodDef(ctypes.Structure):
    _fields_ = [
        ("ml_name", ctypes.c_char_p),
        ("ml_meth", ctypes.c_void_p),
        ("ml_flags", ctypes.c_int),
        ("ml_doc", ctypes.c_char_p),
    ]


BUILTIN_NAMES = frozenset(
    ["export", "import_capsule", "wrap_buffer", "own", "handle", "meta", "set_error_type"]
)


def _load_builtins():
    if os.environ.get("DLBRIDGE_NO_BUILTINS"):
        return None
    try:
        table = pydll.dlb_py_method_table
    except AttributeError:  # a library from before the table
        return None
    table.restype = ctypes.c_void_p
    table.argtypes = []
    address = table()
    if not address:
        return None
    api = ctypes.pythonapi
    if hasattr(api, "PyCFunction_NewEx"):
        make = api.PyCFunction_NewEx
        make.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        extra = (None, None)
    else:
        make = api.PyCFunction_New
        make.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        extra = (None,)
    make.restype = ctypes.py_object
    made = {}
    size = ctypes.sizeof(PyMethodDef)
    while True:
        entry = PyMethodDef.from_address(address)
        if not entry.ml_name:
            break
        made[entry.ml_name.decode("ascii")] = make(address, *extra)
        address += size
    if not BUILTIN_NAMES <= made.keys():
        return None
    return made


builtins = _load_builtins()
