"""The nanobind example (nanobind_sum.cpp) against numpy 2, torch 2 and JAX
arrays of the peer environment: the sum through dlbridge's C API beside the
sum through nb::ndarray, and where the two differ (the cure of a sharded
JAX array, the read-only rule). Built by build.py into
$DLB_NANOBIND_SUM_DIR (scripts/test.d/46-nanobind.sh sets it) or a
temporary folder. A missing peer fails: the pins name them."""

import gc
import os
import sys
import tempfile

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

try:
    import jax
    import jax.numpy as jnp
    import nanobind  # noqa: F401
    import numpy as np
    import torch
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
except ImportError as e:
    pytest.fail("a peer pinned in python/requirements/peers.txt is missing: %s" % e, pytrace=False)

import dlbridge

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build  # noqa: E402

_outdir = os.environ.get("DLB_NANOBIND_SUM_DIR") or tempfile.mkdtemp(prefix="dlbridge-nanobind-")
sys.path.insert(0, os.path.dirname(build.build(_outdir)))
import nanobind_sum as ns  # noqa: E402


@pytest.fixture(autouse=True)
def no_exports_left():
    gc.collect()
    start = dlbridge.live_exports()
    yield
    gc.collect()
    assert dlbridge.live_exports() == start


def sharded(x):
    devices = jax.devices()
    assert len(devices) >= 2, "XLA_FLAGS was set after jax was imported"
    return jax.device_put(x, NamedSharding(Mesh(np.array(devices[:2]), ("x",)), PartitionSpec("x")))


def arrays():
    """(name, array, its sum) from each framework, in several layouts and dtypes."""
    a = np.arange(24.0).reshape(4, 6)
    t = torch.arange(24, dtype=torch.int32).reshape(4, 6)
    j = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    return [
        ("numpy float64", a, 276.0),
        ("numpy strided view", a[:, ::2], float(a[:, ::2].sum())),
        ("numpy transposed uint16", np.arange(6, dtype=np.uint16).reshape(2, 3).T, 15.0),
        ("numpy 0-d", np.array(2.5), 2.5),
        ("numpy empty", np.zeros((0, 3)), 0.0),
        ("numpy bool", np.arange(5) > 2, 2.0),
        ("torch int32", t, 276.0),
        ("torch transposed offset view", t[1:, 2:].t(), float(t[1:, 2:].sum())),
        ("torch float32", torch.full((5,), 0.5), 2.5),
        ("jax float32", j, 66.0),
        ("jax int8", jnp.arange(5, dtype=jnp.int8), 10.0),
        ("dlbridge tensor", dlbridge.from_dlpack(a[1:]), float(a[1:].sum())),
    ]


@pytest.mark.parametrize("case", range(12))
def test_both_ways_sum_every_framework(case):
    name, x, want = arrays()[case]
    assert ns.sum(x) == want, name
    assert ns.sum_ndarray(x) == want, name


def test_a_sharded_jax_array_is_cured_by_dlbridge_and_refused_by_nb_ndarray():
    x = sharded(jnp.arange(8.0, dtype=jnp.float32))
    assert ns.sum(x) == 28.0  # dlbridge.from_dlpack copies it to the host
    with pytest.raises(TypeError, match="incompatible function arguments"):
        ns.sum_ndarray(x)  # nanobind meets JAX's BufferError and gives up


def test_the_read_only_rule():
    ro = np.frombuffer(bytes(range(8)), dtype=np.uint8)
    assert ns.sum(ro) == ns.sum_ndarray(ro) == 28.0
    with pytest.raises(ValueError, match="DLB_ERR_READ_ONLY"):
        ns.scale_(ro, 2.0)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        ns.scale_ndarray_(ro, 2.0)
    # JAX marks its exports READ_ONLY (its arrays are immutable): refused by
    # dlbridge's rule; nb::ndarray takes them only read-only as well.
    with pytest.raises(ValueError, match="DLB_ERR_READ_ONLY"):
        ns.scale_(jnp.arange(3.0), 2.0)
    assert list(bytes(ro)) == list(range(8))


def test_in_place_through_both_ways_writes_the_producers_memory():
    t = torch.arange(6.0).reshape(2, 3)
    ns.scale_(t[:, 1:], 2.0)
    assert t.tolist() == [[0.0, 2.0, 4.0], [3.0, 8.0, 10.0]]
    a = np.arange(4, dtype=np.int64)
    ns.scale_ndarray_(a, 3.0)
    ns.scale_(a, 2.0)
    assert a.tolist() == [0, 6, 12, 18]


def test_refusals_are_precise():
    with pytest.raises(TypeError, match="no C\\+\\+ arithmetic here for float16"):
        ns.sum(np.zeros(2, dtype=np.float16))
    with pytest.raises(TypeError, match="no C\\+\\+ arithmetic here for complex64"):
        ns.sum_ndarray(np.zeros(2, dtype=np.complex64))
    with pytest.raises(AttributeError, match="does not implement the DLPack protocol"):
        ns.sum(object())  # dlbridge.from_dlpack's own words


def test_torch_goes_through_its_exchange_table():
    class NoDunder(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            raise AssertionError("__dlpack__ called")

    x = torch.arange(4.0).as_subclass(NoDunder)
    assert ns.sum(x) == 6.0
