"""JUnit XML for CI: one testcase per check; fail -> <failure>, error -> <error>, skip -> <skipped>."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..model import Report, Status
from ..redact import redact_text, xml_safe


def _x(text: str) -> str:
    """Redacted and XML-1.0-safe: a log's control bytes in a message would make the whole
    file unparseable for the CI that reads it."""
    return xml_safe(redact_text(str(text)))


def render(report: Report) -> str:
    s = report.summary
    suite = ET.Element("testsuite", name="ascend-doctor", tests=str(len(report.results)),
                       failures=str(s["fail"]), errors=str(s["error"]), skipped=str(s["skip"]),
                       time=f"{report.duration_s:.3f}", timestamp=_x(report.started_at),
                       hostname=_x(report.host.hostname))
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname=f"ascend_doctor.{r.category.value}",
                             name=_x(r.check_id), time=f"{r.duration_s:.3f}")
        lines = [f"[{f.status.value}] {f.subject + ': ' if f.subject else ''}{f.message}"
                 + (f" (kb: {', '.join(f.kb)})" if f.kb else "") for f in r.findings]
        body = _x("\n".join(lines))
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
