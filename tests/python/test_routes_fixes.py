"""What an unfriendly tester found on the routes of the value oracle, each
a test that failed before its fix:

1. a padded int4 tensor over 64 KiB (multiprocessing sends it as a ticket,
   not as bytes) was taken by share() but refused by its descriptor, its
   ticket and share_send; multiprocessing's Queue feeder thread dropped it
   and get() never returned. Now the share description carries the padded
   layout, and a tensor that gets no ticket travels as bytes;
2. a producer's deleter written in Python (a ctypes callback) ran with a
   Python exception set when a temporary Tensor went away during an error,
   or when the cure released what a step gave it: the caller got
   SystemError and the producer's tensor leaked;
3. a producer whose copy=True answer cannot be a copy (pyarrow 26's strided
   Tensor keeps the strides over a buffer of the compact size): asked again
   without copy, and the copy made by dlbridge;
4. a field of a structured array (strides not whole elements) is copied by
   the cure again, through the copy engine's byte strides.

Every value is read from the tensor's own memory (raw_memory.raw_values).
"""

import gc
import pickle
import queue
import socket
import subprocess
import sys
import time

import pytest

import dlbridge
from raw_memory import raw_values
from test_impossible_spans import Producer

np = pytest.importorskip("numpy")


def int4_values(n):
    return [((i * 7) % 16) - 8 for i in range(n)]


def padded(n):
    from test_values_fixes import padded_int4

    return padded_int4(int4_values(n))


# -- 1. a padded tensor over 64 KiB, shared ------------------------------------------


def check_int4(u, n):
    assert u.dtype == "int4" and u.shape == (n,) and u.nbytes == n
    assert raw_values(u, np.int8).tolist() == int4_values(n)


def test_a_padded_tensor_shares_by_descriptor_ticket_and_socket():
    n = 70000  # past the 64 KiB that travel as bytes
    t = padded(n)
    shared = dlbridge.share(t)
    check_int4(shared, n)
    fd, description = dlbridge._share.descriptor(shared)
    try:
        check_int4(dlbridge._share.open_shared(fd, description), n)
    finally:
        import os

        os.close(fd)
    # read-only descriptors keep the layout too
    fd, description = dlbridge._share.descriptor(shared, read_only=True)
    try:
        u = dlbridge._share.open_shared(fd, description, read_only=True)
        check_int4(u, n)
        assert u.readonly
    finally:
        os.close(fd)
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        dlbridge.share_send(a, t)
        check_int4(dlbridge.share_recv(b), n)
    from multiprocessing.reduction import ForkingPickler

    check_int4(pickle.loads(ForkingPickler.dumps(t)), n)


def test_a_description_that_says_padded_for_a_whole_byte_dtype_is_malformed():
    from dlbridge import _glue

    t = dlbridge.share(np.arange(6, dtype=np.int8))
    fd, description = dlbridge._share.descriptor(t)
    raw = bytearray(description)
    raw[16] |= 2  # the padded bit, on int8

    def fnv(data):
        h = 2166136261
        for i, c in enumerate(data):
            h = ((h ^ (0 if 12 <= i < 16 else c)) * 16777619) & 0xFFFFFFFF
        return h

    raw[12:16] = fnv(raw).to_bytes(4, "little")
    try:
        with pytest.raises(dlbridge.Error, match="padded sub-byte elements, but its dtype has 8 bits") as info:
            _glue.open_shared(fd, bytes(raw))
        assert info.value.status_name == "DLB_ERR_MALFORMED"
    finally:
        import os

        os.close(fd)


def _echo(q_in, q_out):
    t = q_in.get(timeout=60)
    q_out.put(("%s" % t.dtype, raw_values(t, np.int8).tolist() if t.dtype == "int4" else None))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_padded_tensor_over_64_kib_crosses_a_real_queue(method):
    import multiprocessing as mp

    if method not in mp.get_all_start_methods():
        pytest.skip("no %s start method here" % method)
    if method == "spawn":
        # spawn runs sys.executable anew; where the system cannot start it
        # (an emulated interpreter), this raises the system's own error at
        # once instead of leaving a child that died before answering.
        subprocess.run([sys.executable, "-c", ""], check=True)
    ctx = mp.get_context(method)
    n = 70000
    t = padded(n)
    q_in, q_out = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_echo, args=(q_in, q_out))
    child.start()
    try:
        q_in.put(t)
        # before the fix the item was dropped and this waited for ever
        deadline = time.monotonic() + 90
        while True:
            try:
                dtype, values = q_out.get(timeout=1)
                break
            except queue.Empty:
                assert child.is_alive(), "the child exited with %s before answering" % child.exitcode
                assert time.monotonic() < deadline, "no answer in 90 s"
        assert dtype == "int4" and values == int4_values(n)
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def test_a_tensor_without_a_ticket_travels_as_bytes_or_arrives_as_an_unreceived():
    from multiprocessing.reduction import ForkingPickler

    from dlbridge import _share

    t = dlbridge.from_dlpack(np.arange(20000, dtype=np.int64))  # 160 KB, not shared: a ticket
    real = _share._glue.share_ticket

    def no_ticket(tensor):
        raise dlbridge.Error(1, "no ticket here")

    _share._glue.share_ticket = no_ticket
    try:
        u = pickle.loads(ForkingPickler.dumps(t))
        assert raw_values(u).tolist() == list(range(20000))  # as its bytes
        t.delete()
        r = pickle.loads(ForkingPickler.dumps(t))  # neither: named where it is used
        assert isinstance(r, _share.Unreceived)
        with pytest.raises(dlbridge.Error, match="could not be sent") as info:
            r.shape
        assert info.value.status_name == "DLB_ERR_DELETED"
    finally:
        _share._glue.share_ticket = real


