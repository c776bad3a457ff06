"""A cheap pre-filter for triage: most log lines match no signature, so reject them without
running ~150 regexes each.

For each signature we extract a literal it cannot match without (``anchor``): a whole word
(tested against the line's word set, one C-level call per line) or, failing that, a literal
run (a substring test). A signature with neither is always tried. The gate never rejects a
line its regex would match: words are only taken where literal non-word characters bound
them on both sides, and nothing is taken from groups, classes, alternations or optional
parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD = re.compile(r"\w+")
_SPECIAL = set(".^$*+?{}[]\\|()")
_ESC_LITERAL = set(".^$*+?{}[]\\|()/-'\"#&~:,=!<> ")


def _items(p: str) -> list[str | None] | None:
    """The pattern as literal characters (str) and opaque parts (None); None when it has a
    top-level alternation (no single literal is required then)."""
    out: list[str | None] = []
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\" and i + 1 < n:
            nxt = p[i + 1]
            out.append(nxt if nxt in _ESC_LITERAL else None)
            i += 2
            if nxt in "xuU":  # \xhh \uhhhh \Uhhhhhhhh: one character, not literal digits
                i += {"x": 2, "u": 4, "U": 8}[nxt]
            elif nxt == "N" and i < n and p[i] == "{":
                i = p.find("}", i) + 1 or n
            elif nxt.isdigit():  # octal escape or backreference
                while i < n and p[i].isdigit():
                    i += 1
        elif c == "[":
            j = i + 1
            if j < n and p[j] == "^":
                j += 1
            if j < n and p[j] == "]":
                j += 1
            while j < n and p[j] != "]":
                j += 2 if p[j] == "\\" else 1
            out.append(None)
            i = j + 1
        elif c == "(":
            depth, j = 1, i + 1
            while j < n and depth:
                if p[j] == "\\":
                    j += 2
                    continue
                if p[j] == "[":
                    while j < n and p[j] != "]":
                        j += 2 if p[j] == "\\" else 1
                depth += {"(": 1, ")": -1}.get(p[j], 0)
                j += 1
            follow = p[j] if j < n else ""
            body = _group_body(p[i + 1:j - 1])
            sub = _items(body) if body is not None and follow not in ("?", "*", "{") else None
            # a plain group that must occur gives its literals, cut off from its neighbours
            out.extend([None, *sub, None] if sub is not None else [None])
            i = j
        elif c == "|":
            return None
        elif c in "?*":
            if out:
                out[-1] = None  # the previous item is optional
            out.append(None)
            i += 1
        elif c == "{":
            if out:
                out[-1] = None
            j = p.find("}", i)
            i = n if j < 0 else j + 1
            out.append(None)
        elif c == "+":
            out.append(None)  # the previous item repeats: what follows is not adjacent
            i += 1
        elif c in _SPECIAL:
            out.append(None)
            i += 1
        else:
            out.append(c)
            i += 1
    return out


def _group_body(inner: str) -> str | None:
    """The pattern inside ``(...)``, ``(?:...)`` or ``(?P<name>...)``; None for lookarounds,
    flags, comments and conditionals (their text need not occur as written)."""
    if not inner.startswith("?"):
        return inner
    if inner.startswith("?:"):
        return inner[2:]
    if inner.startswith("?P<"):
        k = inner.find(">")
        return inner[k + 1:] if k > 0 else None
    return None


@dataclass(frozen=True)
class Anchor:
    kind: str  # word | substring | none
    text: str = ""


def anchor(pattern: str) -> Anchor:
    items = _items(pattern)
    if items is None:
        return Anchor("none")
    runs, cur = [], []
    for it in items + [None]:
        if it is None:
            if cur:
                runs.append("".join(cur))
            cur = []
        else:
            cur.append(it)
    words = []
    for run in runs:
        for m in WORD.finditer(run):
            if m.start() > 0 and m.end() < len(run):  # bounded by literal non-word chars
                words.append(m.group())
    if words:
        return Anchor("word", max(words, key=len).lower())
    # 3 characters (OOM, 重复块) already make a substring test far cheaper than the regex
    if runs and len(max(runs, key=len)) >= 3:
        return Anchor("substring", max(runs, key=len).lower())
    return Anchor("none")


class Gate:
    """Which signatures (by index) may match a line."""

    def __init__(self, patterns: list[str]) -> None:
        self.by_word: dict[str, list[int]] = {}
        self.by_sub: list[tuple[str, int]] = []
        self.always: list[int] = []
        for i, p in enumerate(patterns):
            a = anchor(p)
            if a.kind == "word":
                self.by_word.setdefault(a.text, []).append(i)
            elif a.kind == "substring":
                self.by_sub.append((a.text, i))
            else:
                self.always.append(i)
        self.words = frozenset(self.by_word)

    def candidates(self, line: str) -> list[int]:
        low = line.lower()
        out = list(self.always)
        for w in self.words.intersection(WORD.findall(low)):
            out.extend(self.by_word[w])
        out.extend(i for s, i in self.by_sub if s in low)
        return out
