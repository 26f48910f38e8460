"""A CUDA producer of the DLPack protocol for the tests, written with ctypes
over the test suite's fake CUDA driver (tests/cuda/fake_cuda.cpp: "device"
memory is host memory, and every stream has a worker thread, so stream
ordering mistakes show up as stale data).

The producer owns device memory from cuMemAlloc_v2, writes to it on a
stream of its own, and exports it in legacy or versioned capsules whose
deleters it counts. Asked for a consumer stream, it does what the array API
standard asks of a CUDA producer: the consumer's stream waits for an event
recorded on its own stream (nothing for -1).
"""

import ctypes
from ctypes import POINTER, Structure, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32
from ctypes import c_uint64, c_void_p, byref, c_size_t, c_ulonglong

kDLCUDA = 2
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
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", LegacyDeleter),
]


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

# The C API through a handle of our own: the function objects of
# ctypes.pythonapi are shared, and other test modules set their argtypes.
_api = ctypes.PyDLL(None)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]

# Managed tensors not yet deleted, by address: (producer, struct, arrays).
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


# A capsule nobody consumed (still named dltensor*) deletes its tensor, as
# the protocol asks of producers. The argument is a dying object: read it
# only through the C API, as an address.
@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule):
    for name in (CAPSULE_VERSIONED, CAPSULE_LEGACY):
        if _api.PyCapsule_IsValid(capsule, name):
            _delete(_api.PyCapsule_GetPointer(capsule, name))


_DESTRUCTOR = ctypes.cast(_capsule_destructor, c_void_p)


class FakeDriver:
    """The fake driver's entry points, loaded with ctypes from `path` (the
    same file test_cuda_fake.py loads as libcuda.so.1 for dlbridge, so the
    same library instance), with device 0's primary context current."""

    def __init__(self, path):
        self.lib = lib = ctypes.CDLL(path)
        lib.cuMemAlloc_v2.argtypes = [POINTER(c_ulonglong), c_size_t]
        lib.cuMemFree_v2.argtypes = [c_ulonglong]
        lib.cuMemcpyHtoDAsync_v2.argtypes = [c_ulonglong, c_void_p, c_size_t, c_void_p]
        lib.cuMemcpyDtoHAsync_v2.argtypes = [c_void_p, c_ulonglong, c_size_t, c_void_p]
        lib.cuLaunchHostFunc.argtypes = [c_void_p, c_void_p, c_void_p]
        lib.cuStreamCreate.argtypes = [POINTER(c_void_p), ctypes.c_uint]
        lib.cuStreamDestroy_v2.argtypes = [c_void_p]
        lib.cuStreamSynchronize.argtypes = [c_void_p]
        lib.cuEventCreate.argtypes = [POINTER(c_void_p), ctypes.c_uint]
        lib.cuEventRecord.argtypes = [c_void_p, c_void_p]
        lib.cuStreamWaitEvent.argtypes = [c_void_p, c_void_p, ctypes.c_uint]
        lib.cuEventDestroy_v2.argtypes = [c_void_p]
        lib.cuDevicePrimaryCtxRetain.argtypes = [POINTER(c_void_p), c_int]
        lib.cuCtxPushCurrent_v2.argtypes = [c_void_p]
        self.check("cuInit", lib.cuInit(0))
        context = c_void_p()
        self.check("cuDevicePrimaryCtxRetain", lib.cuDevicePrimaryCtxRetain(byref(context), 0))
        self.check("cuCtxPushCurrent_v2", lib.cuCtxPushCurrent_v2(context))

    @staticmethod
    def check(call, rc):
        if rc != 0:
            raise RuntimeError("%s returned %d" % (call, rc))

    def alloc(self, nbytes):
        ptr = c_ulonglong()
        self.check("cuMemAlloc_v2", self.lib.cuMemAlloc_v2(byref(ptr), nbytes))
        return ptr.value

    def free(self, ptr):
        self.check("cuMemFree_v2", self.lib.cuMemFree_v2(ptr))

    def stream_create(self):
        s = c_void_p()
        self.check("cuStreamCreate", self.lib.cuStreamCreate(byref(s), 1))
        return s.value

    def stream_destroy(self, stream):
        self.check("cuStreamDestroy_v2", self.lib.cuStreamDestroy_v2(stream))

    def synchronize(self, stream):
        self.check("cuStreamSynchronize", self.lib.cuStreamSynchronize(stream))

    def host_to_device(self, ptr, data, stream):
        self.check("cuMemcpyHtoDAsync_v2",
                   self.lib.cuMemcpyHtoDAsync_v2(ptr, data, ctypes.sizeof(data), stream))

    def device_to_host(self, data, ptr, stream):
        self.check("cuMemcpyDtoHAsync_v2",
                   self.lib.cuMemcpyDtoHAsync_v2(data, ptr, ctypes.sizeof(data), stream))

    def launch_host_func(self, stream, fn, arg):
        self.check("cuLaunchHostFunc", self.lib.cuLaunchHostFunc(stream, fn, arg))

    def order(self, before, after):
        """Stream `after` waits for the work enqueued so far on `before`."""
        event = c_void_p()
        self.check("cuEventCreate", self.lib.cuEventCreate(byref(event), 2))
        self.check("cuEventRecord", self.lib.cuEventRecord(event, before))
        self.check("cuStreamWaitEvent", self.lib.cuStreamWaitEvent(after, event, 0))
        self.check("cuEventDestroy_v2", self.lib.cuEventDestroy_v2(event))

    def live_allocations(self):
        return self.lib.fake_cuda_live_allocations()


