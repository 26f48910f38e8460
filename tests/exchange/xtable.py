"""ctypes views of the DLPack 1.3 structs and of a type's exchange table, so
that tests can call any producer's five functions directly. The function
pointers are PYFUNCTYPE: called with the GIL held, and a -1 return with an
exception set raises that exception here."""

import ctypes as ct


class DLDevice(ct.Structure):
    _fields_ = [("device_type", ct.c_int32), ("device_id", ct.c_int32)]


class DLDataType(ct.Structure):
    _fields_ = [("code", ct.c_uint8), ("bits", ct.c_uint8), ("lanes", ct.c_uint16)]


class DLTensor(ct.Structure):
    _fields_ = [
        ("data", ct.c_void_p),
        ("device", DLDevice),
        ("ndim", ct.c_int32),
        ("dtype", DLDataType),
        ("shape", ct.POINTER(ct.c_int64)),
        ("strides", ct.POINTER(ct.c_int64)),
        ("byte_offset", ct.c_uint64),
    ]


class DLPackVersion(ct.Structure):
    _fields_ = [("major", ct.c_uint32), ("minor", ct.c_uint32)]


class DLManagedTensorVersioned(ct.Structure):
    pass


DELETER = ct.CFUNCTYPE(None, ct.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ct.c_void_p),
    ("deleter", DELETER),
    ("flags", ct.c_uint64),
    ("dl_tensor", DLTensor),
]
MT_P = ct.POINTER(DLManagedTensorVersioned)

SET_ERROR = ct.CFUNCTYPE(None, ct.c_void_p, ct.c_char_p, ct.c_char_p)
ALLOCATOR = ct.PYFUNCTYPE(ct.c_int, ct.POINTER(DLTensor), ct.POINTER(MT_P), ct.c_void_p, SET_ERROR)
FROM_PY = ct.PYFUNCTYPE(ct.c_int, ct.py_object, ct.POINTER(MT_P))
TO_PY = ct.PYFUNCTYPE(ct.c_int, MT_P, ct.POINTER(ct.c_void_p))
DLTENSOR = ct.PYFUNCTYPE(ct.c_int, ct.py_object, ct.POINTER(DLTensor))
STREAM = ct.PYFUNCTYPE(ct.c_int, ct.c_int32, ct.c_int32, ct.POINTER(ct.c_void_p))


class Header(ct.Structure):
    pass


Header._fields_ = [("version", DLPackVersion), ("prev_api", ct.POINTER(Header))]


class ExchangeAPI(ct.Structure):
    _fields_ = [
        ("header", Header),
        ("managed_tensor_allocator", ALLOCATOR),
        ("managed_tensor_from_py_object_no_sync", FROM_PY),
        ("managed_tensor_to_py_object_no_sync", TO_PY),
        ("dltensor_from_py_object_no_sync", DLTENSOR),
        ("current_work_stream", STREAM),
    ]


_get_pointer = ct.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ct.c_void_p
_get_pointer.argtypes = [ct.py_object, ct.c_char_p]
_get_name = ct.pythonapi.PyCapsule_GetName
_get_name.restype = ct.c_char_p
_get_name.argtypes = [ct.py_object]


def capsule_name(capsule):
    return _get_name(capsule).decode("ascii")


def table(tp):
    """The ExchangeAPI published on type `tp` (checked name and major 1)."""
    capsule = tp.__dict__.get("__dlpack_c_exchange_api__")
    if type(capsule).__name__ != "PyCapsule":  # absent, or a getter (dlbridge.Tensor on 3.12)
        capsule = getattr(tp, "__dlpack_c_exchange_api__")
    assert capsule_name(capsule) == "dlpack_exchange_api"
    api = ct.cast(_get_pointer(capsule, b"dlpack_exchange_api"), ct.POINTER(ExchangeAPI)).contents
    assert api.header.version.major == 1
    return api


def from_py(api, obj):
    out = MT_P()
    assert api.managed_tensor_from_py_object_no_sync(obj, ct.byref(out)) == 0
    return out


_dec_ref = ct.pythonapi.Py_DecRef
_dec_ref.argtypes = [ct.c_void_p]
_dec_ref.restype = None


def to_py(api, mt):
    """Calls to-py-object and takes over the new reference it returns."""
    out = ct.c_void_p()
    assert api.managed_tensor_to_py_object_no_sync(mt, ct.byref(out)) == 0
    obj = ct.cast(out, ct.py_object).value  # a reference of our own
    _dec_ref(out)  # the one to-py-object gave
    return obj


def shape_of(t):
    return tuple(t.shape[i] for i in range(t.ndim))


def strides_of(t):
    return tuple(t.strides[i] for i in range(t.ndim))


class Errors:
    """A set_error callback recording its calls."""

    def __init__(self):
        self.calls = []
        self.callback = SET_ERROR(self._record)

    def _record(self, ctx, kind, message):
        self.calls.append((kind.decode(), message.decode()))


def allocate(api, shape, dtype=(2, 64, 1), device=(1, 0)):
    """Calls the table's allocator: (return value, managed tensor or None, Errors)."""
    n = len(shape)
    dims = (ct.c_int64 * max(n, 1))(*shape)
    proto = DLTensor()
    proto.device = DLDevice(*device)
    proto.dtype = DLDataType(*dtype)
    proto.ndim = n
    proto.shape = ct.cast(dims, ct.POINTER(ct.c_int64))
    errors = Errors()
    out = MT_P()
    rc = api.managed_tensor_allocator(ct.byref(proto), ct.byref(out), None, errors.callback)
    return rc, (out if out else None), errors
