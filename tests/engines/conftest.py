"""Shared fixtures of the engine tests (scripts/test.d/48-engines.sh runs them
with the engine environment, scripts/engines-env): every test leaves the
library's export count where it found it."""

import gc

import pytest

import dlbridge

try:
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    # The same examples every run (derandomize), no database left behind.
    settings.register_profile("ci", max_examples=300, derandomize=True, deadline=None, database=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def no_leaked_exports():
    gc.collect()
    start = dlbridge.live_exports()
    yield
    gc.collect()
    assert dlbridge.live_exports() == start
