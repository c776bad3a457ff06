"""bench/ helpers: per-child peak RSS, importtime parsing and the ratio table."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_measure_once_reports_the_childs_own_peak_rss():
    common = _load("common")
    if not os.access(common.GNU_TIME, os.X_OK):
        pytest.skip("GNU time (Debian package `time`) is not installed")
    big = [sys.executable, "-c", "b = bytearray(80 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"]
    small = [sys.executable, "-c", "pass"]
    _, mb_big, rc = common.measure_once(big)
    _, mb_small, rc2 = common.measure_once(small)  # after the big one: not the running max
    assert rc == rc2 == 0
    assert mb_big > 80 and mb_small < mb_big - 60


def test_importtime_parse_and_table():
    demo = _load("bench_demo")
    err = ("import time: self [us] | cumulative | imported package\n"
           "import time:       424 |      25269 |   click\n"
           "import time:     11749 |      43868 | ascend_doctor.cli\n")
    assert demo.total_import_us(err, "ascend_doctor.cli") == 43868
    run = _load("run")
    rows = [{"name": "demo", "ours_s": 0.5, "peer": "collect_env", "peer_s": 9.0,
             "ours_rss_mb": 26.0, "peer_rss_mb": 208.0, "note": ""},
            {"name": "x", "ours_s": 2.0, "peer": None, "peer_s": None, "ours_rss_mb": None,
             "peer_rss_mb": None, "note": "peer skipped"}]
    lines = run.table(rows)
    assert "| demo | 500 ms | collect_env | 9000 ms | 18.0× faster | 26 MiB | 208 MiB |" in lines[2]
    assert "| — |" in lines[3] and "peer skipped" in lines[3]


def test_report_bench_rows_say_what_they_measure(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")  # the bench sets it for itself; not for later tests
    rows = _load("bench_report").run(quick=True)
    assert [r["name"] for r in rows][0].startswith("text report of the demo")
    assert all(r["note"].startswith("absolute: ") and r["peer_s"] for r in rows)
