"""from_dlpack against real JAX (the modern peer environment, whose run
is in scripts/test.d/43-sdist.sh): zero-copy for a single-device array,
the host-copy cure for arrays sharded over several CPU devices, its refusal
under copy=False, deleted and donated arrays, the stream rule on CPU."""

import os

import peers  # missing peers: skip here, fail in the peer run
import pytest

# Several CPU devices, so that a sharded array is real here; only effective
# before jax is first imported (43-sdist.sh sets it in the environment).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
except ImportError as e:
    peers.missing(e, "JAX")

import dlbridge



def sharded(x):
    devices = jax.devices()
    if len(devices) < 2:
        pytest.skip("skipped: one JAX device only (XLA_FLAGS was set after jax was imported)")
    mesh = Mesh(np.array(devices), ("x",))
    return jax.device_put(x, NamedSharding(mesh, PartitionSpec("x")))


def test_a_single_device_array_is_zero_copy_and_read_only():
    x = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.unsafe_buffer_pointer() and not t.copied
    assert t.readonly  # JAX marks its exports READ_ONLY: its arrays are immutable
    assert np.from_dlpack(t).tolist() == np.asarray(x).tolist()


def test_a_sharded_array_is_refused_by_jax_and_copied_by_dlbridge():
    x = sharded(jnp.arange(32.0, dtype=jnp.float32).reshape(8, 4))
    with pytest.raises(BufferError):
        x.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=True)  # JAX refuses even this
    t = dlbridge.from_dlpack(x)
    assert t.copied and t.device == (1, 0) and t.shape == (8, 4) and t.dtype == "float32"
    assert np.from_dlpack(t).tolist() == np.asarray(x).tolist()
    assert not t.readonly  # a copy is the consumer's own


@pytest.mark.parametrize("dtype", ["bfloat16", "int8", "bool", "complex64", "float16"])
def test_the_cure_keeps_every_dtype(dtype):
    x = sharded(jnp.arange(8).astype(dtype))
    t = dlbridge.from_dlpack(x)
    assert t.copied and t.dtype == dtype and t.shape == (8,)
    back = jnp.from_dlpack(t)
    assert back.dtype == x.dtype and np.asarray(back).tolist() == np.asarray(x).tolist()


def test_copy_false_forbids_the_cure():
    x = sharded(jnp.arange(8.0))
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(x, copy=False)
    text = str(info.value)
    assert text.startswith("DLB_ERR_NOT_ZERO_COPY: ArrayImpl.__dlpack__ raised BufferError: ")
    assert "Sharding over" in text and "copy was forbidden" in text
    assert isinstance(info.value.__cause__, BufferError)


def test_a_deleted_array_raises_deleted_with_jaxs_message():
    x = jnp.arange(4.0)
    x.delete()
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(x)
    e = info.value
    assert e.status_name == "DLB_ERR_DELETED" and "Array has been deleted" in e.message
    assert isinstance(e.__cause__, RuntimeError) and str(e.__cause__) in e.message


def test_a_donated_array_raises_deleted():
    f = jax.jit(lambda a: a + 1, donate_argnums=0)
    x = jnp.arange(4.0)
    y = f(x)
    assert x.is_deleted()
    with pytest.raises(dlbridge.Error, match="DLB_ERR_DELETED"):
        dlbridge.from_dlpack(x)
    with pytest.raises(dlbridge.Error, match="DLB_ERR_DELETED"):
        dlbridge.from_dlpack(x, copy=False)
    assert dlbridge.from_dlpack(y).shape == (4,)


def test_a_stream_for_cpu_memory_is_refused_before_jax_is_asked():
    # JAX itself fails such a call with an UNIMPLEMENTED runtime error.
    with pytest.raises(ValueError, match="has no streams"):
        dlbridge.from_dlpack(jnp.arange(3.0), stream=1)


def test_jax_speaks_the_versioned_protocol():
    x = jnp.arange(3.0)
    dlbridge.from_dlpack(x)
    assert not dlbridge._glue.is_legacy_producer(type(x))


def test_jax_consumes_dlbridge_tensors_and_cured_copies():
    a = np.arange(4, dtype=np.int32)
    y = jnp.from_dlpack(dlbridge.from_dlpack(a))
    assert np.asarray(y).tolist() == [0, 1, 2, 3]
    x = sharded(jnp.arange(8, dtype=jnp.int32))
    z = jnp.from_dlpack(dlbridge.from_dlpack(x))
    assert np.asarray(z).tolist() == list(range(8))
