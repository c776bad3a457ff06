"""The live panel's data: a tiny reader of vLLM's /metrics and of `npu-smi info`.

It only extracts series by name (doctor/promtext.py reads the format) and keeps a
bounded history; it draws no conclusion (that is the service and npu checks' job). On a
live host it polls through the Host; on a bundle (the demo) it replays every recorded
answer once, so the panel shows the recorded history rather than a repeated last value.
No textual here.
"""

from __future__ import annotations

import json
import math
from collections import deque
from typing import Any

from dataclasses import dataclass, field

HISTORY = 60
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # new name, then the old one
PREEMPT = "vllm:num_preemptions"
E2E = "vllm:e2e_request_latency_seconds"
NPU_SMI_ARGV = ["npu-smi", "info"]


@dataclass(frozen=True)
class MetricsSample:
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # 0..1
    preemptions: float | None = None  # counter total
    e2e_buckets: tuple[tuple[float, float], ...] = ()  # (le, cumulative count), summed


@dataclass(frozen=True)
class NpuReading:
    npu: int
    chip: int
    temp_c: float | None
    hbm_used_mb: float | None
    hbm_total_mb: float | None


class FeedError(ValueError):
    """A source answered with something that is not its format."""


def parse_metrics(text: str) -> MetricsSample:
    """The few vLLM series the panel draws, summed over engines and models."""
    from ..promtext import parse

    sums: dict[str, float] = {}
    kv: dict[str, float] = {}
    buckets: dict[float, float] = {}
    try:
        for fam in parse(text):
            for s in fam.samples:
                name, value = s.name, float(s.value)
                if name in (RUNNING, WAITING):
                    sums[name] = sums.get(name, 0.0) + value
                elif name in KV:
                    kv[name] = max(kv.get(name, 0.0), value)
                elif name in (PREEMPT + "_total", PREEMPT):
                    sums[PREEMPT] = sums.get(PREEMPT, 0.0) + value
                elif name == E2E + "_bucket":
                    le = float(s.labels.get("le", "inf").replace("+Inf", "inf"))
                    buckets[le] = buckets.get(le, 0.0) + value
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise FeedError(f"/metrics is not Prometheus text: {exc}") from None
    kv_value = next((kv[n] for n in KV if n in kv), None)
    return MetricsSample(sums.get(RUNNING), sums.get(WAITING), kv_value, sums.get(PREEMPT),
                         tuple(sorted(buckets.items())))


