"""Helpers for other projects' test suites.

``assert_conformant(obj)`` is :func:`dlbridge.check` as a test assertion::

    from dlbridge.testing import assert_conformant

    def test_dlpack_export():
        assert_conformant(mylib.ones((3, 4)), allow=("stream.cpu",))
"""

import fnmatch
from typing import TYPE_CHECKING, Any, Iterable, Union

if TYPE_CHECKING:
    from .check._report import Report

__all__ = ["assert_conformant"]


def assert_conformant(obj: Any, allow: Union[str, Iterable[str]] = (), **kwargs: Any) -> "Report":
    """Checks `obj` with :func:`dlbridge.check` and raises AssertionError
    listing every failed rule (id and detail) not in `allow`.

    allow: rule ids or shell-style patterns ("lifetime.*") whose failures
    are tolerated, for known deviations; a pattern that matches no rule is a
    ValueError, so that a misspelt id cannot hide a failure. Other keyword
    arguments go to :func:`dlbridge.check` (isolation, timeout, label).
    Returns the report.
    """
    from .check import RULES, check

    patterns = (allow,) if isinstance(allow, str) else tuple(allow)
    for pattern in patterns:
        if not fnmatch.filter(RULES, pattern):
            raise ValueError("allow=%r: %r matches no rule of dlbridge.check (rules: %s)"
                             % (patterns, pattern, ", ".join(RULES)))
    report = check(obj, **kwargs)
    failures = [f for f in report.failures
                if not any(fnmatch.fnmatchcase(f.rule, p) for p in patterns)]
    if failures:
        lines = ["%s is not DLPack-conformant: %d rule(s) failed (isolation: %s)"
                 % (report.subject, len(failures), report.isolation)]
        lines += ["  %s: %s" % (f.rule, f.detail) for f in failures]
        raise AssertionError("\n".join(lines))
    return report
