"""The live panel's readers on real formats, and the dashboard model (no terminal needed)."""

from __future__ import annotations

import math

import pytest

from ascend_doctor.model import Category, CheckResult, Finding, Status
from ascend_doctor.tui import livefeed
from ascend_doctor.tui.state import RunState
from tests.fixtures.npusmi import A2, A3
from tests.tui.conftest import LIVE_SAMPLES, metrics_text, npu_smi_text

def test_npu_smi_a2_table():
    r = livefeed.parse_npu_smi(A2)
    assert r == [livefeed.NpuReading(0, 0, 49.0, 3373.0, 65536.0),
                 livefeed.NpuReading(1, 0, 51.0, 20701.0, 65536.0)]


def test_npu_smi_a3_two_chips_and_missing_power():
    r = livefeed.parse_npu_smi(A3)
    assert [(x.npu, x.chip, x.temp_c, x.hbm_used_mb) for x in r] == [
        (0, 0, 37.0, 3133.0), (0, 1, 37.0, 2876.0), (1, 0, 38.0, 3116.0), (1, 1, 38.0, 10568.0)]


def test_npu_smi_eight_npus_and_garbage():
    r = livefeed.parse_npu_smi(npu_smi_text([40 + i for i in range(8)], [1000 * i for i in range(8)]))
    assert [x.temp_c for x in r] == [40.0 + i for i in range(8)]
    assert [x.hbm_used_mb for x in r] == [1000.0 * i for i in range(8)]
    assert livefeed.parse_npu_smi("command not found\n") == []


def test_metrics_reader_sums_series_and_reads_the_histogram():
    s = livefeed.parse_metrics(metrics_text(12, 30, 0.98, 14, [(0.8, 26), (40.0, 2)]))
    assert (s.running, s.waiting, s.kv_usage, s.preemptions) == (12.0, 30.0, 0.98, 14.0)
    assert dict(s.e2e_buckets)[math.inf] == 28.0 and dict(s.e2e_buckets)[0.8] == 26.0


def test_metrics_reader_old_kv_name_and_bad_text():
    s = livefeed.parse_metrics("# TYPE vllm:gpu_cache_usage_perc gauge\n"
                               'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n')
    assert s.kv_usage == 0.5 and s.running is None
    with pytest.raises(livefeed.FeedError):
        livefeed.parse_metrics("vllm:num_requests_running{engine=\"0\" 3\n")


def test_histogram_quantile_interpolates_like_prometheus():
    b = [(0.5, 50.0), (1.0, 90.0), (2.0, 100.0), (math.inf, 100.0)]
    assert livefeed.histogram_quantile(0.5, b) == pytest.approx(0.5)
    assert livefeed.histogram_quantile(0.99, b) == pytest.approx(1.9)
    assert livefeed.histogram_quantile(0.99, [(1.0, 0.0), (math.inf, 0.0)]) is None
    assert livefeed.histogram_quantile(0.99, [(1.0, 1.0), (math.inf, 10.0)]) == 1.0


def test_series_uses_deltas_for_preemptions_and_p99():
    series = livefeed.LiveSeries()
    for run_, wait, kv, pre, fin in LIVE_SAMPLES:
        series.add_metrics(livefeed.parse_metrics(metrics_text(run_, wait, kv, pre, fin)))
    assert list(series.running) == [3, 8, 12, 12]
    assert list(series.kv) == pytest.approx([42, 71, 93, 98])
    assert list(series.preempt) == [0, 5, 9] and series.preempt_total == 14
    # the last interval finished 1+4+7+6+2 = 20 requests; rank 19.8 falls in (30, 40]
    assert series.p99[-1] == pytest.approx(39.0)
    text = livefeed.describe(series)
    assert text["kv"] == "98%" and text["preempt"] == "14"


def _result(cid, cat, *findings):
    return CheckResult(cid, cid, cat, (), tuple(findings))


def test_state_groups_worst_first_and_picks_the_worst_finding():
    st = RunState()

    class Spec:
        def __init__(self, id, cat):
            self.id, self.title, self.category = id, id, cat

    st.start([Spec("a.ok", Category.LIBS), Spec("b.warn", Category.NPU),
              Spec("c.fail", Category.VERSIONS), Spec("d.pending", Category.LIBS)], 1)
    st.add(_result("a.ok", Category.LIBS, Finding.passed("fine")))
    st.add(_result("b.warn", Category.NPU, Finding.warn("npu 3 at 71°C")))
    st.add(_result("c.fail", Category.VERSIONS, Finding.info("i"),
                   Finding.fail("torch 2.13.0, needs 2.10.0",
                                evidence={"versions": {"torch": "2.13.0"}})))
    groups = st.groups()
    assert [g.category for g in groups] == [Category.VERSIONS, Category.NPU, Category.LIBS]
    assert groups[2].state == "pass"  # one pass, one not yet run
    row, f = st.worst()
    assert row.id == "c.fail" and f.status is Status.FAIL
    assert row.findings[0].status is Status.FAIL  # worst first within a check
    assert st.versions() == {"torch": "2.13.0"}
    assert st.summary()["pending"] == 1 and st.done_count() == 3
    assert [r.id for g in st.groups("torch") for r in g.rows] == ["c.fail"]
    assert [r.id for g in st.groups("warn") for r in g.rows] == ["b.warn"]


def test_the_tui_adapters_do_not_import_textual():
    """state, livefeed, fixflow and export hold no UI: usable (and tested) without textual."""
    import subprocess
    import sys

    code = ("import sys, ascend_doctor.tui.state, ascend_doctor.tui.livefeed, ascend_doctor.tui.fixflow, "
            "ascend_doctor.tui.export; print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_worst_prefers_the_actionable_finding_among_equals():
    st = RunState()
    st.add(_result("a.nofix", Category.CONTAINER, Finding.fail("no fix here", kb="ASC-CTR-002")))
    st.add(_result("b.fix", Category.LIBS, Finding.fail("fixable", kb="ASC-LIB-003",
                                                        fix="ldconf.ascend-conf")))
    st.add(_result("c.warn", Category.NPU, Finding.warn("warn with fix", fix="x.y")))
    assert st.worst()[0].id == "b.fix"
    st.add(_result("d.error", Category.NPU, Finding.error("crashed")))
    # a crashed check is not ranked above a real fail (issue 14: doctor/ranking.py)
    assert st.worst()[0].id == "b.fix"


def test_glyphs_fall_back_to_text_on_dumb_terminals(monkeypatch):
    from ascend_doctor.tui import state

    monkeypatch.delenv("ASCEND_DOCTOR_ASCII", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert state.glyph("fail") == "✗"
    monkeypatch.setenv("TERM", "dumb")
    assert state.glyph("fail") == "X" and state.glyph("pass") == "ok"
