"""Tensors to another process and back into values there: pickle protocol 5
with out-of-band buffers and in band, and multiprocessing's pickler (the
memory shared), each read in the child from its raw memory (oracle.py
--child) and compared with the producer's values."""

import pytest

import frameworks
import oracle


def _tensors():
    """(case, expected, dlbridge tensor) for numpy's values in every dtype and
    layout, and the hand-made producer's compact tensors (sub-byte ones
    packed and padded), each taken in by dlbridge."""
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
        except Exception:  # noqa: BLE001  (those routes are the other files')
            continue
        if oracle.compare(expected, oracle.read_tensor(t)) is None:
            out.append((case, expected, t))
    return out


def _problems():
    items = _tensors()
    assert len(items) > 100
    results = oracle.values_in_child([t for _c, _e, t in items])
    assert len(results) == 3 * len(items)
    problems = []
    for i, (case, expected, t) in enumerate(items):
        must = oracle.copyable(t)
        for how, got in results[3 * i:3 * i + 3]:
            route = "child: " + how
            if isinstance(got, str):
                oracle.TALLY.add(route, "refused")
                if must:
                    problems.append("%s, %s: refused where it must work: %s" % (case, route, got[:300]))
                continue
            diff = oracle.compare(expected, got)
            oracle.TALLY.add(route, "wrong" if diff else "copied")
            if diff:
                problems.append("%s, %s: WRONG: %s" % (case, route, diff))
    return problems


def test_pickled_tensors_read_in_a_child_process():
    problems = _problems()
    if problems:
        pytest.fail("%d problems:\n  %s" % (len(problems), "\n  ".join(problems)), pytrace=False)