_libc = ctypes.CDLL(None)
_USLEEP = ctypes.cast(_libc.usleep, c_void_p).value
_SEM_WAIT = ctypes.cast(_libc.sem_wait, c_void_p).value
_libc.sem_init.argtypes = [c_void_p, c_int, ctypes.c_uint]
_libc.sem_post.argtypes = [c_void_p]
_libc.sem_destroy.argtypes = [c_void_p]


class Gate:
    """A POSIX semaphore a stream can be made to wait on (cuLaunchHostFunc
    with sem_wait): work enqueued after it runs only once open() is called."""

    def __init__(self):
        self.sem = ctypes.create_string_buffer(64)
        _libc.sem_init(self.sem, 0, 0)

    def close_on(self, driver, stream):
        driver.launch_host_func(stream, _SEM_WAIT, ctypes.addressof(self.sem))

    def open(self):
        _libc.sem_post(self.sem)


class Producer:
    """float32 device memory holding `values`, written on a stream of its
    own, exported with __dlpack__ as the standard asks of a CUDA producer.

    versioned: whether __dlpack__ speaks DLPack 1.x (takes max_version,
    gives "dltensor_versioned" capsules) or only the legacy protocol (its
    __dlpack__ takes only `stream`, as producers before DLPack 1.0 did).
    device_type: what the capsules say the memory is.
    """

    def __init__(self, driver, values, device_type=kDLCUDA, data=None):
        self.driver = driver
        self.n = len(values)
        self.device_type = device_type
        self.stream = driver.stream_create()
        self.owned = data is None
        self.ptr = driver.alloc(4 * self.n) if data is None else data
        self.calls = []      # the `stream` of every __dlpack__ call
        self.deleted = 0     # deleter calls
        self.exported = 0    # capsules made
        self._keep = []      # host sources of pending copies
        if self.owned:
            self.write(values, delay_us=0)
            driver.synchronize(self.stream)

    def write(self, values, delay_us):
        """Enqueues, on the producer's stream, a pause of `delay_us` and then
        a write of `values`, as a slow kernel would: not waited for."""
        source = (ctypes.c_float * self.n)(*values)
        self._keep.append(source)
        if delay_us:
            self.driver.launch_host_func(self.stream, _USLEEP, delay_us)
        self.driver.host_to_device(self.ptr, source, self.stream)

    def read(self):
        """The memory as the host sees it after the producer's stream."""
        out = (ctypes.c_float * self.n)()
        self.driver.device_to_host(out, self.ptr, self.stream)
        self.driver.synchronize(self.stream)
        return list(out)

    def close(self):
        self.driver.synchronize(self.stream)
        if self.owned:
            self.driver.free(self.ptr)
        self.driver.stream_destroy(self.stream)

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def _order_before(self, stream):
        if stream == -1:
            return  # the consumer synchronises itself
        consumer = 1 if stream is None else stream  # None: the legacy default stream
        self.driver.order(self.stream, consumer)

    def _tensor(self):
        shape = (c_int64 * 1)(self.n)
        t = DLTensor()
        t.data = self.ptr
        t.device = DLDevice(self.device_type, 0)
        t.ndim = 1
        t.dtype = DLDataType(2, 32, 1)  # kDLFloat
        t.shape = shape
        t.strides = None
        t.byte_offset = 0
        return t, shape

    def capsule(self, versioned):
        t, shape = self._tensor()
        if versioned:
            m = DLManagedTensorVersioned()
            m.version = DLPackVersion(1, 0)
            m.deleter = _versioned_deleter
            m.flags = 0
            name = CAPSULE_VERSIONED
        else:
            m = DLManagedTensor()
            m.deleter = _legacy_deleter
            name = CAPSULE_LEGACY
        m.dl_tensor = t
        _alive[ctypes.addressof(m)] = (self, m, shape)
        self.exported += 1
        return _api.PyCapsule_New(ctypes.addressof(m), name, _DESTRUCTOR)


class VersionedProducer(Producer):
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(stream)
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("this producer cannot copy to %r" % (dl_device,))
        if copy:
            raise BufferError("this producer does not copy")
        self._order_before(stream)
        return self.capsule(versioned=max_version is not None and max_version[0] >= 1)


class LegacyProducer(Producer):
    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        self._order_before(stream)
        return self.capsule(versioned=False)


def alive():
    """Managed tensors made here whose deleter has not run."""
    return len(_alive)
