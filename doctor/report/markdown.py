"""An issue body: the environment vllm-ascend's collect_env prints, plus the findings.

The environment part is built from the findings' evidence (each check publishes what it
read under well-known keys), so the core still knows no particular check.
"""

from __future__ import annotations

from .. import problems as _problems
from ..i18n import N_, tr, tt
from ..model import Report, Status
from ..redact import redact_obj, redact_text
from ..suggest import report_fix_command

# Evidence keys any check may publish, with the shape collect_env's layout needs; the first
# finding carrying a key *of that shape* wins (checks use the same names for other things,
# e.g. torch_import's "env" is the name of an environment, a str, not a mapping).
ENV_KEYS: dict[str, type | tuple[type, ...]] = {
    "os": dict, "versions": dict, "packages": dict, "env": dict, "env_source": str,
    "cpu": (list, tuple), "npu_smi": str, "cann_info": str}


STATUS_NAMES = {"fail": N_("fail"), "error": N_("error"), "warn": N_("warn"),
                "info": N_("info"), "pass": N_("pass"), "skip": N_("skip")}
SEVERITY_NAMES = {"critical": N_("critical"), "high": N_("high"), "medium": N_("medium"),
                  "low": N_("low"), "none": N_("none")}


def _cell(text: str) -> str:
    return redact_text(text).replace("|", "\\|").replace("\n", " ")


def _members(pairs) -> str:
    """```libacl.resolve` ×6, `ldconf.order``` (one entry per check, counted)."""
    by: dict[str, int] = {}
    for r, _ in pairs:
        by[r.check_id] = by.get(r.check_id, 0) + 1
    return ", ".join(f"`{c}`" + (f" ×{n}" if n > 1 else "") for c, n in by.items())


def problems_md(report: Report, kb=None, lang: str = "en") -> list[str]:
    """The problems, in the ranking the text and JSON reports use (doctor/ranking.py): the
    root cause (its finding, its fix and KB entry), then what it explains."""
    probs = _problems.group(report, kb)
    if not probs:
        return []
    out = [tt(lang, "### Problems (worst first: a root cause, then what it explains)"), ""]
    for n, p in enumerate(probs, 1):
        r, f = p.head
        sev = tr(SEVERITY_NAMES.get(p.severity.value, p.severity.value), lang).upper()
        out.append(f"{n}. **{sev}** {_cell(tr(p.title(kb, lang), lang))} — `{r.check_id}`: "
                   f"{_cell(tr(f.message, lang))}")
        if p.symptoms:
            out.append("   - " + tt(lang, "explains {n}: {checks}", n=len(p.symptoms),
                                    checks=_members(p.symptoms)))
        if p.roots[1:]:
            out.append("   - " + tt(lang, "same cause: {checks}", checks=_members(p.roots[1:])))
        actions = []
        fix = next((m.fix for _, m in p.members if m.fix), None)
        if fix:
            actions.append(tt(lang, "fix: {command}",
                              command=f"`{report_fix_command(fix, report.context)}`"))
        if f.kb:
            actions.append(tt(lang, "why: {command}",
                              command=f"`ascend-doctor explain {f.kb[0]}`"))
        if actions:
            out.append("   - " + " · ".join(actions))
    return out + [""]


def render(report: Report, kb=None, lang: str = "en") -> str:
    h = report.host
    summary = ", ".join(f"{v} {tr(STATUS_NAMES.get(k, k), lang)}"
                        for k, v in report.summary.items() if v)
    out = [tt(lang, "## ascend-doctor report ({version})", version=report.tool_version), "",
           "- " + tt(lang, "host: `{host}` — {os} — kernel `{kernel}` — arch `{arch}`",
                     host=h.hostname, os=h.os, kernel=h.kernel, arch=h.arch),
           "- " + tt(lang, "context: {context}, started {started}, {seconds} s",
                     context=report.context, started=report.started_at,
                     seconds=f"{report.duration_s:.2f}"),
           "- " + tt(lang, "summary: {counts}", counts=summary), ""]
    out += problems_md(report, kb, lang)
    env = _collect_env(report)
    if env:
        out += ["<details><summary>"
                + tt(lang, "Environment (the fields of vllm-ascend's collect_env)")
                + "</summary>", "", "```", *env, "```", "</details>", ""]
    out += [tt(lang, "### Findings"), "",
            "| " + " | ".join(tr(x, lang) for x in (N_("status"), N_("check"), N_("message"),
                                                     N_("kb"))) + " |", "|---|---|---|---|"]
    rows = sorted(((r, f) for r in report.results for f in r.findings
                   if f.status not in (Status.PASS, Status.SKIP)),
                  key=lambda rf: (-rf[1].status.rank, rf[0].check_id))
    for r, f in rows:
        msg = _cell(tr(f.message, lang))
        out.append(f"| {tr(STATUS_NAMES[f.status.value], lang)} | `{r.check_id}` | {msg} | "
                   f"{', '.join(f.kb)} |")
    passed = [r.check_id for r in report.results if r.status == Status.PASS]
    skipped = [(r.check_id, r.findings[0].message) for r in report.results if r.status == Status.SKIP]
    out += ["", tt(lang, "Passed: {checks}",
                   checks=", ".join(f"`{p}`" for p in passed) or tr(N_("none"), lang)), ""]
    if skipped:
        out += [tt(lang, "Skipped:"), ""] + [f"- `{c}`: {redact_text(tr(m, lang))}"
                                             for c, m in skipped] + [""]
    if kb is not None:
        ids = sorted({k for _, f in rows for k in f.kb})
        if ids:
            out += [tt(lang, "### Knowledge base"), ""]
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
