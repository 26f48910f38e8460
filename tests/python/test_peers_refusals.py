"""The refusal rule against the real producers of the peer environment
(scripts/peers-env; run by scripts/test.d/43-sdist.sh): JAX 0.12's
JaxRuntimeError for string and int2/int4 arrays, TensorFlow's
InvalidArgumentError for float8, pyarrow's ArrowTypeError for booleans,
numpy's BufferError for StringDType and object arrays, JAX PRNG keys
without __dlpack__. Each refusal is cured into a host copy where the host
copy is describable, else named by dlbridge with the producer's words."""

import ctypes
import os

import peers  # missing peers: skip here, fail in the peer run
import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

try:
    import jax
    import jax.numpy as jnp
    import ml_dtypes  # noqa: F401  (the peer environment has it)
    import numpy as np
except ImportError as e:
    peers.missing(e, "JAX")

import dlbridge  # noqa: E402

PJRT = "This operation is implemented for a PjRt-compatible backend only."



def raw(t):
    """The tensor's bytes (C order: the cure's copies are compact)."""
    return ctypes.string_at(t.data_ptr, t.nbytes)


def test_a_jax_string_array_is_named_with_jaxs_words():
    s = jax.device_put(np.array(["ab", "cd"], dtype=np.dtypes.StringDType()), jax.devices()[0])
    with pytest.raises(jax.errors.JaxRuntimeError, match="^" + PJRT + "$"):
        s.__dlpack__(max_version=(1, 3))
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(s)
    e = info.value
    assert e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert e.message == ("ArrayImpl.__dlpack__ raised jax.errors.JaxRuntimeError: " + PJRT + "; dlbridge cannot "
                         "copy it to the host either: its dtype StringDType128 has no DLPack equivalent")
    assert isinstance(e.__cause__, jax.errors.JaxRuntimeError) and str(e.__cause__) == PJRT
    with pytest.raises(BufferError, match="^DLB_ERR_UNSUPPORTED_DTYPE: ArrayImpl.__dlpack__ raised "
                       "jax.errors.JaxRuntimeError: " + PJRT):
        dlbridge.from_dlpack(s, copy=False)


@pytest.mark.parametrize("name,xla,values", [
    ("int4", "S4", [1, -2, 7, -8, 0]),
    ("uint4", "U4", [1, 2, 15, 0, 9]),
    ("int2", "S2", [1, -2, -1, 0, 1]),
    ("uint2", "U2", [1, 2, 3, 0, 3]),
])
def test_sub_byte_jax_arrays_are_copied_one_element_per_byte(name, xla, values):
    x = jnp.array(values, getattr(jnp, name))
    with pytest.raises(jax.errors.JaxRuntimeError, match="UNIMPLEMENTED: XLA type %s has no DLPack equivalent" % xla):
        x.__dlpack__(max_version=(1, 3))
    t = dlbridge.from_dlpack(x)
    assert t.copied and t.dtype == name and t.shape == (5,) and t.nbytes == 5
    assert raw(t) == np.asarray(x).view(np.uint8).tobytes()  # JAX's own host bytes, one per element
    assert np.asarray(x).astype(np.int8).tolist() == values
    # A versioned export says the elements are padded; a legacy one cannot, and is refused.
    with pytest.raises(BufferError, match="^DLB_ERR_UNSUPPORTED_DTYPE: the buffer's %d-bit elements are padded"
                       % (4 if "4" in name else 2)):
        t.__dlpack__()
    again = dlbridge.from_dlpack(t)
    assert again.data_ptr == t.data_ptr and again.dtype == name and again.nbytes == 5
    with pytest.raises(BufferError, match="DLB_ERR_NOT_ZERO_COPY: ArrayImpl.__dlpack__ raised "
                       "jax.errors.JaxRuntimeError: UNIMPLEMENTED: XLA type %s" % xla):
        dlbridge.from_dlpack(x, copy=False)


