"""The logs check's whole-buffer scan gives what the line-by-line matcher gives.

``match_file`` (one scan per block, pure Python or hyperscan) is compared with
``match_stream(kb, iter_lines(...))`` on the same bytes: entries, counts, line numbers,
groups, the line count and the last stats line. Lines come from the real error reports in
tests/corpus/triage, mixed with case variants, non-ASCII text whose lower-casing yields ASCII
(KELVIN SIGN, İ), CJK signatures, invalid UTF-8, CRLF, lines past MAX_LINE and a last line
without a newline; small blocks put block boundaries everywhere.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascend_doctor import knowledge
from ascend_doctor.checks.logs import match_file, match_stream
from ascend_doctor.probes import logs as logs_probe
from ascend_doctor.probes.logs import (MAX_LINE, LinePrefilter, LogScan, _HsEngine, _PyEngine,
                                iter_lines, parse_stats_line, scan_engine)
from tests.timing import growth

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "triage"
KB = knowledge.load()
PRE = LinePrefilter([p for e in KB.entries.values() for p in e.signatures])
STATS = ("INFO 11-20 03:06:02 [loggers.py:123] Engine 000: Avg prompt throughput: 5198.0 "
         "tokens/s, Avg generation throughput: 903.2 tokens/s, Running: 48 reqs, Waiting: 140 "
         "reqs, GPU KV cache usage: 97.0%, Prefix cache hit rate: 0.0%")


def _corpus_lines() -> list[str]:
    out = []
    for p in sorted(CORPUS.glob("*.txt")):
        body = p.read_text(encoding="utf-8").partition("# ---\n")[2]
        out += [ln for ln in body.splitlines() if ln.strip()][:40]
    return out


REAL = _corpus_lines()
EXTRA = [
    STATS, STATS.replace("Waiting", "Pending"), "throughput only, not a stats line",
    'INFO:     10.0.0.7:51514 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB",
    "EI0006: Getting socket times out.", "ei0006: getting SOCKET times out",
    "重复块 ID 17 in block table", "错误 EZ9999 内部错误", "ACL_ERROR_RT_FAILURE",
    "\u212aernel EL0009 \u0130nit", "OOM killer", "ACL_\u212aRROR_X",  # KELVIN SIGN, İ
    "lib\u00e9.so: invalid ELF header", "café", "", "重复块ID", "bloc\u212a_table id 3",
    "\u212aV cache block_table", "AC\u212b ACL_ERROR_\u212a",
]
BYTES_LINES = [b"\xff\xfe EZ9999 bad utf-8", b"EI0006 \xe9\x00 half", b"caf\xc3"]
LONG = ["x" * (MAX_LINE - 1), "y" * MAX_LINE + " EI0006: long", "EZ9999 " + "z" * (MAX_LINE + 5)]


def _old(data: bytes) -> tuple:
    last, count = [], [0]

    def on_line(n: int, line: str) -> None:
        count[0] = n
        if "throughput" in line:
            st = parse_stats_line(line, n)
            if st is not None:
                last[:] = [st]
    m = match_stream(KB, iter_lines(io.BytesIO(data), len(data)), on_line)
    return [(a.entry.id, a.count, a.lines, a.groups) for a in m], count[0], \
        (last[0] if last else None)


def _new(data: bytes, engine) -> tuple:
    r = LogScan()
    m = match_file(KB, io.BytesIO(data), len(data), r, engine)
    return [(a.entry.id, a.count, a.lines, a.groups) for a in m], r.lines, r.last_stats


def _engines() -> list:
    out = [scan_engine(PRE.literals, "python")]
    try:
        out.append(scan_engine(PRE.literals, "hyperscan"))
    except ImportError:
        pass
    return out


def _line() -> st.SearchStrategy[bytes]:
    text = st.sampled_from(REAL + EXTRA).map(lambda s: s.encode())
    cased = st.sampled_from(REAL + EXTRA).map(lambda s: s.swapcase().encode())
    noise = st.text(st.characters(min_codepoint=32, max_codepoint=0x9FFF), max_size=30) \
        .map(lambda s: s.encode("utf-8", "surrogatepass"))
    return st.one_of(text, text, cased, noise, st.sampled_from(BYTES_LINES))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(_line(), max_size=60), ends=st.sampled_from([b"\n", b"\r\n"]),
       last_newline=st.booleans(), block=st.sampled_from([64, 257, 4096, 1 << 20]))
def test_scan_equals_line_by_line(lines, ends, last_newline, block):
    data = ends.join(lines) + (ends if last_newline and lines else b"")
    want = _old(data)
    saved, logs_probe.BLOCK = logs_probe.BLOCK, block
    try:
        for engine in _engines():
            assert _new(data, engine) == want, engine.name
        assert _new(data, None) == want  # no engine named: blocks under SMALL_BLOCK by line
    finally:
        logs_probe.BLOCK = saved


def test_a_small_log_is_scanned_by_line_as_the_engine_scans_it(monkeypatch):
    """Under SMALL_BLOCK no engine is built (its literal list costs more than the scan):
    the demo's log and every corpus log give what the engine path and the stream give."""
    from ascend_doctor.demo.parts.service import SERVER_LOG

    monkeypatch.delenv("ASCEND_DOCTOR_SCAN_ENGINE", raising=False)
    built = []
    real = logs_probe._minimal
    monkeypatch.setattr(logs_probe, "_minimal", lambda lits: built.append(1) or real(lits))
    corpus = Path(__file__).resolve().parents[1] / "corpus"
    logs = [SERVER_LOG.encode()] + [p.read_bytes() for p in sorted(corpus.rglob("*"))
                                    if p.suffix in (".txt", ".log")]
    # only b"\n" ends a line (readline): not \r, \f, \x1c, NEL or U+2028
    odd = ["EZ9999 a\rEI0006: Getting socket times out.", "x\x0cEZ9999\x1cEI0006 b",
           "EI0006\u2028EZ9999\x85 c", "\r\rEZ9999 d\r", STATS + "\rEZ9999"]
    logs.append(("\n".join(odd) + "\nEZ9999 last").encode())
    small = 0
    for data in logs:
        want = _old(data)
        built.clear()
        assert _new(data, None) == want
        if len(data) < logs_probe.SMALL_BLOCK:
            small += 1
            assert built == []
        for engine in _engines():
            assert _new(data, engine) == want, engine.name
    assert small > 20


