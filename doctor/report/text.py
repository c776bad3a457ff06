"""The report for people: grouped by category, worst first, with why and what to do next.

Rich renders it; NO_COLOR and non-terminals get plain text; terminals that cannot encode
the glyphs get ASCII ones.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from ..model import Category, CheckResult, Report, Status
from ..redact import neutralise, redact_text

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


def _safe(text: str) -> str:
    """Redacted (a --service URL's password in a subject), controls shown as ``\\x1b`` text
    (a log's ESC[2J / OSC 52 never reaches the terminal), Rich markup escaped."""
    from rich.markup import escape
    return escape(neutralise(redact_text(str(text))))


def render(report: Report, stream: TextIO | None = None, kb=None, lang: str = "en",
           verbose: bool = False) -> None:
    """Write the report to ``stream``; ``kb`` (a KnowledgeBase) adds titles and next steps."""
    from rich.console import Console
    from rich.markup import escape

    stream = stream or sys.stdout
    no_color = bool(os.environ.get("NO_COLOR")) or not getattr(stream, "isatty", lambda: False)()
    console = Console(file=stream, no_color=no_color, highlight=False, soft_wrap=True,
                      force_terminal=None if not no_color else False, emoji=False)
    glyph = _glyphs(stream)
    h = report.host
    console.print(f"[bold]ascend-doctor {report.tool_version}[/] — {_safe(h.hostname)} "
                  f"({_safe(h.os or h.arch)}, kernel {_safe(h.kernel)}) — context: "
                  f"{report.context}")
    by_cat: dict[Category, list[CheckResult]] = {}
    for r in report.results:
        by_cat.setdefault(r.category, []).append(r)
    for cat in sorted(by_cat, key=lambda c: (-max(r.status.rank for r in by_cat[c]), c.value)):
        results = sorted(by_cat[cat], key=lambda r: (-r.status.rank, r.check_id))
        worst = results[0].status
        console.print()
        console.print(f"[{STYLES[worst]}]{glyph[worst]}[/] [bold]{cat.value.upper()}[/]")
        for r in results:
            st = r.status
            console.print(f"  [{STYLES[st]}]{glyph[st]} {st.value:5}[/] {_safe(r.check_id)} — "
                          f"{_safe(r.title)}")
            for f in r.findings:
                if f.status in (Status.PASS, Status.SKIP) and not verbose and len(r.findings) > 1:
                    continue
                subj = (f"{_safe(f.subject)}: " if f.subject and not
                        f.message.startswith(f.subject) else "")
                console.print(f"      [{STYLES[f.status]}]{glyph[f.status]}[/] {subj}"
                              f"{_safe(f.message)}")
                if f.status in (Status.FAIL, Status.WARN, Status.ERROR):
                    for kb_id in f.kb:
                        entry = kb.get(kb_id) if kb is not None else None
                        if entry is None:
                            console.print(f"        [dim]kb {kb_id}[/]")
                            continue
                        console.print(f"        [dim]kb {kb_id}: {_safe(entry.text('title', lang))}"
                                      f" (ascend-doctor explain {kb_id})[/]")
                        steps = entry.steps_for(lang)
                        if steps:
                            console.print(f"        [dim]next: {_safe(steps[0])}[/]")
                    if f.fix:
                        console.print(f"        [dim]fix: ascend-doctor fix {f.fix.id}[/]")
    s = report.summary
    console.print()
    parts = [f"[{STYLES[st]}]{s[st.value]} {st.value}[/]" for st in
             (Status.FAIL, Status.ERROR, Status.WARN, Status.INFO, Status.PASS, Status.SKIP)]
    console.print(f"[bold]summary[/]: {', '.join(parts)} — {len(report.results)} checks in "
                  f"{report.duration_s:.2f} s")
