"""One ranking for every front end: how much a finding matters, and which problem comes first.

The text report, the JSON ``problems`` order, the TUI's "worst" and the ``fix`` list all
sort with this module, so they never disagree about what to read first.

Severity of a finding, first that applies:
1. the severity of its first knowledge-base entry (critical/high/medium/low), when the
   finding is a ``fail``: the entry describes the confirmed condition (and is the one
   ``explain`` is pointed at);
2. a severity the check chose for the finding, else the check's declared ``severity``;
3. derived from the status (fail → high, warn/error → medium).

A ``warn`` never ranks above ``medium`` and an ``error`` (the check crashed or could not
read its input: we do not know the host is broken) never above ``medium`` either, so a
crashed check is never ranked above a real critical or high fail. ``status_for`` is the
inverse (the status a KB entry found as such is reported with), so no check keeps its own
severity → status table.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol, Sequence

from .model import CheckResult, Finding, Severity, Status

SEV_RANK = {Severity.NONE: 0, Severity.LOW: 1, Severity.MEDIUM: 2, Severity.HIGH: 3,
            Severity.CRITICAL: 4}
# among equal severities a real fail first, then a crash, then a warning
STATUS_WEIGHT = {Status.FAIL: 3, Status.ERROR: 2, Status.WARN: 1}
ACTIONABLE = (Status.FAIL, Status.ERROR, Status.WARN)
_CAPPED = {Status.WARN: Severity.MEDIUM, Status.ERROR: Severity.MEDIUM,
           Status.INFO: Severity.LOW, Status.PASS: Severity.NONE, Status.SKIP: Severity.NONE}


def status_for(sev: Severity) -> Status:
    """The status a finding must carry so that it ranks at ``sev`` (the inverse of the caps
    above): critical/high only a fail can carry, medium a warn, low an info. A check that
    reports a KB entry *as found* (logs.signatures: the entry's signature is in the log)
    takes its status from here, so status and rank come from one rule and never disagree."""
    if SEV_RANK[sev] > SEV_RANK[Severity.MEDIUM]:
        return Status.FAIL
    if sev is Severity.MEDIUM:
        return Status.WARN
    return Status.INFO


class _KB(Protocol):
    def get(self, entry_id: str) -> Any: ...


def _kb_severity(f: Finding, kb: _KB | None) -> Severity | None:
    """The severity of the finding's first KB entry that has one: the entry the report's
    ``why: ascend-doctor explain ID`` names, so the word a report prints is the word
    ``explain`` prints (a later entry is related reading, not this finding's rank)."""
    if kb is None:
        return None
    for kid in f.kb:
        entry = kb.get(kid)
        try:
            return Severity(getattr(entry, "severity", ""))
        except ValueError:
            continue
    return None


def severity(f: Finding, result: CheckResult | None = None, kb: _KB | None = None,
             status: Status | None = None) -> Severity:
    """The severity ``f`` is ranked by (see the module docstring for the order of sources);
    ``status`` judges it as if it had that status (a problem's root, whose problem fails
    through the findings it explains: doctor/problems.py)."""
    st = status or f.status
    sev = _kb_severity(f, kb) if st is Status.FAIL else None
    if sev is None and f.severity_given:
        sev = f.severity
    if sev is None and result is not None and result.severity is not None:
        sev = result.severity
    if sev is None:
        sev = f.severity
    cap = _CAPPED.get(st)
    if cap is not None and SEV_RANK[sev] > SEV_RANK[cap]:
        sev = cap
    return sev


def finding_key(f: Finding, result: CheckResult | None = None, kb: _KB | None = None
                ) -> tuple[int, int, int, int]:
    """Bigger is worse: severity, then fail > error > warn, then actionable (fix, KB)."""
    return (SEV_RANK[severity(f, result, kb)], STATUS_WEIGHT.get(f.status, 0),
            int(f.fix is not None), int(bool(f.kb)))


def rank_findings(pairs: Iterable[tuple[CheckResult, Finding]], kb: _KB | None = None
                  ) -> list[tuple[CheckResult, Finding]]:
    """Worst first; among equals by check id, then the check's own order (stable)."""
    indexed = list(enumerate(pairs))
    indexed.sort(key=lambda t: (tuple(-x for x in finding_key(t[1][1], t[1][0], kb)),
                                t[1][0].check_id, t[0]))
    return [p for _, p in indexed]


def worst(pairs: Iterable[tuple[CheckResult, Finding]], kb: _KB | None = None
          ) -> tuple[CheckResult, Finding] | None:
    """The actionable finding to read first (fail, error or warn), or None."""
    ranked = rank_findings([(r, f) for r, f in pairs if f.status in ACTIONABLE], kb)
    return ranked[0] if ranked else None


class _ProblemLike(Protocol):
    @property
    def severity(self) -> Severity: ...
    @property
    def members(self) -> Sequence[tuple[CheckResult, Finding]]: ...
    @property
    def status(self) -> Status: ...
    @property
    def key(self) -> str: ...
    @property
    def head(self) -> tuple[CheckResult, Finding]: ...


def problem_key(p: _ProblemLike) -> tuple[int, int, int, int, int, str]:
    """Sort key (ascending = first): severity (its root cause's: doctor/problems.py), then
    how many findings it explains, then a
    real fail before a crash before a warning, then the actionable (a fix, a KB entry)."""
    f = p.head[1]
    return (-SEV_RANK[p.severity], -len(p.members), -STATUS_WEIGHT.get(p.status, 0),
            -int(f.fix is not None), -int(bool(f.kb)), p.key)
