"""The value oracle: what a tensor holds, read from its raw memory, and
whether what crossed a route equals what the producer holds.

The truth is the producer's own: ``np.asarray`` (or the framework's own host
copy) of a resolved copy of what it made (frameworks.py). What arrives is
read from memory with ctypes, from its address, shape, strides and dtype
(``read_tensor`` for a dlbridge.Tensor, ``read_raw`` for any DLTensor),
never through another DLPack consumer. Both become ``Values``: the dtype's
name, the shape, and the elements' bytes in row-major order and native byte
order (elements of fewer than 8 bits one a byte, their bits only), so that
equality is bit equality (NaN payloads, -0.0 included).

A route may refuse, and it may copy; it must never hand over other values.
``check`` runs one route and classifies it: "zero-copy" (the result's memory
overlaps the producer's), "copied", "refused" (it raised), "wrong" (other
values, another dtype or shape, or a copy asked for and the producer's
memory handed back), or "n/a" (the case cannot be made). A wrong result,
a refusal where a route must work, and a refusal through dlbridge that does
not name the library's status is a problem: the tests fail on it.
Every outcome is counted in ``TALLY``, which tests/values/conftest.py writes
out for scripts/test.d/47-values.sh.

This module is shared by tests/values and tests/interop (the matrix checks
every exchange that works with it). ``python oracle.py --child`` is the
other end of the route through a subprocess.
"""

import collections
import copy as copy_module
import ctypes
import os
import pickle
import subprocess
import sys

import numpy as np

try:
    import ml_dtypes
except ImportError:  # Debian's python3 has none: those dtypes travel as their bits
    ml_dtypes = None

HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------------ dtypes

