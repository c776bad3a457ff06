"""An issue body: the environment vllm-ascend's collect_env prints, plus the findings.

The environment part is built from the findings' evidence (each check publishes what it
read under well-known keys), so the core still knows no particular check.
"""

from __future__ import annotations

from ..model import Report, Status
from ..redact import redact_obj, redact_text

ENV_KEYS = ("versions", "packages", "cann", "driver", "firmware", "npu", "chip", "python",
            "env", "cpu", "os")


def render(report: Report, kb=None, lang: str = "en") -> str:
    h = report.host
    out = [f"## ascend-doctor report ({report.tool_version})", "",
           f"- host: `{h.hostname}` — {h.os} — kernel `{h.kernel}` — arch `{h.arch}`",
           f"- context: {report.context}, started {report.started_at}, "
           f"{report.duration_s:.2f} s",
           "- summary: " + ", ".join(f"{v} {k}" for k, v in report.summary.items() if v), ""]
    env_blocks: list[str] = []
    for r in report.results:
        for f in r.findings:
            ev = redact_obj(dict(f.evidence))
            for key in ENV_KEYS:
                if key in ev and isinstance(ev[key], (dict, list, str)) and ev[key]:
                    env_blocks.append(_block(f"{r.check_id}: {key}", ev[key]))
    if env_blocks:
        out += ["<details><summary>Environment (as collect_env reports it)</summary>", "", "```"]
        seen = set()
        for b in env_blocks:
            if b not in seen:
                out.append(b)
                seen.add(b)
        out += ["```", "</details>", ""]
    out += ["### Findings", "", "| status | check | message | kb |", "|---|---|---|---|"]
    rows = sorted(((r, f) for r in report.results for f in r.findings
                   if f.status not in (Status.PASS, Status.SKIP)),
                  key=lambda rf: (-rf[1].status.rank, rf[0].check_id))
    for r, f in rows:
        msg = redact_text(f.message).replace("|", "\\|").replace("\n", " ")
        out.append(f"| {f.status.value} | `{r.check_id}` | {msg} | {', '.join(f.kb)} |")
    passed = [r.check_id for r in report.results if r.status == Status.PASS]
    skipped = [(r.check_id, r.findings[0].message) for r in report.results if r.status == Status.SKIP]
    out += ["", f"Passed: {', '.join(f'`{p}`' for p in passed) or 'none'}", ""]
    if skipped:
        out += ["Skipped:", ""] + [f"- `{c}`: {redact_text(m)}" for c, m in skipped] + [""]
    if kb is not None:
        ids = sorted({k for _, f in rows for k in f.kb})
        if ids:
            out += ["### Knowledge base", ""]
            for kid in ids:
                e = kb.get(kid)
                if e is not None:
                    out.append(f"- **{kid}** {e.text('title', lang)}")
            out.append("")
    return "\n".join(out) + "\n"


def _block(title: str, value) -> str:
    lines = [f"# {title}"]
    if isinstance(value, dict):
        lines += [f"{k}: {v}" for k, v in value.items()]
    elif isinstance(value, list):
        lines += [str(v) for v in value]
    else:
        lines.append(str(value))
    return "\n".join(lines)
