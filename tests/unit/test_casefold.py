"""The pre-filters lower-case as ``re.IGNORECASE`` compares (doctor/casefold.py): a line the
regex matches through ſ, ı, İ, ς or µ still reaches the regex."""

from __future__ import annotations

import io
import re
import sys

import pytest

from ascend_doctor import knowledge
from ascend_doctor.casefold import fold
from ascend_doctor.probes.logs import LinePrefilter, required_literal
from ascend_doctor.probes.logmatch import prefilter
from ascend_doctor.probes.logs import LogScan, scan_engine, scan_lines


def test_fold_equates_what_re_ignorecase_equates():
    """Every character folds to one ``re`` matches it with, case-insensitively."""
    for cp in range(0x20, 0x3000):
        c = chr(cp)
        f = fold(c)
        if len(f) == 1:
            assert re.fullmatch(re.escape(c), f, re.IGNORECASE), hex(cp)
    pairs = [("ſ", "s"), ("ı", "i"), ("İ", "i"), ("ς", "σ"), ("Σ", "σ"), ("µ", "μ"),
             ("K", "k"), ("ϐ", "β")]
    for a, b in pairs:
        assert re.fullmatch(re.escape(a), b, re.IGNORECASE)
        assert fold(a) == fold(b), (a, b)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="re._casefix is 3.11+")
@pytest.mark.parametrize("pattern,line", [
    # the only literal each regex needs holds the folded letter: str.lower() alone misses it
    ("segfault", "ſegfault"), ("(x) segfault (y)", "x ſegfault y"),
    ("killer", "kİller"), ("(?:a|b) killer (c)", "a kıller c"), ("σ-log", "ς-LOG"),
])
def test_prefilters_keep_lines_the_regex_matches_through_folding(pattern, line):
    assert re.search(pattern, line, re.IGNORECASE)
    assert LinePrefilter([pattern]).candidate(line), required_literal(pattern)


def test_triage_of_a_kb_signature_written_with_equivalent_letters():
    """A real KB line with letters re equates (a smoke test of the whole path)."""
    kb = knowledge.load()
    line = "RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB"
    want = [m.entry.id for m in kb.match_lines([line])]
    odd = line.replace("s", "ſ").replace("i", "ı")
    assert want and [m.entry.id for m in kb.match_lines([odd])] == want
    # the block scan (a log large enough for the engine) keeps the folded line
    filler = "INFO 12-03 16:31:21 [loggers.py:257] Engine 000: quiet line\n" * 400
    data = (filler + odd + "\n" + filler).encode()
    for engine in ("python", "hyperscan"):
        try:
            eng = scan_engine(prefilter(kb).literals, engine)
        except ImportError:
            continue
        got = list(scan_lines(io.BytesIO(data), None, prefilter(kb), LogScan(), eng))
        assert [n for n, _ in got] == [401], engine
        assert [m.entry.id for m in kb.match_lines((), numbered=iter(got))] == want
