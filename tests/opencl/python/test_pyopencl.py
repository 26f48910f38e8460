"""dlbridge and PyOpenCL on a real OpenCL driver (PoCL's CPU device in CI).

PyOpenCL is the independent side: its Buffers are the memory, its
enqueue_copy is the oracle of every value (what the driver holds, read into
numpy, and numpy's own view of it for a strided layout), and it plays a
DLPack producer and consumer through raw cl_mem handles (Buffer.int_ptr,
Buffer.from_int_ptr; see cl_dlpack.py). Run by scripts/test.d/26-opencl.sh
in the environment of scripts/opencl-env.
"""

import gc
import os
import subprocess
import sys

import numpy as np
import pyopencl as cl
import pytest

import dlbridge
from cl_dlpack import ClArray, device_index, refcount, take_opencl

OPENCL = 4


@pytest.fixture(autouse=True)
def no_leaked_exports():
    gc.collect()
    start = dlbridge.live_exports()
    yield
    gc.collect()
    assert dlbridge.live_exports() == start


@pytest.fixture(scope="module")
def ctx():
    platform = cl.get_platforms()[0]
    return cl.Context(platform.get_devices()[:1])


@pytest.fixture(scope="module")
def queue(ctx):
    return cl.CommandQueue(ctx)


def device_buffer(ctx, queue, values):
    """A pyopencl Buffer holding `values` (float64), written and finished."""
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=values.nbytes)
    cl.enqueue_copy(queue, buf, np.ascontiguousarray(values), is_blocking=True)
    return buf


def oracle(queue, buf, count, shape, strides, offset):
    """What a view of `buf` holds: the driver's copy of the memory, read by
    enqueue_copy, viewed by numpy with the view's strides."""
    whole = np.empty(count, np.float64)
    cl.enqueue_copy(queue, whole, buf, is_blocking=True)
    return np.lib.stride_tricks.as_strided(whole[offset:], shape, tuple(8 * s for s in strides)).copy()


LAYOUTS = [
    # name, shape, strides (elements), offset (elements)
    ("compact", (6, 10), (10, 1), 0),
    ("offset rows", (4, 10), (10, 1), 13),
    ("transposed", (10, 6), (1, 10), 0),
    ("column", (6,), (10,), 3),
    ("box", (3, 4, 5), (60, 10, 1), 11),
    ("every other", (6, 5), (10, 2), 1),
    ("reversed", (10,), (-1,), 9),
]


@pytest.mark.parametrize("name,shape,strides,offset", LAYOUTS, ids=[layout[0] for layout in LAYOUTS])
def test_a_pyopencl_view_comes_in_zero_copy_and_cures_to_the_host(ctx, queue, name, shape, strides, offset):
    buf = device_buffer(ctx, queue, np.arange(240.0) * 0.5 - 7)
    refs = refcount(buf)
    x = ClArray(buf, shape, strides, offset)
    t = dlbridge.from_dlpack(x)
    assert t.device == (OPENCL, device_index(ctx.devices[0]))
    assert t.shape == shape
    # The cl_mem itself, zero-copy, to a consumer asking for kDLOpenCL.
    handle, byte_offset, _, _, _, _ = take_opencl(t.__dlpack__(max_version=(1, 3), dl_device=t.device))
    assert handle == buf.int_ptr
    assert byte_offset == offset * 8
    # A host copy: the elements the view reaches, as the driver holds them.
    host = dlbridge.from_dlpack(t, device=(1, 0))
    assert host.copied and host.device == (1, 0)
    expect = oracle(queue, buf, 240, shape, strides, offset)
    np.testing.assert_array_equal(np.from_dlpack(host), expect)
    # numpy's own request for the CPU gets the same copy.
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), expect)
    assert x.deleted == 0
    del t, host
    gc.collect()
    assert x.deleted == 1
    assert refcount(buf) == refs


