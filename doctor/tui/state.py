"""What the dashboard shows, as plain data: checks grouped by category, counts, the worst
finding, versions. No textual here (tested without a terminal); no check logic either —
it only sorts and counts what the engine produced."""

from __future__ import annotations

import os
from typing import Any, Iterable

from ..model import Category, CheckResult, Finding, HostInfo, Report, Severity, Status
from dataclasses import dataclass, field

PENDING = "pending"
RUNNING = "running"

GLYPHS = {"pass": "✓", "info": "ℹ", "warn": "▲", "fail": "✗", "skip": "–", "error": "‼",
          PENDING: "·", RUNNING: "◌"}
ASCII_GLYPHS = {"pass": "ok", "info": "i", "warn": "!", "fail": "X", "skip": "-", "error": "E!",
                PENDING: ".", RUNNING: "~"}
# theme variables, so status colours follow the light and dark themes
COLOURS = {"pass": "$success", "info": "$primary", "warn": "$warning", "fail": "$error",
           "error": "$error", "skip": "$text-muted", PENDING: "$text-muted",
           RUNNING: "$accent"}
_SEV_RANK = {Severity.NONE: 0, Severity.LOW: 1, Severity.MEDIUM: 2, Severity.HIGH: 3,
             Severity.CRITICAL: 4}


def ascii_mode() -> bool:
    """Glyphs with a text fallback for dumb terminals (popeye's "jurassic" mode)."""
    return bool(os.environ.get("ASCEND_DOCTOR_ASCII")) or os.environ.get("TERM") in ("dumb",
                                                                                   "linux")


def glyph(status: str) -> str:
    return (ASCII_GLYPHS if ascii_mode() else GLYPHS)[status]


def styled(status: str, text: str | None = None) -> str:
    """Textual content markup: the glyph (or ``text``) in the status colour."""
    from_ = text if text is not None else glyph(status)
    body = from_.replace("[", r"\[")
    bold = " bold" if status in ("fail", "error") else ""
    return f"[{COLOURS[status]}{bold}]{body}[/]"


def finding_rank(f: Finding) -> tuple[int, int]:
    return (f.status.rank, _SEV_RANK.get(f.severity, 0))


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=finding_rank, reverse=True)


@dataclass
class CheckRow:
    id: str
    title: str
    category: Category
    state: str  # a Status value, or pending / running
    result: CheckResult | None = None

    @property
    def findings(self) -> list[Finding]:
        return sorted_findings(self.result.findings) if self.result else []


@dataclass
class Group:
    category: Category
    rows: list[CheckRow]

    @property
    def state(self) -> str:
        done = [r.result.status for r in self.rows if r.result is not None]
        if done:
            worst = max(done, key=lambda s: s.rank)
            if worst.rank >= Status.WARN.rank or len(done) == len(self.rows):
                return worst.value
        return RUNNING if any(r.state == RUNNING for r in self.rows) else (
            max(done, key=lambda s: s.rank).value if done else PENDING)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.state] = out.get(r.state, 0) + 1
        return out


def _rank_of(state: str) -> int:
    try:
        return Status(state).rank
    except ValueError:
        return -1


@dataclass
class RunState:
    """The dashboard's model: specs known before the run, results as they stream in."""

    rows: dict[str, CheckRow] = field(default_factory=dict)
    host: HostInfo | None = None
    context: str = ""
    report: Report | None = None
    run_id: int = 0
    finished: bool = False

    def start(self, specs: Iterable[Any], run_id: int) -> None:
        self.rows = {s.id: CheckRow(s.id, s.title, s.category, PENDING) for s in specs}
        self.run_id = run_id
        self.finished = False
        self.report = None

    def mark_running(self, ids: Iterable[str]) -> None:
        for i in ids:
            row = self.rows.get(i)
            if row is not None and row.result is None:
                row.state = RUNNING

    def add(self, result: CheckResult) -> None:
        row = self.rows.get(result.check_id)
        if row is None:
            row = self.rows[result.check_id] = CheckRow(result.check_id, result.title,
                                                        result.category, PENDING)
        row.result = result
        row.state = result.status.value

    def results(self) -> list[CheckResult]:
        return [r.result for r in sorted(self.rows.values(), key=lambda r: r.id) if r.result]

    # -- views -------------------------------------------------------------------------
    def groups(self, query: str = "") -> list[Group]:
        """Categories, worst first; within each, checks worst first, then by id."""
        by_cat: dict[Category, list[CheckRow]] = {}
        for row in self.rows.values():
            if query and not matches(row, query):
                continue
            by_cat.setdefault(row.category, []).append(row)
        groups = [Group(c, sorted(rows, key=lambda r: (-_rank_of(r.state), r.id)))
                  for c, rows in by_cat.items()]
        return sorted(groups, key=lambda g: (-_rank_of(g.state), g.category.value))

    def summary(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        counts[PENDING] = counts[RUNNING] = 0
        for row in self.rows.values():
            counts[row.state] = counts.get(row.state, 0) + 1
        return counts

    def done_count(self) -> int:
        return sum(1 for r in self.rows.values() if r.result is not None)

    def worst(self, kb: Any = None) -> tuple[CheckRow, Finding] | None:
        """The finding a newcomer should read first: the head of the worst problem, by the
        one ranking every front end uses (doctor/ranking.py, doctor/problems.py)."""
        from .. import problems
        if kb is None:
            from ascend_doctor.knowledge import load
            kb = load()
        pair = problems.worst(self.results(), kb)
        return (self.rows[pair[0].check_id], pair[1]) if pair else None

    def versions(self) -> dict[str, str]:
        """Package versions published by checks under the evidence key ``versions``."""
        out: dict[str, str] = {}
        for row in sorted(self.rows.values(), key=lambda r: r.id):
            for f in row.findings:
                v = f.evidence.get("versions") if isinstance(f.evidence, dict) else None
                if isinstance(v, dict):
                    for k, val in v.items():
                        if val and k not in out:
                            out[str(k)] = str(val)
        return out


def matches(row: CheckRow, query: str) -> bool:
    """Every word must appear in the id, title, category, state, or a finding's text."""
    hay = [row.id, row.title, row.category.value, row.state]
    for f in row.findings:
        hay += [f.message, f.subject, f.status.value, *f.kb, f.fix.id if f.fix else ""]
    text = " ".join(hay).lower()
    return all(w in text for w in query.lower().split())


def replace_result(report: Report | None, result: CheckResult) -> Report | None:
    """The report with one check's result replaced (after a fix is verified)."""
    if report is None:
        return None
    from dataclasses import replace

    results = tuple(result if r.check_id == result.check_id else r for r in report.results)
    return replace(report, results=results)


def shown_severity(state: "RunState | None", f: Finding, row: CheckRow) -> Severity:
    """The word the report and `explain` use for ``f``: its problem's severity when it heads
    one (doctor/problems.py), else its ranked severity (doctor/ranking.py)."""
    from ..knowledge import load
    from ..problems import group
    from ..ranking import severity

    kb = load()
    rows = getattr(state, "rows", None) or {}
    results = [x.result for x in rows.values() if x.result is not None]
    if f.status in (Status.FAIL, Status.WARN, Status.ERROR):
        for p in group(results, kb):
            if p.head[1] is f:
                return p.severity
    return severity(f, row.result, kb)
