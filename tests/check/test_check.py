"""dlbridge.check against deliberately broken producers and real ones.

Every broken producer (tests/check/producers.py) must fail exactly the rule
it breaks (and rules that follow from it), with this process surviving; the
real producers (numpy 1.24, torch 1.13, dlbridge) give the findings their
known behaviour predicts.
"""

import json
import os
import re
import subprocess
import sys

import pytest

import dlbridge
from dlbridge import check as check_module
from dlbridge.testing import assert_conformant

sys.path.insert(0, os.path.dirname(__file__))
from producers import Producer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What the fork-isolated run of each broken producer must fail: the rule the
# fault breaks first, then the rules that must fail because of it. Every
# other rule must pass or skip.
BROKEN = {
    "wrong_name": {"legacy.capsule", "max_version.old"},
    "versioned_always": {"legacy.capsule", "max_version.old"},
    "null_strides": {"versioned.strides"},
    "readonly_as_writable": {"legacy.read_only", "versioned.read_only"},
    "is_copied_lie": {"versioned.is_copied", "copy.false", "dl_device.same"},
    "copy_unflagged": {"copy.true"},
    "deleter_twice": {"lifetime.unconsumed", "lifetime.memory", "lifetime.threads"},
    "destructor_leaks": {"lifetime.unconsumed", "lifetime.memory", "lifetime.threads"},
    "ignores_rename": {"lifetime.consumed", "lifetime.memory", "lifetime.threads"},
    "device_lies": {"legacy.device", "versioned.device", "dl_device.same"},
    "ignores_stream": {"stream.cpu"},
    # lifetime.memory warns: 80 bytes kept an export of a 24-byte tensor
    # could be the producer's bookkeeping.
    "keeps_reference": {"lifetime.refcount", "lifetime.threads"},
    "bad_dtype": {"legacy.tensor", "versioned.tensor", "copy.true", "copy.false",
                  "dl_device.same"},
    "major_two": {"versioned.capsule", "max_version.newer", "copy.true", "copy.false",
                  "dl_device.same"},
}


def statuses(report):
    return {f.rule: f.status for f in report.findings}


def failed(report):
    return {f.rule for f in report.failures}


def test_both_spellings_are_the_callable_module():
    from dlbridge import check

    assert check is dlbridge.check is check_module
    report = dlbridge.check(Producer())
    assert type(report) is check.Report
    assert list(check.RULES) == [f.rule for f in report.findings]


def test_a_correct_producer_passes_every_rule():
    p = Producer()
    report = dlbridge.check(p)
    assert report.ok, report.to_text()
    assert report.isolation == "fork"
    s = statuses(report)
    # The two rules that cannot apply to this producer are skipped, not passed.
    assert s.pop("legacy.values") == "skip"  # no buffer protocol to compare with
    assert s.pop("dl_device.host") == "skip"  # a CPU tensor
    assert set(s.values()) == {"pass"}
    # The probes ran in children: this process made no export.
    assert p.deleter_calls == 0 and p.live() == 0


@pytest.mark.parametrize("fault", sorted(BROKEN))
def test_each_fault_fails_the_rule_it_breaks(fault):
    report = dlbridge.check(Producer(fault))
    assert failed(report) == BROKEN[fault], report.to_text()
    assert not report.ok and not report.crashed
    for f in report.failures:
        assert "(rule: " in f.detail and f.cite in f.detail


def test_failure_details_name_the_offending_value():
    r = dlbridge.check(Producer("wrong_name"))
    assert '"DLTensor"' in r.finding("legacy.capsule").detail
    r = dlbridge.check(Producer("null_strides"))
    d = r.finding("versioned.strides").detail
    assert "version 1.3 with ndim 2" in d and "DLB_ERR_MALFORMED" in d and "DLPack 1.2" in d
    r = dlbridge.check(Producer("deleter_twice"))
    assert "deleter ran twice" in r.finding("lifetime.unconsumed").detail
    r = dlbridge.check(Producer("destructor_leaks"))
    assert "deleter ran never" in r.finding("lifetime.unconsumed").detail
    r = dlbridge.check(Producer("device_lies"))
    assert "on (1, 0), __dlpack_device__() says (2, 0)" in r.finding("legacy.device").detail
    r = dlbridge.check(Producer("bad_dtype"))
    assert "DLB_ERR_UNSUPPORTED_DTYPE" in r.finding("legacy.tensor").detail
    assert "99" in r.finding("legacy.tensor").detail
    r = dlbridge.check(Producer("major_two"))
    assert "version 2.0, but the consumer asked for at most 1.3" in \
        r.finding("versioned.capsule").detail
    assert r.finding("lifetime.unconsumed").status == "pass"  # the deleter sits in the stable prefix
    r = dlbridge.check(Producer("readonly_as_writable"))
    assert "flags 0x0, READ_ONLY unset" in r.finding("versioned.read_only").detail


