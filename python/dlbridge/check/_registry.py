"""The checker's rules and probes, registered together.

A probe drives one part of an object's DLPack protocol and returns one
finding per rule it owns. Each probe module declares its probes with
:func:`probe`, which records the rules beside the probe that checks them:
RULES (rule id -> (what it checks, the rule paraphrased and where it is
written)) and PROBES ((name, function, rule ids)) are in report order, the
order of registration. Probes share nothing but the Subject, whose caches
they may rebuild, so that after a crash the checker can carry on with the
next probe in a fresh process.
"""

from typing import Any, Callable, Dict, List, Tuple

from ._report import FAIL, Finding

RULES: Dict[str, Tuple[str, str]] = {}

# A probe: (name, function, the rules it reports).
Probe = Tuple[str, Callable[[Any], List[Finding]], Tuple[str, ...]]

PROBES: List[Probe] = []

#: probe name -> its rule ids.
PROBE_RULES: Dict[str, Tuple[str, ...]] = {}


def probe(name: str, rules: Dict[str, Tuple[str, str]]) -> Callable[[Callable[[Any], List[Finding]]],
                                                                   Callable[[Any], List[Finding]]]:
    """Registers the decorated function as probe `name`, reporting `rules`
    (rule id -> (what it checks, the rule and where it is written))."""

    def register(fn: Callable[[Any], List[Finding]]) -> Callable[[Any], List[Finding]]:
        for rule in rules:
            if rule in RULES:
                raise ValueError("rule %s registered twice" % rule)
        RULES.update(rules)
        PROBE_RULES[name] = tuple(rules)
        PROBES.append((name, fn, tuple(rules)))
        return fn

    return register


def finding(rule: str, status: str, detail: str) -> Finding:
    cite = RULES[rule][1]
    if status == FAIL:
        detail = "%s (rule: %s)" % (detail.rstrip("."), cite)
    return Finding(rule, status, detail, cite)
