"""The right pane: the highlighted check's findings, worst first."""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ...i18n import tr, tt
from ...model import Finding
from ..state import CheckRow, shown_severity
from .render import status_piece


def finding_prompt(f: Finding, lang: str = "en", severity: str | None = None) -> Content:
    """``severity``: the ranked word (doctor/ranking.py) the report prints for it."""
    word = f.status.value.upper() if lang == "en" else tr(f.status.value, lang)
    head = [status_piece(f.status.value), " ", status_piece(f.status.value, word)]
    sev = severity or f.severity.value
    if sev != "none":
        head += [" · ", (tr(sev, lang), "italic")]
    if f.subject:
        head += [" · ", (f.subject, "bold")]
    tail: list[tuple[str, str] | str] = []
    if f.kb:
        tail += [("  kb ", "$text-muted"), ", ".join(f.kb)]
    if f.fix:
        tail += [("  " + tt(lang, "fix") + " ", "$text-muted"), (f.fix.id, "$accent")]
    lines = [Content.assemble(*head), Content("  " + tr(f.message, lang))]
    if tail:
        lines.append(Content.assemble(*tail))
    return Content("\n").join(lines)


class FindingsList(OptionList):
    """One option per finding; enter opens its detail."""

    BINDINGS = [Binding("enter", "select", "Details", id="finding-details",
                        tooltip="Open this finding: cause, steps, evidence")]

    def show_row(self, row: CheckRow | None) -> None:
        self.clear_options()
        if row is None:
            self.border_title = tt(getattr(self.app, "lang", "en"), "Findings")
            return
        lang = getattr(self.app, "lang", "en")
        self.border_title = f"{row.id} — {tr(row.title, lang)}"
        if row.result is None:
            self.add_option(Option(Content.assemble(status_piece(row.state), " ",
                                                    f"{row.state}…"), disabled=True))
            return
        state = getattr(self.app, "state", None)
        self.add_options([Option(finding_prompt(f, lang, shown_severity(state, f, row).value),
                                 id=f"f:{i}")
                          for i, f in enumerate(row.findings)])
        self.highlighted = 0

    @property
    def highlighted_index(self) -> int | None:
        if self.highlighted is None or self.highlighted >= self.option_count:
            return None
        oid = self.get_option_at_index(self.highlighted).id or ""
        return int(oid[2:]) if oid.startswith("f:") else None