def test_deleter_faults_are_caught_in_process_without_a_double_free():
    # In this process: the interposed deleter forwards one call only, so the
    # producer's deleter sees each tensor once although its destructor calls
    # the deleter twice (a real producer would free twice here).
    for fault in ("deleter_twice", "ignores_rename"):
        p = Producer(fault)
        report = dlbridge.check(p, isolation="in-process")
        assert report.isolation == "in-process"
        assert failed(report) == BROKEN[fault]
        assert p.double_calls == 0
        assert p.live() == 0
        assert p.deleter_calls > 0


def test_leaking_destructor_in_process_leaves_the_leak_visible():
    p = Producer("destructor_leaks")
    report = dlbridge.check(p, isolation="in-process")
    assert failed(report) == BROKEN["destructor_leaks"]
    assert p.live() > 0  # the exports the destructor leaked, really leaked


def test_a_producer_that_aborts_is_a_crashed_probe_not_a_dead_checker():
    import faulthandler

    enabled = faulthandler.is_enabled()
    faulthandler.disable()  # the children's tracebacks would only be noise here
    try:
        report = dlbridge.check(Producer("abort"))
    finally:
        if enabled:
            faulthandler.enable()
    assert not report.ok
    crashed = {c["probe"]: c["how"] for c in report.crashed}
    # Every probe that calls __dlpack__ crashed, each in its own child; the
    # device query, which does not, still ran after the first crash.
    assert crashed["legacy"] == "killed by SIGABRT"
    assert "threads" in crashed and "device" not in crashed
    assert report.finding("device.query").status == "pass"
    d = report.finding("legacy.capsule").detail
    assert d.startswith("probe legacy crashed the process: killed by SIGABRT")


def test_a_probe_that_hangs_is_killed_after_the_timeout():
    class Hangs(Producer):
        def __dlpack__(self, **kwargs):
            if kwargs.get("stream") is not None:
                import time

                time.sleep(60)
            return super().__dlpack__(**kwargs)

    report = dlbridge.check(Hangs(), timeout=2)
    assert report.crashed == [{"probe": "stream", "how": "did not finish within 2 s and was killed"}]
    assert report.finding("stream.cpu").status == "fail"
    assert report.finding("lifetime.threads").status == "pass"  # the next probes carried on


def test_a_producer_returning_something_else_than_a_capsule():
    class ReturnsBytes(Producer):
        def __dlpack__(self, **kwargs):
            return b"dltensor"

    report = dlbridge.check(ReturnsBytes())
    assert "__dlpack__() returned not a capsule (bytes)" in report.finding("legacy.capsule").detail
    assert report.finding("versioned.capsule").status == "fail"
    assert report.finding("legacy.tensor").status == "skip"
    assert not report.crashed


def test_legacy_only_producer_skips_the_1x_rules():
    report = dlbridge.check(Producer("legacy_only"))
    assert report.ok, report.to_text()
    s = statuses(report)
    one_x = [r for r in s if r.split(".")[0] in ("versioned", "max_version", "copy", "dl_device")]
    assert len(one_x) == 13
    assert {s[r] for r in one_x} == {"skip"}
    assert "legacy protocol only" in report.finding("copy.true").detail
    assert s["legacy.capsule"] == s["lifetime.consumed"] == "pass"


def test_check_refuses_an_object_without_dlpack():
    with pytest.raises(TypeError, match="has no __dlpack__"):
        dlbridge.check(object())
    with pytest.raises(ValueError, match="isolation"):
        dlbridge.check(Producer(), isolation="thread")


# -- real producers ------------------------------------------------------------


def test_numpy_float64_matrix():
    np = pytest.importorskip("numpy")
    a = np.arange(12.0).reshape(3, 4)
    before = sys.getrefcount(a)
    report = dlbridge.check(a)
    assert report.ok, report.to_text()
    s = statuses(report)
    assert s["legacy.values"] == s["legacy.zero_copy"] == s["lifetime.threads"] == "pass"
    assert s["versioned.capsule"] == "skip"  # numpy 1.24 speaks only the legacy protocol
    assert sys.getrefcount(a) == before


