"""The real vLLM 0.32 (CPU) server's saved answers (tests/corpus/realvllm/README.md says how
each was captured): /metrics after load and with --disable-log-stats, /version, the
head_dim-8 engine death; plus the older metric name and service.version per server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ascend_doctor.checks import service
from ascend_doctor.model import Status
from ascend_doctor.probes.packages import Package, Packages
from ascend_doctor.probes.service import (Endpoint, MetricsSnapshot, ServersHttp, ServiceHttp,
                                          histogram_quantile, parse_metrics)
from ascend_doctor.errors import ParseError
from tests.conftest import run_cli

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "realvllm"
OFF = CORPUS / "metrics-disable-log-stats.txt"
LOADED = CORPUS / "metrics-after-load.txt"
HEAD_DIM = CORPUS / "head-dim-8-first-request-engine-dead.log"


def _http(text: str, url: str = "http://127.0.0.1:8000", pid: int | None = None,
          version: str = "0.32.0") -> ServiceHttp:
    snap = parse_metrics(text)
    eps = {"/health": Endpoint("/health", 200, None, 0.002),
           "/version": Endpoint("/version", 200, None, 0.002, {"version": version})}
    scrapes = (MetricsSnapshot(snap.samples, 0.0, snap.families),
               MetricsSnapshot(snap.samples, 1.0, snap.families))
    return ServiceHttp(url, True, eps, scrapes, pid=pid)


def test_help_and_type_without_samples_is_stats_disabled_not_a_format_error():
    """vLLM's families declared but none sampled (the real after-load capture with every
    vllm: sample line removed: what a server that registers its metrics and records nothing
    exports) is "stats disabled", not a ParseError."""
    text = "\n".join(ln for ln in LOADED.read_text().splitlines()
                     if not ln.startswith("vllm:")) + "\n"
    snap = parse_metrics(text)
    assert "vllm:kv_cache_usage_perc" in snap.families
    assert not [s for s in snap.samples if s.name.startswith("vllm:")]
    h = _http(text)
    assert h.stats_disabled and not h.vllm_series
    (f,) = list(service.metrics(h))
    assert f.status == Status.WARN and f.kb == ("ASC-SVC-005",)
    assert f.message.startswith("stats disabled: /metrics declares") and f.fix.id == \
        "service.launch-flags", f
    assert "vllm:cache_config_info" in f.evidence["declared"]  # the first 20, sorted


def test_real_disable_log_stats_capture_has_no_vllm_family_at_all():
    """vLLM 0.32 with --disable-log-stats registers no vllm: family (measured): the
    stats-off warning from the HTTP series it still exports."""
    text = OFF.read_text()
    assert "vllm:" not in text
    h = _http(text)
    assert not h.stats_disabled
    (f,) = list(service.metrics(h))
    assert f.status == Status.WARN and f.kb == ("ASC-SVC-005",)
    assert "--disable-log-stats" in f.message and f.fix.id == "service.launch-flags"


def test_a_body_with_neither_samples_nor_help_lines_is_still_a_format_error():
    with pytest.raises(ParseError, match="no samples and no HELP/TYPE"):
        parse_metrics("# a comment line only\n")


def test_p99_of_the_real_histograms_lies_in_their_p99_bucket():
    h = _http(LOADED.read_text())
    fs = list(service.metrics(h))
    for base, label in (("vllm:time_to_first_token_seconds", "TTFT"),
                        ("vllm:e2e_request_latency_seconds", "e2e latency")):
        b = h.scrapes[-1].buckets(base)
        f = next(f for f in fs if f.message.startswith(label + " P99"))
        q = f.evidence["p99_s"]
        rank = 0.99 * max(b.values())
        hi = min(le for le, c in b.items() if c >= rank)
        lo = max([le for le, c in b.items() if c < rank], default=0.0)
        assert math.isfinite(q) and lo <= q <= hi and q > 0, (q, lo, hi)
        assert q == round(histogram_quantile(0.99, b), 4)


def test_older_gpu_cache_usage_perc_is_the_kv_usage():
    """vLLM before 0.10 exported the KV usage as vllm:gpu_cache_usage_perc: the real capture
    with the series renamed back is read the same way."""
    text = LOADED.read_text().replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    old = [ln for ln in text.splitlines() if ln.startswith("vllm:gpu_cache_usage_perc")]
    assert old  # the sample line, renamed with its HELP/TYPE lines
    body = "\n".join(ln if ln not in old else ln.rsplit(" ", 1)[0] + " 0.42"
                     for ln in text.splitlines()) + "\n"
    fs = list(service.metrics(_http(body)))
    ev = next(f.evidence for f in fs if "kv_metric" in f.evidence)
    assert ev["kv_metric"] == "vllm:gpu_cache_usage_perc" and ev["kv_cache_usage"] == 0.42


def test_version_is_asked_of_every_discovered_server():
    a = _http(OFF.read_text(), "http://127.0.0.1:8000", pid=11, version="0.32.0")
    b = _http(OFF.read_text(), "http://127.0.0.1:8001", pid=12, version="0.23.0")
    pkgs = Packages("3.11", "/v/bin/python", "test", {"vllm-ascend": Package("vllm_ascend",
                                                                             "0.23.0")})
    fs = list(service.version(a, pkgs, ServersHttp((a, b))))
    by = {f.subject: f for f in fs}
    assert by["pid 11 at http://127.0.0.1:8000"].status == Status.FAIL  # 0.32 vs 0.23
    assert by["pid 12 at http://127.0.0.1:8001"].status == Status.PASS
    assert list(service.version(a, pkgs))[0].status == Status.FAIL  # no ServersHttp: primary


def test_saved_version_body_is_vllms():
    assert json.loads((CORPUS / "version.json").read_text()) == {"version": "0.32.0"}


def test_head_dim_log_has_the_root_cause_above_engine_dead():
    lines = HEAD_DIM.read_text().splitlines()
    cause = [i for i, ln in enumerate(lines)
             if "RuntimeError: Unsupported CPU attention configuration: head_dim=8" in ln]
    dead = [i for i, ln in enumerate(lines) if "EngineDeadError" in ln]
    assert cause and dead and cause[0] < dead[-1]
    r = run_cli("triage", str(HEAD_DIM))
    assert r.returncode == 0 and "ASC-SVC-002" in r.stdout, r.stdout


def test_head_dim_triage_quotes_the_root_cause_line():
    """The engine's death ("EngineCore encountered a fatal error", then EngineDeadError:
    "See stack trace (above)") is answered with the worker's error that caused it, and that
    error is the decisive line (no entry knows it: the index of vllm is not installed here).
    The death entry explains another line than the decisive one, so triage says it has no
    confident match and lists it as a candidate (issue 32: no weak answer given as advice)."""
    r = run_cli("triage", str(HEAD_DIM))
    out = r.stdout
    lines = out.splitlines()
    assert lines[0].startswith("no confident match"), out
    assert lines[1].startswith("decisive line 142: ") and "head_dim=8" in lines[1], out
    (svc,) = [ln for ln in lines if ln.startswith("1. ASC-SVC-002")]
    assert "died of: RuntimeError: Unsupported CPU attention configuration: head_dim=8" in svc
