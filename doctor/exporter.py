"""The doctor's findings as Prometheus metrics: a pure function of a Report and the NpuSmi fact.

Kept free of HTTP and threads so that the exposition can be tested by parsing it back; the
serving loop lives in ``doctor/cli_exporter.py``. Labels are low-cardinality by construction:
check ids, categories, statuses, KB ids, severities, NPU and chip numbers — never pids,
messages or paths.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .model import Report, Severity, Status
from .record import dataclass

HBM_DEGRADED_RATIO = 0.90  # ≥ this share of an NPU's HBM in use is "degraded"
TEMP_DEGRADED_C = 85  # above this, degraded
STATUSES = tuple(s.value for s in Status)
FAILING = (Status.FAIL, Status.WARN, Status.ERROR)
NO_KB = "none"  # the kb label of a finding that names no KB entry
MB = 1024 * 1024


@dataclass(frozen=True)
class Snapshot:
    """What one background run produced: the report, the npu-smi fact (or None) and times."""

    report: Report | None
    npusmi: object | None  # doctor.probes.npusmi.NpuSmi, or None when npu-smi was unavailable
    finished_at: float  # unix time the run ended
    last_success: float | None  # unix time of the last run that produced a report
    error: str = ""  # one line: why the last run produced no report


def _chips(npusmi: object | None) -> tuple:
    info = getattr(npusmi, "info", None)
    return tuple(getattr(info, "chips", ()) or ())


def health(snap: Snapshot) -> tuple[bool, list[str]]:
    """healthy/degraded as an HA probe sees it, with short reasons (no free-form messages)."""
    reasons: list[str] = []
    if snap.report is None:
        reasons.append(f"no report yet: {snap.error or 'the first run has not finished'}")
    for c in _chips(snap.npusmi):
        if c.temp_c is not None and c.temp_c > TEMP_DEGRADED_C:
            reasons.append(f"npu {c.npu} chip {c.chip}: temperature {c.temp_c} C > "
                           f"{TEMP_DEGRADED_C} C")
        ut = c.device_used_total
        if ut and ut[1] and ut[0] / ut[1] >= HBM_DEGRADED_RATIO:
            reasons.append(f"npu {c.npu} chip {c.chip}: memory {ut[0]}/{ut[1]} MB "
                           f"(>= {HBM_DEGRADED_RATIO:.0%})")
    if snap.report is not None:
        for r in snap.report.results:
            if any(f.status is Status.FAIL and f.severity is Severity.CRITICAL
                   for f in r.findings):
                reasons.append(f"critical check failed: {r.check_id}")
    return (not reasons), reasons


class _SnapshotCollector(Collector):
    """Yields the metric families of one frozen Snapshot (the scrape never runs checks)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap, rep = self.snap, self.snap.report
        up = GaugeMetricFamily("ascend_doctor_up",
                               "1 when the last run produced a report, else 0")
        up.add_metric([], 1.0 if rep is not None else 0.0)
        yield up
        if snap.last_success is not None:
            ls = GaugeMetricFamily("ascend_doctor_last_success_timestamp_seconds",
                                   "Unix time the last successful run ended")
            ls.add_metric([], snap.last_success)
            yield ls
        ok, _ = health(snap)
        h = GaugeMetricFamily("ascend_doctor_healthy",
                              "1 healthy, 0 degraded (what /healthz answers)")
        h.add_metric([], 1.0 if ok else 0.0)
        yield h
        if rep is not None:
            yield from self._report(rep)
        yield from self._npus()

    def _report(self, rep: Report) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily("ascend_doctor_info", "The doctor's version and input kind",
                                 labels=["version", "context"])
        info.add_metric([rep.tool_version, rep.context], 1.0)
        yield info
        dur = GaugeMetricFamily("ascend_doctor_run_duration_seconds",
                                "Wall time of the last run of all checks")
        dur.add_metric([], float(rep.duration_s))
        yield dur
        st = GaugeMetricFamily("ascend_doctor_check_status",
                               "One-hot status of each check (1 on the current status)",
                               labels=["check", "category", "status"])
        cd = GaugeMetricFamily("ascend_doctor_check_duration_seconds",
                               "Wall time of each check in the last run",
                               labels=["check", "category"])
        for r in rep.results:
            cur = r.status.value
            for s in STATUSES:
                st.add_metric([r.check_id, r.category.value, s], 1.0 if s == cur else 0.0)
            cd.add_metric([r.check_id, r.category.value], float(r.duration_s))
        yield st
        yield cd
        counts: dict[tuple[str, str, str], int] = {}
        for _, f in rep.findings():
            if f.status not in FAILING:
                continue
            for kb in f.kb or (NO_KB,):
                key = (kb, f.severity.value, f.status.value)
                counts[key] = counts.get(key, 0) + 1
        fm = GaugeMetricFamily("ascend_doctor_findings",
                               "Failing findings (fail, warn, error) per KB id and severity",
                               labels=["kb", "severity", "status"])
        for (kb, sev, status), n in sorted(counts.items()):
            fm.add_metric([kb, sev, status], float(n))
        yield fm

    def _npus(self) -> Iterator[GaugeMetricFamily]:
        chips = _chips(self.snap.npusmi)
        # `id` is npu-exporter's label (the logical device id: npu-smi's Phy-ID where the
        # layout prints one, else the chip's place in npu-smi's order, which is the same on
        # one-chip-per-NPU boards): dashboards and the doctor's gauges join on (node, id)
        lab = ["npu", "chip", "id"]
        ids = {id(c): str(c.phy_id) if getattr(c, "phy_id", None) is not None else str(i)
               for i, c in enumerate(sorted(chips, key=lambda c: (c.npu, c.chip)))}
        hl = GaugeMetricFamily("ascend_doctor_npu_healthy",
                               "1 when npu-smi reports the chip's health as OK", labels=lab)
        tc = GaugeMetricFamily("ascend_doctor_npu_temperature_celsius",
                               "Chip temperature from npu-smi", labels=lab)
        hu = GaugeMetricFamily("ascend_doctor_npu_hbm_used_bytes",
                               "Device memory (HBM, or DDR on a 310) in use", labels=lab)
        ht = GaugeMetricFamily("ascend_doctor_npu_hbm_total_bytes",
                               "Device memory (HBM, or DDR on a 310) in total", labels=lab)
        pw = GaugeMetricFamily("ascend_doctor_npu_power_watts", "Chip power from npu-smi",
                               labels=lab)
        ai = GaugeMetricFamily("ascend_doctor_npu_aicore_utilization_ratio",
                               "AI Core utilisation (0..1) from npu-smi", labels=lab)
        for c in chips:
            v = [str(c.npu), str(c.chip), ids[id(c)]]
            hl.add_metric(v, 1.0 if str(c.health).strip().upper() == "OK" else 0.0)
            if c.temp_c is not None:
                tc.add_metric(v, float(c.temp_c))
            ut = c.device_used_total
            if ut:
                hu.add_metric(v, float(ut[0] * MB))
                ht.add_metric(v, float(ut[1] * MB))
            if c.power_w is not None:
                pw.add_metric(v, float(c.power_w))
            if c.aicore_pct is not None:
                ai.add_metric(v, c.aicore_pct / 100.0)
        yield from (hl, tc, hu, ht, pw, ai)


def build_registry(snap: Snapshot) -> CollectorRegistry:
    """A fresh registry holding exactly this snapshot's metrics."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_SnapshotCollector(snap))
    return reg


def exposition(snap: Snapshot) -> bytes:
    """The Prometheus text exposition of a snapshot."""
    return generate_latest(build_registry(snap))
