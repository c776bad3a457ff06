"""The result model: frozen dataclasses shared by engine, reports, TUI and fixes.

Status says what a check concluded; severity says how much it matters. They are kept apart
(as DCGM and insights-core do) so that a CI gate can key on either.
"""

from __future__ import annotations

import enum
from typing import Any, Mapping

from dataclasses import dataclass, field


class Status(str, enum.Enum):
    PASS = "pass"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """Order used to pick the worst status of a set (skip ranks lowest)."""
        return _RANK[self]

    def __str__(self) -> str:  # click/rich print the value, not the member name
        return self.value


_RANK = {Status.SKIP: 0, Status.PASS: 1, Status.INFO: 2, Status.WARN: 3, Status.FAIL: 4,
         Status.ERROR: 5}


class Severity(str, enum.Enum):
    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    def __str__(self) -> str:
        return self.value


class Category(str, enum.Enum):
    """Where a finding belongs on the dashboard."""

    LIBS = "libs"
    VERSIONS = "versions"
    NPU = "npu"
    CONTAINER = "container"
    SERVICE = "service"
    CONFIG = "config"
    PERFORMANCE = "performance"
    NETWORK = "network"
    KVCACHE = "kvcache"
    PROFILING = "profiling"
    LOGS = "logs"
    HOST = "host"

    def __str__(self) -> str:
        return self.value


_DEFAULT_SEVERITY = {Status.FAIL: Severity.HIGH, Status.WARN: Severity.MEDIUM,
                     Status.ERROR: Severity.MEDIUM}


@dataclass(frozen=True)
class FixRef:
    """A pointer from a finding to a fix recipe, with the parameters the check knows."""

    id: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    """One conclusion of a check, with the numbers that justify it."""

    status: Status
    message: str
    severity: Severity = Severity.NONE
    subject: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    kb: tuple[str, ...] = ()
    fix: FixRef | None = None
    category: Category | None = None
    # causal links, declared by the check from its facts (doctor/problems.py groups on them):
    # ``cause`` names the root cause this finding establishes ("ldconf.unread:/etc/…/x.conf");
    # ``explained_by`` names causes (or check ids) that, when present, explain this finding
    cause: str = ""
    explained_by: tuple[str, ...] = ()
    severity_given: bool = False  # the check chose ``severity``; else it derives from status

    @classmethod
    def make(cls, status: Status, message: str, *, severity: Severity | None = None,
             subject: str = "", evidence: Mapping[str, Any] | None = None,
             kb: str | tuple[str, ...] | list[str] = (), fix: str | FixRef | None = None,
             fix_params: Mapping[str, Any] | None = None,
             category: Category | None = None, cause: str = "",
             explained_by: str | tuple[str, ...] | list[str] = ()) -> "Finding":
        if isinstance(kb, str):
            kb = (kb,)
        if isinstance(explained_by, str):
            explained_by = (explained_by,)
        if isinstance(fix, str):
            fix = FixRef(fix, dict(fix_params or {}))
        return cls(status=status, message=message,
                   severity=severity or _DEFAULT_SEVERITY.get(status, Severity.NONE),
                   subject=subject, evidence=dict(evidence or {}), kb=tuple(kb), fix=fix,
                   category=category, cause=cause,
                   explained_by=tuple(e for e in explained_by if e),
                   severity_given=severity is not None)

    @classmethod
    def passed(cls, message: str, **kw: Any) -> "Finding":
        return cls.make(Status.PASS, message, **kw)

    @classmethod
    def info(cls, message: str, **kw: Any) -> "Finding":
        return cls.make(Status.INFO, message, **kw)

    @classmethod
    def warn(cls, message: str, **kw: Any) -> "Finding":
        return cls.make(Status.WARN, message, **kw)

    @classmethod
    def fail(cls, message: str, **kw: Any) -> "Finding":
        return cls.make(Status.FAIL, message, **kw)

    @classmethod
    def skip(cls, message: str, **kw: Any) -> "Finding":
        return cls.make(Status.SKIP, message, **kw)

    @classmethod
    def error(cls, message: str, **kw: Any) -> "Finding":
        return cls.make(Status.ERROR, message, **kw)


def worst(statuses: "list[Status] | tuple[Status, ...]") -> Status:
    """The status that sums up a set: error > fail > warn > info > pass > skip."""
    return max(statuses, key=lambda s: s.rank) if statuses else Status.SKIP


@dataclass(frozen=True)
class CheckResult:
    """Everything one check produced in one run."""

    check_id: str
    title: str
    category: Category
    tags: tuple[str, ...]
    findings: tuple[Finding, ...]
    duration_s: float = 0.0
    severity: Severity | None = None  # the check's declared severity (@check(severity=))

    @property
    def status(self) -> Status:
        return worst([f.status for f in self.findings])


@dataclass(frozen=True)
class HostInfo:
    """The host a report is about (uname and os-release)."""

    hostname: str = ""
    kernel: str = ""
    arch: str = ""
    os: str = ""


@dataclass(frozen=True)
class Report:
    """A whole run: what was looked at, with which inputs, and every check's result."""

    tool_version: str
    host: HostInfo
    context: str  # live | sysroot | bundle | demo
    started_at: str  # ISO 8601, UTC
    duration_s: float
    results: tuple[CheckResult, ...]
    inputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        for r in self.results:
            counts[r.status.value] += 1
        return counts

    def findings(self) -> list[tuple[CheckResult, Finding]]:
        return [(r, f) for r in self.results for f in r.findings]

    def exit_code(self, fail_on: str = "fail") -> int:
        """0 when nothing reaches the gate, 1 otherwise (2 is decided before a report)."""
        gate = {"fail": Status.FAIL.rank, "warn": Status.WARN.rank}[fail_on]
        statuses = [r.status for r in self.results]
        hit = any(s in (Status.FAIL, Status.WARN) and s.rank >= gate for s in statuses)
        return 1 if hit else 0
