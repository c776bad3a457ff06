"""``npu-smi info`` (the table) and its key/value sub-commands.

``parse_npu_smi_info`` reads the A2 (one chip per NPU), A3 (two chips, ``Chip Phy-ID``) and
310 (``Chip Device``, no HBM column) layouts of facts/ascend-stack.md §3.1, and the process
section. ``parse_npu_smi_kv`` reads ``npu-smi info -t health|common|usages|board -i N``.
``gather_npu_smi`` runs them through the Host with timeouts and keeps a failed or hung run
as data, so the checks can say what npu-smi printed.
"""

from __future__ import annotations

import re

from ..errors import ParseError, SourceMissing
from ..i18n import T
from ..host import CommandResult, Host
from dataclasses import dataclass, field
from ..registry import provider

HEALTH_WORDS = ("OK", "Warning", "Alarm", "Critical", "UNKNOWN")
_HEADER = re.compile(r"npu-smi\s+(?P<tool>\S+)\s+Version:\s*(?P<drv>\S+)", re.IGNORECASE)
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_NO_PROC = re.compile(r"No running processes found in NPU\s+(\d+)", re.IGNORECASE)
_BUS = re.compile(r"^(?:[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]|NA|-)$")
SMI_TIMEOUT_S = 15.0


@dataclass(frozen=True, eq=False)
class NpuChip:
    """One chip row of `npu-smi info`: health, power, temperature, memory."""

    npu: int
    chip: int
    name: str
    health: str
    power_w: float | None
    temp_c: int | None
    bus_id: str
    aicore_pct: int | None
    hbm_used_mb: int | None
    hbm_total_mb: int | None
    mem_used_mb: int | None = None  # DDR / 310 device memory
    mem_total_mb: int | None = None
    phy_id: int | None = None

    @property
    def device_used_total(self) -> tuple[int, int] | None:
        """HBM when the layout has it, else the 310's device memory."""
        if self.hbm_total_mb:
            return self.hbm_used_mb or 0, self.hbm_total_mb
        if self.mem_total_mb:
            return self.mem_used_mb or 0, self.mem_total_mb
        return None


@dataclass(frozen=True, eq=False)
class NpuProcess:
    """One process row of `npu-smi info`: where it runs and the memory it holds."""

    npu: int
    chip: int
    pid: int
    name: str
    mem_mb: int


@dataclass(frozen=True, eq=False)
class NpuSmiInfo:
    """`npu-smi info` parsed: versions, chips, processes, idle NPUs."""

    tool_version: str
    driver_version: str
    chips: tuple[NpuChip, ...]
    processes: tuple[NpuProcess, ...] = ()
    idle_npus: tuple[int, ...] = ()  # "No running processes found in NPU n"
    has_process_section: bool = False

    @property
    def npu_ids(self) -> list[int]:
        return sorted({c.npu for c in self.chips})


def _int(s: str) -> int | None:
    return int(s) if s.isdigit() else None


def _float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_npu_smi_info(text: str, source: str = "npu-smi info") -> NpuSmiInfo:
    tool = drv = ""
    chips: list[NpuChip] = []
    procs: list[NpuProcess] = []
    idle: list[int] = []
    in_procs = False
    pending: tuple[int, str, str, float | None, int | None] | None = None
    chip_has_phy = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("|"):
            continue
        if not tool:
            m = _HEADER.search(line)
            if m:
                tool, drv = m.group("tool"), m.group("drv")
                continue
        if "Process id" in line or "Process name" in line:
            in_procs = True
            continue
        if re.search(r"\|\s*Chip\s+(Phy-ID|Device)\b", line):
            chip_has_phy = True
            continue
        m = _NO_PROC.search(line)
        if m:
            idle.append(int(m.group(1)))
            in_procs = True
            continue
        cells = _cells(line)
        if len(cells) < 3 or not cells[0][:1].isdigit():
            continue
        if in_procs:
            left = cells[0].split()
            if len(cells) >= 4 and len(left) >= 2 and all(x.isdigit() for x in left[:2]) \
                    and cells[1].isdigit():
                mem = re.findall(r"\d+", cells[3])
                procs.append(NpuProcess(int(left[0]), int(left[1]), int(cells[1]),
                                        cells[2], int(mem[0]) if mem else 0))
            continue
        left = cells[0].split()
        if cells[1] in HEALTH_WORDS or (pending is None and len(left) >= 2
                                         and not left[1].isdigit()):
            right = cells[2].split()
            power = _float(right[0]) if right else None
            temp = _int(right[1]) if len(right) > 1 else None
            pending = (int(left[0]) if left[0].isdigit() else -1, left[1] if len(left) > 1 else "",
                       cells[1], power, temp)
            continue
        if pending is not None and _BUS.match(cells[1]):
            pairs = _PAIR.findall(cells[2])
            aic = _int(cells[2].split()[0]) if cells[2].split() else None
            mem = pairs[0] if pairs else None
            hbm = pairs[1] if len(pairs) > 1 else None
            chip = _int(left[0]) if left else None
            phy = _int(left[1]) if chip_has_phy and len(left) > 1 else None
            npu, name, health, power, temp = pending
            chips.append(NpuChip(npu, chip if chip is not None else 0, name, health, power, temp,
                                 cells[1], aic, int(hbm[0]) if hbm else None,
                                 int(hbm[1]) if hbm else None, int(mem[0]) if mem else None,
                                 int(mem[1]) if mem else None, phy))
            pending = None
    if not tool and not chips:
        raise ParseError(source, T("no `npu-smi <ver> Version: <ver>` header and no NPU rows"))
    return NpuSmiInfo(tool, drv, tuple(chips), tuple(procs), tuple(idle), in_procs)


