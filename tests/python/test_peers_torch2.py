"""torch 2 (the peer environment's, python/requirements/peers.txt) and the
DLPack C exchange API, both directions, each test showing which path was
taken; the JAX array sharded over several CPU devices cured into torch
through dlbridge. Run by scripts/test.d/43-sdist.sh with the peer
interpreter and DLBRIDGE_PEERS_REQUIRED=1, under which a missing torch 2,
JAX or tvm-ffi fails instead of skipping.

torch >= 2.10 publishes torch.Tensor.__dlpack_c_exchange_api__ (a PyCapsule
named "dlpack_exchange_api"); torch.from_dlpack reads no other type's table
and calls __dlpack__(max_version=(1, 0), ...)."""

import ctypes as ct
import gc
import os
import sys

import peers  # missing peers: skip here, fail in the peer run
import pytest

# Several CPU devices, so that a sharded array is real; only effective
# before jax is first imported (43-sdist.sh sets it in the environment).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    import tvm_ffi
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if int(torch.__version__.split(".")[0]) < 2:
        raise ImportError("torch %s is not torch 2" % torch.__version__)
except ImportError as e:
    peers.missing(e, "torch 2, JAX and tvm-ffi")

import dlbridge

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exchange"))
import xtable  # noqa: E402  ctypes views of an exchange table



class TableOnly(torch.Tensor):
    """torch's table (inherited from torch.Tensor), with a __dlpack__ that
    must not be called."""

    calls = 0

    def __dlpack__(self, *args, **kwargs):
        type(self).calls += 1
        raise AssertionError("__dlpack__ called although torch's exchange table was there")


def table_only(t):
    TableOnly.calls = 0
    return t.as_subclass(TableOnly)


def sharded(x):
    devices = jax.devices()
    assert len(devices) >= 2, "XLA_FLAGS=--xla_force_host_platform_device_count=2 was set after jax was imported"
    return jax.device_put(x, NamedSharding(Mesh(np.array(devices[:2]), ("x",)), PartitionSpec("x")))


# -- dlbridge takes torch's table --------------------------------------------


def test_torch_publishes_a_version_1_table():
    capsule = torch.Tensor.__dlpack_c_exchange_api__
    assert xtable.capsule_name(capsule) == "dlpack_exchange_api"
    api = xtable.table(torch.Tensor)
    assert api.header.version.major == 1 and api.header.version.minor >= 1


def test_dlbridge_reads_torchs_exchange_table():
    base = torch.arange(12.0).reshape(3, 4)
    x = table_only(base[:, 1:])  # a strided view at an offset
    for _ in range(3):  # the second lookup comes from dlbridge's cache
        t = dlbridge.from_dlpack(x)
        assert t.data_ptr == base[:, 1:].data_ptr() and not t.copied
        assert t.shape == (3, 3) and t.strides == (4, 1) and t.dtype == "float32" and not t.readonly
        assert np.from_dlpack(t).tolist() == base[:, 1:].tolist()
    base[0, 1] = -1.0  # torch's memory, seen through dlbridge
    assert np.from_dlpack(t)[0, 0] == -1.0
    c = dlbridge.from_dlpack(x, copy=True)  # copy= decided by dlbridge on the table's tensor
    assert c.copied and c.data_ptr != base.data_ptr()
    assert TableOnly.calls == 0


def test_torch_dtypes_through_the_table():
    for dtype, name in [(torch.bfloat16, "bfloat16"), (torch.float8_e4m3fn, "float8_e4m3fn"),
                        (torch.float8_e5m2, "float8_e5m2"), (torch.bool, "bool"),
                        (torch.complex128, "complex128"), (torch.uint16, "uint16"), (torch.uint64, "uint64")]:
        x = table_only(torch.zeros(2, 3, dtype=dtype))
        t = dlbridge.from_dlpack(x)
        assert t.dtype == name and t.data_ptr == x.data_ptr() and t.shape == (2, 3)
    assert TableOnly.calls == 0


def test_torchs_table_exports_what_its_dunder_dlpack_refuses():
    # torch 2's __dlpack__ refuses a tensor that requires grad; its table's
    # from-py-object exports it (the data, detached). dlbridge takes what
    # the table gives.
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(BufferError, match="require gradient"):
        x.__dlpack__()
    t = dlbridge.from_dlpack(table_only(x))
    assert t.data_ptr == x.data_ptr() and np.from_dlpack(t).tolist() == [1.0, 1.0, 1.0]
    assert TableOnly.calls == 0


def test_torchs_current_work_stream_for_the_cpu_is_null_and_dlbridge_asks_none():
    api = xtable.table(torch.Tensor)
    stream = ct.c_void_p(1)
    assert api.current_work_stream(1, 0, ct.byref(stream)) == 0  # kDLCPU
    assert stream.value is None
    # A host import carries no stream: dlbridge asks for one only on devices
    # of its CUDA backend.
    assert dlbridge.from_dlpack(torch.zeros(2)).stream is None


