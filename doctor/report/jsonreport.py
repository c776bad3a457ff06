"""The machine-readable report: one JSON document, versioned, validated by a shipped schema.

1.1 adds ``problems`` (root causes with their member findings, ranked by doctor/ranking.py)
and each finding's ``cause`` / ``explained_by``; every 1.0 field is kept, and a finding's
``severity`` is now the ranked one (its KB entry's, else the check's, else from status).
"""

from __future__ import annotations

import json
from typing import Any

from .. import problems as _problems
from .. import ranking
from ..model import CheckResult, Finding, Report
from ..redact import redact_obj, redact_text

SCHEMA_VERSION = "1.1"


def finding_dict(f: Finding, result: CheckResult, kb: Any = None) -> dict[str, Any]:
    return {
        "status": f.status.value,
        "severity": ranking.severity(f, result, kb).value,
        "category": (f.category or result.category).value,
        "subject": redact_text(f.subject) if isinstance(f.subject, str) else f.subject,
        "message": redact_text(f.message),
        "evidence": redact_obj(dict(f.evidence)),
        "kb": list(f.kb),
        "fix": ({"id": f.fix.id, "params": redact_obj(dict(f.fix.params))} if f.fix else None),
        "cause": redact_text(f.cause),
        "explained_by": [redact_text(e) for e in f.explained_by],
    }


def problems_list(report: Report, kb: Any = None, lang: str = "en") -> list[dict[str, Any]]:
    """The problems, worst first; members point into ``checks`` (check id, finding index)."""
    out = []
    for n, p in enumerate(_problems.group(report, kb), 1):
        r, f = p.head
        out.append({
            "rank": n, "cause": redact_text(p.key), "severity": p.severity.value,
            "status": p.status.value, "title": redact_text(p.title(kb, lang)),
            "root": _problems.ref(p, p.head),
            "roots": [_problems.ref(p, m) for m in p.roots],
            "symptoms": [_problems.ref(p, m) for m in p.symptoms],
            "explains": len(p.symptoms),
            "checks": p.checks,
            "kb": list(f.kb),
            "fix": next((m.fix.id for _, m in p.members if m.fix), None),
        })
    return out


def report_dict(report: Report, kb_titles: dict[str, str] | None = None, kb: Any = None,
                lang: str = "en") -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "ascend-doctor", "version": report.tool_version},
        "host": {"hostname": report.host.hostname, "kernel": report.host.kernel,
                 "arch": report.host.arch, "os": report.host.os},
        "context": report.context,
        "started_at": report.started_at,
        "duration_s": report.duration_s,
        "inputs": redact_obj(dict(report.inputs)),
        "summary": report.summary,
        "checks": [
            {"id": r.check_id, "title": r.title, "category": r.category.value,
             "tags": list(r.tags), "status": r.status.value, "duration_s": r.duration_s,
             "findings": [finding_dict(f, r, kb) for f in r.findings]}
            for r in report.results
        ],
        "problems": problems_list(report, kb, lang),
        "knowledge": {k: v for k, v in sorted((kb_titles or {}).items())},
    }


def render(report: Report, kb_titles: dict[str, str] | None = None, kb: Any = None,
           lang: str = "en") -> str:
    return json.dumps(report_dict(report, kb_titles, kb, lang), indent=2, ensure_ascii=False,
                      default=str) + "\n"


def schema() -> dict[str, Any]:
    from importlib.resources import files

    return json.loads(files("ascend_doctor.report").joinpath("report.schema.json").read_text())
