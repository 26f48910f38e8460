"""Findings and reports of the conformance checker, and their three formats."""

import json
from typing import Any, Dict, Iterable, List, Optional

PASS = "pass"
FAIL = "fail"
SKIP = "skip"
WARN = "warn"  # a heuristic rule saw something it cannot call a failure
STATUSES = (PASS, FAIL, SKIP, WARN)

# Version of the JSON layout below; raised only when a key changes meaning.
JSON_FORMAT = 1


class Finding:
    """One rule's outcome: ``rule`` (a short id such as "legacy.capsule"),
    ``status`` ("pass", "fail", "skip", or "warn": a heuristic rule's
    suspicion, not a failure), ``detail`` (what was seen, naming
    the offending value; a failure's detail ends with the rule it breaks,
    paraphrased, and where that rule is written) and ``cite`` (that rule
    text alone)."""

    __slots__ = ("rule", "status", "detail", "cite")

    def __init__(self, rule: str, status: str, detail: str, cite: str = "") -> None:
        if status not in STATUSES:
            raise ValueError("status must be one of %r, not %r" % (STATUSES, status))
        self.rule = rule
        self.status = status
        self.detail = detail
        self.cite = cite

    def as_dict(self) -> Dict[str, str]:
        return {"rule": self.rule, "status": self.status, "detail": self.detail, "cite": self.cite}

    @classmethod
    def from_dict(cls, d: Dict[str, str]) -> "Finding":
        return cls(d["rule"], d["status"], d["detail"], d.get("cite", ""))

    def __repr__(self) -> str:
        return "Finding(%r, %r, %r)" % (self.rule, self.status, self.detail)


class Report:
    """The outcome of :func:`dlbridge.check` on one object.

    ``ok`` is False when any rule failed; ``findings`` lists every rule in a
    fixed order; ``crashed`` names the probes whose process died (fork
    isolation) with how it died; ``isolation`` says how the probes ran
    ("fork": each group in a child process, so that a crashing producer is
    reported; "in-process": in the checker's own process).
    """

    def __init__(self, subject: str, producer: str, isolation: str, findings: Iterable[Finding],
                 crashed: Iterable[Dict[str, str]] = ()) -> None:
        self.subject = subject
        self.producer = producer
        self.isolation = isolation
        self.findings = list(findings)
        self.crashed = list(crashed)

    @property
    def ok(self) -> bool:
        return all(f.status != FAIL for f in self.findings)

    @property
    def failures(self) -> List[Finding]:
        return [f for f in self.findings if f.status == FAIL]

    @property
    def counts(self) -> Dict[str, int]:
        counts = {s: 0 for s in STATUSES}
        for f in self.findings:
            counts[f.status] += 1
        return counts

    def finding(self, rule: str) -> Finding:
        """The finding of `rule` (KeyError when the report has none)."""
        for f in self.findings:
            if f.rule == rule:
                return f
        raise KeyError(rule)

    def _counts_text(self) -> str:
        c = self.counts
        text = "%d rules: %d pass, %d fail, %d skip" % (len(self.findings), c[PASS], c[FAIL], c[SKIP])
        return text + (", %d warn" % c[WARN] if c[WARN] else "")

    # -- formats ---------------------------------------------------------------

    def to_dict(self) -> Dict[str, Any]:
        return {
            "format": JSON_FORMAT,
            "subject": self.subject,
            "producer": self.producer,
            "isolation": self.isolation,
            "ok": self.ok,
            "counts": self.counts,
            "crashed": list(self.crashed),
            "findings": [f.as_dict() for f in self.findings],
        }

    def to_json(self, indent: Optional[int] = 2) -> str:
        """The report as JSON. Keys, always all present: format, subject,
        producer, isolation, ok, counts {pass, fail, skip, warn}, crashed (list of
        {probe, how}), findings (list of {rule, status, detail, cite})."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_markdown(self, heading: str = "##") -> str:
        """The report as a markdown section: a summary line and a table."""
        lines = [
            "%s `%s`" % (heading, self.subject),
            "",
            "Producer: %s. Isolation: %s. **%s** (%s)."
            % (self.producer, self.isolation, "conformant" if self.ok else "not conformant", self._counts_text()),
            "",
        ]
        for c in self.crashed:
            lines.append("- Probe `%s` crashed: %s." % (c["probe"], c["how"]))
        if self.crashed:
            lines.append("")
        lines.append("| rule | status | detail |")
        lines.append("|---|---|---|")
        for f in self.findings:
            status = "**FAIL**" if f.status == FAIL else f.status
            lines.append("| `%s` | %s | %s |" % (f.rule, status, _md_cell(f.detail)))
        lines.append("")
        return "\n".join(lines)

    def to_text(self, color: bool = False) -> str:
        """The report as an aligned table for a terminal; ANSI colours when
        `color` is true."""
        paint = _paint if color else _plain
        width = max([len("RULE")] + [len(f.rule) for f in self.findings])
        lines = [
            "dlbridge.check: %s" % self.subject,
            "producer: %s; isolation: %s" % (self.producer, self.isolation),
            "",
            "%-*s  %-6s  %s" % (width, "RULE", "STATUS", "DETAIL"),
        ]
        for f in self.findings:
            status = paint(f.status, "%-6s" % f.status)
            lines.append("%-*s  %s  %s" % (width, f.rule, status, f.detail))
        lines.append("")
        for c in self.crashed:
            lines.append("crashed: probe %s: %s" % (c["probe"], c["how"]))
        verdict = "conformant" if self.ok else "NOT conformant"
        lines.append("%s: %s" % (paint(PASS if self.ok else FAIL, verdict), self._counts_text()))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return "<dlbridge.check report on %s: %s>" % (self.subject, self._counts_text())


_COLORS = {PASS: "\033[32m", FAIL: "\033[1;31m", SKIP: "\033[33m", WARN: "\033[35m"}


def _plain(status: str, text: str) -> str:
    return text


def _paint(status: str, text: str) -> str:
    return "%s%s\033[0m" % (_COLORS[status], text)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