# -- 2. a Python deleter never runs with an exception set -----------------------------


def test_a_temporary_tensors_producer_deleter_keeps_the_callers_exception():
    p = Producer((), ())
    with pytest.raises(TypeError, match="0-d"):
        len(dlbridge.from_dlpack(p))  # before: SystemError, error return without exception set
    gc.collect()
    assert p.exported == p.deleted == 1
    q = Producer((4,), (1,))
    with pytest.raises((dlbridge.Error, BufferError, ValueError)) as info:
        dlbridge.from_dlpack(dlbridge.from_dlpack(q), device=(4, 99))
    assert not isinstance(info.value, SystemError)
    gc.collect()
    assert q.exported == q.deleted == 1
    assert dlbridge.live_exports() == 0


class PackedWherePadded:
    """Says int4 (the cure copies one element a byte), refuses every request
    for a copy, and on its own device hands over packed elements (a
    Python deleter): the cure's last step fails with a BufferError set
    while that capsule's tensor is released."""

    shape = (8,)

    class dtype:  # noqa: N801
        name = "int4"

    def __init__(self):
        self.producer = Producer((8,), (1,), dtype=(0, 4, 1))

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None or copy:
            raise BufferError("this producer makes no copies")
        return self.producer.__dlpack__(max_version=max_version)


def test_the_cure_keeps_each_steps_reason_while_it_releases_a_python_deleter():
    x = PackedWherePadded()
    with pytest.raises(dlbridge.RefusalError) as info:
        dlbridge.from_dlpack(x, device=(1, 0))
    text = str(info.value)
    # before: "__dlpack__() on its own device: an error:" and a SystemError
    assert "__dlpack__() on its own device: BufferError: it gave packed sub-byte elements, not one per byte" in text
    gc.collect()
    assert x.producer.exported == x.producer.deleted >= 1
    assert dlbridge.live_exports() == 0


# -- 3. a copy that cannot be one -----------------------------------------------------


