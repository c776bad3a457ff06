"""JUnit XML for CI: one testcase per check; fail -> <failure>, error -> <error>, skip -> <skipped>."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..model import Report, Status
from ..redact import redact_text


def render(report: Report) -> str:
    s = report.summary
    suite = ET.Element("testsuite", name="ascend-doctor", tests=str(len(report.results)),
                       failures=str(s["fail"]), errors=str(s["error"]), skipped=str(s["skip"]),
                       time=f"{report.duration_s:.3f}", timestamp=report.started_at,
                       hostname=report.host.hostname)
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname=f"ascend_doctor.{r.category.value}",
                             name=r.check_id, time=f"{r.duration_s:.3f}")
        lines = [f"[{f.status.value}] {f.subject + ': ' if f.subject else ''}{f.message}"
                 + (f" (kb: {', '.join(f.kb)})" if f.kb else "") for f in r.findings]
        body = redact_text("\n".join(lines))
        first = next((f for f in r.findings if f.status == r.status), r.findings[0])
        if r.status == Status.FAIL:
            ET.SubElement(case, "failure", message=redact_text(first.message),
                          type="fail").text = body
        elif r.status == Status.ERROR:
            ET.SubElement(case, "error", message=redact_text(first.message),
                          type="error").text = body
        elif r.status == Status.SKIP:
            ET.SubElement(case, "skipped", message=redact_text(first.message))
        else:
            ET.SubElement(case, "system-out").text = body
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
