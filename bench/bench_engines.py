#!/usr/bin/env python3
"""A float32 dlbridge tensor through Ray and Dask distributed beside the
numpy array it views, in one run, as ratios; and, at 128 MiB, the in-band
pickling a dlbridge tensor got before protocol 5 (its elements copied into
the pickle).

    PYTHONPATH=build/bench/python RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \\
      "$(scripts/engines-env | tail -n 1)/bin/python" bench/bench_engines.py [--rounds R]

One local Ray (ray.init(num_cpus=2), a 1 GiB object store) and one Dask
LocalCluster of two single-threaded worker processes, both on 127.0.0.1,
serve the whole run. For each size (4 KiB, 1 MiB, 128 MiB) and each way:

  ray put+get   ref = ray.put(x); y = ray.get(ref)
  ray task      y = ray.get(identity.remote(x)): x into the task (stored, or
                inlined under Ray's 100 KiB limit), returned, fetched
  dask          y = client.submit(identity, client.scatter(x, hash=False),
                pure=False).result(): to a worker and back

x is the numpy array, the dlbridge tensor over the same memory
(dlbridge.from_dlpack), and at 128 MiB an object whose reduction is the one
a dlbridge tensor had before protocol 5 (tensor_payload: the elements as
bytes in the pickle). After a warm-up (four passes at 128 MiB, which touch
all of Ray's store), a round times each of them once per repetition (40,
20, 5 repetitions by size; numpy and dlbridge alternating which goes first)
and keeps each one's median; a figure is the median over the rounds, with
the spread (lowest, highest round) beside it, in milliseconds. The ratio is
dlbridge's median over numpy's (below 1: dlbridge faster); the in-band
line gives in-band over dlbridge's (how many times slower).
"""

import argparse
import gc
import json
import os
import statistics
import sys
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on 127.0.0.1 only

import numpy as np  # noqa: E402
import ray  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import dlbridge  # noqa: E402
from dlbridge import _glue  # noqa: E402

SIZES = [("4 KiB", 4 << 10, 40), ("1 MiB", 1 << 20, 20), ("128 MiB", 128 << 20, 5)]


class InBand:
    """A dlbridge tensor pickled as it was before protocol 5: the elements
    copied into the pickle (tensor_payload), a new tensor made of them."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __reduce__(self):
        return _glue.tensor_from_payload, _glue.tensor_payload(self.tensor)


def identity(x):
    return x


def ways(client):
    remote_identity = ray.remote(identity)

    def put_get(x):
        ref = ray.put(x)
        y = ray.get(ref)
        del ref
        return y

    def task(x):
        return ray.get(remote_identity.remote(x))

    def dask(x):
        return client.submit(identity, client.scatter(x, hash=False), pure=False).result()

    return [("ray put+get", put_get), ("ray task", task), ("dask", dask)]


def time_once(fn, x):
    start = time.perf_counter()
    y = fn(x)
    elapsed = time.perf_counter() - start
    assert y is not None
    del y
    return elapsed * 1e3


def measure(fn, subjects, reps, rounds):
    """{name: [median of each round, ms]} for the subjects, taking turns."""
    per_round = {name: [] for name, _ in subjects}
    for r in range(rounds):
        times = {name: [] for name, _ in subjects}
        for rep in range(reps):
            order = subjects if (r + rep) % 2 == 0 else subjects[::-1]
            for name, x in order:
                times[name].append(time_once(fn, x))
        gc.collect()
        for name in times:
            per_round[name].append(statistics.median(times[name]))
    return per_round


def row(label, values):
    med = statistics.median(values)
    return "%-34s %10.3f  (%.3f .. %.3f)" % (label, med, min(values), max(values)), med


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the figures to this file as well")
    args = parser.parse_args()

    print("load before: %s" % os.getloadavg().__repr__())
    print("python %s, numpy %s, ray %s, dlbridge %s" % (sys.version.split()[0], np.__version__, ray.__version__,
                                                       dlbridge.__version__))
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=1 << 30, log_to_driver=False)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, worker_dashboard_address=None)
    client = Client(cluster)
    results = {}
    try:
        for way, fn in ways(client):
            for label, nbytes, reps in SIZES:
                a = np.random.default_rng(0).random(nbytes // 4, dtype=np.float32)
                t = dlbridge.from_dlpack(a)
                subjects = [("numpy", a), ("dlbridge", t)]
                if nbytes == 128 << 20:
                    subjects.append(("in-band (before)", InBand(t)))
                # Warm-up: workers started, functions shipped, and at 128 MiB
                # every page of Ray's 1 GiB store touched once (a fresh page
                # costs a fault the first time an object lands on it).
                for _ in range(4 if nbytes == 128 << 20 else 2):
                    for _, x in subjects:
                        time_once(fn, x)
                figures = measure(fn, subjects, reps, args.rounds)
                print("\n%s, %s (ms, median of %d rounds of %d; lowest .. highest round)"
                      % (way, label, args.rounds, reps))
                medians = {}
                for name, values in figures.items():
                    line, medians[name] = row(name, values)
                    print(line)
                print("%-34s %10.3f" % ("ratio dlbridge / numpy", medians["dlbridge"] / medians["numpy"]))
                if "in-band (before)" in medians:
                    print("%-34s %10.1f" % ("ratio in-band / dlbridge", medians["in-band (before)"] / medians["dlbridge"]))
                results["%s %s" % (way, label)] = figures
                del a, t, subjects
                gc.collect()
    finally:
        client.close()
        cluster.close()
        ray.shutdown()
    print("\nload after: %s" % os.getloadavg().__repr__())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
