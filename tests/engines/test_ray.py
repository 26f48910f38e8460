"""dlbridge tensors through Ray on this machine: the object store, tasks,
actors, and a JAX array that JAX cannot export itself.

One local Ray (num_cpus=2, no dashboard) on the loopback address only:
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes Ray use 127.0.0.1 instead of the
machine's network address. XLA_FLAGS (two CPU devices) is set before jax
is imported, here or by scripts/test.d/48-engines.sh.
"""

import os

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import gc  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import ray  # noqa: E402

import dlbridge  # noqa: E402


def mapping_of(address):
    """The file of this process's memory mapping that holds `address`."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                return fields[5] if len(fields) > 5 else ""
    return None


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # The workers import this module (the remote functions' home) by name.
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 * 2**20, log_to_driver=False)
    assert ray.nodes()[0]["NodeManagerAddress"] == "127.0.0.1"
    yield
    ray.shutdown()


@ray.remote
def describe(x):
    """What a worker sees of a tensor: numpy's view of it and where it lies."""
    a = np.from_dlpack(x)
    return {
        "type": type(x).__name__,
        "zero_copy": a.ctypes.data == x.data_ptr,
        "readonly": x.readonly,
        "numpy_writeable": a.flags.writeable,
        "sum": float(a.sum(dtype=np.float64)),
        "mapping": mapping_of(x.data_ptr),
    }


@ray.remote
def doubled(x):
    return dlbridge.from_dlpack(np.from_dlpack(x) * 2)


@ray.remote
class Accumulator:
    def __init__(self, start):
        self.total = np.from_dlpack(start).copy()

    def add(self, x):
        self.total += np.from_dlpack(x)
        return dlbridge.from_dlpack(self.total)


def test_put_and_get_give_tensors_over_the_object_store():
    a = np.arange(1 << 18, dtype=np.float32)  # 1 MiB
    t = dlbridge.from_dlpack(a)
    ref = ray.put(t)
    first, second = ray.get(ref), ray.get(ref)
    assert type(first) is dlbridge.Tensor
    assert first.data_ptr == second.data_ptr != t.data_ptr  # one object, one address
    assert "plasma" in mapping_of(first.data_ptr)  # Ray's shared-memory store
    assert first.readonly and not np.from_dlpack(first).flags.writeable
    assert np.array_equal(np.from_dlpack(first), a)
    del ref, second
    gc.collect()
    assert np.from_dlpack(first)[-1] == a[-1]  # the tensor holds the store's buffer
    del first, t


def test_tasks_take_and_return_tensors():
    a = np.arange(1 << 16, dtype=np.float32)  # 256 KiB: stored, not inlined
    t = dlbridge.from_dlpack(a)
    seen = ray.get(describe.remote(t))
    assert seen["type"] == "Tensor" and seen["zero_copy"] and seen["readonly"]
    assert not seen["numpy_writeable"] and "plasma" in seen["mapping"]
    assert seen["sum"] == float(a.sum(dtype=np.float64))
    back = ray.get(doubled.remote(ray.put(t)))
    assert type(back) is dlbridge.Tensor and np.array_equal(np.from_dlpack(back), a * 2)
    small = ray.get(doubled.remote(dlbridge.from_dlpack(np.arange(4, dtype=np.int64))))  # inlined in the task
    assert np.from_dlpack(small).tolist() == [0, 2, 4, 6]
    del t, back, small


def test_an_actor_takes_and_returns_tensors():
    actor = Accumulator.remote(dlbridge.from_dlpack(np.ones(1000, dtype=np.float64)))
    ray.get(actor.add.remote(dlbridge.from_dlpack(np.arange(1000, dtype=np.float64))))
    total = ray.get(actor.add.remote(dlbridge.from_dlpack(np.full(1000, 2.0))))
    assert type(total) is dlbridge.Tensor and np.array_equal(np.from_dlpack(total), np.arange(1000) + 3.0)
    ray.kill(actor)
    del total


def test_a_sharded_jax_array_reaches_a_worker_as_a_tensor_numpy_imports_without_a_copy():
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices("cpu")
    assert len(devices) == 2, "XLA_FLAGS must give two CPU devices before jax is imported"
    mesh = Mesh(np.array(devices), ("x",))
    x = jax.device_put(np.arange(65536, dtype=np.float32).reshape(256, 256), NamedSharding(mesh, PartitionSpec("x")))
    with pytest.raises(BufferError) as refused:
        x.__dlpack__()  # JAX's own refusal: the array is on two devices
    assert "singular device" in str(refused.value)
    t = dlbridge.from_dlpack(x)  # the host copy the library makes instead (256 KiB: Ray stores it)
    seen = ray.get(describe.remote(t))
    assert seen["zero_copy"] and seen["readonly"] and "plasma" in seen["mapping"]
    assert seen["sum"] == float(np.arange(65536, dtype=np.float64).sum())
    del t, x
