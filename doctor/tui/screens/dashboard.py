"""The dashboard: info bar, checks by category, the highlighted check's findings, live panel."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, OptionList

from ...i18n import N_, tt
from ...model import Finding
from ..lang import localize_tree
from ..state import CheckRow, RunState
from ..widgets.checklist import CheckList, category_name
from ..widgets.findings import FindingsList
from ..widgets.infobar import InfoBar
from ..widgets.live import LivePanel


class DashboardScreen(Screen):
    BINDING_GROUP_TITLE = N_("Dashboard")
    BINDINGS = [
        Binding("enter", "app.detail", "Details", id="detail",
                tooltip="Open the selected finding: cause, steps, evidence"),
        Binding("f", "app.fix", "Fix", id="fix",
                tooltip="Try to fix the selected finding automatically (plan first)"),
        Binding("slash", "filter", "Filter", key_display="/", id="filter",
                tooltip="Filter checks by id, category, status or message words"),
        Binding("w", "worst", "Worst", id="worst", tooltip="Jump to the worst finding"),
        Binding("u", "undo", "Undo", id="undo",
                tooltip="Undo the last fix applied in this session"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="clear-filter",
                tooltip="Clear the filter and go back to the checks"),
    ]

    def __init__(self) -> None:
        super().__init__(id="dashboard")
        self.query_text = ""
        self.user_moved = False

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="✚")
        yield InfoBar(id="info")
        yield Input(placeholder=tt(self._lang, "filter: words in id, category, status, message "
                                               "(enter keeps, escape clears)"), id="filter")
        with Horizontal(id="panes"):
            yield CheckList(id="checks")
            yield FindingsList(id="findings")
        yield LivePanel(id="live")
        yield Footer(compact=True)  # at 80 columns every key hint fits only compact

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        localize_tree(self, self._lang)
        self.query_one("#checks", CheckList).border_title = tt(self._lang, "Checks")
        self.query_one("#findings", FindingsList).border_title = tt(self._lang, "Findings")
        self.query_one("#live").display = bool(getattr(self.app, "live_enabled", True))
        self.query_one("#checks").focus()

    def on_resize(self, event) -> None:
        """Below 100 columns the footer's "^p palette" would push "? Help" out of view;
        help names ctrl+p, which works either way."""
        footer = self.query_one(Footer)
        wide = event.size.width >= 100
        if footer.show_command_palette != wide:
            footer.show_command_palette = wide
            footer.refresh(recompose=True)  # the reactive alone does not redraw the keys

    @property
    def _lang(self) -> str:
        return getattr(self.app, "lang", "en")

    def refresh_lang(self) -> None:
        """Everything this screen shows, again in the app's (new) language."""
        localize_tree(self, self._lang)
        self.query_one("#filter", Input).placeholder = tt(
            self._lang, "filter: words in id, category, status, message (enter keeps, "
                        "escape clears)")
        self.refresh_state()

    # -- model → view ------------------------------------------------------------------
    @property
    def state(self) -> RunState:
        return self.app.state  # type: ignore[attr-defined]

    def refresh_state(self, error: str | None = None) -> None:
        checks = self.query_one("#checks", CheckList)
        checks.show_groups(self.state.groups(self.query_text), self._lang)
        if self.state.finished and not self.user_moved:
            self.action_worst(focus=False)
        self.query_one("#info", InfoBar).show_state(self.state, error)
        self._show_findings()

    def _show_findings(self) -> None:
        row = self.selected_row()
        # the group header scrolls away above a long group: the pane title keeps the category
        self.query_one("#checks", CheckList).border_title = (
            tt(self._lang, "Checks · {category}",
               category=category_name(row.category, self._lang)) if row is not None
            else tt(self._lang, "Checks"))
        self.query_one("#findings", FindingsList).show_row(row)

    def selected_row(self) -> CheckRow | None:
        cid = self.query_one("#checks", CheckList).highlighted_check
        return self.state.rows.get(cid) if cid else None

    def selected_finding(self) -> tuple[CheckRow, Finding] | None:
        row = self.selected_row()
        if row is None or not row.findings:
            return None
        findings = self.query_one("#findings", FindingsList)
        i = findings.highlighted_index if findings.has_focus else 0
        return row, row.findings[i if i is not None and i < len(row.findings) else 0]

    # -- events ------------------------------------------------------------------------
    @on(OptionList.OptionHighlighted, "#checks")
    def _check_moved(self, event: OptionList.OptionHighlighted) -> None:
        checks = self.query_one("#checks", CheckList)
        if checks.highlighted_check != checks.programmatic:
            self.user_moved = True  # a key or a click, not a refresh
        self._show_findings()

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.app.action_detail()  # type: ignore[attr-defined]

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.refresh_state()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.query_one("#checks").focus()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """"u Undo" is offered (and shown in the footer) once a fix was applied."""
        if action == "undo":
            return bool(getattr(self.app, "journal", None))
        return True

    def action_undo(self) -> None:
        self.app.action_undo()  # type: ignore[attr-defined]

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display or self.query_text:
            box.value = ""
            box.display = False
            self.query_text = ""
            self.refresh_state()
        self.query_one("#checks").focus()

    def action_worst(self, focus: bool = True) -> None:
        worst = self.state.worst()
        if worst is None:
            return
        checks = self.query_one("#checks", CheckList)
        if not checks.select_check(worst[0].id) and self.query_text and focus:
            self.action_clear_filter()
            checks.select_check(worst[0].id)
        if focus:
            checks.focus()
        self._show_findings()
