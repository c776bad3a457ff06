"""The report for people, summary first: the verdict in one line, one line per category
(flutter doctor style), a per-NPU table when npu-smi answered, then the problems in detail —
a root cause with the findings it explains (doctor/problems.py), worst first
(doctor/ranking.py). Passes and skips are counted; ``-v`` lists them and every problem.

No line is wider than ``WIDTH`` columns: long messages wrap; on a terminal the short view
cuts them with "…", in a pipe or a file nothing is cut (a script or a ticket gets every word). Rich renders it; NO_COLOR and non-terminals get plain text; terminals that
cannot encode the glyphs get ASCII ones.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, TextIO

from .. import problems as _problems
from .. import ranking
from ..i18n import N_, ntt, tr, tt
from ..model import Category, CheckResult, Finding, Report, Status
from ..probes.stack import NO_STACK_SOURCE, NO_STACK_SOURCES, SERVICE_NO_STACK_SOURCE
from ..redact import neutralise, redact_text
from ..suggest import next_step, report_fix_command

WIDTH = 100
DETAILED = 4  # problems shown in full by default; the others get one line each
FEW_CHECKS = 3  # runs of at most this many checks are shown in full (as with -v)
MESSAGE_LINES = 2  # lines of a root finding's message in the short view

GLYPHS = {Status.PASS: "✔", Status.INFO: "ℹ", Status.WARN: "▲", Status.FAIL: "✖",
          Status.SKIP: "○", Status.ERROR: "⚠"}
ASCII = {Status.PASS: "[ok]", Status.INFO: "[i]", Status.WARN: "[!]", Status.FAIL: "[x]",
         Status.SKIP: "[-]", Status.ERROR: "[E]"}
STYLES = {Status.PASS: "green", Status.INFO: "cyan", Status.WARN: "yellow",
          Status.FAIL: "bold red", Status.SKIP: "dim", Status.ERROR: "magenta"}


def _glyphs(stream: TextIO) -> dict[Status, str]:
    enc = (getattr(stream, "encoding", None) or "ascii").lower()
    try:
        "".join(GLYPHS.values()).encode(enc)
        return GLYPHS
    except (UnicodeEncodeError, LookupError):
        return ASCII


def _clean(text: Any) -> str:
    """Redacted (a --service URL's password in a subject), controls shown as ``\\x1b`` text
    (a log's ESC[2J / OSC 52 never reaches the terminal)."""
    return neutralise(redact_text(str(text)))


def _safe(text: str) -> str:
    """:func:`_clean`, then Rich markup escaped."""
    from rich.markup import escape
    return escape(_clean(text))


def _cells(text: str) -> int:
    """Terminal cells of ``text``; ASCII (nearly all of a report) without asking Rich."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len
    return cell_len(text)


def wrap(text: str, width: int, first: str = "", rest: str | None = None,
         max_lines: int | None = None) -> list[str]:
    """Greedy word wrap by terminal cells (CJK counts double); words longer than a line
    are cut; with ``max_lines`` the last kept line ends in "…". Linear in the text."""
    rest = first if rest is None else rest
    lines: list[str] = []
    words: list[str] = []
    prefix, used = first, 0  # used: cells of " ".join(words)
    room = width - _cells(prefix)
    for word in text.split():
        wlen = _cells(word)
        while True:
            need = wlen + (1 if words else 0)
            if used + need <= room:
                words.append(word)
                used += need
                break
            if words:
                lines.append(prefix + " ".join(words))
                words, used, prefix = [], 0, rest
                room = width - _cells(prefix)
                if max_lines is not None and len(lines) > max_lines:
                    break
                continue
            # a single word wider than the line: cut it at the room left
            cut, acc = 0, 0
            for ch in word:
                c = _cells(ch)
                if acc + c > room:
                    break
                acc += c
                cut += 1
            cut = max(cut, 1)
            lines.append(prefix + word[:cut])
            word, prefix = word[cut:], rest
            room = width - _cells(prefix)
            wlen = _cells(word)
            if not word:
                break
        if max_lines is not None and len(lines) > max_lines:
            break
    if words or not lines:
        lines.append(prefix + " ".join(words))
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        last = lines[-1]
        while last and _cells(last) > width - 1:
            last = last[:-1]
        lines[-1] = last.rstrip() + "…"
    return lines


def _fit(text: str, width: int = WIDTH) -> str:
    """``text`` cut to ``width`` cells with "…" (spacing kept: tables stay aligned)."""
    if _cells(text) <= width:
        return text
    while text and _cells(text) > width - 1:
        text = text[:-1]
    return text.rstrip() + "…"


def _break(text: str, room: int, rest_room: int) -> list[str]:
    """``text`` in lines of at most ``room`` (then ``rest_room``) cells, broken at the last
    space that fits; unlike :func:`wrap` the spacing inside a line is kept (aligned columns)."""
    lines: list[str] = []
    while _cells(text) > room and room > 0:
        cut, acc = 0, 0
        for ch in text:
            acc += _cells(ch)
            if acc > room:
                break
            cut += 1
        at = text.rfind(" ", 0, cut + 1)
        at = at if at > 0 and text[:at].strip() else max(cut, 1)
        lines.append(text[:at].rstrip())
        text, room = text[at:].lstrip(), rest_room
    lines.append(text)
    return lines


class _Out:
    """Plain lines in, markup-styled lines out: the style goes on a known prefix only, so
    wrapping is computed on the text the user sees."""

    def __init__(self, console: Any, cut: bool = True) -> None:
        self.console = console
        self.cut = cut  # a terminal: long lines are cut with "…"; a pipe or file gets them whole
        self.count = 0
        self.buf: list[str] = []

    def line(self, text: str = "", style: str | None = None, lead: str = "",
             lead_style: str | None = None) -> None:
        from rich.markup import escape
        body = escape(text)
        if style:
            body = f"[{style}]{body}[/]"
        if lead:
            body = (f"[{lead_style}]{escape(lead)}[/]" if lead_style else escape(lead)) + body
        self.buf.append(body)  # printed at once by flush(): one Rich render, not one per line
        self.count += 1

    def flush(self) -> None:
        if self.buf:
            self.console.print("\n".join(self.buf))
        self.buf = []

    def limit(self, max_lines: int | None) -> int | None:
        """``max_lines`` on a terminal; None (every line) when the report goes to a file."""
        return max_lines if self.cut else None

    def para(self, text: str, first: str, rest: str | None = None, style: str | None = None,
             max_lines: int | None = None) -> None:
        for ln in wrap(text, WIDTH, first, rest, self.limit(max_lines)):
            self.line(ln, style)

    def fit(self, text: str, style: str | None = None, lead: str = "",
            lead_style: str | None = None, rest: str = "    ") -> None:
        """One line cut to the width on a terminal; elsewhere wrapped, never cut."""
        room = WIDTH - _cells(lead)
        if self.cut or _cells(text) <= room:
            self.line(_fit(text, room), style, lead, lead_style)
            return
        lines = _break(text, room, WIDTH - _cells(rest))
        self.line(lines[0], style, lead, lead_style)
        for ln in lines[1:]:
            self.line(rest + ln, style)


# category and severity names as the reader sees them (the JSON keeps the English values)
CATEGORY_NAMES = {"libs": N_("libs"), "versions": N_("versions"), "npu": N_("npu"),
                  "container": N_("container"), "service": N_("service"),
                  "config": N_("config"), "performance": N_("performance"),
                  "network": N_("network"), "kvcache": N_("kvcache"),
                  "profiling": N_("profiling"), "logs": N_("logs"), "host": N_("host")}
SEVERITY_NAMES = {"critical": N_("critical"), "high": N_("high"), "medium": N_("medium"),
                  "low": N_("low"), "none": N_("none")}
STATUS_NAMES = {"fail": N_("fail"), "error": N_("error"), "warn": N_("warn"),
                "info": N_("info"), "pass": N_("pass"), "skip": N_("skip")}


def _pad(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` terminal cells (CJK counts double)."""
    return text + " " * max(0, width - _cells(text))


def _checks(lang: str, n: int) -> str:
    return ntt(lang, n, "{n} check", "{n} checks")


def _warnings(lang: str, n: int) -> str:
    return ntt(lang, n, "{n} warning", "{n} warnings")


def no_stack(report: Report) -> list[str]:
    """Checks skipped because the host has no Ascend stack (their skip names the source)."""
    return [r.check_id for r, f in report.findings() if f.status is Status.SKIP
            and isinstance(f.evidence, dict) and f.evidence.get("source") in NO_STACK_SOURCES]


def _warned(lang: str, n: int) -> str:
    """The summary's warn count (checks whose status is warn), as line 1 says it."""
    return ntt(lang, n, "{n} check warned", "{n} checks warned")


def verdict(report: Report, probs: list[_problems.Problem], kb: Any = None,
            lang: str = "en") -> tuple[Status, str]:
    """The first line: what is wrong, in one sentence. Its warning count is the summary's
    (checks that warned), never a count of something else under the same word."""
    failing = [p for p in probs if p.status in (Status.FAIL, Status.ERROR)]
    warning = [p for p in probs if p.status is Status.WARN]
    warned = report.summary["warn"]
    absent = no_stack(report)
    if absent:
        # one fact, said once: no stack (or a vLLM service running without one); what else
        # failed follows it, the worst named
        source, reason = next((f.evidence.get("source"), f.evidence.get("reason", ""))
                              for _, f in report.findings() if isinstance(f.evidence, dict)
                              and f.evidence.get("source") in NO_STACK_SOURCES)
        args = {"reason": tr(reason, lang), "checks": _checks(lang, len(absent))}
        if source == SERVICE_NO_STACK_SOURCE:
            text = tt(lang, "A vLLM service runs without an Ascend stack: {reason} ({checks} "
                      "that need one skipped)", **args)
        else:
            text = tt(lang, "No Ascend stack on this host: {reason} ({checks} that need one "
                      "skipped)", **args)
        if failing:
            text += tt(lang, "; besides, {problems} (the worst: {title})",
                       problems=ntt(lang, len(failing), "{n} problem", "{n} problems"),
                       title=_clean(tr(failing[0].title(kb, lang), lang)))
        if warned:
            text += f"; {_warned(lang, warned)}"
        status = failing[0].status if failing else (Status.WARN if warning else Status.SKIP)
        return status, text
    if not probs:
        s = report.summary
        text = tt(lang, "No problem found: {checks} passed", checks=_checks(lang, s["pass"]))
        if s["skip"]:
            text += tt(lang, ", {n} skipped", n=s["skip"])
        return Status.PASS, text
    worst = failing[0] if failing else warning[0]
    nfail, nerr = _problems.broken_checks(report)
    if failing:
        parts = [ntt(lang, nfail, "{n} failed check", "{n} failed checks")] if nfail else []
        if nerr:
            parts.append(ntt(lang, nerr, "{n} check that could not run",
                             "{n} checks that could not run"))
        checks = parts[0] if len(parts) == 1 else tt(lang, "{a} and {b}", a=parts[0], b=parts[1])
        text = ntt(lang, len(failing), "{n} problem explains {checks}",
                   "{n} problems explain {checks}", checks=checks)
        if warned:
            text += tt(lang, " (and {warnings})", warnings=_warned(lang, warned))
    else:
        text = tt(lang, "{warnings}, nothing failed", warnings=_warned(lang, warned))
    return worst.status, text + tt(lang, "; the worst: {title}",
                                   title=_clean(tr(worst.title(kb, lang), lang)))


def _category_lines(report: Report, probs: list[_problems.Problem], kb: Any, lang: str
                    ) -> list[tuple[Status, str]]:
    """One line per category: counts, and the worst problem that touches it."""
    by_cat: dict[Category, list[CheckResult]] = {}
    for r in report.results:
        by_cat.setdefault(r.category, []).append(r)
    first_problem: dict[Category, str] = {}
    for p in probs:
        for r, _ in p.members:
            first_problem.setdefault(r.category, _clean(tr(p.title(kb, lang), lang)))
    order = sorted(by_cat, key=lambda c: (-max(r.status.rank for r in by_cat[c]), c.value))
    names = {c: tr(CATEGORY_NAMES.get(c.value, c.value), lang) for c in order}
    name_w = max(_cells(n) for n in names.values()) if order else 8
    labels = ((Status.FAIL, N_("{n} failed")), (Status.ERROR, N_("{n} could not run")),
              (Status.WARN, N_("{n} warned")), (Status.INFO, N_("{n} info")),
              (Status.PASS, N_("{n} passed")), (Status.SKIP, N_("{n} skipped")))
    out = []
    for cat in order:
        rs = by_cat[cat]
        worst = max((r.status for r in rs), key=lambda s: s.rank)
        counts = {s: sum(1 for r in rs if r.status is s) for s in Status}
        parts = [tt(lang, label, n=counts[s]) for s, label in labels if counts[s]]
        text = f"{_pad(names[cat], name_w)}  {', '.join(parts)}"
        if cat in first_problem:
            text += f" — {first_problem[cat]}"
        out.append((worst, text))
    return out


def _npu_rows(report: Report) -> list[dict]:
    for r, f in report.findings():
        chips = f.evidence.get("chips") if isinstance(f.evidence, dict) else None
        if r.check_id == "npu.smi" and isinstance(chips, list) and chips:
            return [c for c in chips if isinstance(c, dict)]
    return []


def _npu_marks(report: Report) -> dict[tuple[Any, Any], dict[str, Any]]:
    """The cells the npu checks found bad, by (npu, chip): ``temp``, ``health`` and ``ecc`` →
    the finding's status, ``ghosts`` → {pid: status} of exited processes still holding HBM."""
    marks: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r, f in report.findings():
        ev = f.evidence if isinstance(f.evidence, dict) else {}
        if f.status not in (Status.FAIL, Status.WARN):
            continue
        if r.check_id in ("npu.temperature", "npu.health", "npu.ecc") and "npu" in ev:
            key = {"npu.temperature": "temp", "npu.health": "health"}.get(r.check_id, "ecc")
            marks.setdefault((ev["npu"], ev.get("chip", 0)), {})[key] = f.status
        elif r.check_id == "npu.processes":
            for g in ev.get("ghosts") or ():
                if isinstance(g, (list, tuple)) and len(g) >= 3:
                    cell = marks.setdefault((g[0], g[1]), {}).setdefault("ghosts", {})
                    cell[str(g[2])] = f.status
    return marks


def _npu_table(out: _Out, rows: list[dict], lang: str = "en",
               marks: dict | None = None, glyph: dict[Status, str] | None = None) -> None:
    """One row per chip; a bad cell carries the status glyph of the finding that judged it
    (≥ 75/85 °C, health not OK, uncorrectable or rising ECC next to the HBM figures, an
    exited process holding HBM) and so does its row."""
    glyph = glyph or GLYPHS
    marks = marks or {}

    def cell(v: Any, unit: str = "") -> str:
        return "-" if v is None else f"{v}{unit}"

    def mark(text: str, st: Status | None) -> str:
        return f"{text} {glyph[st]}" if st is not None else text

    table = [("",) + tuple(tr(h, lang) for h in (N_("NPU"), N_("chip"), N_("health"),
                                                  N_("temp"), N_("HBM used / total"),
                                                  N_("processes")))]
    for c in rows:
        m = marks.get((c.get("npu"), c.get("chip", 0)), {})
        used, total = c.get("hbm_used_mb"), c.get("hbm_total_mb")
        hbm = "-" if used is None else (f"{used} / {total} MB ({100 * used / total:.0f} %)"
                                        if total else f"{used} MB")
        health = _clean(c.get("health", ""))
        hst = m.get("health") or (Status.WARN if health and health != "OK" else None)
        ghosts = m.get("ghosts", {})
        procs = []
        for pr in c.get("processes") or []:
            text = _clean(pr)
            st = ghosts.get(text.split(" ", 1)[0])
            procs.append(mark(text, st) + (" " + tr(N_("exited"), lang) if st else ""))
        if m.get("ecc") is not None:  # npu.ecc: uncorrectable or rising ECC in this memory
            hbm = mark(f"{hbm} ECC", m["ecc"])
        states = [s for s in (m.get("temp"), hst, m.get("ecc"), *ghosts.values())
                  if s is not None]
        row_st = max(states, key=lambda s: s.rank) if states else None
        table.append((glyph[row_st] if row_st else "", f"{c.get('npu')}",
                      f"{c.get('chip')} {_clean(c.get('name', ''))}", mark(health, hst),
                      mark(cell(c.get("temp_c"), " °C"), m.get("temp")), hbm,
                      "; ".join(procs) if procs else tr(N_("none"), lang)))
    widths = [max(_cells(row[i]) for row in table) for i in range(6)]
    for n, row in enumerate(table):
        head = "  ".join(v + " " * (w - _cells(v)) for v, w in zip(row[:6], widths))
        out.fit(f"  {head}  {row[6]}", "bold" if n == 0 else None, rest=" " * 6)


def _kb_entries(f: Finding, kb: Any) -> list[Any]:
    return [e for e in (kb.get(k) if kb is not None else None for k in f.kb) if e is not None]


def _members_text(pairs: Iterable[tuple[CheckResult, Finding]]) -> str:
    """``libacl.resolve ×6 (libhccl.so, libascendcl.so, …), ldconf.order``"""
    by_check: dict[str, list[Finding]] = {}
    for r, f in pairs:
        by_check.setdefault(r.check_id, []).append(f)
    parts = []
    for cid, fs in by_check.items():
        if len(fs) == 1:
            parts.append(cid)
            continue
        subjects = list(dict.fromkeys(_clean(f.subject) for f in fs if f.subject))
        shown = ", ".join(subjects[:3]) + (", …" if len(subjects) > 3 else "")
        parts.append(f"{cid} ×{len(fs)}" + (f" ({shown})" if subjects else ""))
    return ", ".join(parts)


def _message(f: Finding, lang: str = "en") -> str:
    subj = (f"{f.subject}: " if f.subject and not f.message.startswith(f.subject) else "")
    return _clean(subj + tr(f.message, lang))


def _ran(report: Report) -> str:
    """The subcommand that made this report, as :func:`suggest.next_step` asks for it."""
    return "demo" if report.context == "demo" else "check"


def _problem(out: _Out, n: int, p: _problems.Problem, glyph: dict[Status, str], kb: Any,
             lang: str, verbose: bool, report: Report | None = None) -> None:
    r, f = p.head
    st = p.status
    lead = f"{n:>2} {glyph[st]} "
    sev = tr(SEVERITY_NAMES.get(p.severity.value, p.severity.value), lang)
    title = f"{sev.upper()} {_clean(tr(p.title(kb, lang), lang))}"
    if len(p.members) > 1:
        title += tt(lang, " ({n} findings)", n=len(p.members))
    ind = " " * (len(lead) + 1)
    lines = wrap(title, WIDTH, " " * len(lead), ind, None if verbose else out.limit(1))
    out.line(lines[0][len(lead):], "bold", lead, STYLES[st])
    for ln in lines[1:]:
        out.line(ln, "bold")
    out.para(f"{r.check_id}: {_message(f, lang)}", ind, ind + "  ",
             max_lines=None if verbose else MESSAGE_LINES)
    more_roots = p.roots[1:]
    if verbose:
        for rr, ff in more_roots:
            out.para(tt(lang, "same cause: {check}: {message}", check=rr.check_id,
                        message=_message(ff, lang)), ind, ind + "  ")
        for rr, ff in p.symptoms:
            out.para(tt(lang, "explains {check}: {message}", check=rr.check_id,
                        message=_message(ff, lang)), ind, ind + "  ")
    else:
        parts = []
        if p.symptoms:
            parts.append(tt(lang, "explains {n}: {checks}", n=len(p.symptoms),
                            checks=_members_text(p.symptoms)))
        if more_roots:
            parts.append(tt(lang, "same cause: {checks}", checks=_members_text(more_roots)))
        if parts:
            out.para("; ".join(parts), ind, ind + "  ", max_lines=2)
    actions = []
    fix = next((ff.fix for _, ff in p.members if ff.fix), None)
    if fix:
        actions.append(tt(lang, "fix: {command}", command=report_fix_command(
            fix, report.context if report is not None else None)))
    entries = _kb_entries(f, kb)
    if entries:
        actions.append(tt(lang, "why: {command}",
                          command=f"ascend-doctor explain {entries[0].id}"))
        # the first step that does not repeat what this run did (suggest.next_step)
        step = (next_step(list(entries[0].steps), lang, _ran(report),
                          [x.check_id for x in report.results])
                if verbose and report is not None else None)
        if step:
            actions.append(tt(lang, "next: {step}", step=_clean(step)))
    elif f.kb:
        actions.append(tt(lang, "kb {entry}", entry=f.kb[0]))
    if actions:
        out.para(" · ".join(actions), ind, ind + "  ", style="dim",
                 max_lines=None if verbose else 1)


def render(report: Report, stream: TextIO | None = None, kb: Any = None, lang: str = "en",
           verbose: bool = False) -> None:
    """Write the report to ``stream``; ``kb`` (a KnowledgeBase) adds titles, severities and
    next steps."""
    from rich.console import Console

    stream = stream or sys.stdout
    no_color = bool(os.environ.get("NO_COLOR")) or not getattr(stream, "isatty", lambda: False)()
    console = Console(file=stream, no_color=no_color, highlight=False, soft_wrap=True,
                      force_terminal=None if not no_color else False, emoji=False)
    glyph = _glyphs(stream)
    out = _Out(console, cut=bool(getattr(stream, "isatty", lambda: False)()))
    # a narrow run (--only a few checks) is a question about those checks: answer in full
    verbose = verbose or len(report.results) <= FEW_CHECKS
    probs = _problems.group(report, kb)

    st, text = verdict(report, probs, kb, lang)
    lead = f"{glyph[st]} "
    lines = wrap(text, WIDTH, " " * len(lead), " " * len(lead))
    out.line(lines[0][len(lead):], "bold", lead, STYLES[st])
    for ln in lines[1:]:
        out.line(ln, "bold")
    h = report.host
    if h.kernel:
        head = tt(lang, "ascend-doctor {version} — {host} ({os}, kernel {kernel}) — "
                  "context: {context}", version=report.tool_version, host=_clean(h.hostname),
                  os=_clean(h.os or h.arch), kernel=_clean(h.kernel), context=report.context)
    else:  # a sysroot or bundle that does not say which kernel
        head = tt(lang, "ascend-doctor {version} — {host} ({os}) — context: {context}",
                  version=report.tool_version, host=_clean(h.hostname),
                  os=_clean(h.os or h.arch), context=report.context)
    out.fit(head, "dim")
    inputs = report.inputs if isinstance(report.inputs, dict) else {}
    if inputs.get("service_url_given") and inputs.get("service_url"):
        out.fit(tt(lang, "service: {url}", url=_clean(inputs["service_url"])), "dim")

    out.line()
    for cst, ctext in _category_lines(report, probs, kb, lang):
        out.fit(ctext, None, f"{glyph[cst]} ", STYLES[cst])

    rows = _npu_rows(report)
    if rows:
        out.line()
        _npu_table(out, rows, lang, _npu_marks(report), glyph)

    if probs:
        out.line()
        out.line(tt(lang, "Problems, worst first (a root cause, then what it explains)"),
                 "bold")
        shown = probs if verbose else probs[:DETAILED]
        for n, p in enumerate(shown, 1):
            _problem(out, n, p, glyph, kb, lang, verbose, report)
        rest = [p for p in probs[len(shown):] if p.status is not Status.WARN]
        warns = [p for p in probs[len(shown):] if p.status is Status.WARN]
        if rest:
            out.line(tt(lang, "also failing (-v shows them in full):"), "bold")
            for n, p in enumerate(rest, len(shown) + 1):
                r, f = p.head
                extra = f" (+{len(p.members) - 1})" if len(p.members) > 1 else ""
                sev = tr(SEVERITY_NAMES.get(p.severity.value, p.severity.value), lang)
                body = (f"{_pad(sev, 8)} {r.check_id}{extra}: "
                        f"{_clean(tr(p.title(kb, lang), lang))}")
                lead = f"{n:>2} {glyph[p.status]} "
                out.fit(body, None, lead, STYLES[p.status], rest=" " * (len(lead) + 2))
        if warns:
            lead = f"   {glyph[Status.WARN]} "
            lines = wrap(f"{_warnings(lang, len(warns))}: "
                         + _members_text([p.head for p in warns]), WIDTH, " " * len(lead),
                         " " * len(lead), max_lines=None if verbose else out.limit(2))
            out.line(lines[0][len(lead):], None, lead, STYLES[Status.WARN])
            for ln in lines[1:]:
                out.line(ln)

    quiet = [(r, f) for r, f in report.findings()
             if f.status in (Status.PASS, Status.SKIP, Status.INFO)]
    if verbose and quiet:
        out.line()
        out.line(tt(lang, "Passed, skipped and informational findings"), "bold")
        for r, f in sorted(quiet, key=lambda t: (-t[1].status.rank, t[0].check_id)):
            lead = f"  {glyph[f.status]} "
            lines = wrap(f"{r.check_id}: {_message(f, lang)}", WIDTH, " " * len(lead),
                         " " * (len(lead) + 2))
            out.line(lines[0][len(lead):], None, lead, STYLES[f.status])
            for ln in lines[1:]:
                out.line(ln)

    s = report.summary
    out.line()
    parts = [f"{s[st.value]} {tr(STATUS_NAMES[st.value], lang)}" for st in
             (Status.FAIL, Status.ERROR, Status.WARN, Status.INFO, Status.PASS, Status.SKIP)]
    tail = "" if verbose else tt(lang, "; -v lists them all")
    out.para(tt(lang, "summary: {counts} — {n} checks in {seconds} s{tail}",
                counts=", ".join(parts), n=len(report.results),
                seconds=f"{report.duration_s:.2f}", tail=tail), "")
    out.flush()


__all__ = ["render", "verdict", "wrap", "WIDTH", "NO_STACK_SOURCE", "ranking"]
