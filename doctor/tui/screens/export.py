"""Export: choose JSON, a Markdown issue body or a bundle, and the directory."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from ...i18n import tt


class ExportScreen(ModalScreen["tuple[str, str] | None"]):
    BINDINGS = [
        Binding("j", "pick('json')", "JSON", id="export-json", tooltip="The --json report"),
        Binding("m", "pick('markdown')", "Markdown", id="export-markdown",
                tooltip="An issue body in Markdown"),
        Binding("b", "pick('bundle')", "Bundle", id="export-bundle",
                tooltip="A bundle for offline triage (check --bundle)"),
        Binding("escape", "cancel", "Cancel", id="export-cancel", tooltip="Close"),
    ]

    def __init__(self, directory: str) -> None:
        super().__init__(classes="modal")
        self.directory = directory

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog small", id="export-dialog"):
            lang = getattr(self.app, "lang", "en")
            yield Static(tt(lang, "Export the report to the directory:"), classes="dialog-title")
            yield Input(self.directory, id="export-dir")
            with Horizontal(classes="buttons"):
                yield Button(tt(lang, "JSON (j)"), id="export-json-btn")
                yield Button(tt(lang, "Markdown (m)"), id="export-md-btn")
                yield Button(tt(lang, "Bundle (b)"), id="export-bundle-btn")

    def on_mount(self) -> None:
        self.query_one("#export-json-btn").focus()

    def action_pick(self, fmt: str) -> None:
        self.dismiss((fmt, self.query_one("#export-dir", Input).value.strip() or "."))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        fmt = {"export-json-btn": "json", "export-md-btn": "markdown",
               "export-bundle-btn": "bundle"}.get(event.button.id or "")
        if fmt:
            self.action_pick(fmt)

    def action_cancel(self) -> None:
        self.dismiss(None)
