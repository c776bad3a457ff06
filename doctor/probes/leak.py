"""NPU memory over a watch window while the service is idle (seed 003_d72edf74e71c5e11.txt).

With ``--watch SECONDS`` the sampler reads device HBM use a bounded number of times, from
``npu-smi info`` (through the npu probe's table parser) or else from npu-exporter's own endpoint in the
/metrics, and notes whether requests were running at each point (``vllm:num_requests_running``).
"""

from __future__ import annotations


from ..i18n import T
from ..errors import ParseError, SourceMissing
from ..host import Host
from ..options import RunOptions
from dataclasses import dataclass
from ..registry import provider
from .service import HTTP_TIMEOUT, ServiceHttp, endpoint_url, parse_metrics

MAX_SAMPLES = 13
MAX_WATCH_S = 600.0


def parse_npusmi_hbm(text: str) -> dict[str, tuple[int, int]]:
    """``npu-smi info`` table → {"<npu>.<chip>": (HBM used MB, HBM total MB)}.

    A view of the npu probe's parser (one reader of the table for the whole tool); chips
    without an HBM column (310) report their device memory; none at all gives nothing.
    """
    from .npusmi import parse_npu_smi_info

    out: dict[str, tuple[int, int]] = {}
    for chip in parse_npu_smi_info(text).chips:
        pair = chip.device_used_total
        if pair is not None:
            out[f"{chip.npu}.{chip.chip}"] = pair
    return out


@dataclass(frozen=True, eq=False)
class MemPoint:
    """One NPU memory sample: per-device use and how many requests were running."""

    t: float
    used_mb: dict[str, float]  # per device
    running: float | None  # vllm:num_requests_running at that moment (None: unknown)


@dataclass(frozen=True, eq=False)
class NpuMemoryTrend:
    """NPU memory over the watch window, for the leak check."""

    source: str  # "npu-smi info" or "<npu-exporter url>/metrics (npu-exporter)"
    points: tuple[MemPoint, ...]
    watch_s: float
    clamped: bool = False


def _exporter_mb(text: str) -> dict[str, float]:
    """Per-device HBM in use from npu-exporter's own /metrics (MB, keyed by ``id``)."""
    from .npu_exporter import parse_npu_exporter

    out: dict[str, float] = {}
    for c in parse_npu_exporter(text).chips:
        ut = c.used_total_mb
        if ut is not None:
            out[c.id] = ut[0]
    return out


@provider
def gather_npu_memory_trend(host: Host, options: RunOptions, http: ServiceHttp | None
                            ) -> NpuMemoryTrend:
    if not options.watch_seconds:
        raise SourceMissing("--watch SECONDS", T("no watch window asked (memory trend needs one)"))
    watch = float(options.watch_seconds)
    clamped = watch > MAX_WATCH_S
    watch = min(max(watch, 1.0), MAX_WATCH_S)
    n = MAX_SAMPLES if watch >= MAX_SAMPLES else max(3, int(watch) + 1)
    step = watch / (n - 1)
    base = http.base_url if http is not None else endpoint_url(options.service_url, "")
    use_smi = host.which("npu-smi") is not None
    from .npu_exporter import DEFAULT_URL

    exporter = endpoint_url(options.npu_exporter_url or DEFAULT_URL, "/metrics")
    source = "npu-smi info" if use_smi else f"{exporter} (npu-exporter)"
    points = []
    for i in range(n):
        t = host.monotonic("leak")
        used: dict[str, float] = {}
        if use_smi:
            res = host.run(["npu-smi", "info"], timeout=10.0)
            if res.ok:
                used = {k: float(u) for k, (u, _t) in parse_npusmi_hbm(res.text).items()}
        running = None
        r = host.http_get(endpoint_url(base, "/metrics"), timeout=HTTP_TIMEOUT)
        if r.ok:
            try:
                snap = parse_metrics(r.text)
                running = snap.value("vllm:num_requests_running")
            except ParseError:
                pass
        if not use_smi:
            e = host.http_get(exporter, timeout=HTTP_TIMEOUT)
            if e.ok:
                try:
                    used = _exporter_mb(e.text)
                except ParseError:
                    pass
        if used:
            points.append(MemPoint(t, used, running))
        if i < n - 1:
            host.sleep(step)
    if len(points) < 3:
        raise SourceMissing(source, T("only {got} of {n} samples gave NPU memory (no npu-smi and "
                                      "no npu_chip_info_hbm_used_memory from npu-exporter)",
                                      got=len(points), n=n))
    return NpuMemoryTrend(source, tuple(points), watch, clamped)
