"""JUnit XML for CI: one testcase per check; fail -> <failure>, error -> <error>, skip -> <skipped>.

The problems (doctor/problems.py, ranked by doctor/ranking.py as in the text and JSON
reports) ride along: the suite's ``<properties>`` list them worst first (``problem.N``), and
each member check's body says which problem it belongs to — its root cause, or the root
that explains it — so a CI page shows the cause next to the symptom."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .. import problems as _problems
from ..model import Report, Status
from ..redact import redact_text, xml_safe


def _x(text: str) -> str:
    """Redacted and XML-1.0-safe: a log's control bytes in a message would make the whole
    file unparseable for the CI that reads it."""
    return xml_safe(redact_text(str(text)))


def _problem_notes(report: Report, kb=None) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """(``problem.N`` properties, check id -> lines naming its problem) in the ranking."""
    props: list[tuple[str, str]] = []
    notes: dict[str, list[str]] = {}
    for n, p in enumerate(_problems.group(report, kb), 1):
        root = p.head[0].check_id
        explains = ", ".join(dict.fromkeys(r.check_id for r, _ in p.symptoms))
        props.append((f"problem.{n}", f"{p.severity.value} {p.title(kb)} (root cause: {root}"
                      + (f"; explains: {explains})" if explains else ")")))
        for r, _ in p.roots:
            notes.setdefault(r.check_id, []).append(
                f"problem {n} ({p.severity.value}): root cause: {p.title(kb)}"
                + (f"; explains {explains}" if explains else ""))
        for r, _ in p.symptoms:
            notes.setdefault(r.check_id, []).append(
                f"problem {n} ({p.severity.value}): explained by {root}: {p.title(kb)}")
    return props, {k: list(dict.fromkeys(v)) for k, v in notes.items()}


def render(report: Report, kb=None) -> str:
    s = report.summary
    suite = ET.Element("testsuite", name="ascend-doctor", tests=str(len(report.results)),
                       failures=str(s["fail"]), errors=str(s["error"]), skipped=str(s["skip"]),
                       time=f"{report.duration_s:.3f}", timestamp=_x(report.started_at),
                       hostname=_x(report.host.hostname))
    props, notes = _problem_notes(report, kb)
    if props:
        pe = ET.SubElement(suite, "properties")
        for name, value in props:
            ET.SubElement(pe, "property", name=name, value=_x(value))
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname=f"ascend_doctor.{r.category.value}",
                             name=_x(r.check_id), time=f"{r.duration_s:.3f}")
        lines = [f"[{f.status.value}] {f.subject + ': ' if f.subject else ''}{f.message}"
                 + (f" (kb: {', '.join(f.kb)})" if f.kb else "") for f in r.findings]
        body = _x("\n".join(notes.get(r.check_id, []) + lines))
        first = next((f for f in r.findings if f.status == r.status), r.findings[0])
        if r.status == Status.FAIL:
            ET.SubElement(case, "failure", message=_x(first.message),
                          type="fail").text = body
        elif r.status == Status.ERROR:
            ET.SubElement(case, "error", message=_x(first.message),
                          type="error").text = body
        elif r.status == Status.SKIP:
            ET.SubElement(case, "skipped", message=_x(first.message))
        else:
            ET.SubElement(case, "system-out").text = body
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
