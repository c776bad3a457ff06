"""NPU memory over a watch window while the service is idle (seed 003_d72edf74e71c5e11.txt).

With ``--watch SECONDS`` the sampler reads device HBM use a bounded number of times, from
``npu-smi info`` (a small self-contained reader of its HBM column, ``parse_npusmi_hbm``; the
full npu-smi probe lives elsewhere) or else from NPU exporter series in the service's
/metrics, and notes whether requests were running at each point (``vllm:num_requests_running``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ParseError, SourceMissing
from ..host import Host
from ..options import RunOptions
from ..registry import provider
from .service import HTTP_TIMEOUT, ServiceHttp, parse_metrics

MAX_SAMPLES = 13
MAX_WATCH_S = 600.0
_LINE2 = re.compile(r"^\|\s*(\d+)\s+(\d*)\s*\|\s*([0-9A-Fa-f:.]+|NA)\s*\|.*\|\s*$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_LINE1 = re.compile(r"^\|\s*(\d+)\s+(\S+)\s*\|\s*(OK|Warning|Alarm|Critical|UNKNOWN)\b", re.I)


def parse_npusmi_hbm(text: str) -> dict[str, tuple[int, int]]:
    """``npu-smi info`` table → {"<npu>.<chip>": (HBM used MB, HBM total MB)}.

    The HBM pair is the last ``used / total`` on each chip's second line (facts:
    ascend-stack.md §3.1); boards without an HBM column give nothing.
    """
    out: dict[str, tuple[int, int]] = {}
    npu = None
    for line in text.splitlines():
        m1 = _LINE1.match(line)
        if m1:
            npu = m1.group(1)
            continue
        m2 = _LINE2.match(line)
        if m2 and npu is not None:
            pairs = _PAIR.findall(line)
            if len(pairs) >= 2:  # Memory-Usage pair, then HBM-Usage pair
                used, total = pairs[-1]
                out[f"{npu}.{m2.group(1)}"] = (int(used), int(total))
            npu = None
    if not out and "npu-smi" not in text.lower():
        raise ParseError("npu-smi info", "no NPU table in the output")
    return out


@dataclass(frozen=True)
class MemPoint:
    t: float
    used_mb: dict[str, float]  # per device
    running: float | None  # vllm:num_requests_running at that moment (None: unknown)


@dataclass(frozen=True)
class NpuMemoryTrend:
    source: str  # "npu-smi info" or "<url>/metrics (exporter)"
    points: tuple[MemPoint, ...]
    watch_s: float
    clamped: bool = False


def _exporter_mb(text: str) -> dict[str, float]:
    snap = parse_metrics(text)
    out: dict[str, float] = {}
    for name, scale in (("npu_device_memory_used_bytes", 1 / 2**20),
                        ("npu_chip_info_hbm_used_memory", 1.0)):
        for i, s in enumerate(snap.named(name)):
            dev = s.labels.get("id") or s.labels.get("device") or s.labels.get("npu") or str(i)
            out[str(dev)] = s.value * scale
        if out:
            break
    return out


@provider
def gather_npu_memory_trend(host: Host, options: RunOptions, http: ServiceHttp | None
                            ) -> NpuMemoryTrend:
    if not options.watch_seconds:
        raise SourceMissing("--watch SECONDS", "no watch window asked (memory trend needs one)")
    watch = float(options.watch_seconds)
    clamped = watch > MAX_WATCH_S
    watch = min(max(watch, 1.0), MAX_WATCH_S)
    n = MAX_SAMPLES if watch >= MAX_SAMPLES else max(3, int(watch) + 1)
    step = watch / (n - 1)
    base = http.base_url if http is not None else options.service_url.rstrip("/")
    use_smi = host.which("npu-smi") is not None
    source = "npu-smi info" if use_smi else f"{base}/metrics (exporter)"
    points = []
    for i in range(n):
        t = host.monotonic("leak")
        used: dict[str, float] = {}
        if use_smi:
            res = host.run(["npu-smi", "info"], timeout=10.0)
            if res.ok:
                used = {k: float(u) for k, (u, _t) in parse_npusmi_hbm(res.text).items()}
        running = None
        r = host.http_get(base + "/metrics", timeout=HTTP_TIMEOUT)
        if r.ok:
            try:
                snap = parse_metrics(r.text)
                running = snap.value("vllm:num_requests_running")
                if not use_smi:
                    used = _exporter_mb(r.text)
            except ParseError:
                pass
        if used:
            points.append(MemPoint(t, used, running))
        if i < n - 1:
            host.sleep(step)
    if len(points) < 3:
        raise SourceMissing(source, f"only {len(points)} of {n} samples gave NPU memory "
                            "(no npu-smi and no npu_device_memory_used_bytes in /metrics)")
    return NpuMemoryTrend(source, tuple(points), watch, clamped)