def parse_npu_smi_kv(text: str, source: str = "npu-smi info -t") -> tuple[tuple[str, str], ...]:
    """``Key : value`` lines, in order (keys repeat: ``Health`` per chip)."""
    out = []
    for raw in text.splitlines():
        if ":" not in raw:
            continue
        key, value = raw.split(":", 1)
        key = key.strip()
        if key and not key.startswith(("+", "|")) and len(key) < 80:
            out.append((key, value.strip()))
    if not out:
        raise ParseError(source, T("no `Key : value` line"))
    return tuple(out)


def kv_get(pairs: tuple[tuple[str, str], ...], key: str) -> list[str]:
    return [v for k, v in pairs if k.lower() == key.lower()]


# -- gathering ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SubCommand:
    """One `npu-smi info -t ...` query: its key/value pairs, or how it failed."""

    argv: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...] = ()
    failure: str | None = None  # how it failed (exit code and last line, or timeout)
    timed_out: bool = False


@dataclass(frozen=True, eq=False)
class NpuSmi:
    """What npu-smi said; a failed or hung ``npu-smi info`` is kept, not raised."""

    argv: tuple[str, ...]
    result: CommandResult
    info: NpuSmiInfo | None = None
    parse_error: str | None = None
    health: dict[int, SubCommand] = field(default_factory=dict)
    board: SubCommand | None = None

    @property
    def ok(self) -> bool:
        return self.result.ok and self.info is not None

    @property
    def output(self) -> str:
        return (self.result.stdout + b"\n" + self.result.stderr).decode("utf-8", "replace").strip()


def _sub(host: Host, argv: list[str]) -> SubCommand:
    res = host.run(argv, timeout=SMI_TIMEOUT_S, cap=256 * 1024)
    if not res.ok:
        return SubCommand(tuple(argv), failure=res.describe_failure(), timed_out=res.timed_out)
    try:
        return SubCommand(tuple(argv), parse_npu_smi_kv(res.text, " ".join(argv)))
    except ParseError as exc:
        return SubCommand(tuple(argv), failure=exc.reason)


@provider
def gather_npu_smi(host: Host) -> NpuSmi:
    if host.which("npu-smi") is None:
        raise SourceMissing("npu-smi", T("not on PATH nor in /usr/local/Ascend/driver/tools "
                                         "(no driver installed, or not mounted into the "
                                         "container)"))
    argv = ["npu-smi", "info"]
    res = host.run(argv, timeout=SMI_TIMEOUT_S, cap=1024 * 1024)
    if not res.ok:
        return NpuSmi(tuple(argv), res)
    try:
        info = parse_npu_smi_info(res.text)
    except ParseError as exc:
        return NpuSmi(tuple(argv), res, parse_error=exc.reason)
    health = {}
    board = None
    for npu in info.npu_ids[:64]:
        health[npu] = _sub(host, ["npu-smi", "info", "-t", "health", "-i", str(npu)])
        if health[npu].timed_out:  # one hang is enough: do not wait 15 s per NPU
            return NpuSmi(tuple(argv), res, info, None, health, None)
    if info.npu_ids:
        board = _sub(host, ["npu-smi", "info", "-t", "board", "-i", str(info.npu_ids[0])])
    return NpuSmi(tuple(argv), res, info, None, health, board)
