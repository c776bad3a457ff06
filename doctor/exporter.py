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
from dataclasses import dataclass

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
    npu_detail: object | None = None  # doctor.probes.npusmi_detail.NpuDetail (ECC, card map)
    hccn: object | None = None  # doctor.probes.hccn.HccnState (RoCE ports)


def _chips(npusmi: object | None) -> tuple:
    info = getattr(npusmi, "info", None)
    return tuple(getattr(info, "chips", ()) or ())


def _ecc(snap: Snapshot) -> list:
    """The latest ECC counters per chip (the run's second sample when it took one)."""
    detail = snap.npu_detail
    if detail is None:
        return []
    out = {}
    for samples in (getattr(detail, "first", {}), getattr(detail, "second", {})):
        for key, s in samples.items():
            if getattr(s, "counters", None) is not None:
                out[key] = s.counters
    return [out[k] for k in sorted(out)]


def _ports(snap: Snapshot) -> list:
    return list(getattr(snap.hccn, "devices", ()) or ())


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
    for c in _ecc(snap):
        if c.double:
            reasons.append(f"npu {c.npu} chip {c.chip}: {c.double} uncorrectable ECC errors")
    for d in _ports(snap):
        if d.link.ok and d.link.value != "UP":
            reasons.append(f"npu device {d.dev}: RoCE link {d.link.value}")
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
        yield from self._hw()

    def _hw(self) -> Iterator[GaugeMetricFamily]:
        """ECC counters (npu-smi info -t ecc) and RoCE ports (hccn_tool): a counter that rises
        between scrapes is Prometheus' increase(), so the fleet alerts without local state."""
        ecc = GaugeMetricFamily("ascend_doctor_npu_ecc_errors",
                                "ECC errors since the driver loaded (npu-smi info -t ecc), all "
                                "memories of the chip, by single (corrected) or double bits",
                                labels=["npu", "chip", "bits"])
        iso = GaugeMetricFamily("ascend_doctor_npu_ecc_isolated_pages",
                                "Memory pages taken out of service after ECC errors",
                                labels=["npu", "chip"])
        for c in _ecc(self.snap):
            v = [str(c.npu), str(c.chip)]
            for bits in ("single", "double"):
                ecc.add_metric(v + [bits], float(sum(
                    n for (m, b, k), n in c.counters.items() if b == bits and k == "count")))
            iso.add_metric(v, float(sum(n for (m, b, k), n in c.counters.items()
                                        if k == "isolated")))
        up = GaugeMetricFamily("ascend_doctor_npu_roce_link_up",
                               "1 when hccn_tool -link -g reports the NPU's RoCE port UP",
                               labels=["device"])
        net = GaugeMetricFamily("ascend_doctor_npu_roce_net_healthy",
                                "1 when hccn_tool -net_health -g reports Success",
                                labels=["device"])
        for d in _ports(self.snap):
            if d.link.ok:
                up.add_metric([str(d.dev)], 1.0 if d.link.value == "UP" else 0.0)
            if d.net_health.ok:
                net.add_metric([str(d.dev)], 1.0 if d.net_health.value == "Success" else 0.0)
        yield from (ecc, iso, up, net)


def build_registry(snap: Snapshot) -> CollectorRegistry:
    """A fresh registry holding exactly this snapshot's metrics."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_SnapshotCollector(snap))
    return reg


def exposition(snap: Snapshot) -> bytes:
    """The Prometheus text exposition of a snapshot."""
    return generate_latest(build_registry(snap))