# dtype name (dlbridge's, numpy's and ml_dtypes' names agree) -> bits
BITS = {"bool": 8, "bfloat16": 16, "float16": 16, "float32": 32, "float64": 64, "complex32": 32,
        "complex64": 64, "complex128": 128, "float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6}
for _w in (8, 16, 32, 64):
    BITS["int%d" % _w] = BITS["uint%d" % _w] = _w
for _w in (2, 4):
    BITS["int%d" % _w] = BITS["uint%d" % _w] = _w
FLOAT8 = ["float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
          "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"]
for _n in FLOAT8:
    BITS[_n] = 8
SUBBYTE = [n for n, b in BITS.items() if b < 8]
# dtypes of several lanes (torch's float4_e2m1fn_x2: two float4 in a byte,
# exported as code 17, 4 bits, 2 lanes): name -> (the lane's dtype, lanes);
# an element is all its lanes' bits, read as one
LANED = {"float4_e2m1fnx2": ("float4_e2m1fn", 2)}
BITS.update({n: BITS[base] * lanes for n, (base, lanes) in LANED.items()})

INTEGERS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
# numpy's own dtypes; the others need ml_dtypes
NUMPY_DTYPES = ["bool"] + INTEGERS + FLOATS + ["complex64", "complex128"]
ALL_DTYPES = NUMPY_DTYPES + ["bfloat16"] + FLOAT8 + ["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
                                                     "int4", "uint4", "int2", "uint2"]
# DLPack type codes of the dtypes that have one name per code (for hand-made tensors)
_CODES = {"bool": 6, "bfloat16": 4, "float4_e2m1fn": 17, "float6_e2m3fn": 15, "float6_e3m2fn": 16}
_CODES.update({n: 7 + i for i, n in enumerate(FLOAT8)})


def dl_dtype(name):
    """(code, bits) of a dtype name (of one lane)."""
    if name in LANED:
        raise KeyError("%s has %d lanes" % (name, LANED[name][1]))
    if name in _CODES:
        return _CODES[name], BITS[name]
    for prefix, code in (("uint", 1), ("int", 0), ("float", 2), ("complex", 5)):
        if name.startswith(prefix):
            return code, BITS[name]
    raise KeyError(name)


def numpy_dtype(name):
    """The numpy dtype of a name (ml_dtypes' for the dtypes numpy lacks), or
    None when there is none here."""
    if name in NUMPY_DTYPES:
        return np.dtype(name)
    if ml_dtypes is not None and hasattr(ml_dtypes, name):
        return np.dtype(getattr(ml_dtypes, name))
    return None


def carrier(name):
    """The numpy dtype whose bits hold one element of `name` (itself when
    numpy has it): uint8 / uint16 for the others."""
    return np.dtype(name) if name in NUMPY_DTYPES else np.dtype("uint%d" % max(8, BITS[name]))


class NotApplicable(Exception):
    """The case cannot be made (a dtype or layout the producer lacks)."""


class PeerFault(Exception):
    """A framework's known fault keeps the oracle from its values (it took a
    tensor in and cannot read it back itself)."""


# ------------------------------------------------------------------ values


def named_refusal(e):
    """A refusal by dlbridge names the library's status: a dlbridge.Error,
    or an exception of the exchange table's whose text starts with it.
    (A route into another framework, "-> x", refuses in that framework's
    words.)"""
    import dlbridge

    return isinstance(e, dlbridge.Error) or str(e).startswith("DLB_ERR_")


class Values(collections.namedtuple("Values", "dtype shape data")):
    """dtype name, shape, and the elements' bytes: row-major, native byte
    order; elements of fewer than 8 bits one a byte, only their bits."""

    __slots__ = ()

    @classmethod
    def of_array(cls, arr, name=None):
        """A numpy array's values; `name` when its dtype is a carrier of the
        bits of another (torch's bfloat16 read as int16)."""
        arr = np.asarray(arr)
        if name is None:
            name = arr.dtype.name
            if name not in BITS:
                raise NotApplicable("a numpy dtype the oracle does not know: %s" % arr.dtype)
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        bits = BITS[name]
        if arr.dtype.itemsize * 8 != max(8, bits):
            raise ValueError("%s elements cannot be %s" % (arr.dtype, name))
        data = np.ascontiguousarray(arr)
        if bits < 8:
            data = data.view(np.uint8) & ((1 << bits) - 1)
        return cls(name, tuple(int(n) for n in arr.shape), data.tobytes())

    def array(self):
        """The values as a numpy array of their carrier dtype."""
        return np.frombuffer(self.data, carrier(self.dtype)).reshape(self.shape)

    def __repr__(self):
        return "Values(%s, %s, %d bytes)" % (self.dtype, self.shape, len(self.data))


def compare(expected, got):
    """None when equal, else what differs (the first element that does)."""
    if got.dtype != expected.dtype:
        return "dtype %s, the producer's is %s" % (got.dtype, expected.dtype)
    if tuple(got.shape) != tuple(expected.shape):
        return "shape %s, the producer's is %s" % (tuple(got.shape), tuple(expected.shape))
    if got.data == expected.data:
        return None
    item = max(1, BITS[expected.dtype] // 8)
    a, b = np.frombuffer(expected.data, np.uint8), np.frombuffer(got.data, np.uint8)
    first = int(np.nonzero(a != b)[0][0]) // item
    index = np.unravel_index(first, expected.shape) if expected.shape else ()
    return "element %s is %s, the producer's is %s (%d of %d elements differ)" % (
        tuple(int(i) for i in index), got.data[first * item:(first + 1) * item].hex(),
        expected.data[first * item:(first + 1) * item].hex(),
        int(np.count_nonzero((a != b).reshape(-1, item).any(axis=1))), len(a) // item)


def _offsets(shape, strides):
    """Every element's offset in elements from element 0, row-major order."""
    off = np.zeros((), np.int64)
    for n, s in zip(shape, strides):
        off = off[..., None] + np.arange(n, dtype=np.int64) * int(s)
    return off.reshape(-1)


def read_raw(address, shape, strides, dtype, padded=False):
    """The Values of a host tensor, read from memory: element 0 at
    `address`, `strides` in elements (None: compact row-major)."""
    shape = tuple(int(n) for n in shape)
    if strides is None:
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    bits = BITS[dtype]
    count = int(np.prod(shape)) if shape else 1
    if count == 0:
        return Values(dtype, shape, b"")
    off = _offsets(shape, strides)
    if bits % 8 == 0 or padded:
        item = max(bits // 8, 1)
        byte = off * item
        lo, hi = int(byte.min()), int(byte.max()) + item
        mem = np.frombuffer(ctypes.string_at(address + lo, hi - lo), np.uint8)
        data = mem[(byte - lo)[:, None] + np.arange(item)]
        if bits < 8:
            data = data & ((1 << bits) - 1)
        return Values(dtype, shape, data.tobytes())
    # packed: element i at bit offset i * bits, little bit-endian (DLPack 1.1)
    bit = off * bits
    byte, shift = bit // 8, bit % 8
    spill = bool(((shift + bits) > 8).any())
    lo, hi = int(byte.min()), int(byte.max()) + 1 + spill
    mem = np.frombuffer(ctypes.string_at(address + lo, hi - lo), np.uint8).astype(np.uint16)
    word = mem[byte - lo] | ((mem[byte - lo + 1] << 8) if spill else 0)
    return Values(dtype, shape, ((word >> shift) & ((1 << bits) - 1)).astype(np.uint8).tobytes())


_clib = None


def clib():
    """libdlbridge through ctypes (the file the package loaded)."""
    global _clib
    if _clib is None:
        from dlbridge import _lib

        lib = ctypes.CDLL(_lib.path)
        lib.dlb_buffer_flags.restype = ctypes.c_uint64
        lib.dlb_buffer_flags.argtypes = [ctypes.c_void_p]
        _clib = lib
    return _clib


DLB_BUFFER_SUBBYTE_PADDED = 1 << 2


def is_padded(t):
    return BITS[t.dtype] < 8 and bool(clib().dlb_buffer_flags(t._handle) & DLB_BUFFER_SUBBYTE_PADDED)


def read_tensor(t):
    """The Values of a dlbridge.Tensor, read from its memory."""
    if tuple(t.device) != (1, 0):
        raise AssertionError("a tensor on device %s, not the CPU" % (t.device,))
    return read_raw(t.data_ptr, t.shape, t.strides, t.dtype, is_padded(t))


def span_raw(address, shape, strides, bits, padded=False):
    """[lo, hi) of the bytes a tensor's elements occupy; None when it has none."""
    shape = tuple(shape)
    if shape and min(shape) == 0:
        return None
    if strides is None:
        strides = [0] * len(shape)
        strides[-1:] = [1] if shape else []
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
    lo = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0)
    if bits % 8 == 0 or padded:
        item = max(bits // 8, 1)
        return (address + lo * item, address + (hi + 1) * item)
    return (address + (lo * bits) // 8, address + ((hi + 1) * bits + 7) // 8)


def span_tensor(t):
    return span_raw(t.data_ptr, t.shape, t.strides, BITS[t.dtype], is_padded(t))


def overlap(a, b):
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]


# ------------------------------------------------------------------ capsules

def _capi(name, restype, argtypes):
    """A private ctypes function object of the C API (ctypes.pythonapi[name]
    is a new one each time: declaring it disturbs no other user)."""
    f = ctypes.pythonapi[name]
    f.restype, f.argtypes = restype, argtypes
    return f


_capsule_name = _capi("PyCapsule_GetName", ctypes.c_char_p, [ctypes.py_object])
_capsule_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p])
_capsule_new = _capi("PyCapsule_New", ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p])
_capsule_name_raw = _capi("PyCapsule_GetName", ctypes.c_char_p, [ctypes.c_void_p])
_capsule_pointer_raw = _capi("PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p])


def _decls():
    from dlbridge import _ctypes_decls

    return _ctypes_decls


def capsule_tensor(capsule):
    """(DLTensor, flags) of an unconsumed DLPack capsule, read in place."""
    name = _capsule_name(capsule)
    ptr = _capsule_pointer(capsule, name)
    d = _decls()
    if name == b"dltensor_versioned":
        m = d.DLManagedTensorVersioned.from_address(ptr)
        return m.dl_tensor, m.flags
    if name == b"dltensor":
        return d.DLManagedTensor.from_address(ptr).dl_tensor, 0
    raise ValueError("not an unconsumed DLPack capsule: %r" % name)


def dltensor_dtype(t):
    """The dtype name of a DLTensor (ctypes struct)."""
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    if lanes != 1:
        for name, (base, n) in LANED.items():
            if n == lanes and dl_dtype(base) == (code, bits):
                return name
        raise NotApplicable("%d lanes" % lanes)
    for name in BITS:
        try:
            if dl_dtype(name) == (code, bits):
                return name
        except KeyError:
            pass
    raise ValueError("dtype code %d bits %d" % (code, bits))


def dltensor_fields(t):
    """(address of element 0, shape, strides or None, dtype name)."""
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    return (t.data or 0) + t.byte_offset, shape, strides, dltensor_dtype(t)


def read_dltensor(t, flags=0):
    address, shape, strides, dtype = dltensor_fields(t)
    return read_raw(address, shape, strides, dtype, bool(flags & 4))


def span_dltensor(t, flags=0):
    address, shape, strides, dtype = dltensor_fields(t)
    return span_raw(address, shape, strides, BITS[dtype], bool(flags & 4))


def capsule_span(capsule):
    """The memory span of a DLPack capsule (not consumed: its destructor runs
    the deleter when it is dropped)."""
    return span_dltensor(*capsule_tensor(capsule))


# ---------------------------------------- dlbridge's exchange table, from C


class _ExchangeTable(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev", ctypes.c_void_p),
                ("allocator", ctypes.c_void_p), ("from_py", ctypes.c_void_p), ("to_py", ctypes.c_void_p),
                ("dltensor_from_py", ctypes.c_void_p), ("current_work_stream", ctypes.c_void_p)]


_exchange = None


def _exchange_table():
    global _exchange
    if _exchange is None:
        import dlbridge

        cap = dlbridge.Tensor.__dlpack_c_exchange_api__
        table = _ExchangeTable.from_address(_capsule_pointer(cap, b"dlpack_exchange_api"))
        # PYFUNCTYPE: the GIL stays held, as the table's functions need.
        from_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))(table.from_py)
        view = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(table.dltensor_from_py)
        _exchange = (cap, table, from_py, view)
    return _exchange