def parse_npu_smi(text: str) -> list[NpuReading]:
    """Per-chip temperature and HBM from the `npu-smi info` table (A2, A3 and 310 layouts),
    read by the npu probe's parser; output that is no table gives no readings."""
    from ..errors import ParseError
    from ..probes.npusmi import parse_npu_smi_info

    try:
        info = parse_npu_smi_info(text)
    except ParseError:
        return []
    out = []
    for c in info.chips:
        pair = c.device_used_total
        out.append(NpuReading(c.npu, c.chip, None if c.temp_c is None else float(c.temp_c),
                              float(pair[0]) if pair else None, float(pair[1]) if pair else None))
    return out


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket."""
    b = sorted(buckets)
    if not b or b[-1][1] <= 0:
        return None
    total = b[-1][1]
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in b:
        if count >= rank:
            if math.isinf(le):
                return prev_le  # the highest finite bound, as Prometheus does
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return prev_le


@dataclass
class LiveSeries:
    """Bounded histories of what the panel draws, fed one sample at a time."""

    running: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    waiting: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    kv: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    preempt: deque = field(default_factory=lambda: deque(maxlen=HISTORY))  # per interval
    p99: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    npu_temp_max: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    npus: list[NpuReading] = field(default_factory=list)
    preempt_total: float | None = None
    samples: int = 0
    _last_buckets: tuple[tuple[float, float], ...] = ()
    _last_preempt: float | None = None

    def add_metrics(self, s: MetricsSample) -> None:
        self.samples += 1
        if s.running is not None:
            self.running.append(s.running)
        if s.waiting is not None:
            self.waiting.append(s.waiting)
        if s.kv_usage is not None:
            self.kv.append(s.kv_usage * 100.0)
        if s.preemptions is not None:
            if self._last_preempt is not None:
                self.preempt.append(max(0.0, s.preemptions - self._last_preempt))
            self._last_preempt = s.preemptions
            self.preempt_total = s.preemptions
        if s.e2e_buckets:
            window = list(s.e2e_buckets)
            if self._last_buckets:
                last = dict(self._last_buckets)
                delta = [(le, c - last.get(le, 0.0)) for le, c in window]
                if delta and delta[-1][1] > 0:  # requests finished in this interval
                    window = delta
            p = histogram_quantile(0.99, window)
            if p is not None:
                self.p99.append(p)
            self._last_buckets = s.e2e_buckets

    def add_npus(self, readings: list[NpuReading]) -> None:
        if readings:
            self.npus = readings
            temps = [r.temp_c for r in readings if r.temp_c is not None]
            if temps:
                self.npu_temp_max.append(max(temps))

    @property
    def empty(self) -> bool:
        return self.samples == 0 and not self.npus


@dataclass
class Poll:
    """One refresh: what was read, and why a source could not be (shown in the panel)."""

    metrics: list[MetricsSample] = field(default_factory=list)
    npus: list[list[NpuReading]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    recorded: bool = False
    url: str | None = None  # the service URL polled (None: not known yet)


POLL_TIMEOUT = 5.0  # a loaded server's API process can take seconds to answer /metrics


def poll_live(host: Any, service_url: str, headers: dict[str, str] | None = None,
              timeout: float = POLL_TIMEOUT) -> Poll:
    """One sample of a live service and of npu-smi, through the Host (bounded in time).

    It runs in a worker thread, re-armed only after it returns, so a slow answer delays
    the next sample instead of piling requests on a busy server."""
    from ..probes.service import endpoint_url

    out = Poll()
    url = endpoint_url(service_url, "/metrics")
    resp = host.http_get(url, timeout=timeout, headers=headers)
    if resp.status == 200:
        try:
            out.metrics.append(parse_metrics(resp.text))
        except FeedError as exc:
            out.errors.append(f"{url}: {exc}")
    else:
        out.errors.append(f"{url}: {resp.error or f'HTTP {resp.status}'}")
    try:
        if host.which("npu-smi"):
            r = host.run(NPU_SMI_ARGV, timeout=5.0)
            if r.ok:
                out.npus.append(parse_npu_smi(r.text))
            else:
                out.errors.append("npu-smi info: " + r.describe_failure())
    except Exception as exc:  # a missing or failing tool is shown, never fatal
        out.errors.append(f"npu-smi info: {exc}")
    return out


def replay_bundle(data: Any, service_url: str) -> Poll:
    """Every /metrics and `npu-smi info` answer recorded in a bundle, in order."""
    from ..bundle import _key

    from ..probes.service import endpoint_url

    out = Poll(recorded=True)
    url = endpoint_url(service_url, "/metrics")
    for e in data.get("http", url) or []:
        if e.get("status") == 200 and e.get("body"):
            try:
                out.metrics.append(parse_metrics(data.blobs[e["body"]].decode("utf-8", "replace")))
            except FeedError as exc:
                out.errors.append(f"{url} (recorded): {exc}")
    for e in data.get("run", _key(*NPU_SMI_ARGV)) or []:
        if isinstance(e, dict) and e.get("rc") == 0 and e.get("out"):
            out.npus.append(parse_npu_smi(data.blobs[e["out"]].decode("utf-8", "replace")))
    if not out.metrics:
        out.errors.append(f"no {url} answer was recorded in this bundle")
    return out


def probed_url(results: Any) -> str | None:
    """The service URL the checks asked (service.health's ``base_url``): the one --service
    names, the discovered server's API port, or the default they fell back to. The panel
    polls that, never a URL of its own."""
    for r in results:
        if getattr(r, "check_id", None) != "service.health":
            continue
        for f in r.findings:
            ev = f.evidence if isinstance(f.evidence, dict) else {}
            if isinstance(ev.get("base_url"), str) and ev["base_url"]:
                return ev["base_url"]
    return None


def describe(series: LiveSeries) -> dict[str, str]:
    """Short value texts for the panel's labels (the last value, with units)."""
    def last(d, fmt):
        return fmt.format(d[-1]) if d else "–"

    hbm = "–"
    if series.npus:
        used = sum(r.hbm_used_mb or 0 for r in series.npus)
        total = sum(r.hbm_total_mb or 0 for r in series.npus)
        if total:
            hbm = f"{used / 1024:.0f}/{total / 1024:.0f} GB"
    temp = "–"
    temps = [(r.temp_c, r.npu) for r in series.npus if r.temp_c is not None]
    if temps:
        t, n = max(temps)
        temp = f"{t:.0f}°C npu{n}"
    return {"running": last(series.running, "{:.0f}"), "waiting": last(series.waiting, "{:.0f}"),
            "kv": last(series.kv, "{:.0f}%"),
            "preempt": (f"{series.preempt_total:.0f}" if series.preempt_total is not None
                        else "–"),
            "p99": last(series.p99, "{:.2f} s"), "temp": temp, "hbm": hbm}


def hbm_percent(readings: list[NpuReading]) -> list[float]:
    return [100.0 * (r.hbm_used_mb or 0) / r.hbm_total_mb for r in readings if r.hbm_total_mb]


def to_json(series: LiveSeries) -> str:  # handy for debugging a panel
    return json.dumps({k: list(getattr(series, k)) for k in
                       ("running", "waiting", "kv", "preempt", "p99", "npu_temp_max")})