def test_a_producer_that_cannot_copy_to_the_host_is_copied_by_dlbridge(ctx, queue):
    # ClArray refuses dl_device=(1, 0): the cure takes its OpenCL tensor in and
    # copies it over through the OpenCL backend.
    buf = device_buffer(ctx, queue, np.arange(60.0) - 9)
    refs = refcount(buf)
    x = ClArray(buf, (6, 5), (1, 6), 2)
    with pytest.raises(BufferError, match="ClArray exports OpenCL memory only"):
        x.__dlpack__(max_version=(1, 3), dl_device=(1, 0))
    host = dlbridge.from_dlpack(x, device=(1, 0))
    assert host.copied and host.device == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(host), oracle(queue, buf, 60, (6, 5), (1, 6), 2))
    with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY"):
        dlbridge.from_dlpack(x, device=(1, 0), copy=False)
    del host
    gc.collect()
    assert x.deleted == 1 and refcount(buf) == refs


def test_numpy_is_refused_zero_copy_with_the_backend_named(ctx, queue):
    buf = device_buffer(ctx, queue, np.arange(12.0))
    t = dlbridge.from_dlpack(ClArray(buf, (3, 4)))
    with pytest.raises(BufferError):
        np.from_dlpack(t)  # numpy gets a kDLOpenCL capsule it cannot read
    with pytest.raises(BufferError) as refused:
        t.__dlpack__(dl_device=(1, 0), copy=False)
    assert "DLB_ERR_NOT_ZERO_COPY" in str(refused.value)
    assert "backend 'opencl:0'" in str(refused.value)
    with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY"):
        dlbridge.from_dlpack(t, device=(1, 0), copy=False)


def test_a_legacy_capsule_comes_in_too(ctx, queue):
    values = np.linspace(-1, 1, 16)
    buf = device_buffer(ctx, queue, values)
    x = ClArray(buf, (4, 4))
    t = dlbridge.from_dlpack(x.__dlpack__())  # a bare legacy capsule
    np.testing.assert_array_equal(np.from_dlpack(dlbridge.from_dlpack(t, device=(1, 0))), values.reshape(4, 4))
    del t
    gc.collect()
    assert x.deleted == 1


def test_pyopencl_consumes_a_dlbridge_tensor_on_the_device(queue):
    values = np.arange(30.0).reshape(5, 6) ** 2
    # numpy's array copied to OpenCL device memory by dlbridge.
    t = dlbridge.from_dlpack(values, device=(OPENCL, 0))
    assert t.device == (OPENCL, 0) and t.copied
    handle, byte_offset, shape, strides, seen, context = take_opencl(t.__dlpack__(max_version=(1, 3)))
    assert (shape, byte_offset) == ((5, 6), 0)
    np.testing.assert_array_equal(seen, values)
    # Its consumer queue given as the stream: the export makes the queue
    # wait for the buffer's last writer, and the queue reads the values.
    consumer = cl.CommandQueue(context)
    h2, _, _, _, seen2, _ = take_opencl(t.__dlpack__(max_version=(1, 3), stream=consumer.int_ptr), consumer)
    assert h2 == handle
    np.testing.assert_array_equal(seen2, values)
    # A CUDA stream value means nothing to OpenCL memory.
    with pytest.raises(ValueError, match="is not an OpenCL stream value"):
        t.__dlpack__(stream=1)


def test_a_released_handle_is_refused_by_name_and_its_producer_keeps_its_tensor(ctx, queue):
    buf = device_buffer(ctx, queue, np.arange(8.0))
    stale = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=64)
    handle = stale.int_ptr
    stale.release()
    x = ClArray(buf, (8,), handle=handle)
    with pytest.raises(dlbridge.Error) as refused:
        dlbridge.from_dlpack(x)
    assert refused.value.status_name == "DLB_ERR_MALFORMED"
    assert "is not a live cl_mem" in refused.value.message
    gc.collect()
    assert x.deleted == 1  # by its own capsule, which dlbridge did not take


def test_an_offset_past_the_buffer_and_a_missing_device_are_malformed(ctx, queue):
    buf = device_buffer(ctx, queue, np.arange(8.0))
    refs = refcount(buf)
    for x, words in [(ClArray(buf, (4,), offset=5), "reaches past the cl_mem's 64 bytes"),
                     (ClArray(buf, (4,), device_id=7), "the tensor says opencl:7")]:
        with pytest.raises(dlbridge.Error) as refused:
            dlbridge.from_dlpack(x)
        assert refused.value.status_name == "DLB_ERR_MALFORMED"
        assert words in refused.value.message
        gc.collect()
        assert x.deleted == 1
    assert refcount(buf) == refs