def test_torchs_table_from_py_object_and_back_through_dlbridges_table():
    api = xtable.table(torch.Tensor)
    x = torch.arange(6, dtype=torch.int32)
    mt = xtable.from_py(api, x)
    assert mt.contents.dl_tensor.data == x.data_ptr() and mt.contents.version.major == 1
    # dlbridge's to-py-object takes any producer's tensor in.
    t = xtable.to_py(xtable.table(dlbridge.Tensor), mt)
    assert isinstance(t, dlbridge.Tensor) and t.data_ptr == x.data_ptr()
    assert torch.from_dlpack(t).tolist() == list(range(6))


# -- torch-side consumers take dlbridge's tensors ----------------------------


def test_torch_takes_dlbridge_tensors_zero_copy():
    a = np.arange(12.0).reshape(3, 4).T
    t = dlbridge.from_dlpack(a)
    y = torch.from_dlpack(t)
    assert y.data_ptr() == a.ctypes.data and y.stride() == (1, 4)
    assert y.tolist() == a.tolist()


def test_tvm_ffi_reads_dlbridges_table_for_torch_memory():
    x = torch.arange(8.0)
    t = dlbridge.from_dlpack(x)
    r = tvm_ffi.from_dlpack(t)
    assert r.data_ptr() == x.data_ptr()
    # tvm-ffi reads torch's table the same way: the subclass's __dlpack__ is
    # never called.
    r2 = tvm_ffi.from_dlpack(table_only(x))
    assert r2.data_ptr() == x.data_ptr() and TableOnly.calls == 0


# -- the cure, into torch 2 --------------------------------------------------


def test_a_sharded_jax_array_is_refused_by_torch_and_reaches_it_through_dlbridge():
    x = sharded(jnp.arange(16.0, dtype=jnp.float32).reshape(4, 4))
    with pytest.raises(BufferError, match="unsharded arrays"):
        torch.from_dlpack(x)  # JAX's refusal, as torch meets it
    t = dlbridge.from_dlpack(x)
    assert t.copied and t.device == (1, 0)
    y = torch.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr and y.tolist() == np.asarray(x).tolist()
    y[0, 0] = 7.0  # the copy is the consumer's own, writable
    assert np.from_dlpack(t)[0, 0] == 7.0


@pytest.mark.parametrize("dtype", ["bfloat16", "int8", "bool", "complex64", "uint32"])
def test_the_cure_into_torch_keeps_every_dtype(dtype):
    x = sharded(jnp.arange(8).astype(dtype))
    y = torch.from_dlpack(dlbridge.from_dlpack(x))
    assert str(y.dtype) == "torch." + dtype
    assert y.to(torch.float64 if dtype != "complex64" else torch.complex128).tolist() == \
        np.asarray(x).astype("float64" if dtype != "complex64" else "complex128").tolist()


def test_the_seed_refusals_on_the_way_to_torch():
    # JAX's int4 refusal ("XLA type S4 has no DLPack equivalent") is cured
    # into a padded int4 host tensor, one element a byte; torch 2 has int4
    # as a dtype but its from_dlpack takes no 4-bit integer, and says so.
    x = jnp.array([1, -2, 7, -8], jnp.int4)
    with pytest.raises(Exception, match="S4 has no DLPack equivalent"):
        torch.from_dlpack(x)
    t = dlbridge.from_dlpack(x)
    assert t.copied and t.dtype == "int4" and t.shape == (4,)
    assert ct.string_at(t.data_ptr, 4) == bytes([1, 0x0E, 7, 0x08])  # the low nibble, as ml_dtypes keeps it
    with pytest.raises(BufferError, match="kInt bits 4"):
        torch.from_dlpack(t)
    # The string array's refusal ("PjRt-compatible backend only") stays a
    # refusal: DLPack has no string dtype, and dlbridge says so with JAX's words.
    s = jax.device_put(np.array(["ab", "cd"], dtype=np.dtypes.StringDType()), jax.devices()[0])
    with pytest.raises(dlbridge.Error, match="DLB_ERR_UNSUPPORTED_DTYPE: .*PjRt-compatible backend only") as e:
        dlbridge.from_dlpack(s)
    assert type(e.value.__cause__).__name__ == "JaxRuntimeError"
    del t
    gc.collect()
    assert dlbridge.live_exports() == 0


def test_torchs_conjugate_and_negative_views_arrive_with_their_values():
    # DLPack cannot say "conjugate" or "negate": torch's table exports such
    # views as plain memory, its __dlpack__ refuses the conjugate one only.
    # dlbridge asks is_conj() / is_neg() and copies torch's resolve_conj() /
    # resolve_neg() (test_peers_values.py reads them from raw memory).
    base = torch.tensor([1 + 2j, 3j])
    c = base.conj()
    assert c.is_conj()
    with pytest.raises(BufferError, match="conjugate bit"):
        c.__dlpack__()
    t = dlbridge.from_dlpack(c)
    assert t.copied and np.from_dlpack(t).tolist() == [1 - 2j, -3j]  # c's values, not its memory's
    n = torch.ones(2, dtype=torch.complex64)._neg_view()
    assert n.is_neg()
    t = dlbridge.from_dlpack(n)
    assert t.copied and np.from_dlpack(t).tolist() == [-1, -1]
    del t
