"""An issue body: the environment vllm-ascend's collect_env prints, plus the findings.

The environment part is built from the findings' evidence (each check publishes what it
read under well-known keys), so the core still knows no particular check.
"""

from __future__ import annotations

from ..model import Report, Status
from ..redact import redact_obj, redact_text

# Evidence keys any check may publish, with the shape collect_env's layout needs; the first
# finding carrying a key *of that shape* wins (checks use the same names for other things,
# e.g. torch_import's "env" is the name of an environment, a str, not a mapping).
ENV_KEYS: dict[str, type | tuple[type, ...]] = {
    "os": dict, "versions": dict, "packages": dict, "env": dict, "env_source": str,
    "cpu": (list, tuple), "npu_smi": str, "cann_info": str}


def render(report: Report, kb=None, lang: str = "en") -> str:
    h = report.host
    out = [f"## ascend-doctor report ({report.tool_version})", "",
           f"- host: `{h.hostname}` — {h.os} — kernel `{h.kernel}` — arch `{h.arch}`",
           f"- context: {report.context}, started {report.started_at}, "
           f"{report.duration_s:.2f} s",
           "- summary: " + ", ".join(f"{v} {k}" for k, v in report.summary.items() if v), ""]
    env = _collect_env(report)
    if env:
        out += ["<details><summary>Environment (the fields of vllm-ascend's collect_env)</summary>",
                "", "```", *env, "```", "</details>", ""]
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


def _collect_env(report: Report) -> list[str]:
    """collect_env's layout, filled from evidence published under ENV_KEYS."""
    ev: dict = {}
    for r in report.results:
        for f in r.findings:
            if not isinstance(f.evidence, dict):
                continue
            for key, shape in ENV_KEYS.items():
                value = f.evidence.get(key)
                if key not in ev and value and isinstance(value, shape):
                    ev[key] = redact_obj(value)
    if not ev:
        return []
    osd = ev.get("os") or {}
    vers = ev.get("versions") or {}
    lines = [f"PyTorch version: {vers.get('torch', 'N/A')}",
             f"torch_npu version: {vers.get('torch-npu', 'N/A')}", "",
             f"OS: {osd.get('os', 'N/A')} ({osd.get('arch', '')})",
             f"Kernel: {osd.get('kernel', 'N/A')}",
             f"GCC version: {osd.get('gcc', 'N/A')}", f"Clang version: {osd.get('clang', 'N/A')}",
             f"CMake version: {osd.get('cmake', 'N/A')}", f"Libc version: {osd.get('libc', 'N/A')}",
             "", f"Python version: {vers.get('python', 'N/A')}", "",
             "CPU:", *[str(x) for x in (ev.get("cpu") or ["N/A"])], "",
             "Versions of relevant libraries:",
             *[f"[pip3] {k}=={v}" for k, v in (ev.get("packages") or {}).items()], "",
             f"vLLM Version: {vers.get('vllm', 'N/A')}",
             f"vLLM Ascend Version: {vers.get('vllm-ascend', 'N/A')}", "",
             f"ENV Variables ({ev.get('env_source', 'environment')}):",
             *[f"{k}={v}" for k, v in (ev.get("env") or {}).items()], "",
             "NPU:", str(ev.get("npu_smi") or "N/A").rstrip(), "",
             "CANN:", str(ev.get("cann_info") or "N/A").rstrip()]
    return [redact_text(x) for x in lines]
