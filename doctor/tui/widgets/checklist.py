"""The left pane: checks grouped by category, a status glyph and counts per group."""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ...i18n import tr
from ...model import Category
from ...report.text import CATEGORY_NAMES
from ..state import Group
from .render import status_piece

_ORDER = ("error", "fail", "warn", "info", "pass", "skip", "running", "pending")


def group_counts(group: Group) -> list[tuple[str, str] | str]:
    counts = group.counts()
    out: list[tuple[str, str] | str] = []
    for state in _ORDER:
        n = counts.get(state, 0)
        if n:
            out += [" ", status_piece(state, f"{n}{status_piece(state)[0]}")]
    return out


def category_name(category: Category, lang: str | None) -> str:
    """The category as the reader sees it: the text report's word, in ``lang``."""
    return tr(CATEGORY_NAMES.get(category.value, category.value), lang)


class CheckList(OptionList):
    """Category headers (not selectable) and their checks; the highlighted check's id."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="check-down",
                tooltip="Next check"),
        Binding("k", "cursor_up", "Up", show=False, id="check-up", tooltip="Previous check"),
        # OptionList's own enter is hidden, and the focused list's binding is the one the
        # footer shows: name it, so "enter Details" is in the footer
        Binding("enter", "select", "Details", id="check-details",
                tooltip="Open the check's worst finding: cause, steps, evidence"),
    ]

    def show_groups(self, groups: list[Group], lang: str | None = "en") -> None:
        keep = self.highlighted_check
        options: list[Option] = []
        for g in groups:
            options.append(Option(Content.assemble(status_piece(g.state), " ",
                                                   (category_name(g.category, lang), "bold"),
                                                   *group_counts(g)),
                                  id=f"cat:{g.category.value}", disabled=True))
            for r in g.rows:
                options.append(Option(Content.assemble("  ", status_piece(r.state), " ", r.id),
                                      id=f"check:{r.id}"))
        self.clear_options()
        self.add_options(options)
        self.select_check(keep)

    programmatic: str | None = None  # the check the code (not the user) highlighted last

    def select_check(self, check_id: str | None) -> bool:
        ids = [o.id for o in self.options]
        if check_id and f"check:{check_id}" in ids:
            self.programmatic = check_id
            self.highlighted = ids.index(f"check:{check_id}")
            return True
        first = next((i for i, x in enumerate(ids) if x and x.startswith("check:")), None)
        self.programmatic = ids[first].removeprefix("check:") if first is not None else None
        self.highlighted = first
        return False

    @property
    def highlighted_check(self) -> str | None:
        if self.highlighted is None or self.highlighted >= self.option_count:
            return None
        oid = self.get_option_at_index(self.highlighted).id or ""
        return oid.removeprefix("check:") if oid.startswith("check:") else None
