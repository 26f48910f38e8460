"""Probes of lifetimes: deleters of unconsumed and consumed capsules,
reference counts, memory and threads. Each probe is registered with the
rules it reports (see _registry)."""

import gc
import sys
import threading
import tracemalloc
from typing import Any, Dict, List, Optional, Tuple

from ._native import (
    LEGACY,
    VERSIONED,
    native,
)
from ._registry import finding, probe
from ._report import FAIL, PASS, SKIP, WARN, Finding
from ._subject import (
    MAX_VERSION,
    _STD,
    _exc,
    Subject,
    release,
    _numel,
)


def _kinds(s: Subject) -> List[Tuple[str, Dict[str, Any]]]:
    """[(label, kwargs)] of the export kinds the producer speaks."""
    kinds: List[Tuple[str, Dict[str, Any]]] = [("legacy", {})]
    if s.protocol()[0] == "versioned":
        kinds.append(("versioned", {"max_version": MAX_VERSION}))
    return kinds


def _calls_text(n: int) -> str:
    return {0: "never", 1: "once", 2: "twice"}.get(n, "%d times" % n)


@probe("unconsumed", {
        "lifetime.unconsumed": (
            "a capsule dropped unconsumed runs the deleter exactly once, through its destructor",
            _STD + ", Data interchange mechanisms, DLPack: the producer sets a PyCapsule "
            "destructor that calls the deleter while the capsule has its unused name; dlpack.h, "
            "deleter: called once, by the last owner",
        ),
})
def probe_unconsumed(s: Subject) -> List[Finding]:
    parts: List[str] = []
    failed: List[str] = []
    for label, kwargs in _kinds(s):
        exp, err = s.export(**kwargs)
        if err is not None:
            parts.append("%s: refused (%s)" % (label, type(err).__name__))
            continue
        record, has_destructor = exp.record, exp.has_destructor
        if exp.name not in (LEGACY, VERSIONED):
            release(exp)
            parts.append("%s: not a DLPack capsule" % label)
            continue
        release(exp)
        del exp
        if record is None:
            parts.append("%s: NULL deleter (allowed)" % label)
            continue
        if record.calls != 1:
            why = " (the capsule has no destructor)" if not has_destructor else ""
            failed.append("%s capsule dropped unconsumed: deleter ran %s%s"
                          % (label, _calls_text(record.calls), why))
        else:
            parts.append("%s: deleter ran once" % label)
    if failed:
        return [finding("lifetime.unconsumed", FAIL, "; ".join(failed))]
    return [finding("lifetime.unconsumed", PASS if parts else SKIP, "; ".join(parts) or "no export")]


@probe("consumed", {
        "lifetime.consumed": (
            "a capsule renamed used_* by a consumer does not run the deleter again",
            _STD + ", Data interchange mechanisms, DLPack: the consumer renames the capsule to "
            '"used_dltensor" / "used_dltensor_versioned" so that the destructor does not call '
            "the deleter; the consumer then calls it",
        ),
})
def probe_consumed(s: Subject) -> List[Finding]:
    parts: List[str] = []
    failed: List[str] = []
    for label, kwargs in _kinds(s):
        exp, err = s.export(**kwargs)
        if err is not None:
            parts.append("%s: refused (%s)" % (label, type(err).__name__))
            continue
        if exp.name not in (LEGACY, VERSIONED):
            release(exp)
            parts.append("%s: not a DLPack capsule" % label)
            continue
        record = exp.record
        exp.rename_used()
        release(exp)
        del exp
        if record is None:
            parts.append("%s: NULL deleter (allowed)" % label)
            continue
        by_destructor = record.calls
        s.deleters.call(record)  # the consumer is done with the tensor
        if by_destructor:
            failed.append("%s: the destructor of a capsule renamed used_* ran the deleter (%s), and "
                          "the consumer's call made it %s" % (label, _calls_text(by_destructor),
                                                              _calls_text(record.calls)))
        elif record.calls != 1:
            failed.append("%s: the consumer's deleter call counted %d" % (label, record.calls))
        else:
            parts.append("%s: destructor left it, consumer's call ran it once" % label)
    if failed:
        return [finding("lifetime.consumed", FAIL, "; ".join(failed))]
    return [finding("lifetime.consumed", PASS if parts else SKIP, "; ".join(parts) or "no export")]


class _Tally:
    """Deleter calls of released exports, counted without keeping them."""

    def __init__(self) -> None:
        self.exports = 0
        self.bad: Dict[int, int] = {}  # calls -> how many exports had that count

    def add(self, s: Subject, record: Any) -> None:
        s.deleters.forget(record)
        self.exports += 1
        if record.calls != 1:
            self.bad[record.calls] = self.bad.get(record.calls, 0) + 1

    def text(self) -> str:
        return ", ".join("%d ran %s" % (n, _calls_text(c)) for c, n in sorted(self.bad.items()))


def _cycle(s: Subject, kinds: List[Tuple[str, Dict[str, Any]]], tally: _Tally) -> None:
    """One export of each kind dropped unconsumed and one consumed."""
    for _label, kwargs in kinds:
        exp, err = s.export(**kwargs)
        if err is None:
            record = exp.record
            release(exp)
            exp = None
            if record is not None:
                tally.add(s, record)
        exp, err = s.export(**kwargs)
        if err is None and exp.name in (LEGACY, VERSIONED):
            record = exp.record
            exp.rename_used()
            release(exp)
            exp = None
            if record is not None:
                s.deleters.call(record)
                tally.add(s, record)
        elif err is None:
            release(exp)


