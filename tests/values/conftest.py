"""The value oracle's session: every test leaves no export alive, and the
outcomes of every route are counted (oracle.TALLY) and written to the file
named by DLBRIDGE_VALUES_COUNTS (JSON), which 47-values.sh sums up."""

import gc
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oracle  # noqa: E402


@pytest.fixture(autouse=True)
def no_leaked_exports():
    import dlbridge

    start = dlbridge.live_exports()
    yield
    if dlbridge.live_exports() != start:
        gc.collect()  # only when reference counting alone did not free everything
    assert dlbridge.live_exports() == start, "exports leaked by the test"
    assert oracle.HandMade.live == 0, "a hand-made tensor's deleter did not run (%d)" % oracle.HandMade.live


def _summary():
    t = oracle.TALLY.totals()
    checked = sum(n for k, n in t.items() if k != "n/a")
    return checked, t


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("DLBRIDGE_VALUES_COUNTS")
    checked, t = _summary()
    if path:
        routes = sorted({r for (r, _o) in oracle.TALLY.counts})
        with open(path, "w") as f:
            json.dump({"checked": checked, "outcomes": dict(t), "routes": len(routes),
                       "by_route": {"%s|%s" % k: n for k, n in sorted(oracle.TALLY.counts.items())},
                       "errors": {"%s|%s" % k: n for k, n in sorted(oracle.TALLY.errors.items())}}, f, indent=1)


def pytest_terminal_summary(terminalreporter):
    checked, t = _summary()
    terminalreporter.write_line(
        "value oracle: %d route x case checks: zero-copy %d, copied %d, refused %d, wrong %d, peer faults %d"
        % (checked, t["zero-copy"], t["copied"], t["refused"], t["wrong"], t["peer-fault"]))
