"""CUDA tensors between torch and dlbridge's CUDA backend, both ways, with
streams, on a real GPU (scripts/gpu-check runs it). Plain ctypes against the
built library, so that it checks the C library alone.

    python3 tests/cuda/torch_exchange.py path/to/libdlbridge.so

torch -> dlbridge: a torch tensor written by a slow kernel on a torch stream
is exported with `__dlpack__(stream=consumer)`, wrapped with
dlb_cuda_buffer_wrap on the consumer stream, and copied to the host by
dlbridge: the values must be those after the kernel, with no host sync in
between. dlbridge -> torch: a dlbridge buffer exported with the consumer's
stream is taken by torch (same address), written on a torch stream that
dlbridge is told about, and copied to the host by dlbridge.

Exit status: 0 passed, 1 failed, 77 skipped (no torch, or torch without CUDA).
"""
import ctypes
import sys

from ctypes import (CFUNCTYPE, POINTER, Structure, byref, c_char_p, c_int32, c_int64, c_size_t, c_uint8,
                    c_uint16, c_uint64, c_void_p, py_object)


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


DELETER = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DELETER)]


class ExportOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("copy", c_int32), ("has_target_device", c_int32),
                ("target_device", DLDevice), ("stream", c_int64), ("flags", c_uint64)]


RELEASE = CFUNCTYPE(None, c_void_p)
KDLCUDA = 2
FLOAT32 = DLDataType(2, 32, 1)
USED_NAME = b"used_dltensor"  # kept alive: a capsule keeps a pointer to its name


