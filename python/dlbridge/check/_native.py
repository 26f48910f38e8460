"""The C side of the conformance checker: capsules, managed tensors, deleters.

Everything the checker reads from a producer goes through here: the capsule
(read with the CPython capsule API through ctypes), the managed tensor it
holds (DLPack's struct layouts), and the tensor rules, which are those of
libdlbridge's ``dlb_validate`` rather than a second copy written in Python.

Deleters are interposed: the checker replaces the deleter pointer of every
managed tensor it receives with one of its own, which counts the calls and
forwards the first one to the producer's deleter, so that a producer that
runs its deleter twice is reported instead of freeing memory twice.
"""

import ctypes
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from .._ctypes_decls import DLDataType, DLManagedTensor, DLManagedTensorVersioned, DLTensor

_vp = ctypes.c_void_p

# Capsule names of the Python protocol (array API standard, "DLPack").
LEGACY = b"dltensor"
VERSIONED = b"dltensor_versioned"
USED_LEGACY = b"used_dltensor"
USED_VERSIONED = b"used_dltensor_versioned"

# Flag bits of DLManagedTensorVersioned (dlpack.h 1.x).
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_SUBBYTE_PADDED = 1 << 2

# dlb_validate flags (dlbridge.h).
VALIDATE_STRIDES_REQUIRED = 1 << 1


# How many dimensions the checker reads from a tensor whose ndim it has not
# validated yet (beyond that it only reports the value).
_READ_NDIM_LIMIT = 64


def _capsule_api() -> Tuple[Any, Any, Any, Any, Any, Any]:
    """The CPython capsule functions, as private ctypes function objects.

    ``ctypes.pythonapi[name]`` makes a new function object, so declaring its
    argument types here cannot disturb other users of ``ctypes.pythonapi``.
    """
    api = ctypes.pythonapi
    get_name = api["PyCapsule_GetName"]
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_pointer = api["PyCapsule_GetPointer"]
    get_pointer.restype = _vp
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    set_name = api["PyCapsule_SetName"]
    set_name.restype = ctypes.c_int
    set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
    get_destructor = api["PyCapsule_GetDestructor"]
    get_destructor.restype = _vp
    get_destructor.argtypes = [ctypes.py_object]
    get_buffer = api["PyObject_GetBuffer"]
    get_buffer.restype = ctypes.c_int
    get_buffer.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    release_buffer = api["PyBuffer_Release"]
    release_buffer.restype = None
    release_buffer.argtypes = [ctypes.c_void_p]
    return get_name, get_pointer, set_name, get_destructor, get_buffer, release_buffer


(
    _capsule_get_name,
    _capsule_get_pointer,
    _capsule_set_name,
    _capsule_get_destructor,
    _object_get_buffer,
    _buffer_release,
) = _capsule_api()


class _PyBuffer(ctypes.Structure):
    """Py_buffer (Include/pybuffer.h)."""

    _fields_ = [
        ("buf", _vp),
        ("obj", _vp),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", _vp),
        ("strides", _vp),
        ("suboffsets", _vp),
        ("internal", _vp),
    ]


_PyBUF_RECORDS_RO = 0x0018 | 0x0004  # PyBUF_STRIDES | PyBUF_FORMAT


def buffer_address(obj: object) -> Optional[Tuple[int, bool]]:
    """(address of the first element, read-only) through the buffer protocol,
    or None when `obj` has no buffer."""
    view = _PyBuffer()
    try:
        _object_get_buffer(obj, ctypes.byref(view), _PyBUF_RECORDS_RO)
    except Exception:
        return None
    try:
        return (view.buf or 0), bool(view.readonly)
    finally:
        _buffer_release(ctypes.byref(view))


# ----------------------------------------------------------------------------
# libdlbridge
# ----------------------------------------------------------------------------

_native: Optional["_Native"] = None
_native_lock = threading.Lock()


def native() -> "_Native":
    """libdlbridge and the DLPack structs, loaded once: the one place the
    checker reaches into the rest of the package."""
    global _native
    with _native_lock:
        if _native is None:
            from .. import _lib

            _native = _Native(_lib.path)
        return _native


