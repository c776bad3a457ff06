"""The detector of untranslated English (issue 14 item 6), shared by the zh tests.

What counts as an untranslated English sentence (``english_runs``): three or more
consecutive English words on one line, where a word is a token of letters only (``found``,
``Tried``), at least two letters, not all capitals (``NPU``, ``OOM``, ``HBM`` are names) —
after removing what is not prose: `backtick spans`, and tokens that are paths, commands,
identifiers, check ids, versions or units (anything with a digit, ``/``, ``_``, ``.``, ``-``,
``=``, ``:`` inside, ``<``/``>``, ``*``). CJK characters and full-width punctuation end a run,
so "ldconfig 时会" is not a sentence.
"""

from __future__ import annotations

import re


_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
# literal text a translation quotes: commands in backticks, log lines in quotes
_LITERAL = re.compile(r"`[^`]*`|'[^']*'|\"[^\"]*\"|“[^”]*”")
_WORD = re.compile(r"^[(\[\"']*([A-Za-z]{2,})[)\]\"',;:.!?…]*$")


def _check_ids() -> list[str]:
    from ascend_doctor.registry import Registry
    return sorted(Registry.discover().checks, key=len, reverse=True)


_CID = re.compile("(" + "|".join(re.escape(c) for c in _check_ids())
                  + r")(?: ×\d+| \(\+\d+\))?\s?[:：]")


def _is_word(tok: str) -> bool:
    m = _WORD.match(tok)
    return bool(m) and not m.group(1).isupper()


def english_runs(line: str, n: int = 3) -> list[str]:
    """The runs of >= n consecutive English words in ``line`` (see the module docstring)."""
    text = _CJK.sub(" | ", _LITERAL.sub(" | ", line))
    runs, cur = [], []
    for tok in text.split():
        if _is_word(tok):
            cur.append(tok)
            continue
        if len(cur) >= n:
            runs.append(" ".join(cur))
        cur = []
    if len(cur) >= n:
        runs.append(" ".join(cur))
    return runs


def owners(lines: list[str]) -> list[str | None]:
    """For each line, the check id of the finding it shows (its own ``id:`` or, for a wrapped
    continuation indented deeper, the line it continues), else None."""
    out: list[str | None] = []
    cur: tuple[int, str] | None = None
    for ln in lines:
        indent = len(ln) - len(ln.lstrip())
        m = _CID.search(ln)
        if m and not english_runs(ln[:m.start()]):
            cur = (indent, m.group(1))
        elif cur is None or indent <= cur[0] or not ln.strip():
            cur = None
        out.append(cur[1] if cur else None)
    return out


# a quote ends at its ” or where the report cut the line short (… at the end of a line)
_QUOTED = re.compile(r"“[^”]*?(?:”|…$)", re.M)


def mask_quoted(report: str) -> str:
    """``report`` with the inside of every “…” span blanked, also when the report wrapped it
    over several lines or cut it short (a verbatim log line a translation quotes); line breaks
    are kept."""
    return _QUOTED.sub(lambda m: re.sub(r"[^\n]", "|", m.group()), report)


def untranslated(report: str, pending: tuple[str, ...] = ()) -> list[str]:
    """Lines with an English sentence, except in findings of the ``pending`` check ids."""
    lines = report.splitlines()
    masked = mask_quoted(report).splitlines()
    bad = []
    for ln, shown, owner in zip(masked, lines, owners(lines)):
        runs = english_runs(ln)
        if runs and not (pending and owner and owner.startswith(pending)):
            bad.append(f"{owner or '-'}: {shown.strip()}  <- {runs}")
    return bad
