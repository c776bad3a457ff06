"""Problems, not symptoms: findings that share a cause become one problem.

The links are declared by the checks from their facts, never guessed from message text:
a finding may name the root cause it establishes (``Finding.cause``, a key such as
``ldconf.unread:/etc/ld.so.conf.d/ascend.conf``) and the causes that explain it
(``Finding.explained_by``: cause keys or check ids). Here we only follow those links:

* findings declaring the same ``cause`` are one problem (its roots);
* a finding whose ``explained_by`` names a cause (or a check id) present among this run's
  fail/warn/error findings joins that problem as a symptom, transitively (a library missing
  because of an unread conf, torch_npu failing on that library → both under the conf);
* every other actionable finding is a problem of its own.

Ordering is doctor/ranking.py's.
"""

from __future__ import annotations

from typing import Any, Iterable

from . import ranking
from .i18n import tr, tt
from .model import CheckResult, Finding, Report, Severity, Status
from .model import worst as worst_status
from dataclasses import dataclass, field

Pair = tuple[CheckResult, Finding]


@dataclass(frozen=True, eq=False)
class Problem:
    """A root cause (one or more findings establishing it) and the findings it explains."""

    key: str
    roots: tuple[Pair, ...]
    symptoms: tuple[Pair, ...] = ()
    severity: Severity = Severity.NONE
    refs: dict[int, tuple[str, int]] = field(default_factory=dict, compare=False)

    @property
    def members(self) -> tuple[Pair, ...]:
        return self.roots + self.symptoms

    @property
    def status(self) -> Status:
        return worst_status([f.status for _, f in self.members])

    @property
    def head(self) -> Pair:
        return self.roots[0]

    @property
    def checks(self) -> list[str]:
        """The check ids involved, roots first, each once."""
        return list(dict.fromkeys(r.check_id for r, _ in self.members))

    def title(self, kb: Any = None, lang: str = "en") -> str:
        """The KB entry's title of the head finding, else the check's title; for a check
        that could not run, the input it could not use (its title states what should hold)."""
        r, f = self.head
        if f.status is Status.ERROR and not f.kb:
            src = f.evidence.get("source") if isinstance(f.evidence, dict) else None
            if src:
                return tt(lang, "{source} cannot be used", source=tr(str(src), lang))
            return tt(lang, "{check} could not run", check=r.check_id)
        for kid in f.kb:
            entry = kb.get(kid) if kb is not None else None
            if entry is not None:
                return entry.text("title", lang)
        return r.title


def _index(results: Iterable[CheckResult]) -> list[tuple[CheckResult, Finding, int]]:
    return [(r, f, i) for r in results for i, f in enumerate(r.findings)
            if f.status in ranking.ACTIONABLE]


def group(report: Report | Iterable[CheckResult], kb: Any = None) -> list[Problem]:
    """The run's problems, worst first (doctor/ranking.py). Takes a Report, or the results
    received so far (the TUI, while checks still run)."""
    items = _index(report.results if isinstance(report, Report) else report)
    own: list[str] = []
    by_cause: dict[str, int] = {}
    first_of_check: dict[str, int] = {}
    for n, (r, f, i) in enumerate(items):
        own.append(f.cause or f"{r.check_id}#{i}")
        if f.cause:
            by_cause.setdefault(f.cause, n)
        first_of_check.setdefault(r.check_id, n)

    def link(n: int) -> int | None:
        """The item this one's declared cause points at, if it is present in the run."""
        r, f, _ = items[n]
        for k in f.explained_by:
            target = by_cause.get(k)
            if target is None and k != r.check_id:
                target = first_of_check.get(k)
            if target is not None and own[target] != own[n]:
                return target
        return None

    def root_of(n: int) -> str:
        seen = {own[n]}
        cur = n
        while True:
            nxt = link(cur)
            if nxt is None or own[nxt] in seen:  # a cycle stops at the last new cause
                return own[cur]
            seen.add(own[nxt])
            cur = nxt

    members: dict[str, list[int]] = {}
    for n in range(len(items)):
        members.setdefault(root_of(n), []).append(n)
    problems = []
    for key, ns in members.items():
        roots = [n for n in ns if own[n] == key]
        symptoms = [n for n in ns if own[n] != key]
        if not roots:  # cannot happen (the root's own item is in its group); keep it safe
            roots, symptoms = symptoms[:1], symptoms[1:]
        pr = ranking.rank_findings([items[n][:2] for n in roots], kb)
        # among equally ranked roots, the check that states the cause most often leads
        per_check = {r.check_id: sum(1 for x, _ in pr if x.check_id == r.check_id) for r, _ in pr}
        pr = sorted(pr, key=lambda t: (tuple(-x for x in ranking.finding_key(t[1], t[0], kb)),
                                       -per_check[t[0].check_id]))
        ps = ranking.rank_findings([items[n][:2] for n in symptoms], kb)
        # one severity per problem, everywhere: its root cause's (the head finding's), the
        # word `explain` of the head's entry and the TUI's detail of the head print too; a
        # problem that explains more findings ranks first among equals (ranking.problem_key)
        # (a root that is a warning but explains a fail is judged as the failing problem it
        # heads: its KB entry's severity, the word `explain` prints)
        status = worst_status([f.status for _, f in pr + ps])
        sev = ranking.severity(pr[0][1], pr[0][0], kb, status)
        refs = {id(items[n][1]): (items[n][0].check_id, items[n][2]) for n in ns}
        problems.append(Problem(key, tuple(pr), tuple(ps), sev, refs))
    return sorted(problems, key=ranking.problem_key)


def ref(problem: Problem, pair: Pair) -> dict[str, Any]:
    """Where a member finding sits in the report: its check id and index among its findings."""
    check_id, index = problem.refs.get(id(pair[1]), (pair[0].check_id, 0))
    return {"check": check_id, "finding": index}


def worst(results: Report | Iterable[CheckResult], kb: Any = None) -> Pair | None:
    """The finding to read first: the head of the worst problem (the TUI's ``w``)."""
    probs = group(results, kb)
    return probs[0].head if probs else None


def failed_checks(report: Report) -> int:
    return sum(1 for r in report.results if r.status in (Status.FAIL, Status.ERROR))


def broken_checks(report: Report) -> tuple[int, int]:
    """(checks that failed, checks that could not run): a verdict tells them apart."""
    return (sum(1 for r in report.results if r.status is Status.FAIL),
            sum(1 for r in report.results if r.status is Status.ERROR))
