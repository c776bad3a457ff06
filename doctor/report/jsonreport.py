"""The machine-readable report: one JSON document, versioned, validated by a shipped schema."""

from __future__ import annotations

import json
from typing import Any

from ..model import CheckResult, Finding, Report
from ..redact import redact_obj, redact_text

SCHEMA_VERSION = "1.0"


def finding_dict(f: Finding, result: CheckResult) -> dict[str, Any]:
    return {
        "status": f.status.value,
        "severity": f.severity.value,
        "category": (f.category or result.category).value,
        "subject": redact_text(f.subject) if isinstance(f.subject, str) else f.subject,
        "message": redact_text(f.message),
        "evidence": redact_obj(dict(f.evidence)),
        "kb": list(f.kb),
        "fix": ({"id": f.fix.id, "params": redact_obj(dict(f.fix.params))} if f.fix else None),
    }


def report_dict(report: Report, kb_titles: dict[str, str] | None = None) -> dict[str, Any]:
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
             "findings": [finding_dict(f, r) for f in r.findings]}
            for r in report.results
        ],
        "knowledge": {k: v for k, v in sorted((kb_titles or {}).items())},
    }


def render(report: Report, kb_titles: dict[str, str] | None = None) -> str:
    return json.dumps(report_dict(report, kb_titles), indent=2, ensure_ascii=False,
                      default=str) + "\n"


def schema() -> dict[str, Any]:
    from importlib.resources import files

    return json.loads(files("doctor.report").joinpath("report.schema.json").read_text())