def test_without_a_platform_the_device_copy_says_why():
    env = dict(os.environ, OCL_ICD_VENDORS="/nonexistent/vendors")
    code = (
        "import numpy as np, dlbridge\n"
        "try:\n"
        "    dlbridge.from_dlpack(np.arange(3.0), device=(4, 0))\n"
        "except BufferError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "DLB_ERR_UNSUPPORTED_DEVICE" in out
    assert "no OpenCL platform" in out


def test_the_users_own_device_and_queue_name_dlbridges_device_index(ctx, queue):
    """dlb_opencl_device_index / dlb_opencl_queue_device_index over
    PyOpenCL's handles agree with the loader's order, and a tensor asked
    for on that index lands on the user's device."""
    import ctypes

    from dlbridge._cdef import library_path

    lib = ctypes.CDLL(library_path())
    for name in ("dlb_opencl_device_index", "dlb_opencl_queue_device_index"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]
        getattr(lib, name).restype = ctypes.c_int32
    index = ctypes.c_int32(-1)
    for platform in cl.get_platforms():
        for d in platform.get_devices():
            assert lib.dlb_opencl_device_index(d.int_ptr, ctypes.byref(index)) == 0
            assert index.value == device_index(d)
    assert lib.dlb_opencl_queue_device_index(queue.int_ptr, ctypes.byref(index)) == 0
    assert index.value == device_index(queue.device)
    values = np.arange(6.0)
    t = dlbridge.from_dlpack(values, device=(OPENCL, index.value))
    assert t.device == (OPENCL, index.value)
    # a handle that is no queue: refused by name, `out` untouched
    junk = ctypes.c_int64(0)
    index.value = 77
    rc = lib.dlb_opencl_queue_device_index(ctypes.addressof(junk), ctypes.byref(index))
    assert dlbridge._glue.status_name(rc) == "DLB_ERR_INVALID_ARGUMENT"
    assert index.value == 77


DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_values_of_every_dtype_in_every_layout_reach_the_host(ctx, queue, dtype):
    """The value oracle over OpenCL: each dtype's values in each layout of
    LAYOUTS, taken in zero-copy and copied to the host by dlbridge, equal
    what the driver holds (enqueue_copy, viewed with the layout's strides);
    copy=False to the host is refused by name, and every deleter runs."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(sum(map(ord, dtype)))
    if dt.kind == "b":
        values = rng.integers(0, 2, 240).astype(dt)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        values = rng.integers(info.min, info.max, 240, dtype=dt, endpoint=True)
    elif dt.kind == "c":
        values = (rng.standard_normal(240) + 1j * rng.standard_normal(240)).astype(dt)
    else:
        values = rng.standard_normal(240).astype(dt)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=values.nbytes)
    cl.enqueue_copy(queue, buf, values, is_blocking=True)
    whole = np.empty(240, dt)
    cl.enqueue_copy(queue, whole, buf, is_blocking=True)
    for name, shape, strides, offset in LAYOUTS:
        x = ClArray(buf, shape, strides, offset, dtype=dt)
        t = dlbridge.from_dlpack(x)
        assert t.dtype == dtype and t.shape == shape, name
        host = dlbridge.from_dlpack(t, device=(1, 0))
        expect = np.lib.stride_tricks.as_strided(whole[offset:], shape, tuple(dt.itemsize * s for s in strides))
        got = np.from_dlpack(host)
        assert got.dtype == dt and np.array_equal(got, expect), (dtype, name)
        with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY"):
            dlbridge.from_dlpack(t, device=(1, 0), copy=False)
        del t, host, got
        gc.collect()
        assert x.deleted == x.exported == 1, (dtype, name)


DLB_BUFFER_SUBBYTE_PADDED = 1 << 2  # include/dlbridge/buffer.h


def _nibbles(raw, count, padded, signed):
    """The first `count` 4-bit elements of bytes `raw` (packed: element i in
    bits 4 (i % 2) of byte i // 2; padded: the low bits of byte i), as int8."""
    raw = np.frombuffer(raw, np.uint8)
    v = (raw[:count] if padded else (raw[np.arange(count) // 2] >> (4 * (np.arange(count) % 2)))) & 0xF
    return np.where(signed & (v >= 8), v.astype(np.int16) - 16, v).astype(np.int8)


def _host_values(t, padded):
    """A host tensor's 4-bit values, read from its memory (data_ptr,
    shape, strides), as int8."""
    import ctypes

    shape, strides = tuple(t.shape), tuple(t.strides)
    count = int(np.prod(shape)) if shape else 1
    if count == 0:
        return np.zeros(shape, np.int8)
    offsets = np.zeros((), np.int64)
    for n, s in zip(shape, strides):
        offsets = offsets[..., None] + np.arange(n, dtype=np.int64) * s
    offsets = offsets.reshape(-1)
    assert offsets.min() >= 0
    span = int(offsets.max()) + 1
    raw = ctypes.string_at(t.data_ptr, span if padded else (span + 1) // 2)
    every = _nibbles(raw, span, padded, t.dtype == "int4")
    return every[offsets].reshape(shape)


@pytest.mark.parametrize("padded", [False, True], ids=["packed", "padded"])
@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_values_of_4_bit_dtypes_packed_and_padded_reach_the_host(ctx, queue, dtype, padded):
    """The value oracle over OpenCL for int4 and uint4, two to a byte
    (packed) or one (padded, SUBBYTE_PADDED): in each layout of LAYOUTS
    (packed: its offset made even, so that element 0 starts on a byte),
    taken in zero-copy, then copied to the host with the values the driver
    holds (enqueue_copy of the whole buffer, each element read from its
    bits), or refused by name: a packed view must come in, and copy when
    it is compact; copy=False to the host is refused by name, and every
    deleter runs."""
    import ctypes

    from dlbridge._cdef import library_path

    lib = ctypes.CDLL(library_path())
    lib.dlb_buffer_flags.restype, lib.dlb_buffer_flags.argtypes = ctypes.c_uint64, [ctypes.c_void_p]
    signed = dtype == "int4"
    rng = np.random.default_rng(sum(map(ord, dtype)) + padded)
    nibbles = rng.integers(0, 16, 240).astype(np.uint8)
    if padded:  # one to a byte; a signed element sign-extended, as ml_dtypes writes them
        stored = np.where(signed & (nibbles >= 8), nibbles | 0xF0, nibbles).astype(np.uint8)
    else:
        stored = (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=stored.nbytes)
    cl.enqueue_copy(queue, buf, stored, is_blocking=True)
    whole = np.empty(stored.nbytes, np.uint8)
    cl.enqueue_copy(queue, whole, buf, is_blocking=True)
    held = _nibbles(whole.tobytes(), 240, padded, signed)  # what the driver holds, element by element
    outcomes = {}
    for name, shape, strides, offset in LAYOUTS:
        offset = offset if padded else offset + offset % 2
        x = ClArray(buf, shape, strides, offset, dtype=dtype, padded=padded)
        try:
            t = dlbridge.from_dlpack(x)
        except BufferError as e:  # the OpenCL backend takes no padded elements in
            assert "DLB_ERR_" in str(e) and padded, (dtype, name, str(e))
            outcomes[name] = "refused at import"
            gc.collect()
            assert x.deleted == x.exported == 1, (dtype, name)
            continue
        assert t.dtype == dtype and t.shape == shape, name
        compact = list(strides) == [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
        try:
            host = dlbridge.from_dlpack(t, device=(1, 0))
        except BufferError as e:
            assert "DLB_ERR_" in str(e), (dtype, name, str(e))
            assert padded or not compact, (dtype, name, "a compact packed view must copy", str(e))
            outcomes[name] = "refused"
        else:
            assert host.copied and host.device == (1, 0) and host.dtype == dtype, name
            host_padded = bool(lib.dlb_buffer_flags(host._handle) & DLB_BUFFER_SUBBYTE_PADDED)
            index = offset + sum(np.arange(n).reshape((-1,) + (1,) * (len(shape) - 1 - i)) * s
                                 for i, (n, s) in enumerate(zip(shape, strides)))
            np.testing.assert_array_equal(_host_values(host, host_padded), held[index], err_msg=(dtype, name))
            outcomes[name] = "copied"
            del host
        with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY"):
            dlbridge.from_dlpack(t, device=(1, 0), copy=False)
        del t
        gc.collect()
        assert x.deleted == x.exported == 1, (dtype, name)
    assert padded or outcomes["compact"] == "copied"