@pytest.fixture
def monkeypatch_block():
    saved = logs_probe.BLOCK

    def set_block(n: int) -> None:
        logs_probe.BLOCK = n
    yield set_block
    logs_probe.BLOCK = saved


@pytest.mark.parametrize("block", [100, 1 << 16, 1 << 22])
def test_long_lines_and_real_reports(monkeypatch_block, block):
    """Lines past MAX_LINE are split as readline(MAX_LINE) splits them; numbers follow."""
    monkeypatch_block(block)
    body = "\n".join([*REAL[:25], *LONG, STATS, *REAL[25:], LONG[1], "EI0006: tail"])
    data = body.encode()
    want = _old(data)
    assert want[0] and want[1] > len(REAL) + 5
    for engine in _engines():
        assert _new(data, engine) == want, engine.name


def test_engines_find_every_line_with_a_literal():
    """Each engine's line starts hold every line the exact test accepts (ASCII lines)."""
    lines = [ln.encode() for ln in REAL + EXTRA if ln.isascii()]
    lines += [ln.swapcase() for ln in lines]
    block = b"\n".join(lines) + b"\n"
    starts, pos = [], 0
    for ln in lines:
        if PRE.candidate(ln.decode()):
            starts.append(pos)
        pos += len(ln) + 1
    assert len(starts) > 20
    for engine in _engines():
        assert set(starts) <= engine.line_starts(block), engine.name


def test_pure_python_engine_is_the_fallback(monkeypatch):
    monkeypatch.delenv("ASCEND_DOCTOR_SCAN_ENGINE", raising=False)
    assert isinstance(scan_engine(PRE.literals, "python"), _PyEngine)
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        assert isinstance(scan_engine(PRE.literals), _PyEngine)
    else:
        assert isinstance(scan_engine(PRE.literals), _HsEngine)


