"""The knowledge base: TOML data files in this package, one per domain.

An entry explains a finding (cause, numbered steps with literal commands), matches log lines
and tracebacks (``signatures``, for triage), says where it applies (``applies_to`` version
ranges, chips, models) and names its fix recipe. Texts are bilingual: ``{en = …, zh = …}``.
Versions stay strings. ``compat.toml`` holds the compatibility matrix (not entries).
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LANGS = ("en", "zh")
DATA_FILES_EXCLUDED = {"compat.toml"}


class KnowledgeError(ValueError):
    """A knowledge file that cannot be used: not UTF-8, not TOML, or an entry of the wrong
    shape. Names the file (and the entry when known); a ValueError for older callers."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    id: str
    title: Mapping[str, str]
    cause: Mapping[str, str]
    steps: tuple[Mapping[str, str], ...]
    signatures: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    fix: str | None = None
    applies_to: Mapping[str, Any] = field(default_factory=dict)
    advice: tuple[Mapping[str, Any], ...] = ()  # version-conditional notes
    sources: tuple[str, ...] = ()
    severity: str = "medium"
    domain: str = ""

    def text(self, name: str, lang: str = "en") -> str:
        value = getattr(self, name)
        return value.get(lang) or value.get("en") or next(iter(value.values()), "")

    def steps_for(self, lang: str = "en") -> list[str]:
        """Numbered step texts, each with its literal command when it has one."""
        out = []
        for s in self.steps:
            t = s.get(lang) or s.get("en", "")
            if s.get("cmd"):
                t = f"{t} `{s['cmd']}`"
            out.append(t)
        return out

    @functools.cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in self.signatures)


@dataclass(frozen=True)
class Match:
    entry: Entry
    score: float
    lines: tuple[tuple[int, str], ...]  # (line number, text)
    groups: Mapping[str, str]


class KnowledgeBase:
    def __init__(self, entries: Iterable[Entry]) -> None:
        self.entries: dict[str, Entry] = {}
        for e in entries:
            if e.id in self.entries:
                raise ValueError(f"duplicate knowledge id {e.id}")
            self.entries[e.id] = e

    def get(self, id: str) -> Entry | None:
        e = self.entries.get(id)
        if e is None:
            for cand in self.entries.values():
                if id in cand.aliases:
                    return cand
        return e

    def titles(self, ids: Iterable[str], lang: str = "en") -> dict[str, str]:
        return {i: self.entries[i].text("title", lang) for i in ids if i in self.entries}

    def search(self, text: str, lang: str | None = None) -> list[Entry]:
        """Entries whose id, alias, title or cause contains every word of ``text``."""
        words = [w.lower() for w in text.split() if w]
        out = []
        for e in self.entries.values():
            hay = " ".join([e.id, *e.aliases, *e.title.values(), *e.cause.values(),
                            *(s.get("cmd", "") for s in e.steps)]).lower()
            if all(w in hay for w in words):
                out.append(e)
        return sorted(out, key=lambda e: e.id)

    def match_lines(self, lines: Iterable[str], limit_lines_per_entry: int = 5) -> list[Match]:
        """Rank entries by how many distinct lines their signatures match (streaming)."""
        hits: dict[str, list[tuple[int, str]]] = {}
        groups: dict[str, dict[str, str]] = {}
        counts: dict[str, int] = {}
        entries = [e for e in self.entries.values() if e.signatures]
        for n, line in enumerate(lines, 1):
            for e in entries:
                for rx in e.compiled:
                    m = rx.search(line)
                    if m:
                        counts[e.id] = counts.get(e.id, 0) + 1
                        lst = hits.setdefault(e.id, [])
                        if len(lst) < limit_lines_per_entry:
                            lst.append((n, line.rstrip("\n")[:500]))
                        groups.setdefault(e.id, {}).update(
                            {k: v for k, v in m.groupdict().items() if v})
                        break
        out = []
        for eid, cnt in counts.items():
            e = self.entries[eid]
            specificity = max(len(p) for p in e.signatures) / 100.0
            out.append(Match(e, cnt + min(specificity, 0.99), tuple(hits[eid]), groups.get(eid, {})))
        return sorted(out, key=lambda m: (-m.score, m.entry.id))


