"""The fix flow's modals: the plan (diff, commands, risk), confirm, the result with undo,
and "fixes are not installed" (with the KB's manual steps, so the user is never stuck)."""

from __future__ import annotations

import shlex

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown, Static

from ...i18n import tr, tt
from ..fixflow import Applied, PlanView
from ..widgets.render import diff_content, status_piece


def _lang(screen: ModalScreen) -> str:
    """The app's language (a screen built outside an app, as in a unit test: English)."""
    try:
        return getattr(screen.app, "lang", "en")
    except Exception:  # noqa: BLE001 (no active app)
        return "en"


class FixPlanScreen(ModalScreen[bool]):
    """Shows what a fix would change; dismisses True to go on to the confirmation."""

    BINDINGS = [
        Binding("escape,n", "cancel", "Cancel", id="plan-cancel", tooltip="Close without changes"),
        Binding("a", "proceed", "Apply…", id="plan-apply", tooltip="Go on to the confirmation"),
    ]

    def __init__(self, plan: PlanView, check_id: str) -> None:
        super().__init__(classes="modal")
        self.plan, self.check_id = plan, check_id

    def compose(self) -> ComposeResult:
        p = self.plan
        lang = _lang(self)
        with Vertical(classes="dialog", id="plan-dialog"):
            yield Static(Content.assemble((tt(lang, "Plan "), "bold"), (p.recipe_id, "$accent bold"),
                                          " — ", p.title), classes="dialog-title")
            with VerticalScroll(id="plan-body"):
                if p.risks:
                    yield Static(Content.assemble(status_piece("warn"), (" " + tt(lang, "risk: "), "bold"),
                                                  ", ".join(tr(r, lang) for r in p.risks)), id="plan-risks")
                for d in p.diffs:
                    yield Static(Content.assemble((tt(lang, "edit "), "bold"),
                                                  d.path or tt(lang, "(file)")),
                                 classes="plan-heading")
                    yield Static(diff_content(d.diff), classes="plan-diff")
                if p.commands:
                    yield Static(Content.assemble((tt(lang, "commands"), "bold")), classes="plan-heading")
                    yield Static("\n".join("$ " + shlex.join(c) for c in p.commands),
                                 classes="plan-commands", markup=False)
                if p.manual:
                    yield Static(Content.assemble((tt(lang, "by hand (not automated)"), "bold")),
                                 classes="plan-heading")
                    yield Static("\n".join(f"{i}. {m}" for i, m in enumerate(p.manual, 1)),
                                 markup=False)
                for n in p.notes:
                    yield Static(Content.assemble(status_piece("info"), " ", tr(n, lang)))
                if not p.automatic:
                    yield Static(tt(lang, "Nothing to apply automatically: follow the steps "
                                          "above."))
            with Horizontal(classes="buttons"):
                yield Button(tt(lang, "Apply… (a)"), id="plan-go", variant="warning",
                             disabled=not p.automatic)
                yield Button(tt(lang, "Cancel (esc)"), id="plan-no")

    @on(Button.Pressed, "#plan-go")
    def action_proceed(self) -> None:
        if self.plan.automatic:
            self.dismiss(True)

    @on(Button.Pressed, "#plan-no")
    def action_cancel(self) -> None:
        self.dismiss(False)


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "yes", "Yes, apply", id="confirm-yes", tooltip="Apply the plan now"),
        Binding("escape,n", "no", "No", id="confirm-no", tooltip="Do not apply"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__(classes="modal")
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog small", id="confirm-dialog"):
            yield Static(self.question, id="confirm-question", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(tt(_lang(self), "Yes, apply (y)"), id="confirm-go", variant="error")
                yield Button(tt(_lang(self), "No (esc)"), id="confirm-stop")

    @on(Button.Pressed, "#confirm-go")
    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-stop")
    def action_no(self) -> None:
        self.dismiss(False)


class FixResultScreen(ModalScreen[str]):
    """What was applied and what the re-run check says now; dismisses "undo" or "close"."""

    BINDINGS = [
        Binding("u", "undo", "Undo", id="result-undo", tooltip="Restore the files from the journal"),
        Binding("escape,enter", "close", "Close", id="result-close", tooltip="Back"),
    ]

    def __init__(self, applied: Applied, verify_state: str, verify_text: str,
                 undone: bool = False) -> None:
        super().__init__(classes="modal")
        self.applied, self.verify_state, self.verify_text = applied, verify_state, verify_text
        self.undone = undone

    def compose(self) -> ComposeResult:
        lang = _lang(self)
        with Vertical(classes="dialog small", id="result-dialog"):
            yield Static(Content.assemble((tt(lang, "Undone") if self.undone
                                           else tt(lang, "Applied"), "bold"),
                                          ": ", tr(self.applied.message, lang)),
                         id="result-applied")
            if self.applied.journal_id:
                yield Static(Content.assemble((tt(lang, "journal "), "$text-muted"),
                                              self.applied.journal_id))
            yield Static(Content.assemble((tt(lang, "verify: "), "bold"),
                                          status_piece(self.verify_state), " ",
                                          tr(self.verify_text, lang)), id="result-verify")
            with Horizontal(classes="buttons"):
                if not self.undone and self.applied.journal_id:
                    yield Button(tt(lang, "Undo (u)"), id="result-undo", variant="warning")
                yield Button(tt(lang, "Close (esc)"), id="result-close-btn")

    @on(Button.Pressed, "#result-undo")
    def action_undo(self) -> None:
        if not self.undone and self.applied.journal_id:
            self.dismiss("undo")

    @on(Button.Pressed, "#result-close-btn")
    def action_close(self) -> None:
        self.dismiss("close")


class FixUnavailableScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter", "close", "Close", id="unavailable-close",
                        tooltip="Back")]

    def __init__(self, reason: str, steps_markdown: str) -> None:
        super().__init__(classes="modal")
        self.reason, self.steps_markdown = reason, steps_markdown

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="unavailable-dialog"):
            yield Static(Content.assemble(status_piece("skip"), (" " + tt(_lang(self), "No automatic fix"), "bold")),
                         classes="dialog-title")
            yield Static(self.reason, id="unavailable-reason", markup=False)
            with VerticalScroll(id="unavailable-body"):
                yield Markdown(self.steps_markdown)
            with Horizontal(classes="buttons"):
                yield Button(tt(_lang(self), "Close (esc)"), id="unavailable-ok")

    @on(Button.Pressed, "#unavailable-ok")
    def action_close(self) -> None:
        self.dismiss(None)
