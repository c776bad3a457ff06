"""A finding's detail: the message with its numbers, evidence, the KB entry, raw evidence."""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Header, Markdown, Pretty, Static

from ...i18n import N_, tr, tt
from ...model import Finding
from ..state import CheckRow, shown_severity
from ..widgets.checklist import category_name
from ..widgets.render import status_piece

HEADINGS = {"en": {"cause": "Cause", "steps": "Steps", "advice": "Notes", "sources": "Sources",
                   "none": "No knowledge-base entry for this finding.", "fix": "Fix",
                   "answer": "Answer from", "confidence": "confidence",
                   "not_confident": "not confident: a candidate, not the answer"},
            "zh": {"cause": "原因", "steps": "处理步骤", "advice": "说明", "sources": "来源",
                   "none": "该结果没有知识库条目。", "fix": "修复",
                   "answer": "答案来源", "confidence": "置信度",
                   "not_confident": "不确定：仅为候选，并非答案"}}


def kb_markdown(finding: Finding, lang: str) -> str:
    """The KB entries of a finding as Markdown: title, cause, numbered steps."""
    from ascend_doctor.knowledge import load

    kb = load()
    h = HEADINGS[lang]
    parts: list[str] = []
    for kid in finding.kb:
        e = kb.get(kid)
        if e is None:
            parts.append(f"### {kid}\n\n{h['none']}")
            continue
        steps = "\n".join(f"{i}. {s}" for i, s in enumerate(e.steps_for(lang), 1))
        block = [f"### {e.id} · {e.text('title', lang)}", f"**{h['cause']}.** {e.text('cause', lang)}",
                 f"**{h['steps']}**", steps or "—"]
        notes = [a.get(lang) or a.get("en", "") for a in e.advice]
        if notes:
            block += [f"**{h['advice']}**", "\n".join(f"- {n}" for n in notes if n)]
        if e.fix:
            block.append(f"**{h['fix']}:** `{e.fix}` (f)")
        if e.sources:
            block.append(f"*{h['sources']}: " + "; ".join(e.sources) + "*")
        parts.append("\n\n".join(block))
    ans = finding.evidence.get("answer") if isinstance(finding.evidence, dict) else None
    if isinstance(ans, dict) and ans.get("source"):  # logs: curated, code table, shape, template
        conf = ans.get("confidence")
        parts.append(f"*{h['answer']}: {ans['source']} ({ans.get('how', '')})"
                     + (f", {h['confidence']} {conf}" if conf is not None else "")
                     + (f", {h['not_confident']}" if ans.get("confident") is False else "")
                     + "*")
    return "\n\n".join(parts) if parts else h["none"]


class DetailScreen(Screen):
    BINDING_GROUP_TITLE = N_("Finding")
    BINDINGS = [
        Binding("escape", "app.back", "Back", id="back", tooltip="Back to the dashboard"),
        Binding("f", "app.fix", "Fix", id="detail-fix",
                tooltip="Try to fix this finding automatically (plan first)"),
    ]

    def __init__(self, row: CheckRow, finding: Finding) -> None:
        super().__init__(id="detail")
        self.row, self.finding = row, finding

    def compose(self) -> ComposeResult:
        f, r = self.finding, self.row
        lang = getattr(self.app, "lang", "en")  # finding messages and titles (issue 14 item 6)
        yield Header(show_clock=False, icon="✚")
        with VerticalScroll(id="detail-body"):
            yield Static(Content.assemble(status_piece(f.status.value), " ",
                                          status_piece(f.status.value, f.status.value.upper()
                                                       if lang == "en" else tr(f.status.value, lang)),
                                          " ", (r.id, "bold"), " — ", tr(r.title, lang)),
                         id="d-title")
            sev = shown_severity(getattr(self.app, "state", None), f, r)
            meta = [(tt(lang, "severity") + " ", "$text-muted"), tr(sev.value, lang),
                    ("   " + tt(lang, "category") + " ", "$text-muted"),
                    category_name(f.category or r.category, lang)]
            if f.subject:
                meta += [("   " + tt(lang, "subject") + " ", "$text-muted"), tr(f.subject, lang)]
            if f.fix:
                meta += [("   " + tt(lang, "fix") + " ", "$text-muted"), (f.fix.id, "$accent"),
                         " (f)"]
            yield Static(Content.assemble(*meta), id="d-meta")
            yield Static(Content(tr(f.message, lang)), id="d-message")
            yield Static(Content.assemble((tt(lang, "Knowledge base"), "bold"),
                                          ("  (l: 中文 / English)", "$text-muted")),
                         classes="d-heading")
            yield Markdown(kb_markdown(f, self.app.lang), id="d-kb")  # type: ignore[attr-defined]
            yield Static(Content.assemble((tt(lang, "Evidence"), "bold")), classes="d-heading")
            yield Pretty(dict(f.evidence), id="d-evidence")
            yield Static(Content.assemble((tt(lang, "Raw evidence (JSON)"), "bold")), classes="d-heading")
            yield Static(json.dumps(dict(f.evidence), indent=2, ensure_ascii=False, default=str),
                         id="d-raw", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#detail-body").focus()

    async def show_result(self, row: CheckRow) -> None:
        """The check was re-run (a fix applied, verified or undone): show its current finding.

        The finding about the same subject if the re-run still reports one, else its worst.
        """
        findings = row.findings
        if not findings:
            return
        same = [f for f in findings if self.finding.subject and f.subject == self.finding.subject]
        self.row, self.finding = row, (same or findings)[0]
        await self.recompose()
        self.query_one("#detail-body").focus()

    def refresh_lang(self) -> None:
        self.query_one("#d-kb", Markdown).update(kb_markdown(self.finding,
                                                             self.app.lang))  # type: ignore
