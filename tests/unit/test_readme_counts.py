"""The README's first paragraph counts what the code has: its numbers of checks and knowledge
base entries are read from the registry and the KB, so adding a check or an entry without
updating them fails here (with the number to write)."""

from __future__ import annotations

import re
from pathlib import Path

from ascend_doctor.knowledge import load
from ascend_doctor.registry import Registry

README = Path(__file__).resolve().parents[2] / "README.md"


def _intro() -> str:
    text = README.read_text(encoding="utf-8")
    return text[:text.index("```")]  # the paragraph above the first command


def test_the_readme_counts_the_built_in_checks():
    m = re.search(r"(\d+) pluggable checks", _intro())
    assert m, "README's first paragraph should say 'N pluggable checks'"
    have = len(Registry.discover(plugins=False).checks)
    assert int(m.group(1)) == have, f"README says {m.group(1)} checks; the registry has {have}"


def test_the_readme_counts_the_knowledge_base_entries():
    m = re.search(r"knowledge base \((\d+) entries", _intro())
    assert m, "README's first paragraph should say 'knowledge base (N entries'"
    have = len(load().entries)
    assert int(m.group(1)) == have, f"README says {m.group(1)} entries; the KB has {have}"