class _Native:
    def __init__(self, path: str) -> None:
        self.DLTensor = DLTensor
        self.DLDataType = DLDataType
        # Offsets the checker writes through (deleter interposition) or
        # reads from (the tensor of a known major), from the declarations.
        self.legacy_deleter_offset: int = DLManagedTensor.deleter.offset
        self.versioned_deleter_offset: int = DLManagedTensorVersioned.deleter.offset
        self.versioned_tensor_offset: int = DLManagedTensorVersioned.dl_tensor.offset
        self.DLManagedTensor = DLManagedTensor
        self.DLManagedTensorVersioned = DLManagedTensorVersioned

        lib = ctypes.CDLL(path)

        def declare(name: str, restype: Any, argtypes: Any) -> Any:
            f = lib[name]
            f.restype = restype
            f.argtypes = argtypes
            return f

        self.validate = declare("dlb_validate", ctypes.c_int32, [_vp, ctypes.c_uint32])
        self.status_name = declare("dlb_status_name", ctypes.c_char_p, [ctypes.c_int32])
        self.last_message = declare("dlb_last_error_message", ctypes.c_char_p, [])
        self.dtype_name = declare(
            "dlb_dtype_name", ctypes.c_int32, [DLDataType, ctypes.c_char_p, ctypes.c_size_t]
        )
        self.copy_to_contiguous = declare(
            "dlb_copy_to_contiguous", ctypes.c_int32, [_vp, _vp, ctypes.c_uint64]
        )
        self.buffer_wrap = declare(
            "dlb_buffer_wrap", ctypes.c_int32, [_vp, ctypes.c_uint64, _vp, _vp, ctypes.POINTER(_vp)]
        )
        self.buffer_nbytes = declare("dlb_buffer_nbytes", ctypes.c_uint64, [_vp])
        self.buffer_release = declare("dlb_buffer_release", None, [_vp])

    def error(self, status: int) -> str:
        """'DLB_ERR_X: message' for the calling thread's last failure."""
        message = self.last_message().decode("utf-8", "replace")
        return "%s: %s" % (self.status_name(status).decode("ascii"), message)

    def check_tensor(self, address: int, flags: int = 0) -> Tuple[int, str]:
        """(status, text) of dlb_validate on the DLTensor at `address`."""
        status = self.validate(address, flags)
        return status, (self.error(status) if status != 0 else "")

    def dtype_text(self, code: int, bits: int, lanes: int) -> str:
        out = ctypes.create_string_buffer(64)
        status = self.dtype_name(self.DLDataType(code, bits, lanes), out, 64)
        if status != 0:
            return "(code %d, bits %d, lanes %d)" % (code, bits, lanes)
        return out.value.decode("ascii")

    def device_known(self, device_type: int, device_id: int) -> Tuple[int, str]:
        """(status, text) of dlb_validate on an empty tensor on that device:
        the library's device table decides whether DLPack defines it."""
        shape = (ctypes.c_int64 * 1)(0)
        t = self.DLTensor()
        t.data = None
        t.device.device_type = device_type
        t.device.device_id = device_id
        t.ndim = 1
        t.dtype = self.DLDataType(2, 32, 1)
        t.shape = shape
        t.strides = None
        t.byte_offset = 0
        return self.check_tensor(ctypes.addressof(t))

    def compact_bytes(self, address: int) -> Tuple[Optional[bytes], str]:
        """The elements of the (validated, host-readable) DLTensor at
        `address` as compact row-major bytes, or (None, why)."""
        handle = _vp()
        status = self.buffer_wrap(address, 0, None, None, ctypes.byref(handle))
        if status != 0:
            return None, self.error(status)
        try:
            size = self.buffer_nbytes(handle)
        finally:
            self.buffer_release(handle)
        out = ctypes.create_string_buffer(max(int(size), 1))
        status = self.copy_to_contiguous(address, out, size)
        if status != 0:
            return None, self.error(status)
        return out.raw[:size], ""


# ----------------------------------------------------------------------------
# What a capsule holds
# ----------------------------------------------------------------------------


