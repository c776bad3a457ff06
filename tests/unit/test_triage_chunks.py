"""``triage FILE`` gives match_lines only the lines it could use (knowledge/gate.py
``match_chunks``); the ranking, scores, lines and groups equal ``match_lines`` on every line.

Logs mix real error reports (tests/corpus/triage), wrapped pastes (continuation lines that
join), CANN ``runtime result = N`` lines, tracebacks, blank lines, non-ASCII text and generic
noise; tiny chunks put chunk boundaries between a line and its continuation.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascend_doctor import knowledge
from ascend_doctor.knowledge.gate import match_chunks, text_chunks

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "triage"
KB = knowledge.load()


def _corpus() -> list[list[str]]:
    return [p.read_text(encoding="utf-8").partition("# ---\n")[2].splitlines(True)
            for p in sorted(CORPUS.glob("*.txt"))]


CASES = _corpus()
POOL = [ln for c in CASES for ln in c][:400] + [
    "INFO 11-20 03:06:02 [loggers.py:123] Avg prompt throughput: 1.0 tokens/s\n",
    "    raise RuntimeError(\"NPU out of\n", "memory. Tried to allocate 2 GiB\")\n",
    "EI0006: Getting socket\n", "times out. Reason: Remote Rank did not send\n",
    "[ERROR] RUNTIME(1234) rtError = 507015 in stream\n", "  runtime result = 207018\n",
    "[ERROR] runtime result = 207018\n", "[E] ret code: 507899\n",
    "\n", "   \n", "Traceback (most recent call last):\n", "  File \"x.py\", line 3\n",
    "重复块 ID 12\n", "caf\u00e9 EZ9999\n", "error code is\n", "207018\n",
    "ACL_ERROR_\n", "RT_FAILURE\n", "lib\n", "foo.so: file too short\n",
]


def _wrapped_pastes() -> list[str]:
    """Lines that match alone, cut in two as a paste wraps them: the first half starts a
    record ("[E] ...") and holds no gate literal, so only its join with the continuation
    line after it can match: leaving out either half would change the result."""
    from ascend_doctor.knowledge.gate import numbered_candidates

    _, gate = KB._flat()
    out = []
    for ln in [ln for c in CASES for ln in c] + POOL:
        text = ln.strip()
        if len(text) < 8 or not KB.match_lines([text]):
            continue
        for k in range(2, len(text) - 2, 3):
            a, b = "[E] " + text[:k].rstrip(), text[k:].lstrip()
            if not a or not b or knowledge._RECORD_START.match(b):
                continue
            if list(numbered_candidates([a + "\n"], gate, knowledge._RECORD_START)):
                continue  # the first half alone holds a literal: kept anyway
            if KB.match_lines([a + "\n", b + "\n"]):
                out.append(f"{a}\n{b}\n")
    return out[:150]


WRAPPED = _wrapped_pastes()
SAMPLED = st.one_of(st.sampled_from(POOL), st.sampled_from(WRAPPED))


def _engines() -> list[str]:
    out = ["python"]
    try:
        import hyperscan  # noqa: F401
        out.append("hyperscan")
    except ImportError:
        pass
    return out


def _flat(ms) -> list:
    return [(m.entry.id, m.score, m.lines, dict(m.groups)) for m in ms]


def _both(lines: list[str], chunk: int) -> None:
    text = "".join(lines)
    want = _flat(KB.match_lines(io.StringIO(text)))
    for engine in _engines():
        got = _flat(match_chunks(KB, text_chunks(io.StringIO(text), chunk), engine))
        assert got == want, engine


@pytest.mark.parametrize("chunk", [7, 64, 1 << 22])
def test_real_reports_rank_the_same(chunk):
    assert len(WRAPPED) > 20
    for case in CASES:
        _both(case, chunk)
    _both(WRAPPED, chunk)
    _both(["INFO x\n"] + WRAPPED[:5] + ["INFO y\n"], chunk)


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(SAMPLED, max_size=50), chunk=st.sampled_from([5, 40, 300, 1 << 20]),
       last=st.booleans())
def test_chunked_triage_equals_every_line(lines, chunk, last):
    if lines and last:
        lines[-1] = lines[-1].rstrip("\n")  # a last line without a newline
    _both(lines, chunk)


def test_noise_lines_are_left_out():
    """The point: lines no signature can use never reach the matcher."""
    from ascend_doctor.knowledge import _RECORD_START
    from ascend_doctor.knowledge.gate import numbered_candidates

    _, gate = KB._flat()
    noise = 'INFO:     10.0.0.7:51514 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    text = noise * 1000 + "EI0006: Getting socket times out.\n" + noise * 1000
    got = list(numbered_candidates(text_chunks(io.StringIO(text), 4096), gate, _RECORD_START))
    assert [n for n, _ in got] == [1001]


def test_a_paste_split_at_every_chunk_boundary():
    """A wrapped paste (a record start without literals, then its continuation) at every
    offset against the chunk boundaries: the continuation may be the first line a chunk
    round sees."""
    pair = next(w for w in WRAPPED if len(w) < 400)
    noise = "INFO ok\n"
    for before in range(4):
        lines = [noise] * before + pair.splitlines(True) + [noise] * 2
        for chunk in range(4, 40, 3):
            _both(lines, chunk)
