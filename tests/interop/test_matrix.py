"""The interop matrix against its expectations (tests/interop/expectations.py).

Runs tests/interop/matrix.py once for the session (DLBRIDGE_INTEROP_JSON=FILE
reads a result written by an earlier run instead) and checks every pair:
each failed exchange has a named reason in the table, each exchange the
table names still fails, each copy by a consumer that promises zero-copy
has a named reason, every pair of CPU frameworks works through dlbridge
for every case its failure reasons do not exclude, and every exchange that
works (zero-copy or a copy) passed the value oracle's check of its values
and the write and deleter checks (the matrix reports a failed check as a
failure, so it lands in the first test).
"""

import importlib.util
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import expectations  # noqa: E402
import matrix  # noqa: E402

# framework -> the module whose absence fails its pairs: every framework of
# the matrix is pinned in python/requirements/peers.txt, so one that is
# missing is a broken environment, not a skip.
_MODULES = {"numpy": "numpy", "jax": "jax", "tvm_ffi": "tvm_ffi", "tensorflow": "tensorflow",
            "paddle": "paddle", "pyarrow": "pyarrow", "array_api_strict": "array_api_strict",
            "dlbridge": "dlbridge", "torch": "torch", "mlx": "mlx", "onnxruntime": "onnxruntime"}


def _absent(fw):
    name = _MODULES[fw]
    if importlib.util.find_spec(name) is None or (
            fw != "numpy" and importlib.util.find_spec("ml_dtypes") is None):
        return True
    if fw == "torch":  # Debian's torch 1.13 is not the peer
        import importlib.metadata as md

        return int(md.version("torch").split(".")[0]) < 2
    return False


MISSING = sorted({matrix.framework(p) for p in matrix.PRODUCERS + matrix.CONSUMERS
                  if _absent(matrix.framework(p))})
PAIRS = matrix.all_pairs()


def _missing_reason(producer, consumer):
    missing = [fw for fw in (matrix.framework(producer), matrix.framework(consumer)) if fw in MISSING]
    if missing:
        return ("%s not importable by %s, although python/requirements/peers.txt pins it "
                "(run with scripts/peers-env's interpreter)" % (" and ".join(sorted(set(missing))),
                                                                sys.executable))
    return None


@pytest.fixture(scope="session")
def doc():
    cached = os.environ.get("DLBRIDGE_INTEROP_JSON")
    if cached and os.path.exists(cached):
        with open(cached) as f:
            return json.load(f)
    pairs = [p for p in PAIRS if _missing_reason(*p) is None]
    if not pairs:
        pytest.fail(_missing_reason(*PAIRS[0]))
    result = matrix.run_matrix(pairs=pairs)
    if cached:
        with open(cached, "w") as f:
            json.dump(result, f, indent=1)
    return result


_classified = {}


def _classify(doc):
    """expectations.classify(doc), once for the session's document."""
    if id(doc) not in _classified:
        _classified[id(doc)] = expectations.classify(doc)
    return _classified[id(doc)]


def _rows(doc, producer, consumer):
    return [row for row in _classify(doc) if row[0] == producer and row[1] == consumer]


def _describe(row):
    producer, consumer, case, path, status, reason, _expected = row
    return "%s -> %s %s (%s): %s%s" % (producer, consumer, case, path, status,
                                       " [%s]" % reason if reason else "")


@pytest.mark.parametrize("producer,consumer", PAIRS, ids=["%s->%s" % p for p in PAIRS])
def test_pair(doc, producer, consumer):
    """Every exchange of the pair is as the table expects; an exchange that
    fails without a named reason, works although a reason says it fails,
    copies where the consumer promises zero-copy and no copy reason says
    why, or shares memory where a copy reason says it copies, fails the
    test."""
    missing = _missing_reason(producer, consumer)
    if missing:
        pytest.fail(missing)
    rows = _rows(doc, producer, consumer)
    assert len(rows) == 2 * len(doc["cases"]), "the matrix has no full result for this pair"
    by_key = {(r["producer"], r["consumer"], r["case"]): r for r in doc["results"]}
    problems = []
    pending = []
    for row in rows:
        if row[6]:
            if row[5] in expectations.PENDING:
                pending.append(row)
            continue
        _p, _c, case, path, status, _reason, _ = row
        if status in expectations.WORKS:
            named = [r[0] for r in expectations.rules_for(producer, consumer, case, path)]
            copies = [r[0] for r in expectations.copy_rules_for(producer, consumer, case, path)]
            if any(n in expectations.PENDING for n in named):
                problems.append("%s: works now; the fix is in, remove %s from "
                                "expectations.PENDING" % (_describe(row), named))
            elif named:
                problems.append("%s: works, but expectations name %s: remove the rule"
                                % (_describe(row), named))
            elif status == "copy":
                problems.append("%s: a copy, although %s promises zero-copy and no copy rule "
                                "says why" % (_describe(row), consumer))
            else:
                problems.append("%s: shares the producer's memory, but expectations name %s: "
                                "remove the copy rule" % (_describe(row), copies))
        else:
            o = by_key[(producer, consumer, case)][path]
            problems.append("%s: %s: %s" % (_describe(row), o.get("error"), o.get("reason")))
    assert not problems, "unexpected outcomes:\n  " + "\n  ".join(problems)
    if pending:
        pytest.xfail("%d exchanges wait on a fix in dlbridge: %s"
                     % (len(pending), ", ".join(sorted({r[5] for r in pending}))))