def test_numpy_views_and_read_only_memory():
    np = pytest.importorskip("numpy")
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[::2, ::-3]  # strided, negative
    report = dlbridge.check(a)
    assert report.ok, report.to_text()
    assert "strides (12, -3)" in report.finding("legacy.tensor").detail
    assert report.finding("legacy.values").status == "pass"
    unaligned = np.zeros(17, dtype=np.uint8)[1:].view(np.float32)
    report = dlbridge.check(unaligned)
    assert report.ok
    assert "not aligned to its 4-byte element" in report.finding("legacy.tensor").detail
    assert "element-aligned" in dlbridge.check(np.arange(3.0)).finding("legacy.tensor").detail
    ro = np.arange(4.0)
    ro.flags.writeable = False
    report = dlbridge.check(ro)
    assert report.finding("legacy.capsule").detail.startswith("refused with BufferError")
    assert report.finding("legacy.read_only").status == "pass"


def test_a_legacy_copy_of_read_only_memory_conforms():
    # dlbridge hands read-only memory to a legacy consumer as a copy (copy=None
    # allows it): neither zero-copy nor read-only is broken by that.
    t = dlbridge.from_buffer(bytes(range(16)))
    report = dlbridge.check(t)
    assert report.finding("legacy.capsule").status == "pass"
    assert report.finding("legacy.zero_copy").status == "pass"
    assert "a copy" in report.finding("legacy.zero_copy").detail
    assert report.finding("legacy.read_only").status == "pass"
    assert "the legacy export is a copy" in report.finding("legacy.read_only").detail
    assert report.ok


def test_torch_ignores_the_stream_and_refuses_bool_with_the_wrong_type():
    torch = pytest.importorskip("torch")
    report = dlbridge.check(torch.arange(6.0).reshape(2, 3).t())
    assert failed(report) == {"stream.cpu"}
    assert "stream=1 on a CPU tensor was accepted" in report.finding("stream.cpu").detail
    report = dlbridge.check(torch.zeros(3, dtype=torch.bool))
    assert "legacy.capsule" in failed(report)
    assert "RuntimeError" in report.finding("legacy.capsule").detail


def test_dlbridge_own_tensors_conform():
    for t in (dlbridge.empty((3, 4), "float32"), dlbridge.from_buffer(bytes(range(16)))):
        report = dlbridge.check(t)
        assert report.ok, report.to_text()
        assert report.finding("versioned.capsule").status == "pass"
    assert dlbridge.check(dlbridge.from_buffer(bytes(8))).finding("versioned.read_only").detail == \
        "read-only memory, READ_ONLY set"


# -- formats and the command line ------------------------------------------------


def test_json_has_stable_keys():
    report = dlbridge.check(Producer("null_strides"))
    d = json.loads(report.to_json())
    assert list(d) == ["format", "subject", "producer", "isolation", "ok", "counts", "crashed",
                       "findings"]
    assert d["format"] == 1 and d["ok"] is False and d["isolation"] == "fork"
    assert d["counts"] == {"pass": 23, "fail": 1, "skip": 2, "warn": 0}
    assert all(list(f) == ["rule", "status", "detail", "cite"] for f in d["findings"])


def test_markdown_and_text():
    report = dlbridge.check(Producer("ignores_stream"))
    md = report.to_markdown()
    assert "| `stream.cpu` | **FAIL** |" in md
    assert "23 pass, 1 fail, 2 skip" in md
    text = report.to_text()
    assert "\033[" not in text
    assert re.search(r"^stream\.cpu +fail +stream=1 on a CPU tensor", text, re.M)
    assert "\033[1;31m" in report.to_text(color=True)


