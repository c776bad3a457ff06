"""``npu-smi info`` (the table) and its key/value sub-commands.

``parse_npu_smi_info`` reads the A2 (one chip per NPU), A3 (two dies per card, ``Chip
Phy-ID``; also the wider 26.0 layout) and 310P (``Chip Device``, no HBM column) tables and
the process section. ``parse_health``, ``parse_board`` and ``parse_usages`` read ``npu-smi
info -t health|board|usages`` (tests/fixtures/npusmi/captured/ cites each real output).
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
    foreign = next((c.health for c in chips if not c.health.isascii()), None)
    if foreign is not None:  # a localized build: its words are not the ones the rules know
        raise ParseError(source, T("health `{word}` is not one of npu-smi's English words "
                                   "(a localized npu-smi?)", word=foreign))
    return NpuSmiInfo(tool, drv, tuple(chips), tuple(procs), tuple(idle), in_procs)


def _ascii_key(key: str) -> bool:
    return bool(key) and key.isascii()


def parse_npu_smi_kv(text: str, source: str = "npu-smi info -t") -> tuple[tuple[str, str], ...]:
    """``Key : value`` lines, in order (keys repeat: ``Health`` per chip).

    A line with nothing before its colon continues the previous value (``Error
    Information`` gives one such line per further error code). A key in another language
    (npu-smi's Chinese builds) is refused: the typed parsers below look for English keys,
    and an output none of whose keys is English would otherwise read as "nothing wrong"."""
    out: list[list[str]] = []
    foreign = 0
    for raw in text.splitlines():
        if ":" not in raw:
            continue
        key, value = raw.split(":", 1)
        key = key.strip()
        if not key and out:
            out[-1][1] = (out[-1][1] + "\n" + value.strip()).strip()
            continue
        if key and not key.startswith(("+", "|")) and len(key) < 80:
            if not _ascii_key(key):
                foreign += 1
                continue
            out.append([key, value.strip()])
    if not out:
        raise ParseError(source, T("no `Key : value` line with an English key") if foreign
                         else T("no `Key : value` line"))
    return tuple((k, v) for k, v in out)


def kv_get(pairs: tuple[tuple[str, str], ...], key: str) -> list[str]:
    return [v for k, v in pairs if k.lower() == key.lower()]


def _kv_first(pairs: tuple[tuple[str, str], ...], key: str) -> str | None:
    vals = kv_get(pairs, key)
    return vals[0] if vals else None


@dataclass(frozen=True, eq=False)
class ChipHealth:
    """``npu-smi info -t health -i N -c C``: the chip's health word, its alarm codes and
    their information lines (one per code, as npu-smi prints them)."""

    status: str
    codes: tuple[str, ...] = ()
    infos: tuple[str, ...] = ()


def parse_health(text: str, source: str = "npu-smi info -t health") -> ChipHealth:
    """``Health Status`` (``Health`` in the card-level view), ``Error Code`` (several codes on
    one line, space-separated) and ``Error Information`` with its continuation lines."""
    pairs = parse_npu_smi_kv(text, source)
    status = _kv_first(pairs, "Health Status") or _kv_first(pairs, "Health")
    if not status:
        raise ParseError(source, T("no `Health Status : …` line"))
    codes = tuple(c for v in kv_get(pairs, "Error Code") for c in v.split()
                  if c.upper() not in ("NA", "0"))
    infos = tuple(i.strip() for v in kv_get(pairs, "Error Information") for i in v.split("\n")
                  if i.strip() and i.strip() != "NA")
    return ChipHealth(status, codes, infos)


@dataclass(frozen=True, eq=False)
class NpuBoard:
    """``npu-smi info -t board -i N``: what the card reports of its driver and firmware."""

    npu: int
    software_version: str | None
    firmware_version: str | None
    compatibility: str | None
    bus: str | None
    chip_count: int | None
    chip_name: str | None = None  # only in the chip-level view (``-c C``)


def _na(v: str | None) -> str | None:
    return None if v is None or v.strip() in ("", "NA") else v.strip()


def parse_board(text: str, npu: int, source: str = "npu-smi info -t board") -> NpuBoard:
    pairs = parse_npu_smi_kv(text, source)
    fw = _na(_kv_first(pairs, "Firmware Version"))
    sw = _na(_kv_first(pairs, "Software Version"))
    if _kv_first(pairs, "Firmware Version") is None and sw is None:
        raise ParseError(source, T("no `Firmware Version : …` nor `Software Version : …` line"))
    count = _kv_first(pairs, "Chip Count")
    return NpuBoard(npu, sw, fw, _na(_kv_first(pairs, "Compatibility")),
                    _na(_kv_first(pairs, "PCIe Bus Info")),
                    int(count) if count and count.isascii() and count.isdigit() else None,
                    _na(_kv_first(pairs, "Chip Name")))


@dataclass(frozen=True, eq=False)
class Usages:
    """``npu-smi info -t usages -i N [-c C]``: ``name(unit)`` → number (``NA`` left out)."""

    values: dict[str, float] = field(default_factory=dict)

    def get(self, key: str) -> float | None:
        return self.values.get(key)


def parse_usages(text: str, source: str = "npu-smi info -t usages") -> Usages:
    values: dict[str, float] = {}
    for key, value in parse_npu_smi_kv(text, source):
        if key in ("NPU ID", "Chip ID", "Chip Count"):
            continue
        try:
            values[key] = float(value)
        except ValueError:
            continue
    if not any("Usage Rate" in k for k in values):
        raise ParseError(source, T("no `… Usage Rate(%) : <number>` line"))
    return Usages(values)


# -- gathering ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SubCommand:
    """One `npu-smi info -t ...` query: its parsed value, or how it failed."""

    argv: tuple[str, ...]
    value: object = None
    failure: str | None = None  # how it failed (exit code and last line, or timeout)
    timed_out: bool = False


@dataclass(frozen=True, eq=False)
class NpuSmi:
    """What npu-smi said; a failed or hung ``npu-smi info`` is kept, not raised.

    ``health`` holds ``-t health -i N -c C`` per chip of the table (both dies of an A3
    card, both chips of a 310P Duo), ``boards`` ``-t board -i N`` per card."""

    argv: tuple[str, ...]
    result: CommandResult
    info: NpuSmiInfo | None = None
    parse_error: str | None = None
    health: dict[tuple[int, int], SubCommand] = field(default_factory=dict)
    boards: dict[int, SubCommand] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.result.ok and self.info is not None

    @property
    def output(self) -> str:
        return (self.result.stdout + b"\n" + self.result.stderr).decode("utf-8", "replace").strip()

    @property
    def board(self) -> NpuBoard | None:
        """The first card that answered ``-t board`` (its chip name, driver, firmware)."""
        for sub in self.boards.values():
            if isinstance(sub.value, NpuBoard):
                return sub.value
        return None

    def chip_health(self, npu: int, chip: int) -> ChipHealth | None:
        sub = self.health.get((npu, chip))
        return sub.value if sub is not None and isinstance(sub.value, ChipHealth) else None

    @property
    def hung(self) -> SubCommand | None:
        for sub in [*self.health.values(), *self.boards.values()]:
            if sub.timed_out:
                return sub
        return None


def _sub(host: Host, argv: list[str], parse) -> SubCommand:
    res = host.run(argv, timeout=SMI_TIMEOUT_S, cap=256 * 1024)
    if not res.ok:
        return SubCommand(tuple(argv), failure=res.describe_failure(), timed_out=res.timed_out)
    try:
        return SubCommand(tuple(argv), parse(res.text, " ".join(argv)))
    except ParseError as exc:
        return SubCommand(tuple(argv), failure=exc.reason)


MAX_QUERIES = 64


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
    health: dict[tuple[int, int], SubCommand] = {}
    boards: dict[int, SubCommand] = {}
    for c in info.chips[:MAX_QUERIES]:
        sub = health[(c.npu, c.chip)] = _sub(
            host, ["npu-smi", "info", "-t", "health", "-i", str(c.npu), "-c", str(c.chip)],
            parse_health)
        if sub.timed_out:  # one hang is enough: do not wait 15 s per chip
            return NpuSmi(tuple(argv), res, info, None, health, boards)
    for npu in info.npu_ids[:MAX_QUERIES]:
        sub = boards[npu] = _sub(host, ["npu-smi", "info", "-t", "board", "-i", str(npu)],
                                 lambda t, src, n=npu: parse_board(t, n, src))
        if sub.timed_out:
            break
    return NpuSmi(tuple(argv), res, info, None, health, boards)