class TableExport:
    """What dlbridge's exchange table's managed_tensor_from_py_object_no_sync
    gives a C consumer for a tensor, read from memory; its deleter is run."""

    def __init__(self, t):
        _cap, _table, from_py, _view = _exchange_table()
        out = ctypes.c_void_p()
        if from_py(t, ctypes.byref(out)) != 0:
            raise RuntimeError("managed_tensor_from_py_object_no_sync failed")
        m = _decls().DLManagedTensorVersioned.from_address(out.value)
        try:
            self.values = read_dltensor(m.dl_tensor, m.flags)
            self.span = span_dltensor(m.dl_tensor, m.flags)
        finally:
            if m.deleter:
                ctypes.CFUNCTYPE(None, ctypes.c_void_p)(m.deleter)(out.value)


class TableView:
    """The same through dltensor_from_py_object_no_sync (a borrowed DLTensor)."""

    def __init__(self, t):
        _cap, _table, _from_py, view = _exchange_table()
        out = _decls().DLTensor()
        if view(t, ctypes.addressof(out)) != 0:
            raise RuntimeError("dltensor_from_py_object_no_sync failed")
        # a borrowed DLTensor has no flags: its elements read as DLPack says
        # (sub-byte ones packed), as any C consumer reads them
        self.values = read_dltensor(out)
        self.span = span_dltensor(out)