def test_the_environment_picks_the_engine(monkeypatch):
    monkeypatch.setenv("ASCEND_DOCTOR_SCAN_ENGINE", "python")
    assert isinstance(scan_engine(PRE.literals), _PyEngine)
    pytest.importorskip("hyperscan")
    monkeypatch.setenv("ASCEND_DOCTOR_SCAN_ENGINE", "hyperscan")
    assert isinstance(scan_engine(PRE.literals), _HsEngine)


def test_the_accelerator_loads_only_once_a_log_is_large(monkeypatch):
    """No engine named: a log under HS_AFTER bytes is scanned in pure Python (loading
    hyperscan would cost more than the scan); a larger one loads the chosen engine once, at
    the block that crosses the mark, and the findings are the same either way."""
    monkeypatch.delenv("ASCEND_DOCTOR_SCAN_ENGINE", raising=False)
    picked: list[str] = []
    real = logs_probe.scan_engine

    def spy(literals, prefer=None, patterns=()):
        e = real(literals, prefer, patterns)
        picked.append(e.name)
        return e
    monkeypatch.setattr(logs_probe, "scan_engine", spy)
    unit = ("\n".join(REAL) + "\n" + STATS + "\n").encode()
    small = unit * max(1, (logs_probe.HS_AFTER // 2) // len(unit))
    got = _new(small, None)
    assert picked == [] and got == _old(small)
    monkeypatch.setattr(logs_probe, "BLOCK", 64 << 10)  # several blocks before the mark
    large = unit * (logs_probe.HS_AFTER // len(unit) + 2)
    got = _new(large, None)
    assert len(picked) == 1 and got == _old(large), picked


def _minimal_pairwise(literals: list[str]) -> list[bytes]:
    """``_minimal`` as pairwise ``in`` tests (how it once ran)."""
    found = {lit.encode().split(b"\n")[0] for lit in literals
             if lit.isascii() or lit == lit.upper() == lit.lower()} - {b""}
    return sorted(a for a in found if not any(b != a and b in a for b in found))


# é is cased (its line is tested whole), 重 is not (searched as its bytes)
@given(st.lists(st.text(st.sampled_from("ab\nc\u00e9\u91cd"), max_size=6), max_size=10))
def test_minimal_literals_equal_the_pairwise_definition(literals):
    assert sorted(logs_probe._minimal(literals)) == _minimal_pairwise(literals)


def test_minimal_literals_of_the_knowledge_base():
    kb = knowledge.load()
    lits = LinePrefilter([p for e in kb.entries.values() for p in e.signatures]).literals
    assert sorted(logs_probe._minimal(lits)) == _minimal_pairwise(lits)


@given(st.text(max_size=12) | st.text(st.sampled_from("ab.*()[]\\|?+{}^$ "), max_size=12))
def test_required_literal_skips_the_parse_only_where_it_changes_nothing(pattern):
    import warnings

    with warnings.catch_warnings():  # "[[" and friends: the parser's FutureWarning
        warnings.simplefilter("ignore", FutureWarning)
        assert logs_probe.required_literal(pattern) == logs_probe._literal_by_parse(pattern)


def test_required_literal_of_every_signature_equals_the_parsed_one():
    kb = knowledge.load()
    for p in (p for e in kb.entries.values() for p in e.signatures):
        assert logs_probe.required_literal(p) == logs_probe._literal_by_parse(p), p


def test_a_log_is_read_to_its_size_when_opened_and_a_time_cut_is_said(tmp_path):
    """Issue 34: a log growing faster than it is read made the logs check time out and the
    bundle hold no log. The read stops at the size the file had when opened, and a read cut
    by the time budget keeps what it read and says where it stopped."""
    import io
    import time as _time

    from ascend_doctor.probes import logs

    class Growing(io.RawIOBase):
        """A file that gains a line for every read (a writer at full speed)."""

        def __init__(self, start: bytes) -> None:
            self.data = bytearray(start)
            self.pos = 0

        def readable(self):
            return True

        def seekable(self):
            return True

        def seek(self, off, whence=0):
            self.pos = {0: off, 1: self.pos + off, 2: len(self.data) + off}[whence]
            return self.pos

        def tell(self):
            return self.pos

        def readinto(self, b):
            self.data += b"INFO growing line\n" * 1000
            chunk = self.data[self.pos:self.pos + len(b)]
            b[:len(chunk)] = chunk
            self.pos += len(chunk)
            return len(chunk)

    start = b"".join(b"INFO line %d\n" % i for i in range(1000))
    fh = io.BufferedReader(Growing(start))
    size = logs.stream_size(fh)
    assert size == len(start)
    res = logs.LogScan()
    pre = logs.LinePrefilter(["never-matches-anything"])
    list(logs.scan_lines(fh, size, pre, res))
    assert res.lines == 1000 and res.cut is None and res.read_to == len(start)

    res = logs.LogScan()
    blocks = list(logs.bounded_blocks(io.BytesIO(start), len(start), res, _time.monotonic() - 1))
    assert blocks == [] and res.cut == f"read for {logs.READ_BUDGET_S:g} s" and res.read_to == 0


def test_many_throughput_lines_that_are_not_stats_lines_stay_linear():
    """A block full of lines holding "throughput" that are not vLLM's stats line: the
    search for the last stats line counted newlines for each of them (quadratic: a 15 MB
    log of such lines took > 60 s). Same answer as the line-by-line path, in bounded time."""
    import io

    from ascend_doctor.probes import logs

    junk = b"INFO engine.py:1] Avg prompt throughput: 1.0 tokens/s, x\n"
    stats = (b"INFO loggers.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput:"
             b" 2.0 tokens/s, Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 5.0%\n")
    pre = logs.LinePrefilter(["never-matches-anything"])

    def scan(n: int) -> logs.LogScan:
        data = stats + junk * n  # 60 000: ~3.4 MB, one block
        res = logs.LogScan()
        list(logs.scan_lines(io.BytesIO(data), len(data), pre, res, logs._PyEngine([b"never"])))
        return res

    # 4x the lines ~4x the time (4.3 measured), quadratic ~16x; load slows both alike
    ratio = growth(scan, 15_000, k=3)
    assert ratio < 8, f"4x the lines took {ratio:.1f}x the time: not linear"
    res = scan(60_000)
    assert res.last_stats is not None and res.last_stats.line_no == 1
    assert res.lines == 60_001


def _bench_logs():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "bench_logs.py"
    spec = importlib.util.spec_from_file_location("bench_logs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_triage_of_a_realistic_log_is_the_same_with_every_engine(tmp_path, cli):
    """``triage FILE --json`` on the bench's realistic vllm-ascend log (the real server's
    banner and tracebacks, CJK prompts, access and stats lines; 3 blocks of 4 MiB): the plain
    line-by-line path, the pure-Python block engine and Hyperscan give the same answers,
    decisive line and line count."""
    import json

    log = tmp_path / "server.log"
    inserted = _bench_logs().realistic_log(log, 30_000, blocks_every=3_000)
    assert inserted >= 9 and log.stat().st_size > 2 * logs_probe.BLOCK
    assert "请用三句话".encode() in log.read_bytes()
    engines = ["line", "python"]
    try:
        scan_engine(PRE.literals, "hyperscan")
        engines.append("hyperscan")
    except ImportError:
        pass
    out = {}
    for eng in engines:
        r = cli("triage", str(log), "--json", env={"ASCEND_DOCTOR_SCAN_ENGINE": eng})
        assert r.returncode == 0, r.stderr
        out[eng] = json.loads(r.stdout)
    want = out["line"]
    assert want["lines"] == 30_000 and want["decisive"] and want["answers"]
    for eng in engines[1:]:
        assert out[eng] == want, eng
    # and the lines each engine hands to the matcher and the event reading, one by one
    from ascend_doctor.probes.logmatch import prefilter

    pre = prefilter(KB, events=True)
    pats = (logs_probe.EVENT_PATTERN,)
    lines = {}
    for eng in engines:
        with open(log, "rb") as fh:
            engine = scan_engine(pre.literals, eng, pats)
            lines[eng] = list(logs_probe.scan_lines(fh, None, pre, LogScan(), engine,
                                                    patterns=pats))
    assert len(lines["line"]) > 300
    for eng in engines[1:]:
        assert lines[eng] == lines["line"], eng
