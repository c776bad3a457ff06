"""`check --npd`: the report as a node-problem-detector custom plugin answers.

NPD's custom plugin protocol (kubernetes/node-problem-detector,
pkg/custompluginmonitor/types): exit 0 OK, 1 NonOK, anything else Unknown; standard output
is the condition's message, cut at the monitor's ``max_output_length`` (80 in
deploy/npd/ascend-doctor-monitor.json). So: one line, at most 80 characters, the most
severe failing check first. A run that produced no report exits 2 (Unknown) through the
CLI's own error path.
"""

from __future__ import annotations

from .model import Report, Severity, Status

NPD_OK, NPD_PROBLEM, NPD_UNKNOWN = 0, 1, 2
MAX_MESSAGE = 80
_SEV = {s: i for i, s in enumerate((Severity.NONE, Severity.LOW, Severity.MEDIUM,
                                    Severity.HIGH, Severity.CRITICAL))}


def npd_result(report: Report, fail_on: str = "fail") -> tuple[int, str]:
    """(exit code, one message line) for NPD."""
    from .redact import neutralise, redact_text

    gate = {"fail": (Status.FAIL,), "warn": (Status.FAIL, Status.WARN)}[fail_on]
    bad = []
    for r in report.results:
        if r.status in gate:
            fs = [f for f in r.findings if f.status is r.status]
            sev = max((_SEV.get(f.severity, 0) for f in fs), default=0)
            kb = next((k for f in fs for k in f.kb), "")
            bad.append((-sev, -r.status.rank, r.check_id, kb))
    if not bad:
        errors = sum(1 for r in report.results if r.status is Status.ERROR)
        what = "failing" if fail_on == "fail" else "failing or warning"
        msg = f"ok: {len(report.results)} checks, none {what}"
        if errors:
            msg += f" ({errors} could not run)"
        return NPD_OK, _fit(neutralise(redact_text(msg)))
    bad.sort()
    parts = [f"{cid}" + (f" {kb}" if kb else "") for _, _, cid, kb in bad]
    head = f"{len(bad)} failing: "
    msg = head + parts[0]
    for i in range(1, len(parts)):
        cand = msg + ", " + parts[i]
        rest = len(parts) - i - 1
        if len(cand) + (len(f", +{rest} more") if rest else 0) > MAX_MESSAGE:
            msg += f", +{len(parts) - i} more"  # fitted with the previous round's reserve
            break
        msg = cand
    return NPD_PROBLEM, _fit(neutralise(redact_text(msg)))


def _fit(msg: str) -> str:
    msg = " ".join(msg.split())
    return msg if len(msg) <= MAX_MESSAGE else msg[:MAX_MESSAGE - 1] + "…"