def main():
    if len(sys.argv) != 2:
        print("usage: torch_exchange.py LIBDLBRIDGE", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("torch exchange: skipped (no torch)")
        return 77
    if not torch.cuda.is_available():
        print("torch exchange: skipped (torch %s without CUDA)" % torch.__version__)
        return 77

    lib = ctypes.CDLL(sys.argv[1])
    lib.dlb_last_error_message.restype = c_char_p
    lib.dlb_cuda_buffer_wrap.argtypes = [c_void_p, POINTER(DLTensor), c_uint64, c_int64, RELEASE, c_void_p,
                                         POINTER(c_void_p)]
    lib.dlb_cuda_buffer_alloc.argtypes = [c_void_p, DLDevice, DLDataType, c_int32, POINTER(c_int64),
                                          POINTER(c_void_p)]
    lib.dlb_cuda_buffer_set_stream.argtypes = [c_void_p, c_int64]
    lib.dlb_buffer_to_host.argtypes = [c_void_p, POINTER(c_void_p)]
    lib.dlb_buffer_dltensor.argtypes = [c_void_p, POINTER(DLTensor)]
    lib.dlb_buffer_release.argtypes = [c_void_p]
    lib.dlb_backend_release.argtypes = [c_void_p]
    lib.dlb_export_legacy.argtypes = [c_void_p, POINTER(ExportOptions), POINTER(POINTER(DLManagedTensor))]
    lib.dlb_export_options_init.argtypes = [POINTER(ExportOptions)]
    lib.dlb_live_exports.restype = c_int64
    capi = ctypes.pythonapi
    capi.PyCapsule_GetPointer.restype = c_void_p
    capi.PyCapsule_GetPointer.argtypes = [py_object, c_char_p]
    capi.PyCapsule_SetName.argtypes = [py_object, c_char_p]
    capi.PyCapsule_New.restype = py_object
    capi.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]

    def check(status, what):
        if status != 0:
            raise AssertionError("%s: status %d: %s" % (what, status, lib.dlb_last_error_message().decode()))

    def host_values(buf, n):
        host = c_void_p()
        check(lib.dlb_buffer_to_host(buf, byref(host)), "dlb_buffer_to_host")
        t = DLTensor()
        check(lib.dlb_buffer_dltensor(host, byref(t)), "dlb_buffer_dltensor")
        values = list((ctypes.c_float * n).from_address(t.data))
        lib.dlb_buffer_release(host)
        return values

    device = torch.cuda.current_device()
    backend = c_void_p()
    check(lib.dlb_cuda_backend_create(device, byref(backend)), "dlb_cuda_backend_create")
    n = 1 << 20
    spin = 200_000_000  # GPU cycles of torch.cuda._sleep: pending work the host does not wait for

    # torch -> dlbridge
    x = torch.zeros(n, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(spin)
        x.add_(torch.arange(n, dtype=torch.float32, device="cuda"))
        capsule = x.__dlpack__(stream=consumer.cuda_stream)
    x.record_stream(producer)
    managed = ctypes.cast(capi.PyCapsule_GetPointer(capsule, b"dltensor"), POINTER(DLManagedTensor))
    deleter = managed.contents.deleter
    released = []

    def release(ctx):
        released.append(1)
        deleter(ctypes.cast(ctx, POINTER(DLManagedTensor)))

    release_fn = RELEASE(release)
    buf = c_void_p()
    check(lib.dlb_cuda_buffer_wrap(backend, byref(managed.contents.dl_tensor), 0, consumer.cuda_stream, release_fn,
                                   ctypes.cast(managed, c_void_p), byref(buf)), "dlb_cuda_buffer_wrap")
    capi.PyCapsule_SetName(capsule, USED_NAME)
    got = host_values(buf, n)
    want = [float(i) for i in range(n)]
    if got != want:
        bad = next(i for i in range(n) if got[i] != want[i])
        raise AssertionError("torch -> dlbridge: element %d is %r, want %r (stream ordering broken?)"
                             % (bad, got[bad], want[bad]))
    lib.dlb_buffer_release(buf)
    if released != [1]:
        raise AssertionError("torch -> dlbridge: the torch tensor's deleter ran %d times" % len(released))
    del capsule

    # dlbridge -> torch
    shape = (c_int64 * 1)(n)
    buf = c_void_p()
    check(lib.dlb_cuda_buffer_alloc(backend, DLDevice(KDLCUDA, device), FLOAT32, 1, shape, byref(buf)),
          "dlb_cuda_buffer_alloc")
    writer = torch.cuda.Stream()
    opts = ExportOptions()
    lib.dlb_export_options_init(byref(opts))
    opts.stream = writer.cuda_stream
    m = POINTER(DLManagedTensor)()
    check(lib.dlb_export_legacy(buf, byref(opts), byref(m)), "dlb_export_legacy")
    address = m.contents.dl_tensor.data
    t = torch.utils.dlpack.from_dlpack(capi.PyCapsule_New(ctypes.cast(m, c_void_p), b"dltensor", None))
    if t.data_ptr() != address or not t.is_cuda:
        raise AssertionError("dlbridge -> torch: not zero-copy (%#x vs %#x)" % (t.data_ptr(), address))
    with torch.cuda.stream(writer):
        torch.cuda._sleep(spin)
        t.add_(7.0)
    check(lib.dlb_cuda_buffer_set_stream(buf, writer.cuda_stream), "dlb_cuda_buffer_set_stream")
    got = host_values(buf, n)
    if got != [7.0] * n:
        bad = next(i for i in range(n) if got[i] != 7.0)
        raise AssertionError("dlbridge -> torch: element %d is %r, want 7.0 (stream ordering broken?)"
                             % (bad, got[bad]))
    del t
    torch.cuda.synchronize()
    live = lib.dlb_live_exports()
    if live != 0:
        raise AssertionError("dlbridge -> torch: %d export(s) still alive after torch dropped the tensor" % live)
    lib.dlb_buffer_release(buf)
    lib.dlb_backend_release(backend)
    print("torch exchange: passed both ways (torch %s, %s)" % (torch.__version__, torch.cuda.get_device_name()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print("torch exchange: FAILED: %s" % e)
        sys.exit(1)