# ------------------------------------------------------------------ a producer written with ctypes

_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class HandMade:
    """A DLPack producer written with ctypes, which says whatever a test
    wants: any dtype code (every float8, float6 and float4 kind, integers
    of 2 and 4 bits packed or padded), a byte_offset, any strides or none
    (NULL), a NULL shape for 0-d, versioned or legacy capsules, READ_ONLY.
    Its values are written element by element into memory it owns (not
    read back by the oracle's reader); `live` counts its exports whose
    deleter has not run."""

    live = 0
    _keep = {}  # address of a managed tensor -> what it holds on to

    def __init__(self, values, strides="C", byte_offset=0, padded=False, readonly=False, legacy=False,
                 null_shape=False):
        self.values, self.padded, self.readonly, self.legacy = values, padded, readonly, legacy
        self.shape = values.shape
        ndim = len(self.shape)
        bits = BITS[values.dtype]
        if strides == "C" or strides is None:
            st, step = [0] * ndim, 1
            for i in range(ndim - 1, -1, -1):
                st[i], step = step, step * max(self.shape[i], 1)
        elif strides == "F":
            st, step = [0] * ndim, 1
            for i in range(ndim):
                st[i], step = step, step * max(self.shape[i], 1)
        else:
            st = list(strides)
        self.strides = None if strides is None else tuple(st)
        self.null_shape = null_shape and ndim == 0
        unit = 8 if padded or bits >= 8 else bits  # bits an element's offset moves by
        item = max(1, bits // 8) if unit == 8 else 0
        count = int(np.prod(self.shape)) if ndim else 1
        compact = list(st) == [int(np.prod(self.shape[i + 1:])) for i in range(ndim)]
        if unit == 8 and compact and count > 4096:  # large and compact: written at once
            self.memory = np.zeros(count * item + byte_offset + 192, np.uint8)
            self.data = (self.memory.ctypes.data + 63) // 64 * 64
            self.byte_offset = byte_offset
            start = self.data + byte_offset - self.memory.ctypes.data
            body = np.frombuffer(values.data, np.uint8).copy()
            if bits < 8 and values.dtype.startswith("int"):
                body[(body >> (bits - 1)) & 1 == 1] |= 0xFF ^ ((1 << bits) - 1)  # sign-extended
            self.memory[start:start + count * item] = body
            if legacy:
                self.__dlpack__ = self._legacy_dlpack
            return
        offs = [sum(i * s for i, s in zip(idx, st)) for idx in np.ndindex(*self.shape)] if count else []
        first = [o * item if unit == 8 else (o * bits) // 8 for o in [0] + offs]  # each element's first byte
        lo, hi = min(first) - 1, max(first) + max(item, 2) + 1
        # element 0 sits byte_offset + -lo bytes past a 64-byte aligned data pointer
        self.memory = np.zeros(hi - lo + byte_offset + 128, np.uint8)
        self.data = (self.memory.ctypes.data + 63) // 64 * 64
        self.byte_offset = byte_offset - lo
        start = self.data + self.byte_offset - self.memory.ctypes.data
        elements = np.frombuffer(values.data, np.uint8).reshape(count, -1) if count else []
        # elements at one offset (a zero stride) hold the value written last
        last = dict(zip(offs, elements))
        self.values = values = Values(values.dtype, values.shape, b"".join(last[o].tobytes() for o in offs))
        for off, element in last.items():
            if unit == 8:
                self.memory[start + off * item:start + off * item + item] = element
                if bits < 8 and values.dtype.startswith("int") and element[0] >> (bits - 1):
                    self.memory[start + off] |= 0xFF ^ ((1 << bits) - 1)  # sign-extended, as ml_dtypes does
            else:
                bit = off * bits
                word = int(self.memory[start + bit // 8]) | int(self.memory[start + bit // 8 + 1]) << 8
                word |= int(element[0]) << (bit % 8)
                self.memory[start + bit // 8], self.memory[start + bit // 8 + 1] = word & 0xFF, word >> 8
        if legacy:
            self.__dlpack__ = self._legacy_dlpack

    def __repr__(self):
        return "HandMade(%s %s, strides %s, byte_offset %d%s%s%s)" % (
            self.values.dtype, self.shape, self.strides, self.byte_offset, ", padded" if self.padded else "",
            ", read-only" if self.readonly else "", ", legacy" if self.legacy else "")

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy or (dl_device is not None and tuple(dl_device) != (1, 0)):
            raise BufferError("the hand-made producer makes no copies")
        if self.legacy or max_version is None or max_version[0] < 1:
            return self._capsule(False)
        return self._capsule(True)

    def _legacy_dlpack(self, stream=None):
        return self._capsule(False)

    def _capsule(self, versioned):
        d = _decls()
        if not versioned and (self.readonly or self.padded):
            raise BufferError("a legacy capsule cannot say read-only or padded")
        m = d.DLManagedTensorVersioned() if versioned else d.DLManagedTensor()
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(ndim, 1))(*(self.strides or ()))
        t = m.dl_tensor
        t.data, t.byte_offset = self.data, self.byte_offset
        t.device.device_type, t.device.device_id = 1, 0
        t.ndim = ndim
        code, bits = dl_dtype(self.values.dtype)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        t.shape = None if self.null_shape else ctypes.cast(shape, type(t.shape))
        t.strides = ctypes.cast(strides, type(t.strides)) if self.strides is not None else None
        address = ctypes.addressof(m)
        m.deleter = ctypes.cast(_hand_deleter, ctypes.c_void_p).value
        if versioned:
            m.version.major, m.version.minor = 1, 3
            m.flags = (1 if self.readonly else 0) | (4 if self.padded else 0)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        HandMade._keep[address] = (m, shape, strides, self.memory)
        HandMade.live += 1
        return _capsule_new(address, name, ctypes.cast(_destructor, ctypes.c_void_p).value)


def _destroy(capsule):
    """An unconsumed capsule's destructor runs its tensor's deleter."""
    name = _capsule_name_raw(capsule)
    if name in (b"dltensor_versioned", b"dltensor"):
        ptr = _capsule_pointer_raw(capsule, name)
        deleter = ctypes.c_void_p.from_address(ptr + (16 if name == b"dltensor_versioned" else 56)).value
        _DELETER(deleter)(ptr)


def _hand_delete(ptr):
    HandMade._keep.pop(ptr)
    HandMade.live -= 1


_destructor = _CAPSULE_DESTRUCTOR(_destroy)
_hand_deleter = _DELETER(_hand_delete)


# ------------------------------------------------------------------ producers that test one step


def _kwargs(**kw):
    return {k: v for k, v in kw.items() if v is not None}


def _modern(x, **kw):
    """x.__dlpack__ with the 1.x keywords; NotApplicable when x takes none
    (a legacy producer: numpy 1.24, TensorFlow)."""
    try:
        return x.__dlpack__(**kw)
    except TypeError as e:
        if "argument" in str(e) or "keyword" in str(e):
            raise NotApplicable("a legacy producer: %s" % e)
        raise


def takes_keywords(x):
    """Whether x.__dlpack__ takes the 1.x keywords (asked once)."""
    try:
        cap = x.__dlpack__(max_version=(1, 0))
    except TypeError as e:
        return not ("argument" in str(e) or "keyword" in str(e))
    except Exception:  # noqa: BLE001  a refusal of the array, not of the keyword
        return True
    del cap
    return True


def not_applicable(e):
    """Whether an exception is, or was caused by, NotApplicable."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, NotApplicable):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


class Versioned:
    """The producer's own __dlpack__, asked for a versioned capsule (no
    exchange table, no cure: a refusal stays one)."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _modern(self.x, **_kwargs(stream=stream, max_version=max_version or (1, 0),
                                         dl_device=dl_device, copy=copy))

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class Legacy:
    """The producer's own __dlpack__ without keywords: a legacy capsule."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, stream=None):
        return self.x.__dlpack__() if stream is None else self.x.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class Refusal(BufferError):
    pass


class CopyOnRequest:
    """Refuses unless asked for a host copy (dl_device=CPU, copy=True), which
    it has the producer make: the cure's first step."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy is not True or dl_device is None or tuple(dl_device)[:1] != (1,):
            raise Refusal("only a host copy (the test's producer)")
        return _modern(self.x, max_version=max_version, dl_device=dl_device, copy=True)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class IgnoresCopy:
    """Takes copy= and ignores it: hands over its own memory every time."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _modern(self.x, **_kwargs(max_version=max_version))

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class OnlyArray:
    """Refuses __dlpack__; offers the producer's own __array__ only (no shape
    or dtype attribute: the cure reads both from the array)."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, **_kw):
        raise Refusal("no DLPack (the test's producer)")

    def __dlpack_device__(self):
        return (1, 0)

    def __array__(self, dtype=None, copy=None):
        arr = self.x.__array__() if hasattr(self.x, "__array__") else np.asarray(self.x)
        return arr if dtype is None else arr.astype(dtype)