class StridedCopy:
    """A producer that, asked for copy=True, answers as pyarrow 26 does for a
    strided tensor: IS_COPIED, the source's strides, and a buffer of the
    compact size only (its tail reads zeros)."""

    def __init__(self, arr):
        self.arr = arr
        self.asked = []
        self.compact = np.zeros(arr.size + 64, arr.dtype)  # what a wrong copy holds
        self.compact[:arr.size] = arr.ravel()
        self.wrong = None

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.asked.append(copy)
        if not copy:
            return self.arr.__dlpack__()
        from dlbridge._ctypes_decls import DLDataType, DLDevice, DLPackVersion, DLTensor
        import ctypes
        import test_impossible_spans as spans

        p = Producer(self.arr.shape, [s // self.arr.itemsize for s in self.arr.strides], dtype=(0, 16, 1))
        p.storage = self.compact
        p.data = self.compact.ctypes.data
        self.wrong = p
        capsule = p.__dlpack__(max_version=(1, 3))
        m = spans.DLManagedTensorVersioned.from_address(_api_pointer(capsule))
        m.flags = 2  # IS_COPIED
        return capsule


def _api_pointer(capsule):
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, b"dltensor_versioned")


@pytest.mark.skipif(not hasattr(np.ndarray, "__dlpack__"), reason="numpy without __dlpack__")
def test_a_copy_whose_strides_reach_past_its_compact_size_is_asked_for_again():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[1:, ::2]
    x = StridedCopy(a)
    t = dlbridge.from_dlpack(x, copy=True)
    assert raw_values(t).tolist() == a.tolist()  # before: [6, 8, 10, 12, 14, 0, 0, 0, 0]
    assert t.copied and x.asked == [True, None]
    gc.collect()
    assert x.wrong.exported == x.wrong.deleted == 1
    assert dlbridge.live_exports() == 0


def test_pyarrows_strided_tensor_copies_right():
    pa = pytest.importorskip("pyarrow")
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[1:, ::2]
    t = dlbridge.from_dlpack(pa.Tensor.from_numpy(a), copy=True)
    assert t.copied and raw_values(t).tolist() == a.tolist()


# -- 4. a structured array's field, copied by the cure -------------------------------


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_structured_field_is_copied_through_byte_strides(order):
    record = np.zeros(5, dtype=[("int", order + "i4"), ("char", "i1")])
    record["int"] = [1, -2, 3, 400000, -5]
    record["char"] = 7
    field = record["int"]
    assert field.strides == (5,)
    t = dlbridge.from_dlpack(field)  # before: DLB_ERR_BACKEND ... not a multiple of the item size 4
    assert t.copied and t.dtype == "int32" and raw_values(t).tolist() == [1, -2, 3, 400000, -5]
    two = np.zeros((3, 4), dtype=[("f", "<f8"), ("pad", "u1", (3,))])
    two["f"] = np.arange(12.0).reshape(3, 4) - 5.5
    t = dlbridge.from_dlpack(two["f"].T)  # byte strides (11, 44), transposed
    assert raw_values(t).tolist() == (np.arange(12.0).reshape(3, 4) - 5.5).T.tolist()
    with pytest.raises(dlbridge.Error, match="not a multiple of the item size|big-endian"):
        dlbridge.from_buffer(field)  # zero-copy: still no DLPack layout for it
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(field, copy=False)


# -- 5. the library's host-view rule decides what pickling hands out ----------------


class Pinned:
    """A producer of pinned host memory (kDLCUDAHost, which the CPU reads)."""

    def __init__(self):
        self.producer = Producer((8,), (1,))

    def __dlpack_device__(self):
        return (3, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        import test_impossible_spans as spans

        capsule = self.producer.__dlpack__(max_version=(1, 3))
        spans.DLManagedTensorVersioned.from_address(_api_pointer(capsule)).dl_tensor.device.device_type = 3
        return capsule


def test_pickling_hands_out_memory_the_host_view_rule_allows_without_a_copy():
    x = Pinned()
    t = dlbridge.from_dlpack(x)
    assert t.device == (3, 0) and t.data_ptr == x.producer.data
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    # dlb_buffer_host_view says the CPU reads it as it is: its own memory, not a copy
    assert np.frombuffer(buffers[0].raw(), np.uint8).ctypes.data == t.data_ptr
    u = pickle.loads(data, buffers=buffers)
    assert raw_values(u).tolist() == list(range(33, 41))
    del u, buffers, t
    gc.collect()
    assert x.producer.exported == x.producer.deleted == 1


def test_the_byte_stride_copy_checks_what_it_is_given():
    """dlb_copy_to_contiguous_flags with DLB_COPY_FLAG_BYTE_STRIDES, called
    as C would: values through byte strides (swapped too), and each bad
    input refused by name."""
    import ctypes

    from dlbridge._cdef import library_path
    from dlbridge._ctypes_decls import DLDataType, DLDevice, DLTensor

    lib = ctypes.CDLL(library_path())
    copy = lib.dlb_copy_to_contiguous_flags
    copy.argtypes = [ctypes.POINTER(DLTensor), ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32]
    copy.restype = ctypes.c_int32
    message = lib.dlb_last_error_message
    message.restype = ctypes.c_char_p
    byte_strides, swap = 4, 1
    record = np.zeros(6, dtype=[("v", ">i4"), ("pad", "u1", (3,))])  # 7-byte records
    record["v"] = [5, -6, 70000, -8, 9, 1 << 30]
    shape = (ctypes.c_int64 * 2)(2, 3)
    strides = (ctypes.c_int64 * 2)(21, 7)  # bytes

    def tensor(code=0, bits=32, ndim=2, st=strides, data=record.ctypes.data):
        t = DLTensor()
        t.data, t.device, t.ndim, t.dtype = data, DLDevice(1, 0), ndim, DLDataType(code, bits, 1)
        t.shape = ctypes.cast(shape, type(t.shape))
        t.strides = ctypes.cast(st, type(t.strides)) if st is not None else None
        return t

    out = np.zeros(6, np.int32)
    t = tensor()
    assert copy(ctypes.byref(t), out.ctypes.data, out.nbytes, byte_strides | swap) == 0
    assert out.tolist() == [5, -6, 70000, -8, 9, 1 << 30]

    def refused(t, size=out.nbytes, flags=byte_strides):
        status = copy(ctypes.byref(t), out.ctypes.data, size, flags)
        return dlbridge._glue.status_name(status), message().decode()

    name, text = refused(tensor(bits=4))
    assert name == "DLB_ERR_UNSUPPORTED_LAYOUT" and "whole bytes" in text
    name, text = refused(tensor(st=None))
    assert name == "DLB_ERR_INVALID_ARGUMENT" and "strides is NULL" in text
    name, text = refused(tensor(ndim=64))
    assert name == "DLB_ERR_INVALID_ARGUMENT" and "byte strides takes 0 to 63" in text
    name, text = refused(tensor(), size=8)
    assert name == "DLB_ERR_INVALID_ARGUMENT" and "dst_size is 8 bytes" in text
    huge = (ctypes.c_int64 * 2)(2 ** 62, 7)
    name, text = refused(tensor(st=huge))
    assert name in ("DLB_ERR_OVERFLOW", "DLB_ERR_MALFORMED"), (name, text)
    name, text = refused(tensor(), flags=1 << 7)
    assert name == "DLB_ERR_INVALID_ARGUMENT" and "DLB_COPY_FLAG_" in text
