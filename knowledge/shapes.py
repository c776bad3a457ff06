"""Message shapes of the dynamic loader, the OS and CPython (``cannot open shared object
file``, ``undefined symbol``, ``Errno 98``, ``cannot import name``, ``No space left on
device``, a bus error on ``/dev/shm`` …) and what each means in an Ascend stack.

Data in ``knowledge/tables/shapes.toml``: a shape has a key, a pattern whose named groups
fill its texts, a meaning, a first step and the cause keys its step fixes; a variant refines
all of them by one captured group. ``literals`` (one is in every line the pattern matches,
checked by tests/unit/test_kb_layers.py) keep the regexes off the lines that cannot match (``libc_sec.so`` is the driver's, ``libascendcl.so`` the
toolkit's).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ascend_doctor.casefold import fold

from . import _tomllib, fill


@dataclass(frozen=True)
class ShapeHit:
    """A shape found in a line, with its texts filled from the captured groups."""

    key: str
    meaning: Mapping[str, str]
    step: Mapping[str, str]
    causes: tuple[str, ...]
    groups: Mapping[str, str] = field(default_factory=dict)
    start: int = 0
    end: int = 0
    source: str = ""
    # the message is raised for many unrelated causes ("No module named …") and no variant
    # narrowed it: its cause keys are a guess, never a confident answer (knowledge/decide.py)
    broad: bool = False
    # the message is part of or a consequence of another error (a CANN report frame, an access
    # log's 500): it traces the line, it never makes the line an event of its own
    context: bool = False


@dataclass(frozen=True)
class _Shape:
    key: str
    rx: "re.Pattern[str]"
    doc: Mapping[str, Any]
    variants: tuple[tuple[str, "re.Pattern[str]", Mapping[str, Any]], ...]
    literals: tuple[str, ...]  # one of them is in every line the pattern matches


@functools.lru_cache(maxsize=1)
def _load() -> tuple[list[_Shape], str]:
    from ascend_doctor.pkgdata import read_bytes

    doc = _tomllib().loads(read_bytes(__package__ or "ascend_doctor.knowledge", __file__,
                                      "tables/shapes.toml").decode("utf-8"))
    out = []
    for s in doc["shape"]:
        variants = tuple((v["group"], re.compile(v["match"], re.IGNORECASE), v)
                         for v in s.get("variants", ()))
        out.append(_Shape(s["key"], re.compile(s["pattern"]), s, variants,
                          tuple(fold(x) for x in s["literals"])))
    return out, doc["source"]


def shapes() -> list[str]:
    """Every shape key (kb lint, docs)."""
    return [s.key for s in _load()[0]]


def _fill(d: Mapping[str, Any], prefix: str, groups: Mapping[str, str],
          names: Any = ()) -> dict[str, str]:
    """The texts with the captured groups; a group the line did not have reads as the
    shape's ``unmatched_<lang>`` ("a library")."""
    out = {}
    for lang in ("en", "zh"):
        if not d.get(prefix + lang):
            continue
        blank = str(d.get("unmatched_" + lang) or "")
        out[lang] = fill(str(d[prefix + lang]), {**{n: blank for n in names}, **groups})
    return out


def shapes_in(line: str) -> list[ShapeHit]:
    """Every shape the line has, in line order."""
    found, source = [], _load()[1]
    low = fold(line)
    for s in _load()[0]:
        if not any(lit in low for lit in s.literals):
            continue
        m = s.rx.search(line)
        if not m:
            continue
        groups = {k: v for k, v in m.groupdict().items() if v}
        d: Mapping[str, Any] = s.doc
        broad = bool(s.doc.get("broad"))
        for group, rx, v in s.variants:
            if rx.search(groups.get(group, "")):
                d = {**s.doc, **v}
                broad = bool(v.get("broad", False))
                break
        names = tuple(s.rx.groupindex)
        found.append(ShapeHit(s.key, _fill(d, "", groups, names), _fill(d, "step_", groups, names),
                              tuple(d.get("causes", ())), groups, m.start(), m.end(), source,
                              broad, bool(s.doc.get("context"))))
    return sorted(found, key=lambda h: h.start)
