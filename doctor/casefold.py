"""Lower-casing as ``re.IGNORECASE`` compares characters, for the literal pre-filters.

``str.lower()`` alone is not what the regex engine uses: ``re`` folds with the simple
lowercase mapping (İ is i, not i + combining dot) and treats some further characters as
equal (ſ and s, ı and i, ς and σ, µ and μ...: ``re._casefix``). A pre-filter that lowers a
line with ``str.lower()`` would reject "ſegfault" although ``(?i)segfault`` matches it;
``fold`` maps each such character to one representative, so a literal a regex needs is
found in every line the regex matches.
"""

from __future__ import annotations


def _tables() -> tuple[dict[int, str], dict[int, str]]:
    try:
        from re._casefix import _EXTRA_CASES as extra  # type: ignore[import-not-found]
    except ImportError:  # Python 3.10
        try:
            from sre_compile import _ignorecase_fixes as extra  # type: ignore[attr-defined]
        except ImportError:  # pragma: no cover
            extra = {}
    post = {k: chr(min(k, *v)) for k, v in extra.items() if min(k, *v) != k}
    return {0x130: "i"}, post


_PRE, _POST = _tables()


def fold(s: str) -> str:
    """``s`` lower-cased so that characters ``re.IGNORECASE`` equates come out the same."""
    if s.isascii():
        return s.lower()
    return s.translate(_PRE).lower().translate(_POST)
