"""The top lines: host, context, versions; the summary; the worst finding and what to press."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...i18n import tr, tt
from ..state import RunState
from .render import status_piece

_SUMMARY = ("fail", "error", "warn", "info", "pass", "skip")


PREFERRED = ("cann", "driver", "vllm-ascend", "vllm", "torch-npu", "torch", "triton-ascend",
             "transformers")


def top_versions(versions: dict[str, str], limit: int = 6) -> dict[str, str]:
    """The serving stack's versions first (the header has one line for them)."""
    keys = [k for k in PREFERRED if k in versions] + [k for k in versions if k not in PREFERRED]
    return {k: versions[k] for k in keys[:limit]}


class InfoBar(Static):
    def show_state(self, state: RunState, error: str | None = None) -> None:
        lang = getattr(self.app, "lang", "en")
        h = state.host
        where = [(h.hostname or "…", "bold") if h else ("…", "bold"), " · ",
                 (state.context or "…", "$accent bold")]
        if h and h.os:
            where += [" · ", h.os]
        versions = top_versions(state.versions())
        if versions:
            where += [" · "] + [x for k, v in versions.items() for x in ((k, "$text-muted"),
                                                                         f" {v}  ")]
        counts = state.summary()
        summary: list[tuple[str, str] | str] = []
        for s in _SUMMARY:
            summary += [status_piece(s), f" {counts.get(s, 0)} {tr(s, lang)}   "]
        total = len(state.rows)
        done = state.done_count()
        summary.append((tt(lang, "done") if state.finished else
                        tt(lang, "running {done}/{total} checks", done=done, total=total),
                        "$text-muted" if state.finished else "$accent"))
        worst = state.worst()
        if error:
            third = Content.assemble(status_piece("error"), " ", (error, "$error"))
        elif worst:
            row, f = worst
            # the message right after the id: at 80 columns the key hints (also in the
            # footer) are what the ellipsis cuts, not the finding
            third = Content.assemble((tt(lang, "Worst: "), "bold"), status_piece(f.status.value),
                                     " ", (row.id, "bold"), "  ", tr(f.message, lang),
                                     ("  " + tt(lang, "(w go · enter why · f fix)"),
                                      "$text-muted"))
        elif state.finished:
            third = Content.assemble(status_piece("pass"),
                                     " " + tt(lang, "nothing to fix: no warn or fail"))
        else:
            third = Content(tt(lang, "waiting for the first results…"))
        self.update(Content("\n").join([Content.assemble(*where), Content.assemble(*summary),
                                        third]))
