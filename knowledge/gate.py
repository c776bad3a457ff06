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
from typing import Any, Iterable, Iterator

from ascend_doctor.casefold import fold
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
    """A literal a signature cannot match without: a word, a substring, or none."""

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
        return Anchor("word", fold(max(words, key=len)))
    # 3 characters (OOM, 重复块) already make a substring test far cheaper than the regex
    if runs and len(max(runs, key=len)) >= 3:
        return Anchor("substring", fold(max(runs, key=len)))
    return Anchor("none")


class Gate:
    """Which signatures (by index) may match a line."""

    def __init__(self, patterns: list[str], anchors: "list[Anchor] | None" = None) -> None:
        """``anchors``: ``anchor(p)`` of each pattern when already known (the KB caches them)."""
        self.by_word: dict[str, list[int]] = {}
        self.by_sub: list[tuple[str, int]] = []
        self.always: list[int] = []
        for i, p in enumerate(patterns):
            a = anchors[i] if anchors is not None else anchor(p)
            if a.kind == "word":
                self.by_word.setdefault(a.text, []).append(i)
            elif a.kind == "substring":
                self.by_sub.append((a.text, i))
            else:
                self.always.append(i)
        self.words = frozenset(self.by_word)

    def candidates(self, line: str) -> list[int]:
        low = fold(line)  # as re.IGNORECASE compares: ſ is s, İ is i
        out = list(self.always)
        for w in self.words.intersection(WORD.findall(low)):
            out.extend(self.by_word[w])
        out.extend(i for s, i in self.by_sub if s in low)
        return out


# ---- whole-chunk prefilter for `triage FILE` ------------------------------------------
# KnowledgeBase.match_lines tries each line alone and joined with up to two lines before it
# when it does not start a record. A line can be left out when it holds no gate literal, does
# not start a CANN ``runtime result`` (read as ``error code is``), and neither it nor either
# of the two lines after it is a continuation: it can then match nothing alone, and no join
# includes it. Chunks with non-ASCII text keep every line (lower-casing is then not bytewise).

CHUNK = 4 << 20
_EXTRA_LITERALS = ["runtime result", "rterror", "ret code", "return code",  # _RUNTIME_RESULT
                   # exception lines: the cause an entry with cause_above quotes
                   # (knowledge/__init__.py _EXCEPTION_LINE), e.g. "ValueError: No common ..."
                   "error: ", "exception: ", "exit: ", "]: "]


def _continuation(record_start: "re.Pattern[str]") -> "re.Pattern[str]":
    """A newline followed by a line that does not start a record (its ``\\s*`` kept within
    the line, as ``record_start.match`` on the line alone)."""
    body = record_start.pattern
    assert body.startswith(r"\s*"), body
    return re.compile(r"\n(?!(?:[^\S\n]*" + body[3:] + "))")


def match_chunks(kb: Any, chunks: Iterable[str], prefer: str | None = None) -> list:
    """``kb.match_lines`` over the lines of ``chunks``, given only the lines it could use."""
    from . import _RECORD_START

    _, gate = kb._flat()
    keys = kb.signature_keys()
    # per signature its longest required literal (fewer false hits than a short anchor word
    # such as "to"), else its gate anchor; a signature with neither keeps every line
    lits: list[str] | None = []
    for lit, (kind, text) in zip(keys["literals"], keys["anchors"]):
        a = lit or (text if kind != "none" else None)
        if a is None:
            lits = None
            break
        lits.append(a)
    return kb.match_lines((), numbered=numbered_candidates(chunks, gate, _RECORD_START, prefer,
                                                           lits))


def numbered_candidates(chunks: Iterable[str], gate: Gate, record_start: "re.Pattern[str]",
                        prefer: str | None = None, literals: list[str] | None = None
                        ) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line ``match_lines`` could use, from text chunks that
    each end at a newline (the last may not). A chunk's last two lines wait for the next
    chunk: whether they may be left out depends on the lines after them."""
    from ascend_doctor.probes.logs import scan_engine

    every = bool(gate.always) if literals is None else False
    if literals is None:
        literals = [*gate.words, *(s for s, _ in gate.by_sub)]
    engine = scan_engine(sorted({*literals, *_EXTRA_LITERALS}), prefer)
    cont = _continuation(record_start)
    n = 0
    pending = ""
    for chunk in _with_end(chunks):
        buf = pending + chunk if chunk is not None else pending
        if not buf:
            continue
        if chunk is None:
            cut = len(buf)
        else:  # the start of the second-to-last line
            last = buf.rfind("\n", 0, len(buf) - 1) + 1
            cut = buf.rfind("\n", 0, last - 1) + 1 if last > 0 else 0
        pending = buf[cut:]
        if not cut:
            continue
        if every or not buf.isascii():
            for line in _split_lines(buf[:cut]):
                n += 1
                yield n, line
            continue
        keep = {s for s in engine.line_starts(buf.encode("ascii")) if s < cut}
        first = buf[:buf.find("\n") + 1 or len(buf)]
        if not record_start.match(first):
            keep.add(0)
        for m in cont.finditer(buf):
            s = m.start() + 1  # a continuation line: it and the two lines before it
            if s == len(buf):  # the final newline: no line follows it
                continue
            p1 = buf.rfind("\n", 0, m.start()) + 1
            keep.update((s, p1))
            if p1 > 0:
                keep.add(buf.rfind("\n", 0, p1 - 1) + 1)
        prev, base = 0, n
        for s in sorted(x for x in keep if x < cut):
            base += buf.count("\n", prev, s)
            prev = s
            e = buf.find("\n", s) + 1 or len(buf)
            yield base + 1, buf[s:e]
        n += buf.count("\n", 0, cut) + (0 if buf[cut - 1] == "\n" else 1)


def _with_end(chunks: Iterable[str]) -> Iterator[str | None]:
    yield from chunks
    yield None


def _split_lines(chunk: str) -> "list[str]":
    """The chunk's lines as a text file yields them (split after each newline only)."""
    parts = chunk.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def text_chunks(fh: "Any", size: int = CHUNK) -> "Iterator[str]":
    """A text stream in chunks that end at a newline (universal newlines already applied)."""
    carry = ""
    while True:
        data = fh.read(size)
        if not data:
            if carry:
                yield carry
            return
        buf = carry + data if carry else data
        cut = buf.rfind("\n") + 1
        if cut:
            yield buf[:cut]
        carry = buf[cut:]