class OnlyInterface:
    """Refuses __dlpack__; offers a numpy array's __array_interface__ only,
    which carries its own shape, typestr and strides."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, **_kw):
        raise Refusal("no DLPack (the test's producer)")

    def __dlpack_device__(self):
        return (1, 0)

    @property
    def __array_interface__(self):
        return self.arr.__array_interface__


class OnlyBuffer:
    """Refuses __dlpack__; offers the buffer protocol only (Python 3.12's
    __buffer__) over a numpy array's memory."""

    def __init__(self, arr):
        self.arr = arr
        self.shape, self.dtype = arr.shape, arr.dtype

    def __dlpack__(self, **_kw):
        raise Refusal("no DLPack (the test's producer)")

    def __dlpack_device__(self):
        return (1, 0)

    def __buffer__(self, flags):
        return memoryview(self.arr)


_refusing_array = None


def refusing_array(arr):
    """A numpy array (a subclass) whose __dlpack__ refuses: the cure reaches
    its memory through the buffer protocol (Python 3.11 has no __buffer__)."""
    global _refusing_array
    if _refusing_array is None:
        class RefusingArray(np.ndarray):
            def __dlpack__(self, **_kw):
                raise Refusal("no DLPack (the test's producer)")

            def __dlpack_device__(self):
                return (1, 0)

        _refusing_array = RefusingArray
    return arr.view(_refusing_array)