@probe("refcount", {
        "lifetime.refcount": (
            "the object's reference count returns to its starting value once exports are released",
            "dlpack.h, deleter: destructs the manager_ctx that holds the tensor, so every "
            "reference an export took is given back when its deleter runs",
        ),
})
def probe_refcount(s: Subject) -> List[Finding]:
    kinds = _kinds(s)
    gc.collect()
    before = sys.getrefcount(s.obj)
    tally = _Tally()
    for _ in range(25):
        _cycle(s, kinds, tally)
    gc.collect()
    after = sys.getrefcount(s.obj)
    if after != before:
        return [finding("lifetime.refcount", FAIL, "reference count %d before and %d after %d "
                        "exports released" % (before, after, tally.exports))]
    return [finding("lifetime.refcount", PASS, "unchanged after %d exports released" % tally.exports)]


# The memory probe measures three windows of cycles and takes the smallest
# growth: the checker's own bookkeeping grows in steps (a dict resized now
# and then) that show in one window, while a leak grows every window.
_MEMORY_WINDOWS = 3
_MEMORY_CYCLES = 50
_MEMORY_BYTES_PER_EXPORT = 4  # growth at or below this an export passes
# Growth cannot tell a leaked tensor from a producer's own record of each
# export (a dict entry, a log line: about 1 KB of Python memory) unless the
# tensor is larger than any such record: from this size on, an export that
# retains at least half its tensor's bytes fails; other growth is a warning.
_MEMORY_TENSOR_MIN_BYTES = 16 * 1024


def _tensor_nbytes(s: Subject) -> Optional[int]:
    """The bytes of the tensor one legacy export describes (None if unknown)."""
    exp, err = s.export()
    if err is not None:
        return None
    try:
        if not exp.tensor or native().check_tensor(exp.tensor)[0] != 0:
            return None
        summary = exp.summary()
        code, bits, lanes = summary["dtype"]
        if summary["shape"] is None:
            return None
        nbytes: int = _numel(summary["shape"]) * bits * lanes // 8
        return nbytes
    finally:
        record = exp.record
        release(exp)
        if record is not None:
            s.deleters.forget(record)


@probe("memory", {
        "lifetime.memory": (
            "exports released leave no Python memory behind (tracemalloc), each deleter run once; "
            "growth smaller than the tensor is a warning (a heuristic)",
            "dlpack.h, deleter: destructs the manager_ctx and the managed tensor itself",
        ),
})
def probe_memory(s: Subject) -> List[Finding]:
    kinds = _kinds(s)
    nbytes = _tensor_nbytes(s)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tally = _Tally()
    grown: List[int] = []
    try:
        for _ in range(10):  # warm caches
            _cycle(s, kinds, _Tally())
        for _ in range(_MEMORY_WINDOWS):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            window = _Tally()
            for _ in range(_MEMORY_CYCLES):
                _cycle(s, kinds, window)
            gc.collect()
            grown.append(tracemalloc.get_traced_memory()[0] - before)
            tally.exports += window.exports
            for calls, n in window.bad.items():
                tally.bad[calls] = tally.bad.get(calls, 0) + n
    finally:
        if started:
            tracemalloc.stop()
    n = tally.exports
    per_window = n // _MEMORY_WINDOWS
    if tally.bad:
        return [finding("lifetime.memory", FAIL, "of %d exports released, %s" % (n, tally.text()))]
    per_export = min(grown) / per_window if per_window else 0.0
    if per_export <= _MEMORY_BYTES_PER_EXPORT:
        return [finding("lifetime.memory", PASS, "%d exports released, each deleter once, no Python "
                        "memory retained" % n)]
    grew = ("Python memory grew by %s bytes in each of %d windows of %d exports released (about "
            "%.0f bytes an export" % ("/".join(map(str, grown)), len(grown), per_window, per_export))
    if nbytes is not None and nbytes >= _MEMORY_TENSOR_MIN_BYTES and per_export >= nbytes / 2:
        return [finding("lifetime.memory", FAIL, "%s, the tensor being %d bytes): each export's "
                        "tensor, or a copy of it, is never freed" % (grew, nbytes))]
    size = "%d-byte" % nbytes if nbytes is not None else "unknown-size"
    return [finding("lifetime.memory", WARN, "%s; the tensor being %s, growth this small cannot "
                    "tell a leak from the producer's own record of each export: a heuristic; check "
                    "with a tensor of %d bytes or more, where an export retaining half its tensor "
                    "fails)" % (grew, size, _MEMORY_TENSOR_MIN_BYTES))]


@probe("threads", {
        "lifetime.threads": (
            "exports made and released on several threads at once run each deleter once",
            "dlpack.h, deleter: called exactly once by whoever owns the tensor last, on any thread",
        ),
})
def probe_threads(s: Subject) -> List[Finding]:
    kinds = _kinds(s)
    gc.collect()
    before = sys.getrefcount(s.obj)
    tallies = [_Tally() for _ in range(4)]
    errors: List[Exception] = []

    def work(tally: _Tally) -> None:
        try:
            for _ in range(25):
                _cycle(s, kinds, tally)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in tallies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    gc.collect()
    after = sys.getrefcount(s.obj)
    total = _Tally()
    for t in tallies:
        total.exports += t.exports
        for calls, n in t.bad.items():
            total.bad[calls] = total.bad.get(calls, 0) + n
    n = total.exports
    if errors:
        return [finding("lifetime.threads", FAIL, "an export on a thread raised " + _exc(errors[0]))]
    if total.bad:
        return [finding("lifetime.threads", FAIL, "of %d exports on 4 threads, %s" % (n, total.text()))]
    if after != before:
        return [finding("lifetime.threads", FAIL, "reference count %d before and %d after %d exports "
                        "on 4 threads" % (before, after, n))]
    return [finding("lifetime.threads", PASS, "%d exports on 4 threads, each deleter once" % n)]
