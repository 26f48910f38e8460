"""dlbridge tensors through Dask distributed: the serializer dlbridge
registers (python/dlbridge/_pickle.py: the protocol-5 pickle with the
memory as a frame, also on the scheduler's protocol-4 connections) and a
LocalCluster of two worker processes on the loopback address."""

import subprocess
import sys

import numpy as np
import pytest
from distributed import Client, LocalCluster
from distributed.protocol import deserialize, serialize

import dlbridge


def address(frame):
    return np.frombuffer(memoryview(frame).cast("B"), np.uint8).ctypes.data


@pytest.mark.parametrize("context", [None, {"pickle-protocol": 4}])  # 4: what the scheduler's connections use
def test_serialize_gives_a_frame_over_the_tensors_own_memory(context):
    a = np.arange(1 << 18, dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    header, frames = serialize(t, context=context)
    assert header["serializer"] == "dask"
    assert len(frames) == 2 and len(frames[0]) < 200  # the pickle's header, then the elements
    assert memoryview(frames[1]).nbytes == a.nbytes and address(frames[1]) == t.data_ptr
    received = [bytes(frames[0]), bytearray(frames[1])]  # as another process reads them
    u = deserialize(header, received)
    assert u.data_ptr == address(received[1]) and not u.readonly
    assert np.array_equal(np.from_dlpack(u), a)
    del t, u, frames, received


def test_a_read_only_tensor_arrives_read_only():
    a = np.arange(16, dtype=np.int32)
    a.flags.writeable = False
    header, frames = serialize(dlbridge.from_dlpack(a))
    u = deserialize(header, [bytes(frames[0]), bytearray(frames[1])])
    assert u.readonly and np.from_dlpack(u).tolist() == list(range(16))
    del u


@pytest.mark.parametrize("first", ["dlbridge", "distributed.protocol"])
def test_the_serializer_is_registered_whichever_is_imported_first(first):
    second = "distributed.protocol" if first == "dlbridge" else "dlbridge"
    code = (
        "import sys\n"
        "import %s\n"
        "assert 'distributed' not in sys.modules or %r != 'dlbridge', 'import dlbridge imported Dask'\n"
        "import %s\n"
        "import dlbridge, dlbridge._pickle as p\n"
        "from distributed.protocol.serialize import dask_serialize\n"
        "assert dask_serialize.dispatch(dlbridge.Tensor) is p._dask_serialize\n" % (first, first, second)
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def scale(x, k):
    return dlbridge.from_dlpack(np.from_dlpack(x) * k)


def total(xs):
    return dlbridge.from_dlpack(sum(np.from_dlpack(x) for x in xs))


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, worker_dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def test_a_two_process_cluster_scatters_computes_on_and_gathers_tensors(client):
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in workers)
    parts = [dlbridge.from_dlpack(np.full((256, 256), i, dtype=np.float32)) for i in range(4)]
    futures = client.scatter(parts)  # spread over both workers
    scaled = [client.submit(scale, f, 3) for f in futures]
    result = client.submit(total, scaled).result()
    assert type(result) is dlbridge.Tensor and np.array_equal(np.from_dlpack(result), np.full((256, 256), 18.0))
    gathered = client.gather(scaled)
    assert [type(g) for g in gathered] == [dlbridge.Tensor] * 4
    assert [float(np.from_dlpack(g)[0, 0]) for g in gathered] == [0.0, 3.0, 6.0, 9.0]
    del parts, futures, scaled, result, gathered
