"""The TUI's own words in the reader's language: key bindings (footer, help, palette) are
class-level English ``Binding`` objects, so each node's binding map is re-made from the
English originals with translated descriptions and tooltips (``l`` switches back and forth)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..i18n import tr


def localize_binding(b: Any, lang: str) -> Any:
    """``b`` with its description and tooltip in ``lang`` (English: ``b`` itself)."""
    if lang == "en":
        return b
    return replace(b, description=tr(b.description, lang), tooltip=tr(b.tooltip, lang))


def localize_bindings(node: Any, lang: str) -> None:
    """Re-make ``node``'s bindings in ``lang`` from the English ones it was built with."""
    bmap = getattr(node, "_bindings", None)
    if bmap is None:
        return
    en = node.__dict__.get("_en_key_to_bindings")
    if en is None:
        en = {k: list(v) for k, v in bmap.key_to_bindings.items()}
        node.__dict__["_en_key_to_bindings"] = en
    bmap.key_to_bindings = {k: [localize_binding(b, lang) for b in v] for k, v in en.items()}


def localize_tree(root: Any, lang: str) -> None:
    """``root`` and every mounted node under it."""
    localize_bindings(root, lang)
    walk = getattr(root, "walk_children", None)
    if walk is not None:
        for node in walk(with_self=False):
            localize_bindings(node, lang)
