"""The knowledge base as a fact: loaded once per run, so a check matching text against it
stays a pure rule over facts (a test hands it a ``Knowledge`` built from any entries)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..knowledge import KnowledgeBase, Match, compat, load
from dataclasses import dataclass, field
from ..registry import provider


@dataclass(frozen=True, eq=False)
class Knowledge:
    """The knowledge base and compatibility matrix, as a fact the checks ask for."""

    kb: KnowledgeBase
    compat: Mapping[str, Any] = field(default_factory=dict)  # knowledge/compat.toml

    def match_lines(self, lines: Iterable[str]) -> list[Match]:
        """``KnowledgeBase.match_lines``: entries ranked by the evidence in ``lines``."""
        return self.kb.match_lines(lines)


@provider
def gather_knowledge() -> Knowledge:
    return Knowledge(load(), compat())
