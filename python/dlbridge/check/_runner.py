"""Running the probes: in forked children (crash isolation) or in process.

With fork isolation the probes run in a child process that sends each
probe's findings back through a pipe as a line of JSON. When the child dies
(a producer that aborts, a segmentation fault) or stops answering, the probe
it was running is reported as crashed and the next probe runs in a fresh
child, so that one crash costs one probe, not the report.
"""

import gc
import json
import os
import select
import signal
import sys
import time
import traceback
import warnings
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

from ._probes import PROBES, Probe, Subject, finding
from ._report import FAIL, SKIP, Finding

FORK = "fork"
IN_PROCESS = "in-process"


def _run_probe(subject: Subject, probe: Probe) -> List[Finding]:
    name, fn, rules = probe
    try:
        found = fn(subject)
    except Exception as e:  # noqa: BLE001 - a probe that raises is a finding
        where = traceback.extract_tb(e.__traceback__)[-1]
        text = "%s: %s" % (type(e).__name__, e)
        return [Finding(r, FAIL, "probe %s raised %s (at %s:%s)" % (
            name, text, os.path.basename(where.filename), where.lineno)) for r in rules]
    by_rule = {f.rule: f for f in found}
    return [by_rule.get(r) or Finding(r, SKIP, "not reported by probe %s" % name) for r in rules]


def run_in_process(obj: Any, probes: Sequence[Probe] = PROBES
                   ) -> Tuple[List[Finding], List[Dict[str, str]]]:
    # The lifetime probes collect garbage often: frozen, the objects that
    # existed before the check are not scanned again each time.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        subject = Subject(obj)
        findings: List[Finding] = []
        for probe in probes:
            findings.extend(_run_probe(subject, probe))
        return findings, []
    finally:
        if freeze:
            gc.unfreeze()


def _child(obj: Any, probes: Sequence[Probe], start: int, wfd: int) -> NoReturn:
    """Runs probes[start:] and writes one JSON line per event; never returns."""
    code = 0
    try:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file
        except Exception:  # noqa: BLE001
            pass
        # Objects inherited from the parent are frozen: a collection then
        # neither scans them nor copies their pages.
        gc.freeze()
        subject = Subject(obj)
        for index in range(start, len(probes)):
            _send(wfd, {"event": "start", "index": index})
            found = _run_probe(subject, probes[index])
            _send(wfd, {"event": "done", "index": index, "findings": [f.as_dict() for f in found]})
    except BaseException:  # noqa: BLE001
        code = 3
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(code)


def _send(wfd: int, message: Dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode("utf-8")
    while data:
        n = os.write(wfd, data)
        data = data[n:]


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        return "killed by %s" % name
    if os.WIFEXITED(status):
        return "exited with status %d" % os.WEXITSTATUS(status)
    return "ended (wait status %d)" % status


def run_forked(obj: Any, probes: Sequence[Probe] = PROBES, timeout: float = 60.0
               ) -> Tuple[List[Finding], List[Dict[str, str]]]:
    """(findings, crashed) with each run of probes in a forked child."""
    results: Dict[int, List[Finding]] = {}
    crashed: List[Dict[str, str]] = []
    start = 0
    while start < len(probes):
        rfd, wfd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:
            os.close(rfd)
            _child(obj, probes, start, wfd)
        os.close(wfd)
        try:
            running, timed_out = _collect(rfd, pid, results, timeout)
        except BaseException:  # KeyboardInterrupt, a bad line: leave no child behind
            _kill(pid)
            os.waitpid(pid, 0)
            raise
        finally:
            os.close(rfd)
        _, status = os.waitpid(pid, 0)
        if running is None:
            missing = [i for i in range(start, len(probes)) if i not in results]
            if not missing:
                break
            running = missing[0]  # died between probes
        name, _, rules = probes[running]
        how = ("did not finish within %g s and was killed" % timeout) if timed_out else _how(status)
        crashed.append({"probe": name, "how": how})
        results[running] = [
            finding(r, FAIL, "probe %s crashed the process: %s" % (name, how)) for r in rules
        ]
        start = running + 1
    findings = []
    for index, probe in enumerate(probes):
        found = results.get(index)
        if found is None:
            found = [Finding(r, SKIP, "not run") for r in probe[2]]
        findings.extend(found)
    return findings, crashed


def _collect(rfd: int, pid: int, results: Dict[int, List[Finding]],
             timeout: float) -> Tuple[Optional[int], bool]:
    """Reads the child's events into `results` until it closes the pipe.

    Returns (index of the probe started and not finished or None, whether
    the child was killed for taking longer than `timeout` on one probe)."""
    running: Optional[int] = None
    pending = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            _kill(pid)
            return running, True
        ready, _, _ = select.select([rfd], [], [], left)
        if not ready:
            continue
        chunk = os.read(rfd, 65536)
        if not chunk:
            return running, False
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            event = json.loads(line.decode("utf-8"))
            if event["event"] == "start":
                running = event["index"]
            else:
                results[event["index"]] = [Finding.from_dict(d) for d in event["findings"]]
                running = None
            deadline = time.monotonic() + timeout


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
