"""DLPack conformance checker for any producer of the Python protocol.

``dlbridge.check(obj)`` drives ``obj.__dlpack__`` and ``obj.__dlpack_device__``
the way consumers do and returns a :class:`Report`: one finding per rule
(``.rule``, ``.status`` "pass" / "fail" / "skip", ``.detail``), ``.ok``,
``.to_json()``, ``.to_markdown()`` and ``str(report)`` (a table). The tensor
rules are those of libdlbridge's ``dlb_validate``; every deleter the checker
receives is interposed, so a deleter run twice or never is reported, not
suffered. Each probe runs in a forked child where the platform has fork, so
a producer that crashes is reported as a crashed probe.

From a shell: ``python -m dlbridge.check "numpy:arange(12.0).reshape(3, 4)"``.
"""

import sys
import types
from typing import TYPE_CHECKING, Any, List, Optional

if TYPE_CHECKING:  # at run time the names load on first use (__getattr__)
    from ._report import Finding, Report

__all__ = ["check", "Report", "Finding", "RULES", "main"]


def __getattr__(name: str) -> Any:
    """RULES (rule id -> what the rule checks, in report order), Report and
    Finding, loaded on first use so that importing the package loads no probe."""
    if name == "RULES":
        from ._probes import RULES as rules

        value: Any = {rule: text for rule, (text, _cite) in rules.items()}
    elif name in ("Report", "Finding"):
        from . import _report

        value = getattr(_report, name)
    else:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    globals()[name] = value
    return value


def check(obj: Any, *, isolation: str = "auto", timeout: float = 60.0,
          label: Optional[str] = None) -> "Report":
    """Checks `obj`'s DLPack protocol against the DLPack header and the array
    API standard; returns a :class:`Report`.

    isolation: "fork" runs the probes in forked children (a crash of the
    producer fails the probe it happened in, and the next probe carries on
    in a fresh child); "in-process" runs them here; "auto" (the default)
    forks where the platform can. timeout: seconds one probe may take under
    fork before it is killed and reported. label: the subject's name in the
    report (default: the type, shape and dtype of `obj`).

    Raises TypeError when `obj` has no ``__dlpack__``.
    """
    import os

    from . import _runner as runner

    if not callable(getattr(obj, "__dlpack__", None)):
        raise TypeError("%s has no __dlpack__ method" % _type_name(obj))
    if isolation == "auto":
        isolation = runner.FORK if hasattr(os, "fork") else runner.IN_PROCESS
    if isolation == runner.FORK:
        if not hasattr(os, "fork"):
            raise ValueError('isolation "fork" needs os.fork, which this platform lacks')
        findings, crashed = runner.run_forked(obj, timeout=timeout)
    elif isolation == runner.IN_PROCESS:
        findings, crashed = runner.run_in_process(obj)
    else:
        raise ValueError('isolation must be "auto", "fork" or "in-process", not %r' % (isolation,))
    from ._report import Report

    return Report(label or describe(obj), _producer(obj), isolation, findings, crashed)


def _type_name(obj: Any) -> str:
    t = type(obj)
    module = t.__module__
    return t.__qualname__ if module in ("builtins", "__main__") else "%s.%s" % (module, t.__qualname__)


def describe(obj: Any) -> str:
    """'numpy.ndarray shape=(3, 4) dtype=float64' (what the object says of itself)."""
    parts = [_type_name(obj)]
    for attr in ("shape", "dtype"):
        try:
            value = getattr(obj, attr)
        except Exception:  # noqa: BLE001
            continue
        if attr == "shape":
            try:
                value = tuple(int(x) for x in value)
            except Exception:  # noqa: BLE001
                continue
        parts.append("%s=%s" % (attr, value))
    return " ".join(parts)


def _producer(obj: Any) -> str:
    top = type(obj).__module__.split(".")[0]
    module = sys.modules.get(top)
    version = getattr(module, "__version__", None)
    return "%s %s" % (top, version) if isinstance(version, str) else top


# -- command line ------------------------------------------------------------------


class SpecError(ValueError):
    """A MODULE:EXPR spec that does not give an object with __dlpack__."""


def load(spec: str) -> Any:
    """The object a MODULE:EXPR spec names: MODULE imported, EXPR evaluated
    in its namespace. Raises SpecError saying what went wrong."""
    import importlib

    module_name, sep, expr = spec.partition(":")
    if not sep or not module_name or not expr.strip():
        raise SpecError("SPEC must be MODULE:EXPR, for example numpy:arange(4.0), not %r" % spec)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001
        raise SpecError("cannot import %s: %s: %s" % (module_name, type(e).__name__, e)) from None
    try:
        obj = eval(expr, dict(vars(module)))  # noqa: S307 - the user's own expression
    except Exception as e:  # noqa: BLE001
        raise SpecError("evaluating %r in %s raised %s: %s"
                        % (expr, module_name, type(e).__name__, e)) from None
    if not callable(getattr(obj, "__dlpack__", None)):
        raise SpecError("%s (from %s) has no __dlpack__ method" % (_type_name(obj), spec))
    return obj


_EPILOG = """\
SPEC is MODULE:EXPR: MODULE is imported and EXPR evaluated in its namespace.

examples:
  python -m dlbridge.check "numpy:arange(12.0).reshape(3, 4)"
  python -m dlbridge.check "numpy:arange(12.0).reshape(3, 4).T" --markdown
  python -m dlbridge.check "torch:ones(2, 3, dtype=bfloat16)" --json
  python -m dlbridge.check "dlbridge:empty((2, 3), 'float32')"
  python -m dlbridge.check "mypackage.tests.producers:make_tensor()"

exit status: 0 when no rule failed, 1 when one did, 2 for a usage error (a bad
SPEC, a module that does not import, an EXPR that raises, an object without
__dlpack__).
"""


def main(argv: Optional[List[str]] = None) -> int:
    """The command line; returns the exit status."""
    import argparse
    import os

    parser = argparse.ArgumentParser(
        prog="python -m dlbridge.check",
        description="Check an object's DLPack protocol (__dlpack__, __dlpack_device__) against "
        "the DLPack header and the array API standard.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("spec", metavar="SPEC", help="MODULE:EXPR, the object to check")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print the report as markdown")
    parser.add_argument("--in-process", action="store_true",
                        help="run the probes in this process instead of forked children")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S",
                        help="seconds one probe may take before it is killed (default 60)")
    args = parser.parse_args(argv)

    def usage(message: str) -> int:
        print("python -m dlbridge.check: %s" % message, file=sys.stderr)
        return 2

    try:
        obj = load(args.spec)
    except SpecError as e:
        return usage(str(e))

    report = check(obj, isolation="in-process" if args.in_process else "auto",
                   timeout=args.timeout, label=args.spec)
    if args.json:
        print(report.to_json())
    elif args.markdown:
        print(report.to_markdown())
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        print(report.to_text(color=color))
    return 0 if report.ok else 1


class _CallableModule(types.ModuleType):
    """Lets the module itself be called: ``dlbridge.check(obj)``."""

    def __call__(self, obj: Any, **kwargs: Any) -> "Report":
        return check(obj, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
