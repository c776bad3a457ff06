"""triage reads a log the user hands over to its end; the checks' 40 s read budget stops a
read of a service log and says where (the end of a log is where its failure usually is)."""

from __future__ import annotations

import itertools

from ascend_doctor import knowledge
from ascend_doctor.cli_kb import read_log
from ascend_doctor.probes import logs as logs_probe
from ascend_doctor.probes.logmatch import prefilter
from ascend_doctor.probes.logs import BLOCK, LogScan, scan_lines

FATAL = "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"


def _log(tmp_path):
    filler = "INFO 12-06 10:00:00 [loggers.py:123] Avg prompt throughput: 1.0 tokens/s\n"
    n = 3 * BLOCK // len(filler) + 1  # several blocks, so the clock is asked between them
    p = tmp_path / "rank0.log"
    p.write_text(filler * n + FATAL + "\n", encoding="utf-8")
    return p, n + 1


def _racing_clock(monkeypatch):
    """time.monotonic advancing 100 s a call: any budget is spent after the first block."""
    ticks = itertools.count(0, 100)
    monkeypatch.setattr(logs_probe.time, "monotonic", lambda: float(next(ticks)))


def test_triage_reads_past_the_checks_budget(tmp_path, monkeypatch):
    path, last = _log(tmp_path)
    _racing_clock(monkeypatch)
    lines, _matches, scan = read_log(str(path), knowledge.load())
    assert scan.cut is None
    assert scan.lines == last
    assert (last, FATAL + "\n") in lines or (last, FATAL) in lines


def test_the_checks_read_stops_at_its_budget_and_says_so(tmp_path, monkeypatch):
    path, last = _log(tmp_path)
    _racing_clock(monkeypatch)
    scan = LogScan()
    with open(path, "rb") as fh:
        got = list(scan_lines(fh, path.stat().st_size, prefilter(knowledge.load()), scan))
    assert scan.cut == f"read for {logs_probe.READ_BUDGET_S:g} s"
    assert scan.read_to is not None and scan.read_to < path.stat().st_size
    assert all(n < last for n, _ in got)