def _entry_from(d: Mapping[str, Any], domain: str) -> Entry:
    return Entry(id=d["id"], title=d["title"], cause=d["cause"],
                 steps=tuple(d.get("steps", ())), signatures=tuple(d.get("signatures", ())),
                 aliases=tuple(d.get("aliases", ())), checks=tuple(d.get("checks", ())),
                 fix=d.get("fix"), applies_to=d.get("applies_to", {}),
                 advice=tuple(d.get("advice", ())), sources=tuple(d.get("sources", ())),
                 severity=d.get("severity", "medium"), domain=domain)


def data_files() -> list[tuple[str, bytes]]:
    from importlib.resources import files

    root = files("knowledge")
    return sorted((p.name, p.read_bytes()) for p in root.iterdir()
                  if p.name.endswith(".toml"))


def _texts(value: Any, what: str) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not value or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{what} must be a table of language = text")
    return value


def _strs(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} must be a list of strings")
    return tuple(value)


def _checked(d: Any, domain: str) -> Entry:
    """An entry whose fields have the types the reports and triage rely on."""
    if not isinstance(d, Mapping):
        raise TypeError("an [[entry]] must be a table")
    if not isinstance(d.get("id"), str):
        raise KeyError("id")
    _texts(d["title"], "title")
    _texts(d["cause"], "cause")
    steps = d.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, Mapping) and all(
            isinstance(v, str) for v in s.values()) for s in steps):
        raise TypeError("steps must be a list of tables of strings")
    for key in ("signatures", "aliases", "checks", "sources"):
        _strs(d.get(key, []), key)
    for rx in d.get("signatures", []):
        re.compile(rx)
    if d.get("fix") is not None and not isinstance(d["fix"], str):
        raise TypeError("fix must be a recipe id string")
    if not isinstance(d.get("applies_to", {}), Mapping):
        raise TypeError("applies_to must be a table")
    advice = d.get("advice", [])
    if not isinstance(advice, list) or not all(isinstance(a, Mapping) for a in advice):
        raise TypeError("advice must be a list of tables")
    if not isinstance(d.get("severity", "medium"), str):
        raise TypeError("severity must be a string")
    return _entry_from(d, domain)


def parse_file(name: str, raw: bytes) -> list[Entry]:
    """Entries of one knowledge file; KnowledgeError names the file and what is wrong."""
    domain = name.removesuffix(".toml")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise KnowledgeError(name, f"not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(name, f"not valid TOML ({exc})") from None
    entries = doc.get("entry", [])
    if not isinstance(entries, list):
        raise KnowledgeError(name, "`entry` must be an array of tables ([[entry]])")
    out = []
    for i, d in enumerate(entries, 1):
        label = d.get("id") if isinstance(d, Mapping) and isinstance(d.get("id"), str) else f"#{i}"
        try:
            out.append(_checked(d, domain))
        except KeyError as exc:
            raise KnowledgeError(name, f"entry {label} lacks the field {exc.args[0]!r}") from None
        except (TypeError, re.error) as exc:
            raise KnowledgeError(name, f"entry {label}: {exc}") from None
    return out


@functools.lru_cache(maxsize=1)
def load() -> KnowledgeBase:
    entries: list[Entry] = []
    for name, raw in data_files():
        if name in DATA_FILES_EXCLUDED:
            continue
        entries.extend(parse_file(name, raw))
    return KnowledgeBase(entries)


@functools.lru_cache(maxsize=1)
def compat() -> dict[str, Any]:
    """The compatibility matrix (knowledge/compat.toml)."""
    for name, raw in data_files():
        if name == "compat.toml":
            return tomllib.loads(raw.decode("utf-8"))
    return {}