class Export:
    """What one ``__dlpack__`` call returned, read without consuming it.

    ``name`` is the capsule's name (bytes, or None when it is not a capsule);
    for a "dltensor" or "dltensor_versioned" capsule, ``managed`` is the
    address of the managed struct and ``tensor`` that of its DLTensor.
    """

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule
        self.name: Optional[bytes] = None
        self.managed = 0
        self.tensor = 0
        self.versioned = False
        self.version: Optional[Tuple[int, int]] = None
        self.flags = 0
        self.deleter = 0
        self.has_destructor = False
        self.record: Optional[DeleterProbe.Record] = None  # set by whoever interposes
        self.is_capsule = type(capsule).__name__ == "PyCapsule"
        if not self.is_capsule:
            return
        self.name = _capsule_get_name(capsule)
        self.has_destructor = bool(_capsule_get_destructor(capsule))
        if self.name not in (LEGACY, VERSIONED):
            return
        self.managed = _capsule_get_pointer(capsule, self.name) or 0
        if not self.managed:
            return
        n = native()
        if self.name == VERSIONED:
            self.versioned = True
            mv = n.DLManagedTensorVersioned.from_address(self.managed)
            self.version = (mv.version.major, mv.version.minor)
            self.deleter = mv.deleter or 0
            self.flags = mv.flags
            if mv.version.major == 1:  # beyond `flags`, only a known major is readable
                self.tensor = self.managed + n.versioned_tensor_offset
        else:
            ml = n.DLManagedTensor.from_address(self.managed)
            self.deleter = ml.deleter or 0
            self.tensor = self.managed

    @property
    def name_text(self) -> str:
        if not self.is_capsule:
            return "not a capsule (%s)" % type(self.capsule).__name__
        if self.name is None:
            return "a capsule without a name"
        return '"%s"' % self.name.decode("ascii", "replace")

    def dltensor(self) -> Any:
        """The DLTensor as a ctypes struct view (valid while the capsule or
        the consumer's ownership lasts)."""
        return native().DLTensor.from_address(self.tensor)

    def summary(self) -> Dict[str, Any]:
        """Device, ndim, dtype, shape, strides, address, read defensively."""
        t = self.dltensor()
        ndim = t.ndim
        shape = strides = None
        if 0 <= ndim <= _READ_NDIM_LIMIT:
            if t.shape:
                shape = tuple(t.shape[:ndim])
            if t.strides:
                strides = tuple(t.strides[:ndim])
        return {
            "device": (t.device.device_type, t.device.device_id),
            "ndim": ndim,
            "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
            "shape": shape,
            "strides": strides,
            "address": (t.data or 0) + t.byte_offset,
            "byte_offset": t.byte_offset,
        }

    def rename_used(self) -> None:
        """Takes ownership as a consumer would: renames the capsule to used_*."""
        _capsule_set_name(self.capsule, USED_VERSIONED if self.versioned else USED_LEGACY)


class DeleterProbe:
    """Interposes on the deleters of managed tensors the checker receives.

    ``wrap(export)`` replaces the managed struct's deleter pointer with the
    probe's own and returns a record whose ``calls`` counts how often the
    deleter was called. The first call is forwarded to the producer's
    deleter (with the GIL held, as a capsule destructor would call it); any
    further call is counted and not forwarded, so a producer bug is reported
    rather than becoming a double free.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: Dict[int, DeleterProbe.Record] = {}  # managed address -> record, until the first call
        self._done: Dict[int, DeleterProbe.Record] = {}  # managed address -> record, after it
        self._callback = ctypes.CFUNCTYPE(None, _vp)(self._called)
        self.address = ctypes.cast(self._callback, _vp).value
        self.stray = 0  # calls for addresses never wrapped

    class Record:
        __slots__ = ("managed", "original", "calls", "thread")

        def __init__(self, managed: int, original: int) -> None:
            self.managed = managed
            self.original = original
            self.calls = 0
            self.thread: Optional[int] = None

    def wrap(self, export: "Export") -> Optional["DeleterProbe.Record"]:
        """Interposes on `export`'s deleter; None when it has none (NULL)."""
        if not export.managed or not export.deleter:
            return None
        record = self.Record(export.managed, export.deleter)
        with self._lock:
            self._live[export.managed] = record
            self._done.pop(export.managed, None)
        n = native()
        offset = n.versioned_deleter_offset if export.versioned else n.legacy_deleter_offset
        _vp.from_address(export.managed + offset).value = self.address
        return record

    def forget(self, record: "DeleterProbe.Record") -> None:
        """Drops the probe's memory of a tensor the checker is done with (a
        later call for its address is then counted as stray)."""
        with self._lock:
            if self._done.get(record.managed) is record:
                del self._done[record.managed]
            if self._live.get(record.managed) is record:
                del self._live[record.managed]

    def call(self, record: "DeleterProbe.Record") -> None:
        """Calls the deleter as a consumer that owns the tensor would."""
        self._called(record.managed)

    def _called(self, address: Optional[int]) -> None:
        managed = address or 0  # ctypes passes a NULL void* as None
        try:
            with self._lock:
                record = self._live.pop(managed, None)
                if record is not None:
                    self._done[managed] = record
                else:
                    record = self._done.get(managed)
                    if record is None:
                        self.stray += 1
                        return
                record.calls += 1
                first = record.calls == 1
            if first:
                record.thread = threading.get_ident()
                ctypes.PYFUNCTYPE(None, _vp)(record.original)(managed)
        except BaseException:  # never let an exception into a C caller
            pass
