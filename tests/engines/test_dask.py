"""dlbridge tensors through Dask distributed: its serializer (pickle protocol
5, no serializer of dlbridge's own) and a LocalCluster of two worker
processes on the loopback address."""

import numpy as np
import pytest
from distributed import Client, LocalCluster
from distributed.protocol import deserialize, serialize

import dlbridge


def address(frame):
    return np.frombuffer(memoryview(frame).cast("B"), np.uint8).ctypes.data


def test_serialize_gives_a_frame_over_the_tensors_own_memory():
    a = np.arange(1 << 18, dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    header, frames = serialize(t)
    assert header["serializer"] == "pickle"
    assert len(frames) == 2 and len(frames[0]) < 200  # the pickle's header, then the elements
    assert memoryview(frames[1]).nbytes == a.nbytes and address(frames[1]) == t.data_ptr
    received = [bytes(frames[0]), bytearray(frames[1])]  # as another process reads them
    u = deserialize(header, received)
    assert u.data_ptr == address(received[1]) and not u.readonly
    assert np.array_equal(np.from_dlpack(u), a)
    del t, u, frames, received


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