# ------------------------------------------------------------------ outcomes and counts


class Tally:
    """Outcomes by route; problems (wrong values, refusals where a route must
    work) with their case."""

    def __init__(self):
        self.counts = collections.Counter()
        self.errors = collections.Counter()

    def add(self, route, outcome):
        self.counts[(route, outcome)] += 1

    def totals(self):
        t = collections.Counter()
        for (_route, outcome), n in self.counts.items():
            t[outcome] += n
        return t


TALLY = Tally()


class Checker:
    """Runs routes for one case and keeps its problems; `done()` raises
    AssertionError listing them."""

    def __init__(self, case, tally=TALLY):
        self.case = case
        self.tally = tally
        self.problems = []

    def run(self, route, make, expected, source=None, *, read=None, span=None, copy=None,
            must_work=False, fault=None):
        """Runs `make()` and checks what it returns against `expected`.

        read/span: the result's Values and memory span (default: a
        dlbridge.Tensor's). source: the producer's memory span (None:
        unknown). copy: the route asked for a copy (True: sharing is wrong)
        or forbade one (False: a copy is wrong). must_work: a refusal is a
        problem. fault(route, expected, got) -> reason or None: a known
        fault of a peer that explains a difference (counted as "peer-fault").
        Returns the result, or None when there is none."""
        try:
            result = make()
        except NotApplicable:
            self.tally.add(route, "n/a")
            return None
        except PeerFault as e:
            self.tally.add(route, "peer-fault")
            self.tally.errors[(route, "fault: %s" % e)] += 1
            return None
        except Exception as e:  # noqa: BLE001  a refusal, of any class
            if not_applicable(e):
                self.tally.add(route, "n/a")
                return None
            self.tally.add(route, "refused")
            self.tally.errors[(route, type(e).__name__)] += 1
            if not route.startswith("-> ") and not named_refusal(e):
                self.problems.append("%s: refused without a status name: %s: %s"
                                     % (route, type(e).__name__, " ".join(str(e).split())[:300]))
            if must_work:
                self.problems.append("%s: refused where it must work: %s: %s"
                                     % (route, type(e).__name__, " ".join(str(e).split())[:300]))
            return None
        try:
            got = (read or read_tensor)(result)
        except NotApplicable:
            self.tally.add(route, "n/a")
            return None
        except PeerFault as e:
            self.tally.add(route, "peer-fault")
            self.tally.errors[(route, "fault: %s" % e)] += 1
            return None
        except Exception as e:  # noqa: BLE001
            self.tally.add(route, "wrong")
            self.problems.append("%s: its result cannot be read: %s: %s" % (route, type(e).__name__, e))
            return None
        diff = compare(expected, got)
        if diff is not None and fault is not None:
            reason = fault(route, expected, got)
            if reason:
                self.tally.add(route, "peer-fault")
                self.tally.errors[(route, "fault: " + reason)] += 1
                return result
        where = (span or _default_span)(result)
        shares = overlap(source, where)
        said_copied = getattr(result, "copied", None)
        if diff is None and copy is True and (shares or (said_copied is False and where is not None)):
            diff = ("copy=True, and it hands over the producer's memory" if shares
                    else "copy=True, and the tensor says it is not a copy (copied False)")
        if diff is None and copy is False and (said_copied or (source is not None and where is not None
                                                                and not shares)):
            diff = "copy=False, and it made a copy"
        if diff is None and said_copied and shares:
            diff = "it says it is a copy (copied True) and shares the producer's memory"
        if diff is not None:
            self.tally.add(route, "wrong")
            self.problems.append("%s: WRONG: %s" % (route, diff))
            return None  # not taken further: every later route would repeat it
        if source is not None or where is None:
            zero = shares
        else:
            zero = said_copied is False
        self.tally.add(route, "zero-copy" if zero else "copied")
        return result

    def done(self):
        """Fails the test with every problem of the case (no traceback: the
        routes' names say where)."""
        if self.problems:
            import pytest

            pytest.fail("%s:\n  %s" % (self.case, "\n  ".join(self.problems)), pytrace=False)


def _default_span(result):
    return span_tensor(result) if hasattr(result, "data_ptr") and hasattr(result, "_handle") else None


# ------------------------------------------------------------------ routes