def run_cli(*args):
    env = dict(os.environ)
    # The package from wherever this process imported it, and the producers.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(dlbridge.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_root, os.path.dirname(__file__)])
    return subprocess.run([sys.executable, "-m", "dlbridge.check", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_exit_statuses():
    ok = run_cli("producers:Producer()")
    assert ok.returncode == 0, ok.stderr
    assert "conformant: 26 rules: 24 pass, 0 fail, 2 skip" in ok.stdout
    assert "RuntimeWarning" not in ok.stderr  # python -m runs it once
    bad = run_cli("producers:Producer('null_strides')", "--json")
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["subject"] == "producers:Producer('null_strides')"
    md = run_cli("producers:Producer()", "--markdown", "--in-process")
    assert md.returncode == 0 and "Isolation: in-process" in md.stdout
    for spec, message in [
        ("no_colon", "SPEC must be MODULE:EXPR"),
        ("no_such_module_here:x", "cannot import no_such_module_here"),
        ("producers:undefined_name", "raised NameError"),
        ("producers:object()", "has no __dlpack__"),
    ]:
        r = run_cli(spec)
        assert r.returncode == 2, (spec, r.stdout, r.stderr)
        assert message in r.stderr
    assert run_cli("producers:Producer()", "--json", "--markdown").returncode == 2
    help_text = run_cli("--help")
    assert help_text.returncode == 0 and 'python -m dlbridge.check "numpy:' in help_text.stdout


# -- dlbridge.testing -------------------------------------------------------------


def test_assert_conformant():
    assert_conformant(Producer()).ok
    with pytest.raises(AssertionError) as e:
        assert_conformant(Producer("copy_unflagged"))
    assert "copy.true: copy=True gave flags 0x0: IS_COPIED unset" in str(e.value)
    assert_conformant(Producer("copy_unflagged"), allow=("copy.true",))
    assert_conformant(Producer("deleter_twice"), allow=("lifetime.*",))
    with pytest.raises(ValueError, match="matches no rule"):
        assert_conformant(Producer(), allow=("copy.ture",))


def test_the_example_in_docs_conformance_runs():
    with open(os.path.join(ROOT, "docs", "conformance.md")) as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/conformance.md has no python example"
    namespace = {"__name__": "docs_example"}
    exec(compile(blocks[0], "docs/conformance.md", "exec"), namespace)  # noqa: S102
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert tests
    for test in tests:
        test()


def test_docs_conformance_lists_every_rule():
    with open(os.path.join(ROOT, "docs", "conformance.md")) as f:
        text = f.read()
    listed = re.findall(r"^\| `([a-z_.]+)` \|", text, re.M)
    assert listed == list(check_module.RULES)


class _Delegating:
    """A 64 KiB float32 numpy array's protocol, with what each export does besides."""

    def __init__(self, np):
        self.arr = np.arange(16384, dtype=np.float32)
        self.shape = self.arr.shape

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_memory_rule_warns_for_a_producers_record_of_each_export():
    """A correct producer that keeps about 1 KB of Python memory a export
    (its own log of exports) is warned about, not failed."""
    np = pytest.importorskip("numpy")

    class Bookkeeping(_Delegating):
        def __init__(self):
            super().__init__(np)
            self.records = []

        def __dlpack__(self, *, stream=None):
            self.records.append(bytes(1024))
            return self.arr.__dlpack__(stream=stream)

    report = dlbridge.check(Bookkeeping())
    f = report.finding("lifetime.memory")
    assert f.status == "warn", f
    assert "heuristic" in f.detail and "65536-byte" in f.detail
    assert report.ok
    assert report.counts["warn"] == 1
    assert "1 warn" in report.to_text()


def test_memory_rule_fails_a_producer_whose_exported_tensors_are_never_freed():
    """Each export hands out a copy of the tensor that the producer keeps
    forever (deleters all run): the growth is the tensor's size, a failure."""
    np = pytest.importorskip("numpy")

    class LeaksTensors(_Delegating):
        def __init__(self):
            super().__init__(np)
            self.leaked = []

        def __dlpack__(self, *, stream=None):
            c = self.arr.copy()
            self.leaked.append(c)
            return c.__dlpack__(stream=stream)

    report = dlbridge.check(LeaksTensors())
    f = report.finding("lifetime.memory")
    assert f.status == "fail", f
    assert "never freed" in f.detail and "65536 bytes" in f.detail
    assert not report.ok


def test_rules_are_registered_with_their_probes():
    """Each probe declares its rules where it is defined; RULES and PROBES
    come from the same registrations, in report order."""
    from dlbridge.check import _registry
    from dlbridge.check._probes import PROBES, RULES

    assert [r for _name, _fn, rules in PROBES for r in rules] == list(RULES)
    assert list(check_module.RULES) == list(RULES)
    assert all(fn.__module__.startswith("dlbridge.check._probes_") for _n, fn, _r in PROBES)
    with pytest.raises(ValueError, match="registered twice"):
        _registry.probe("again", {"device.query": ("x", "y")})(lambda s: [])
    assert len(_registry.PROBES) == len(PROBES)


def test_importing_the_package_loads_no_probe():
    code = ("import sys, dlbridge.check; "
            "assert 'dlbridge.check._probes' not in sys.modules, 'probes loaded'; "
            "dlbridge.check.RULES; assert 'dlbridge.check._probes' in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
