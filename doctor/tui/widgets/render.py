"""Content builders shared by widgets and screens (status colours from theme variables)."""

from __future__ import annotations

from textual.content import Content

from ..state import COLOURS, glyph


def status_piece(state: str, text: str | None = None) -> tuple[str, str]:
    bold = " bold" if state in ("fail", "error") else ""
    return (text if text is not None else glyph(state), f"{COLOURS[state]}{bold}")


def status_line(state: str, *rest: "str | tuple[str, str]") -> Content:
    return Content.assemble(status_piece(state), " ", *rest)


def diff_content(diff: str) -> Content:
    """A unified diff coloured line by line: additions, removals, hunks, headers."""
    parts: list[tuple[str, str] | str] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "$success"
        elif line.startswith("-"):
            style = "$error"
        elif line.startswith("@@"):
            style = "$accent"
        else:
            style = ""
        parts.append((line, style) if style else line)
        parts.append("\n")
    return Content.assemble(*parts[:-1])
