"""Help: every key with its id and description, and where to start."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from ...i18n import N_, tr, tt

START = N_("""\
**Start here.** The third line of the dashboard names the worst finding. Press **w** to
jump to it, **enter** to read why (cause and numbered steps from the knowledge base,
**l** switches 中文/English), **f** to see the fix plan, confirm, and check the result;
**u** undoes the last fix. **ctrl+p** lists every action.
""")


def bindings_markdown(groups: list[tuple[str, list[Binding]]], lang: str = "en") -> str:
    lines = [tr(START, lang), "", tt(lang, "| key | action | id |"), "|---|---|---|"]
    for title, bindings in groups:
        for b in bindings:
            key = b.key_display or b.key
            lines.append(f"| `{key}` | {tr(b.description, lang)} — {tr(b.tooltip, lang)} "
                         f"({tr(title, lang)}) | {b.id} |")
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help-close",
                        tooltip="Close help")]

    def __init__(self, text: str) -> None:
        super().__init__(classes="modal")
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help-dialog"):
            with VerticalScroll():
                yield Markdown(self.text, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
