"""Huawei's npu-exporter (MindX DL) as it really is: its own endpoint (port 8082 by default,
``--npu-exporter URL`` for another), its series ``npu_chip_info_*`` keyed by ``id`` (the
logical device id), in its units: HBM and memory in MB (MiB, as npu-smi prints them),
utilization in percent, health 1 (healthy) / 0, temperature in °C, power in W.

Units and labels are those the exporter documents (its README's metric table, "Metrics
Labels") and emits (its own test data, stored as tests/fixtures/npu_exporter/).
"""

from __future__ import annotations

from ..errors import ParseError, SourceError, SourceMissing
from ..host import Host
from ..i18n import T
from ..options import RunOptions
from dataclasses import dataclass
from ..registry import provider

PREFIX = "npu_chip_info_"
DEFAULT_URL = "http://127.0.0.1:8082"
HTTP_TIMEOUT = 5.0
METRICS_CAP = 4 * 2**20  # a 16-die node with per-process series stays far below
# exporter series name (without the prefix) -> NpuExporterChip field
_FIELDS = {"hbm_used_memory": "hbm_used_mb", "hbm_total_memory": "hbm_total_mb",
           "used_memory": "mem_used_mb", "total_memory": "mem_total_mb",
           "utilization": "utilization_pct", "health_status": "health",
           "temperature": "temperature_c", "power": "power_w", "error_code": "error_code"}


@dataclass(frozen=True)
class NpuExporterChip:
    """One device as npu-exporter reports it (values in the exporter's own units)."""

    id: str
    model_name: str = ""
    hbm_used_mb: float | None = None
    hbm_total_mb: float | None = None
    mem_used_mb: float | None = None  # DDR (310/310P), or the 910's device memory
    mem_total_mb: float | None = None
    utilization_pct: float | None = None  # AI Core
    health: float | None = None  # 1 healthy, 0 unhealthy
    temperature_c: float | None = None
    power_w: float | None = None
    error_code: float | None = None

    @property
    def used_total_mb(self) -> tuple[float, float | None] | None:
        """HBM when reported (910), else the device memory (310P); total None if absent."""
        if self.hbm_used_mb is not None or self.hbm_total_mb:
            return self.hbm_used_mb or 0.0, self.hbm_total_mb or None
        if self.mem_used_mb is not None:
            return self.mem_used_mb, self.mem_total_mb or None
        return None


@dataclass(frozen=True)
class NpuExporterMetrics:
    """One scrape of npu-exporter's /metrics: its chips by ``id``, sorted."""

    url: str
    chips: tuple[NpuExporterChip, ...]
    npu_count: float | None = None  # machine_npu_nums
    version: str = ""  # npu_exporter_version_info{exporterVersion=…}
    url_given: bool = False


def _id_key(chip: NpuExporterChip) -> tuple[int, str]:
    return (int(chip.id), "") if chip.id.isdigit() else (1 << 30, chip.id)


def parse_npu_exporter(text: str, source: str = "npu-exporter /metrics") -> NpuExporterMetrics:
    """npu-exporter's exposition -> chips by ``id``. A body without any ``npu_chip_info_``
    series is a ParseError: it is some other exporter (a vLLM /metrics, a node-exporter)."""
    from .service import parse_metrics

    snap = parse_metrics(text, source)
    values: dict[str, dict[str, object]] = {}
    npu_count = None
    version = ""
    seen = False
    for s in snap.samples:
        if s.name == "machine_npu_nums":
            npu_count = s.value
            continue
        if s.name == "npu_exporter_version_info":
            version = s.labels.get("exporterVersion", "")
            continue
        if not s.name.startswith(PREFIX):
            continue
        seen = True
        fld = _FIELDS.get(s.name[len(PREFIX):])
        dev = s.labels.get("id")
        if fld is None or dev is None:
            continue
        if s.labels.get("process_id"):  # per-process rows (npu_chip_info_process_info)
            continue
        row = values.setdefault(dev, {"id": dev})
        if s.labels.get("model_name"):
            row["model_name"] = s.labels["model_name"]
        row.setdefault(fld, s.value)  # vNPU rows repeat a series: the first is the chip's
    if not seen:
        raise ParseError(source, T("no npu_chip_info_* series: this is not Huawei's "
                                   "npu-exporter"))
    chips = tuple(sorted((NpuExporterChip(**v) for v in values.values()), key=_id_key))
    return NpuExporterMetrics(source, chips, npu_count, version)


@provider
def gather_npu_exporter(host: Host, options: RunOptions) -> NpuExporterMetrics:
    base = (options.npu_exporter_url or DEFAULT_URL).rstrip("/")
    url = base + "/metrics"
    r = host.http_get(url, timeout=HTTP_TIMEOUT, cap=METRICS_CAP)
    if r.status is None and options.npu_exporter_url:  # named by the user: its absence is news
        raise SourceError(url, r.error or T("no answer"))
    if r.status is None:
        raise SourceMissing(T("npu-exporter at {url}", url=url),
                            T("{why} (pass --npu-exporter URL to name another)",
                              why=r.error or T("no answer")))
    if not r.ok:
        raise ParseError(url, T("HTTP {status}", status=r.status) if r.error is None
                         else str(r.error))
    if r.truncated:
        raise ParseError(url, T("body larger than {n} bytes (truncated)", n=len(r.body)))
    m = parse_npu_exporter(r.body.decode("utf-8", "replace"), url)
    return NpuExporterMetrics(url, m.chips, m.npu_count, m.version,
                              bool(options.npu_exporter_url))