def test_every_reason_is_seen(doc):
    """No reason in the table is stale: each still explains some failure or
    copy."""
    assert not MISSING, "not importable: %s" % ", ".join(MISSING)
    seen = {row[5] for row in _classify(doc) if row[5]}
    assert set(expectations.REASONS) - seen == set()
    assert set(expectations.COPY_REASONS) - seen == set()
    assert set(expectations.PENDING) <= set(expectations.REASONS)


def test_through_dlbridge_only_named_consumer_or_producer_limits(doc):
    """The goal: through dlbridge every pair works (zero-copy or a correct
    copy) except where a reason says why dlbridge cannot work around the
    producer or consumer."""
    for row in _classify(doc):
        producer, consumer, case, path, status, reason, _ = row
        if path == "dlbridge" and status in ("fail", "crash"):
            assert reason is not None, _describe(row)
            assert expectations.REASONS[reason][3] is not None, (
                "%s: the reason says dlbridge cures it" % _describe(row))


def test_no_crashes(doc):
    crashes = [r for r in doc["results"]
               if "crash" in (r["direct"]["status"], r["dlbridge"]["status"])]
    assert not crashes, crashes[:3]


def test_capsule_apis_are_the_installed_ones():
    """The capsule-only APIs the matrix uses exist in the installed versions."""
    assert "tensorflow" not in MISSING and "paddle" not in MISSING, MISSING
    import subprocess

    code = ("import tensorflow as tf; t = tf.constant([1.0]); "
            "c = tf.experimental.dlpack.to_dlpack(t); assert type(c).__name__ == 'PyCapsule'; "
            "tf.experimental.dlpack.from_dlpack(c)")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    if "paddle" not in MISSING:
        code = ("import paddle; t = paddle.to_tensor([1.0]); "
                "c = paddle.utils.dlpack.to_dlpack(t); assert type(c).__name__ == 'PyCapsule'; "
                "paddle.utils.dlpack.from_dlpack(c)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr[-2000:]


# --- torch 2, mlx, onnxruntime (issue 34) ----------------------------------


def test_torch2_through_dlbridge():
    """torch 2 (the peer environment's) tensors go through dlbridge to numpy
    without a copy and back, the dlbridge exports all released."""
    assert "torch" not in MISSING, "torch 2 is pinned in python/requirements/peers.txt"
    import numpy as np
    import torch

    import dlbridge

    start = dlbridge.live_exports()
    x = torch.arange(12.0).reshape(3, 4)[:, 1:]
    mid = dlbridge.from_dlpack(x)
    assert mid.data_ptr == x.data_ptr()
    a = np.from_dlpack(mid)
    assert a.__array_interface__["data"][0] == x.data_ptr()
    x[0, 0] = 100.0
    assert a[0, 0] == 100.0
    back = torch.from_dlpack(dlbridge.from_dlpack(a))
    assert back.data_ptr() == x.data_ptr() and torch.equal(back, x)
    del mid, a, back
    assert dlbridge.live_exports() == start


def test_the_new_peers_dlpack_apis_are_the_installed_ones():
    """The entry points the matrix uses for torch 2, mlx and onnxruntime."""
    assert not {"torch", "mlx", "onnxruntime"} & set(MISSING), MISSING
    import mlx.core as mx
    import numpy as np
    import onnxruntime as ort
    import torch

    assert type(torch.utils.dlpack.to_dlpack(torch.zeros(2))).__name__ == "PyCapsule"
    assert mx.from_dlpack(np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
    a = np.arange(3.0)
    assert ort.OrtValue.from_dlpack(a).data_ptr() == a.ctypes.data
