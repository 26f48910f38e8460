"""Tensors through real multiprocessing Queues and Pools, both ways, with
every start method this machine has: numpy's values in every dtype and
layout and the hand-made producer's compact tensors (sub-byte ones packed
and padded), each also grown past 64 KiB so that it travels as a memory
file (a ticket) and not as its bytes. The child reads each tensor from its
raw memory and sends the values back; it also makes tensors of them and
sends those, which the parent reads. A Queue item is a list of tensors
(each pickled by multiprocessing's reducer), a pool's task a chunk of them. Every wait is bounded: a dropped item
fails the test instead of hanging it."""

import multiprocessing as mp

import numpy as np
import pytest

import frameworks
import oracle

TIMEOUT = 120  # seconds for one batch, both ways
BATCH = 40  # tensors a Queue item (a list) or a pool's task chunk carries


def _tensors():
    """(case name, expected Values, dlbridge tensor), compact ones only grown
    past 64 KiB as well."""
    import dlbridge

    out = []
    sources = [(c, frameworks.ALL["numpy"]) for c in frameworks.consumer_cases()]
    sources += [(c, frameworks.ALL["ctypes"]) for c in frameworks.hand_cases()
                if c.layout.split(" padded")[0] in ("C", "0-d", "zero-size", "byte_offset 3")]
    for case, fw in sources:
        try:
            x = fw.build(case)
            expected = fw.own(x)
            t = dlbridge.from_dlpack(x)
        except Exception:  # noqa: BLE001  (the other files' routes)
            continue
        if oracle.compare(expected, oracle.read_tensor(t)) is not None:
            continue
        out.append((str(case), expected, t))
        if case.layout == "C" and oracle.copyable(t):
            big = _grown(expected, oracle.is_padded(t))
            if big is not None:
                out.append((str(case) + " > 64 KiB", big[0], big[1]))
    return out


def _grown(expected, padded):
    """The same dtype, 70,000 elements or more (past 64 KiB in any width), as
    a hand-made producer's tensor taken in by dlbridge."""
    import dlbridge

    n = max(1, len(expected.data))
    reps = 70000 // max(1, np.prod(expected.shape) if expected.shape else 1) + 1
    data = expected.data * reps
    count = (np.prod(expected.shape) if expected.shape else 1) * reps
    if n == 0 or count == 0:
        return None
    values = oracle.Values(expected.dtype, (int(count),), data)
    h = oracle.HandMade(values, padded=padded)
    t = dlbridge.from_dlpack(h)
    return h.values, t


def _run(method, items, how):
    ctx = mp.get_context(method)
    tensors = [t for _n, _e, t in items]
    problems = []
    if how == "queue":
        to_child, from_child = ctx.Queue(), ctx.Queue()
        batches = [tensors[i:i + BATCH] for i in range(0, len(tensors), BATCH)]
        child = ctx.Process(target=oracle.queue_child, args=(to_child, from_child, len(batches)))
        child.start()
        try:
            for batch in batches:
                to_child.put(batch)
            seen = from_child.get(timeout=TIMEOUT)
            back = [t for _ in batches for t in from_child.get(timeout=TIMEOUT)]
        finally:
            child.join(timeout=TIMEOUT)
            if child.is_alive():
                child.kill()
                problems.append("the child did not end (killed)")
        if child.exitcode not in (0, None):
            problems.append("the child exited with %s" % child.exitcode)
    else:
        with ctx.Pool(2) as pool:
            seen = pool.map_async(oracle.values_of_tensor, tensors, chunksize=BATCH).get(timeout=TIMEOUT)
            back = pool.map_async(oracle.tensor_of_values, seen, chunksize=BATCH).get(timeout=TIMEOUT)
    routes = ("%s (%s) to a child" % (how, method), "%s (%s) from a child" % (how, method))
    for (name, expected, _t), got, returned in zip(items, seen, back):
        for route, result in ((routes[0], got), (routes[1], returned)):
            if isinstance(result, str):
                oracle.TALLY.add(route, "refused")
                problems.append("%s, %s: refused: %s" % (name, route, result[:300]))
                continue
            try:
                value = oracle.Values(*result) if isinstance(result, tuple) else oracle.read_tensor(result)
            except Exception as e:  # noqa: BLE001  (an Unreceived raises the library's error)
                oracle.TALLY.add(route, "refused")
                problems.append("%s, %s: cannot be read: %s: %s" % (name, route, type(e).__name__, e))
                continue
            diff = oracle.compare(expected, value)
            oracle.TALLY.add(route, "wrong" if diff else "copied")
            if diff:
                problems.append("%s, %s: WRONG: %s" % (name, route, diff))
    return problems


@pytest.mark.parametrize("how", ["queue", "pool"])
@pytest.mark.parametrize("method", [m for m in ("fork", "spawn") if m in mp.get_all_start_methods()])
def test_tensors_cross_real_queues_and_pools_both_ways(method, how):
    items = _tensors()
    assert len(items) > 100
    assert any(n.endswith("> 64 KiB") for n, _e, _t in items)
    problems = _run(method, items, how)
    if problems:
        pytest.fail("%d problems:\n  %s" % (len(problems), "\n  ".join(problems[:60])), pytrace=False)
