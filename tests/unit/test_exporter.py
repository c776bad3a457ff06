"""The exporter's metrics, parsed back from the exposition text, on the demo scenario."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ascend_doctor.cli import build_options, demo_host
from ascend_doctor.cli_exporter import FAULT_SAMPLING_CHECKS, State, loop, run_once
from ascend_doctor.exporter import Snapshot, exposition, health
from ascend_doctor.model import Category, CheckResult, Finding, HostInfo, Report, Severity
from ascend_doctor.probes.npusmi import NpuChip, NpuSmiInfo

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def demo_snap() -> Snapshot:
    snap = run_once(demo_host, build_options({"service_url": None}), FAULT_SAMPLING_CHECKS,
                    None, "demo", None)
    assert snap.report is not None, snap.error
    return snap


def _families(body: bytes) -> dict:
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def _chip(npu: int, temp: int, used: int, total: int = 65536, health: str = "OK") -> NpuChip:
    return NpuChip(npu, 0, "910B4", health, 90.0, temp, f"0000:{npu:02x}:00.0", 0, used, total)


def _report(*results: CheckResult) -> Report:
    return Report("0", HostInfo(), "sysroot", "2026-01-01T00:00:00+00:00", 1.5, results)


def test_demo_exposition_parses_with_checks_findings_and_npus(demo_snap: Snapshot) -> None:
    fams = _families(exposition(demo_snap))
    st = fams["ascend_doctor_check_status"].samples
    checks = {s.labels["check"] for s in st}
    assert len(checks) == len(demo_snap.report.results) > 20
    # one-hot: exactly one status is 1 per check, and it is the check's status
    for r in demo_snap.report.results:
        on = [s.labels["status"] for s in st if s.labels["check"] == r.check_id and s.value == 1]
        assert on == [r.status.value]
    assert {s.labels["status"] for s in st} == {"pass", "info", "warn", "fail", "skip", "error"}
    assert "tlb.faults" not in checks  # fault sampling only when --sample-seconds is given

    temps = {s.labels["npu"]: s.value
             for s in fams["ascend_doctor_npu_temperature_celsius"].samples}
    assert len(temps) == 8 and temps["3"] == 86.0 and temps["0"] == 47.0
    used = {s.labels["npu"]: s.value for s in fams["ascend_doctor_npu_hbm_used_bytes"].samples}
    total = {s.labels["npu"]: s.value for s in fams["ascend_doctor_npu_hbm_total_bytes"].samples}
    assert set(used) == set(total) == set(temps)
    assert all(0 < total[n] and used[n] <= total[n] for n in total)
    healthy = {s.labels["npu"]: s.value for s in fams["ascend_doctor_npu_healthy"].samples}
    assert 0.0 in healthy.values() and 1.0 in healthy.values()

    findings = fams["ascend_doctor_findings"].samples
    by_kb = {(s.labels["kb"], s.labels["severity"], s.labels["status"]): s.value
             for s in findings}
    failing = [f for _, f in demo_snap.report.findings() if f.status.value in
               ("fail", "warn", "error")]
    assert sum(by_kb.values()) == sum(max(1, len(f.kb)) for f in failing)
    assert any(k[0].startswith("ASC-NPU-") for k in by_kb)
    assert fams["ascend_doctor_run_duration_seconds"].samples[0].value == \
        demo_snap.report.duration_s
    ts = fams["ascend_doctor_last_success_timestamp_seconds"].samples[0].value
    assert abs(ts - time.time()) < 600
    assert fams["ascend_doctor_up"].samples[0].value == 1.0


def test_labels_are_bounded_and_never_free_text(demo_snap: Snapshot) -> None:
    fams = _families(exposition(demo_snap))
    allowed = {"check", "category", "status", "kb", "severity", "npu", "chip", "id", "version",
               "context", "bits", "device"}
    values: dict[str, set[str]] = {}
    for fam in fams.values():
        for s in fam.samples:
            assert set(s.labels) <= allowed, (fam.name, s.labels)
            for k, v in s.labels.items():
                values.setdefault(k, set()).add(v)
                assert len(v) <= 64 and " " not in v, (k, v)
    assert values["status"] <= {"pass", "info", "warn", "fail", "skip", "error"}
    assert values["severity"] <= {"none", "low", "medium", "high", "critical"}
    assert values["category"] <= {c.value for c in Category}
    assert all(re.fullmatch(r"[A-Z]+-[A-Z]+-\d+|none", k) for k in values["kb"])
    assert all(v.isdigit() for v in values["npu"] | values["chip"] | values["id"]
               | values.get("device", set()))
    assert values.get("bits", set()) <= {"single", "double"}
    total = sum(len(f.samples) for f in fams.values())
    assert total < 6 * len(demo_snap.report.results) + 200


def test_healthz_degraded_on_the_demo_names_the_hot_npu(demo_snap: Snapshot) -> None:
    ok, reasons = health(demo_snap)
    assert not ok
    assert "npu 3 chip 0: temperature 86 C > 85 C" in reasons
    assert _families(exposition(demo_snap))["ascend_doctor_healthy"].samples[0].value == 0.0


def test_health_thresholds_hbm_and_critical_check() -> None:
    cool = SimpleNamespace(info=NpuSmiInfo("1", "1", (_chip(0, 85, 58982),)))  # 89.99 %, 85 C
    assert health(Snapshot(_report(), cool, 0.0, 0.0)) == (True, [])
    full = SimpleNamespace(info=NpuSmiInfo("1", "1", (_chip(0, 40, 58983),)))  # 90.0 %
    ok, reasons = health(Snapshot(_report(), full, 0.0, 0.0))
    assert not ok and reasons == ["npu 0 chip 0: memory 58983/65536 MB (>= 90%)"]
    crit = CheckResult("npu.health", "t", Category.NPU, (),
                       (Finding.fail("chip lost", severity=Severity.CRITICAL),))
    high = CheckResult("libs.x", "t", Category.LIBS, (), (Finding.fail("broken"),))
    ok, reasons = health(Snapshot(_report(crit, high), None, 0.0, 0.0))
    assert not ok and reasons == ["critical check failed: npu.health"]
    ok, reasons = health(Snapshot(_report(high), None, 0.0, 0.0))
    assert ok  # a high (not critical) failure leaves the node serving


def test_no_report_yet_is_degraded_and_down_with_no_npu_series() -> None:
    snap = Snapshot(None, None, 0.0, None, "BundleError: bundle x.tar.gz does not exist")
    ok, reasons = health(snap)
    assert not ok and "bundle x.tar.gz does not exist" in reasons[0]
    fams = _families(exposition(snap))
    assert fams["ascend_doctor_up"].samples[0].value == 0.0
    assert "ascend_doctor_last_success_timestamp_seconds" not in fams
    assert fams["ascend_doctor_npu_temperature_celsius"].samples == []


def test_run_failure_keeps_the_last_success_time() -> None:
    def broken_host():
        raise OSError("permission denied: /proc")
    snap = run_once(broken_host, build_options({}), (), None, None, 1234.0)
    assert snap.report is None and snap.last_success == 1234.0
    assert snap.error == "OSError: permission denied: /proc"


def test_runs_never_overlap_and_scrapes_never_run_checks() -> None:
    state, stop = State(), threading.Event()
    active, peak, calls = [0], [0], []
    lock = threading.Lock()

    def once(last):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.3)
        with lock:
            active[0] -= 1
        calls.append(time.monotonic())
        return Snapshot(_report(), None, time.time(), time.time())

    t = threading.Thread(target=loop, args=(state, once, 0.05, stop), daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while len(calls) < 2 and time.monotonic() < deadline:
            before = len(calls)
            for _ in range(50):
                state.get()  # what a scrape does
            assert len(calls) == before or len(calls) == before + 1
            time.sleep(0.05)
    finally:
        stop.set()
        t.join(timeout=5)
    assert not t.is_alive()
    assert peak[0] == 1 and len(calls) >= 2
    assert calls[1] - calls[0] >= 1.0  # at least a second between two runs' ends


promtool = shutil.which("promtool")


@pytest.mark.skipif(promtool is None, reason="promtool not installed (apt-get install prometheus)")
def test_rules_file_passes_promtool_check_and_unit_tests() -> None:
    out = subprocess.run([promtool, "check", "rules", str(RULES / "ascend-doctor-rules.yml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 21 rules found" in out.stdout + out.stderr
    out = subprocess.run([promtool, "test", "rules", "ascend-doctor-rules.test.yml"],
                         cwd=RULES, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr


def test_sysroot_without_npu_smi_exports_checks_but_no_npu_series(sysroot) -> None:
    from ascend_doctor.cli import open_host
    sysroot.write("/etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12"\n')
    snap = run_once(lambda: open_host(str(sysroot), None),
                    build_options({"service_url": "http://127.0.0.1:9"}), FAULT_SAMPLING_CHECKS,
                    5.0, None, None)
    assert snap.report is not None, snap.error
    assert snap.npusmi is None
    fams = _families(exposition(snap))
    assert fams["ascend_doctor_check_status"].samples
    assert fams["ascend_doctor_npu_temperature_celsius"].samples == []
    assert fams["ascend_doctor_info"].samples[0].labels["context"] == "sysroot"
