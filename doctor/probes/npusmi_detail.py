"""``npu-smi info -m`` (the card/chip/logic-id map) and ``npu-smi info -t ecc -i N -c C``.

The map is what ``ASCEND_RT_VISIBLE_DEVICES`` and HCCL speak (logic ids), while the table
speaks cards and chips; an A3 card carries two dies (two logic ids), a 310P Duo card two
chips, and an A2 card one chip plus its MCU (logic id ``-``). ECC counters are sampled
twice when the first sample is not all zero, so a single run can tell "errors happened
once" from "errors are still happening" without keeping state between runs.
"""

from __future__ import annotations

import re

from ..errors import ParseError, SourceMissing
from ..host import Host
from ..i18n import T
from dataclasses import dataclass, field
from ..registry import provider
from .npusmi import SMI_TIMEOUT_S, NpuSmi, parse_npu_smi_kv

ECC_GAP_S = 2.0  # between the two ECC samples; bundles replay it through host.sleep
MAX_CHIPS = 64
_ECC_KEY = re.compile(r"^(?P<mem>DDR|HBM|SRAM|L2BUFF|NPU)\s+(?P<bits>Single|Double)\s+Bit\s+"
                      r"(?P<kind>Error Count|Aggregate Total Err Cnt|Isolated Pages Count)$",
                      re.IGNORECASE)
_KIND = {"error count": "count", "aggregate total err cnt": "total",
         "isolated pages count": "isolated"}


@dataclass(frozen=True, eq=False)
class MapRow:
    """One line of ``npu-smi info -m``: card, chip on the card, logic id (None for an MCU)."""

    npu: int
    chip: int
    logic_id: int | None
    name: str
    phy_id: int | None = None


@dataclass(frozen=True, eq=False)
class NpuMap:
    """``npu-smi info -m`` parsed."""

    rows: tuple[MapRow, ...]

    def logic_of(self, npu: int, chip: int) -> int | None:
        for r in self.rows:
            if (r.npu, r.chip) == (npu, chip):
                return r.logic_id
        return None


def _digits(s: str) -> bool:
    """ASCII digits only: str.isdigit() also accepts '²', which int() refuses."""
    return s.isascii() and s.isdigit()


def _opt_int(s: str) -> int | None:
    return int(s) if _digits(s.strip()) else None


def parse_npu_smi_map(text: str, source: str = "npu-smi info -m") -> NpuMap:
    """Header-driven: columns are separated by two or more spaces, names may hold one."""
    header: list[str] | None = None
    rows: list[MapRow] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        cols = re.split(r"\s{2,}", line)
        if header is None:
            if "NPU ID" in cols and "Chip ID" in cols:
                header = cols
            continue
        if len(cols) != len(header):
            continue
        rec = dict(zip(header, cols))
        if not _digits(rec["NPU ID"]) or not _digits(rec["Chip ID"]):  # by name: a mangled
            continue  # header need not put them first
        rows.append(MapRow(int(rec["NPU ID"]), int(rec["Chip ID"]),
                           _opt_int(rec.get("Chip Logic ID", "-")),
                           rec.get("Chip Name", ""), _opt_int(rec.get("Chip Phy-ID", "-"))))
    if header is None:
        raise ParseError(source, T("no `NPU ID  Chip ID  Chip Logic ID` header line"))
    return NpuMap(tuple(rows))


@dataclass(frozen=True, eq=False)
class EccCounters:
    """ECC counters of one chip: {(memory, "single"|"double", "count"|"total"|"isolated"): n}.

    ``count`` is since the driver loaded, ``total`` the aggregate kept across resets,
    ``isolated`` the pages taken out of service; an ``NA`` value is left out.
    """

    npu: int
    chip: int
    counters: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def get(self, mem: str, bits: str, kind: str) -> int:
        return self.counters.get((mem, bits, kind), 0)

    @property
    def double(self) -> int:
        return sum(v for (m, b, k), v in self.counters.items() if b == "double" and k != "isolated")

    @property
    def single(self) -> int:
        return sum(v for (m, b, k), v in self.counters.items() if b == "single" and k == "count")

    @property
    def any_nonzero(self) -> bool:
        return any(self.counters.values())


def parse_ecc(text: str, npu: int, chip: int, source: str = "npu-smi info -t ecc") -> EccCounters:
    """One chip's ``npu-smi info -t ecc -i N -c C``; no counter line is a ParseError."""
    counters: dict[tuple[str, str, str], int] = {}
    seen = False
    for key, value in parse_npu_smi_kv(text, source):
        m = _ECC_KEY.match(key)
        if not m:
            continue
        seen = True
        v = value.strip()
        if _digits(v):
            counters[(m.group("mem").upper(), m.group("bits").lower(),
                      _KIND[m.group("kind").lower()])] = int(v)
    if not seen:
        raise ParseError(source, T("no `HBM|DDR Single|Double Bit …` ECC counter line"))
    return EccCounters(npu, chip, counters)


# -- gathering ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class EccSample:
    """One chip's ECC query: counters, or how it failed."""

    argv: tuple[str, ...]
    counters: EccCounters | None = None
    failure: str | None = None
    timed_out: bool = False


@dataclass(frozen=True, eq=False)
class NpuDetail:
    """The map and the ECC samples (the second only for chips whose first was not all zero)."""

    map: NpuMap | None
    map_failure: str | None
    first: dict[tuple[int, int], EccSample] = field(default_factory=dict)
    second: dict[tuple[int, int], EccSample] = field(default_factory=dict)
    gap_s: float = 0.0


def _ecc(host: Host, npu: int, chip: int) -> EccSample:
    argv = ["npu-smi", "info", "-t", "ecc", "-i", str(npu), "-c", str(chip)]
    res = host.run(argv, timeout=SMI_TIMEOUT_S, cap=128 * 1024)
    if not res.ok:
        return EccSample(tuple(argv), failure=res.describe_failure(), timed_out=res.timed_out)
    try:
        return EccSample(tuple(argv), parse_ecc(res.text, npu, chip, " ".join(argv)))
    except ParseError as exc:
        return EccSample(tuple(argv), failure=exc.reason)


def _sample(host: Host, chips: list[tuple[int, int]]) -> dict[tuple[int, int], EccSample]:
    out: dict[tuple[int, int], EccSample] = {}
    for npu, chip in chips:
        out[(npu, chip)] = s = _ecc(host, npu, chip)
        if s.timed_out:  # one hang is enough: do not wait 15 s per chip
            break
    return out


@provider
def gather_npu_detail(host: Host, smi: NpuSmi) -> NpuDetail:
    if smi.info is None:
        raise SourceMissing("npu-smi info", T("npu-smi gave no table (see npu.smi)"))
    argv = ["npu-smi", "info", "-m"]
    res = host.run(argv, timeout=SMI_TIMEOUT_S, cap=256 * 1024)
    nmap, map_failure = None, None
    if not res.ok:
        map_failure = res.describe_failure()
    else:
        try:
            nmap = parse_npu_smi_map(res.text)
        except ParseError as exc:
            map_failure = exc.reason
    chips = [(c.npu, c.chip) for c in smi.info.chips][:MAX_CHIPS]
    if res.timed_out:
        return NpuDetail(nmap, map_failure)
    first = _sample(host, chips)
    again = [k for k, s in first.items() if s.counters is not None and s.counters.any_nonzero]
    if not again:
        return NpuDetail(nmap, map_failure, first)
    t0 = host.monotonic("npu-ecc")
    host.sleep(ECC_GAP_S)
    second = _sample(host, again)
    return NpuDetail(nmap, map_failure, first, second, host.monotonic("npu-ecc") - t0)