def test_a_jax_int4_matrix_keeps_its_shape():
    x = jnp.arange(-8, 4, dtype=jnp.int4).reshape(3, 4).T
    t = dlbridge.from_dlpack(x)
    assert t.shape == (4, 3) and t.strides == (3, 1)
    assert raw(t) == np.ascontiguousarray(np.asarray(x)).view(np.uint8).tobytes()


def test_a_prng_key_array_is_named():
    k = jax.random.key(0)
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(k)
    assert info.value.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert info.value.message.startswith("PRNGKeyArray has no __dlpack__, and its dtype key<fry> has no DLPack "
                                         "equivalent; its __array__() raised TypeError: JAX array with PRNGKey "
                                         "dtype cannot be converted to a NumPy array.")


def test_a_stream_on_cpu_is_refused_before_jax_is_asked():
    with pytest.raises(jax.errors.JaxRuntimeError, match="WaitUntilBufferReadyOnStream is only implemented for GPU"):
        jnp.ones(3).__dlpack__(stream=1)
    with pytest.raises(ValueError, match="stream"):
        dlbridge.from_dlpack(jnp.ones(3), stream=1)


@pytest.mark.parametrize("array,dtype", [
    (np.array(["ab", "c"], dtype=np.dtypes.StringDType()), "StringDType128"),
    (np.array([1, "a"], dtype=object), "object"),
])
def test_numpy_arrays_dlpack_cannot_describe_are_named(array, dtype):
    with pytest.raises(dlbridge.Error) as info:
        dlbridge.from_dlpack(array)
    e = info.value
    assert e.status_name == "DLB_ERR_UNSUPPORTED_DTYPE"
    assert e.message.startswith("ndarray.__dlpack__ raised BufferError: DLPack only supports")
    assert e.message.endswith("its dtype %s has no DLPack equivalent" % dtype)


def test_pyarrow_booleans_are_copied_one_byte_each():
    import pyarrow as pa

    b = pa.array([True, False, True, True])
    with pytest.raises(pa.ArrowTypeError, match="Bit-packed boolean data type not supported by DLPack"):
        b.__dlpack__()
    t = dlbridge.from_dlpack(b)
    assert t.copied and t.dtype == "bool" and t.shape == (4,)
    assert np.from_dlpack(t).tolist() == [True, False, True, True]
    with pytest.raises(BufferError, match="BooleanArray.__dlpack__ raised pyarrow.lib.ArrowTypeError: Bit-packed"):
        dlbridge.from_dlpack(b, copy=False)


def test_tensorflow_float8_is_copied_through_numpy():
    import subprocess
    import sys

    # TensorFlow in a process of its own (it is heavy, and the matrix keeps it apart too).
    code = r"""
import ctypes, numpy as np, ml_dtypes, tensorflow as tf, dlbridge
x = tf.constant(np.array([[1, 2], [3, -4]], ml_dtypes.float8_e4m3fn))
try:
    x.__dlpack__()
except Exception as e:
    print(type(e).__module__, type(e).__name__, e)
start = dlbridge.live_exports()
t = dlbridge.from_dlpack(x)
assert t.copied and t.dtype == "float8_e4m3fn" and t.shape == (2, 2), t
assert ctypes.string_at(t.data_ptr, 4) == x.numpy().view(np.uint8).tobytes()
assert np.from_dlpack(t).astype(np.float32).tolist() == [[1, 2], [3, -4]]
try:
    dlbridge.from_dlpack(x, copy=False)
except BufferError as e:
    print(e)
del t
assert dlbridge.live_exports() == start
print("ok")
"""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == ("tensorflow.python.framework.errors_impl InvalidArgumentError "
                        "DT_FLOAT8_E4M3FN is not supported by dlpack")
    assert lines[1].startswith("DLB_ERR_NOT_ZERO_COPY: EagerTensor.__dlpack__ raised "
                               "tensorflow.python.framework.errors_impl.InvalidArgumentError: DT_FLOAT8_E4M3FN")
    assert lines[-1] == "ok"
