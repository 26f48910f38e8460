"""The one rule (a consumer receives the producer's values, or the call
raises) against the real producers of the peer environment (scripts/
peers-env; run by scripts/test.d/43-sdist.sh with DLBRIDGE_PEERS_REQUIRED=1):
torch 2's conjugate and negative bits through its exchange table, numpy 2's
big-endian arrays, copy=True with mlx and tvm-ffi, onnxruntime's float8,
JAX's int4 through pickle, copy and sharing, pyarrow's booleans. Values are
read from raw memory and compared with the producer's own (np.asarray of a
resolved copy); test_values_fixes.py has the same rules against fakes."""

import copy
import ctypes
import os
import pickle

import peers  # missing peers: skip here, fail in the peer run
import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

try:
    import jax.numpy as jnp
    import mlx.core as mx
    import numpy as np
    import onnxruntime as ort
    import pyarrow as pa
    import torch
    import tvm_ffi

    if int(torch.__version__.split(".")[0]) < 2 or int(np.__version__.split(".")[0]) < 2:
        raise ImportError("torch %s and numpy %s are not torch 2 and numpy 2" % (torch.__version__, np.__version__))
except ImportError as e:
    peers.missing(e, "torch 2, numpy 2, JAX, mlx, onnxruntime, pyarrow and tvm-ffi")

import dlbridge  # noqa: E402
from test_values_fixes import raw_values, same  # noqa: E402  the raw-memory reader, one for every test


class TableOnly(torch.Tensor):
    """torch's exchange table (inherited), with a __dlpack__ that counts."""

    calls = 0

    def __dlpack__(self, *args, **kwargs):
        type(self).calls += 1
        return super().__dlpack__(*args, **kwargs)


def test_torch_bits_are_seen_on_the_exchange_table_path():
    z = torch.tensor([[1 + 2j, -3 - 4.5j], [0.5j, 6 + 0j]], dtype=torch.complex128)
    x = torch.arange(6.0).reshape(2, 3) - 2
    for name, v in [("conj", z.conj()), ("conj().imag", z.conj().imag), ("_neg_view", torch._neg_view(x)),
                    ("both", torch._neg_view(z.conj()))]:
        want = v.resolve_conj().resolve_neg().numpy()
        TableOnly.calls = 0
        t = dlbridge.from_dlpack(v.as_subclass(TableOnly))
        assert TableOnly.calls == 0, name  # the table, not __dlpack__
        assert t.copied and same(raw_values(t), want), (name, raw_values(t), want)
        with pytest.raises(dlbridge.RefusalError, match="copy=False") as info:
            dlbridge.from_dlpack(v, copy=False)
        assert info.value.status_name == "DLB_ERR_NOT_ZERO_COPY" and "bit (is_" in str(info.value)
    # A plain tensor is taken zero-copy, as before.
    t = dlbridge.from_dlpack(x)
    assert not t.copied and t.data_ptr == x.data_ptr()


def test_numpy2_big_endian_arrays_arrive_in_native_order():
    for dtype in (">i2", ">u4", ">i8", ">f2", ">f4", ">f8", ">c8", ">c16"):
        x = (np.arange(12).reshape(3, 4) * 37 - 100).astype(dtype)
        for v in (x, x.T, x[::-1, 1::2], np.asfortranarray(x)):
            with pytest.raises(BufferError):
                v.__dlpack__(max_version=(1, 3))  # numpy refuses non-native order
            t = dlbridge.from_dlpack(v)
            assert t.copied and same(raw_values(t), v), dtype


def test_mlx_copy_true_is_a_copy():
    m = mx.array([1.5, -2.0, 3.25])
    mx.eval(m)
    t = dlbridge.from_dlpack(m, copy=True)
    assert t.copied and same(raw_values(t), np.asarray(m))
    u = dlbridge.from_dlpack(m)
    assert not u.copied and u.data_ptr != t.data_ptr


def test_tvm_ffi_copy_true_is_imported_then_copied():
    x = np.arange(6.0).reshape(2, 3)
    v = tvm_ffi.from_dlpack(x)
    with pytest.raises(BufferError, match="copy not yet supported"):
        v.__dlpack__(max_version=(1, 3), copy=True)
    t = dlbridge.from_dlpack(v, copy=True)
    assert t.copied and t.data_ptr != x.ctypes.data
    x[:] = 0  # the copy does not see later writes
    assert same(raw_values(t), np.arange(6.0).reshape(2, 3))


def test_onnxruntime_float8_is_refused_not_relabelled():
    # float8_e4m3fn: its __array__() gives the bytes as uint8, its data_type() says float8.
    o = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.arange(6, dtype=np.uint8), 17)
    assert o.data_type() == "tensor(float8e4m3fn)" and np.asarray(o).dtype == np.uint8
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(o)
    e = info.value
    assert isinstance(e, dlbridge.Error) and e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert "tensor(float8e4m3fn)" in str(e) and "gave uint8" in str(e) and "Unexpected data type" in str(e)
    assert isinstance(e.__cause__, RuntimeError)
    # float8_e5m2: its __array__() refuses too; the refusal names both.
    o = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.arange(6, dtype=np.uint8), 19)
    with pytest.raises(dlbridge.RefusalError, match=r"__array__\(\) raised RuntimeError: No corresponding Numpy"):
        dlbridge.from_dlpack(o)
    o = ort.OrtValue.ortvalue_from_numpy(np.arange(4, dtype=np.float32))
    assert same(raw_values(dlbridge.from_dlpack(o)), np.arange(4, dtype=np.float32))


def test_jax_int4_survives_pickling_copying_and_sharing():
    values = [-8, -3, 0, 1, 7, -1]
    x = jnp.array(values, jnp.int4).reshape(2, 3)
    t = dlbridge.from_dlpack(x)
    assert t.dtype == "int4" and t.nbytes == 6 and t.copied
    want = np.asarray(x).view(np.uint8)  # JAX's own host copy, one element a byte
    assert same(raw_values(t, np.uint8), want)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    for u in (pickle.loads(data, buffers=buffers), pickle.loads(pickle.dumps(t, protocol=5)),
              pickle.loads(pickle.dumps(t, protocol=4)), copy.deepcopy(t), dlbridge.share(t)):
        assert u.dtype == "int4" and u.shape == (2, 3) and same(raw_values(u, np.uint8), want)


def test_pyarrow_booleans_are_still_cured():
    a = pa.array([True, False, True, True])
    t = dlbridge.from_dlpack(a)
    assert t.copied and same(raw_values(t), np.asarray(a))