def routes_into_dlbridge(ck, x, expected, source, fault=None):
    """Every route from a producer object `x` into a dlbridge.Tensor; the
    results, for chaining. fault: the producer's known fault (Checker.run)."""
    import dlbridge

    out = []

    def run(route, make, **kw):
        t = ck.run(route, make, expected, source, fault=fault, **kw)
        if t is not None:
            out.append((route, t))

    # a producer with a DLPack C exchange table (torch 2) is taken through it
    table = isinstance(getattr(type(x), "__dlpack_c_exchange_api__", None), type(dlbridge.Tensor.__dlpack_c_exchange_api__))
    run("from_dlpack" + (" (exchange table in)" if table else ""), lambda: dlbridge.from_dlpack(x))
    # what dlbridge takes in, it can copy (but a strided view of packed sub-byte elements)
    run("from_dlpack(copy=True)", lambda: dlbridge.from_dlpack(x, copy=True), copy=True,
        must_work=bool(out) and copyable(out[0][1]))
    run("from_dlpack(copy=False)", lambda: dlbridge.from_dlpack(x, copy=False), copy=False)
    if hasattr(x, "__dlpack__"):
        run("legacy capsule", lambda: dlbridge.from_dlpack(Legacy(x)))
        if takes_keywords(x):
            run("versioned capsule", lambda: dlbridge.from_dlpack(Versioned(x)))
            run("cure: dl_device+copy", lambda: dlbridge.from_dlpack(CopyOnRequest(x)))
            run("copy=True ignored", lambda: dlbridge.from_dlpack(IgnoresCopy(x), copy=True), copy=True)
        else:
            for route in ("versioned capsule", "cure: dl_device+copy", "copy=True ignored"):
                ck.tally.add(route, "n/a")
    if hasattr(x, "__array__"):
        run("cure: __array__", lambda: dlbridge.from_dlpack(OnlyArray(x)))
    run("share", lambda: dlbridge.share(x))
    return out


def _pickle5(t):
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    return pickle.loads(data, buffers=buffers)


CHAIN = [
    ("pickle5 out-of-band", _pickle5),
    ("pickle5 in-band", lambda t: pickle.loads(pickle.dumps(t, protocol=5))),
    ("deepcopy", copy_module.deepcopy),
    ("share(tensor)", lambda t: __import__("dlbridge").share(t)),
    ("from_dlpack(tensor)", lambda t: __import__("dlbridge").from_dlpack(t)),
    ("from_dlpack(tensor, copy=True)", lambda t: __import__("dlbridge").from_dlpack(t, copy=True)),
]


def copyable(t):
    """Whether dlbridge can copy a tensor: all but a strided view of packed
    sub-byte elements (refused with DLB_ERR_UNSUPPORTED_LAYOUT)."""
    return not (BITS[t.dtype] < 8 and not is_padded(t) and not _compact(t.shape, t.strides))


def _compact(shape, strides):
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def routes_from_tensor(ck, t, via):
    """Every dlbridge-to-dlbridge route from a tensor (pickling, copying,
    sharing, dlbridge's own exchange table read from C): each must work
    and keep the tensor's values (which were checked against the
    producer's before)."""
    expected = read_tensor(t)
    source = span_tensor(t)
    tag = "" if via.startswith("from_dlpack (") or via == "from_dlpack" else " <- %s" % via
    for name, fn in CHAIN:
        ck.run(name + tag, lambda: fn(t), expected, source, copy=True if name.endswith("copy=True)") else None,
               must_work=copyable(t) or name == "from_dlpack(tensor)")
    ck.run("exchange table out (C)" + tag, lambda: TableExport(t), expected, source,
           read=lambda e: e.values, span=lambda e: e.span, must_work=True)
    # a borrowed DLTensor cannot say read-only or padded: refused for such tensors
    ck.run("exchange table view (C)" + tag, lambda: TableView(t), expected, source,
           read=lambda e: e.values, span=lambda e: e.span, must_work=not (t.readonly or is_padded(t)))


def _forking(t):
    from multiprocessing.reduction import ForkingPickler

    return pickle.loads(ForkingPickler.dumps(t))


def _socket(t):
    import socket

    import dlbridge

    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        dlbridge.share_send(a, t)
        return dlbridge.share_recv(b)


def _read_only_descriptor(t):
    import dlbridge

    fd, description = dlbridge._share.descriptor(t, copy=True, read_only=True)
    try:
        u = dlbridge._share.open_shared(fd, description, read_only=True)
    finally:
        os.close(fd)
    if not u.readonly:
        raise AssertionError("a read-only descriptor opened writable")
    return u


# The routes a tensor travels by to another process (or to itself by the
# same bytes): every pickle protocol before 5, the copy module, the
# multiprocessing pickler (a ticket, or the bytes of a tensor of 64 KiB or
# less that is not shared), a Unix socket (share_send / share_recv), and a
# read-only descriptor.
TRAVEL = [("pickle protocol %d" % n, (lambda n: lambda t: pickle.loads(pickle.dumps(t, protocol=n)))(n))
          for n in range(5)] + [
    ("copy.copy", copy_module.copy),
    ("multiprocessing pickler (ticket)", _forking),
    ("share_send/share_recv", _socket),
    ("read-only descriptor", _read_only_descriptor),
]


def routes_of_travel(ck, t):
    """A tensor through the routes of TRAVEL: each must work (but for a
    strided view of packed sub-byte elements, which nothing can copy) and
    keep the tensor's values."""
    expected = read_tensor(t)
    source = span_tensor(t)
    for name, fn in TRAVEL:
        ck.run(name, lambda: fn(t), expected, source, must_work=copyable(t))


def check_producer(ck, x, expected, source, consumers=(), fault=None):
    """A producer object through every route into dlbridge, every result
    through every dlbridge route, the first through the routes of travel
    and every consumer."""
    results = routes_into_dlbridge(ck, x, expected, source, fault)
    for via, t in results:
        routes_from_tensor(ck, t, via)
    first = results[0][1] if results else None
    if first is not None:
        routes_of_travel(ck, first)
        for fw in consumers:
            consume_with(ck, fw, first, expected)
    return results


