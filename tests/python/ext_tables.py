"""ctypes views of the DLPack 1.3 structs and of an exchange table whose
functions are Python callables, for the tests of from_dlpack as a consumer
of another producer's table (test_ext_exchange_*.py)."""

import ctypes as ct

from dlbridge._ctypes_decls import DLDataType, DLDevice, DLPackVersion, DLTensor


class Managed(ct.Structure):
    pass


DELETER = ct.CFUNCTYPE(None, ct.POINTER(Managed))
Managed._fields_ = [("version", DLPackVersion), ("manager_ctx", ct.c_void_p), ("deleter", DELETER),
                    ("flags", ct.c_uint64), ("dl_tensor", DLTensor)]
MANAGED_P = ct.POINTER(Managed)
FROM_PY = ct.PYFUNCTYPE(ct.c_int, ct.py_object, ct.POINTER(MANAGED_P))
STREAM = ct.PYFUNCTYPE(ct.c_int, ct.c_int32, ct.c_int32, ct.POINTER(ct.c_void_p))


class Table(ct.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ct.c_void_p), ("allocator", ct.c_void_p),
                ("from_py", FROM_PY), ("to_py", ct.c_void_p), ("view", ct.c_void_p), ("stream", STREAM)]


_capsule_new = ct.pythonapi.PyCapsule_New
_capsule_new.restype = ct.py_object
_capsule_new.argtypes = [ct.c_void_p, ct.c_char_p, ct.c_void_p]

KDLCPU, KDLCUDA = 1, 2
KDLFLOAT, KDLCOMPLEX = 2, 5


class HandMade:
    """A DLManagedTensorVersioned made here, over memory kept here; `freed`
    counts its deleter's runs."""

    def __init__(self, values=(1.0, 2.0, 3.0), device=(KDLCPU, 0), major=1, ndim=1, code=KDLFLOAT):
        self.memory = (ct.c_double * len(values))(*values)
        self.shape = (ct.c_int64 * 1)(len(values) if code == KDLFLOAT else len(values) // 2)
        self.freed = 0
        self.deleter = DELETER(self._delete)
        self.managed = Managed()
        self.managed.version = DLPackVersion(major, 0)
        self.managed.deleter = self.deleter
        t = self.managed.dl_tensor
        t.data = ct.addressof(self.memory)
        t.device = DLDevice(*device)
        t.ndim = ndim
        t.dtype = DLDataType(code, 64 if code == KDLFLOAT else 128, 1)
        t.shape = self.shape

    def _delete(self, _):
        self.freed += 1

    def pointer(self):
        return ct.pointer(self.managed)


FAIL = "fail"  # what `give` returns for a from_py that fails (-1) without an exception


def producer_type(give, stream=None, **methods):
    """A producer type whose table's from_py gives what `give(obj)` returns
    (a HandMade, None for no tensor, FAIL); `stream`: its
    current_work_stream (None: one that says NULL; False: no function)."""

    def from_py(obj, out):
        made = give(obj)
        if made is FAIL:
            return -1
        out[0] = made.pointer() if made is not None else MANAGED_P()
        return 0

    def no_stream(device_type, device_id, out):
        out[0] = None
        return 0

    table = Table()
    table.version = DLPackVersion(1, 3)
    table.from_py = FROM_PY(from_py)
    if stream is not False:
        table.stream = STREAM(stream or no_stream)
    capsule = _capsule_new(ct.addressof(table), b"dlpack_exchange_api", None)
    attrs = {"__dlpack_c_exchange_api__": capsule, "_table": table}
    attrs.update(methods)
    return type("TableProducer", (), attrs)