def consume_with(ck, fw, t, expected):
    """dlbridge tensor `t` consumed by framework adapter `fw`."""
    ck.run("-> %s" % fw.name, lambda: fw.consume(t), expected, span_tensor(t),
           read=fw.own, span=fw.span, fault=fw.consumer_fault)


# ------------------------------------------------------------------ routes of numpy memory


def check_numpy_memory(ck, arr, expected):
    """The routes only memory of numpy's has: the buffer protocol
    (from_buffer, the cure's buffer step) and __array_interface__.
    Non-native byte order may be refused, never relabelled."""
    import dlbridge

    source = numpy_span(arr)
    native = arr.dtype.isnative
    # numpy's own dtypes in native order must travel every way; ml_dtypes'
    # have no buffer format (the cure's next step, __array__, takes them)
    must = native and arr.dtype.name in NUMPY_DTYPES
    ck.run("from_buffer", lambda: dlbridge.from_buffer(arr), expected, source, must_work=must)
    ck.run("cure: buffer protocol", lambda: dlbridge.from_dlpack(refusing_array(arr)), expected, source,
           must_work=native)
    if sys.version_info >= (3, 12):
        ck.run("cure: __buffer__", lambda: dlbridge.from_dlpack(OnlyBuffer(arr)), expected, source,
               must_work=must)
    ck.run("cure: __array_interface__", lambda: dlbridge.from_dlpack(OnlyInterface(arr)), expected, source,
           must_work=must)


def numpy_span(arr):
    if arr.size == 0:
        return None
    address = arr.__array_interface__["data"][0]
    return span_raw(address, arr.shape, [s // arr.itemsize for s in arr.strides], 8 * arr.itemsize)


# ------------------------------------------------------------------ the route through another process


def values_in_child(tensors, python=None):
    """The Values of pickled tensors as another process reads them: each
    item of `tensors` (a dlbridge.Tensor) is pickled three ways (protocol 5
    with its buffers out of band, protocol 5 in band, multiprocessing's
    pickler, which shares the memory); returns [(how, Values or the error's
    words)], three for each tensor."""
    from multiprocessing.reduction import ForkingPickler

    items = []
    for t in tensors:
        for how, dump in (("pickle5 out-of-band", _dump_oob), ("pickle5 in-band", _dump_inband),
                          ("multiprocessing", lambda t: (bytes(ForkingPickler.dumps(t)), []))):
            try:
                head, buffers = dump(t)
            except Exception as e:  # noqa: BLE001  refused here already
                head, buffers = None, "%s: %s" % (type(e).__name__, e)
            items.append((how, head, buffers))
    proc = subprocess.run([python or sys.executable, os.path.join(HERE, "oracle.py"), "--child"],
                          input=pickle.dumps(items, protocol=5), capture_output=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError("the child failed (exit %d): %s" % (proc.returncode, proc.stderr.decode()[-2000:]))
    return [(how, got if isinstance(got, str) else Values(*got)) for how, got in pickle.loads(proc.stdout)]


def _dump_oob(t):
    buffers = []
    head = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    return head, [bytes(b.raw()) for b in buffers]


def _dump_inband(t):
    return pickle.dumps(t, protocol=5), []


def values_of_tensor(t):
    """A tensor's Values as a tuple, or the words of why it cannot be read
    (for a child process: a pool's task)."""
    try:
        return tuple(read_tensor(t))
    except Exception as e:  # noqa: BLE001
        return "%s: %s" % (type(e).__name__, e)


def tensor_of_values(values):
    """A dlbridge tensor holding `values` (a tuple of Values' fields, or the
    words of an earlier failure, passed on), made by the hand-made producer
    and taken in by dlbridge: what a child sends back."""
    import dlbridge

    if isinstance(values, str):
        return values
    v = Values(*values)
    try:
        return dlbridge.from_dlpack(HandMade(v, padded=BITS[v.dtype] < 8))
    except Exception as e:  # noqa: BLE001
        return "%s: %s" % (type(e).__name__, e)


def queue_child(to_child, from_child, n):
    """A child process's end of a Queue test: takes n lists of tensors,
    sends the Values of all of them (one list), then for each list taken a
    list of tensors of their values."""
    batches = [[values_of_tensor(t) for t in to_child.get(timeout=120)] for _ in range(n)]
    from_child.put([v for batch in batches for v in batch])
    for batch in batches:
        from_child.put([tensor_of_values(v) for v in batch])
    from_child.close()
    from_child.join_thread()


def _child():
    import dlbridge  # noqa: F401  (the rebuilds name it)

    items = pickle.loads(sys.stdin.buffer.read())
    out = []
    for how, head, buffers in items:
        if head is None:
            out.append((how, buffers))
            continue
        try:
            t = pickle.loads(head, buffers=buffers)
            out.append((how, tuple(read_tensor(t))))
            del t
        except Exception as e:  # noqa: BLE001
            out.append((how, "%s: %s" % (type(e).__name__, e)))
    sys.stdout.buffer.write(pickle.dumps(out))


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        sys.exit(_child())
    sys.exit("usage: oracle.py --child (the subprocess end of tests/values)")
