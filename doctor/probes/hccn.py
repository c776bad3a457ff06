"""HCCN / RoCE of each NPU: ``/etc/hccn.conf`` and ``hccn_tool -i N -link|-net_health|-ip|
-gateway|-optical|-pfc|-speed|-dscp_to_tc -g``.

These are the commands Ascend's multi-node guides run before any HCCL job ("the results
must all be success and the status must be UP"); an HCCL connect timeout (``EI0006``) on a
node whose link is down is that link, not HCCL. Parsers are pure and refuse output they do
not recognise (another language, a usage text) with a named ``ParseError``, so an unknown
answer never reads as healthy. The formats are those of the open-sourced hccn_tool and of
the outputs cited in tests/fixtures/hccn/captured/.
"""

from __future__ import annotations

import ipaddress
import re

from ..errors import ParseError, SourceError, SourceMissing
from ..host import Host
from ..i18n import T
from dataclasses import dataclass, field
from ..registry import provider
from .npusmi import NpuSmi
from .npusmi_detail import NpuDetail

HCCN_CONF = "/etc/hccn.conf"
HCCN_TIMEOUT_S = 10.0
MAX_DEVICES = 32
_CONF_LINE = re.compile(r"^(?P<key>[a-z_]+?)_(?P<dev>\d+)\s*=\s*(?P<value>.*?)\s*$")
_IPV4 = r"(\d{1,3}(?:\.\d{1,3}){3})"
# net health results of hccn_tool, in the order of DCMI's dcmi_rdfx_detect_result (0..8)
NET_HEALTH_OK = "Success"
NET_HEALTH_WORDS = ("Success", "Socket fail", "Receive timeout", "Unreachable",
                    "Time exceeded", "Fault", "Init", "Thread error", "Detect ip set",
                    "Unknown")


# -- /etc/hccn.conf ----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class HccnConf:
    """``key_N=value`` per device N (address, netmask, netdetect, gateway, …)."""

    devices: dict[int, dict[str, str]] = field(default_factory=dict)
    duplicate_keys: tuple[str, ...] = ()  # ``address_0`` set twice: the last one wins
    bad_lines: tuple[tuple[int, str], ...] = ()

    def value(self, dev: int, key: str) -> str | None:
        return self.devices.get(dev, {}).get(key)


def parse_hccn_conf(text: str) -> HccnConf:
    devices: dict[int, dict[str, str]] = {}
    dup: list[str] = []
    bad: list[tuple[int, str]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _CONF_LINE.match(line)
        if not m:
            bad.append((n, line[:120]))
            continue
        dev, key = int(m.group("dev")), m.group("key")
        d = devices.setdefault(dev, {})
        if key in d:
            dup.append(f"{key}_{dev}")
        d[key] = m.group("value")
    return HccnConf(devices, tuple(dup), tuple(bad))


# -- hccn_tool answers -------------------------------------------------------------------
def _kv(text: str) -> list[tuple[str, str]]:
    out = []
    for raw in text.splitlines():
        if ":" in raw:
            k, v = raw.split(":", 1)
            out.append((k.strip().lower(), v.strip()))
    return out


def parse_link(text: str, source: str = "hccn_tool -link -g") -> str:
    """``link status: UP`` → ``UP``."""
    for k, v in _kv(text):
        if k == "link status" and v.upper() in ("UP", "DOWN"):
            return v.upper()
    raise ParseError(source, T("no `link status: UP|DOWN` line"))


def parse_net_health(text: str, source: str = "hccn_tool -net_health -g") -> str:
    """``net health status: Success`` → ``Success``.

    A documented word is returned in its documented spelling; any other word on that line
    is returned as printed (a 910A node answers ``Socket failed``): it is still a result,
    and only ``Success`` reads as healthy."""
    words = {w.lower(): w for w in NET_HEALTH_WORDS}
    for k, v in _kv(text):
        if k == "net health status" and v and v.isascii():
            return words.get(v.lower(), v)
    raise ParseError(source, T("no `net health status: <result>` line"))


def parse_ip(text: str, source: str = "hccn_tool -ip -g") -> tuple[str, str]:
    """``ipaddr:10.0.0.10`` / ``netmask:255.255.255.0`` → (address, netmask)."""
    d = dict(_kv(text))
    ip, mask = d.get("ipaddr", ""), d.get("netmask", "")
    if not re.fullmatch(_IPV4, ip) or not re.fullmatch(_IPV4, mask):
        raise ParseError(source, T("no `ipaddr:` and `netmask:` lines with IPv4 values"))
    return ip, mask


def parse_gateway(text: str, source: str = "hccn_tool -gateway -g") -> str:
    """The IPv4 address on a ``gateway…:`` line."""
    for k, v in _kv(text):
        m = re.match(_IPV4 + r"(?![\d.])", v)
        if "gateway" in k and m:
            return m.group(1)
    raise ParseError(source, T("no `gateway …: <IPv4>` line"))


def parse_optical(text: str, source: str = "hccn_tool -optical -g") -> dict[str, str]:
    """The optical module's ``key : value`` lines; ``present`` must be among them."""
    d = {k: v for k, v in _kv(text) if k}
    if "present" not in d:
        raise ParseError(source, T("no `present : …` line"))
    return d


def parse_pfc(text: str, source: str = "hccn_tool -pfc -g") -> tuple[int, ...]:
    """The priorities (0..7) with PFC enabled.

    hccn_tool prints ``PFC configuration:``, ``priority   0 1 2 … 7`` and ``enabled    0 0 0 1
    0 0 0 0`` (no colon after the row names); a colon after them is accepted too."""
    prio: list[str] | None = None
    for raw in text.splitlines():
        words = raw.replace(":", " ").split()
        if len(words) != 9:
            continue
        name, flags = words[0].lower(), words[1:]
        if name == "priority" and flags == [str(i) for i in range(8)]:
            prio = flags
        elif name in ("enabled", "enable") and prio is not None and set(flags) <= {"0", "1"}:
            return tuple(i for i, f in enumerate(flags) if f == "1")
    raise ParseError(source, T("no `priority 0 … 7` row followed by an `enabled` row of eight "
                               "0/1 flags"))


def parse_dscp(text: str, source: str = "hccn_tool -dscp_to_tc -g") -> dict[int, int]:
    """``dscp  tc`` header, then one ``<dscp> <tc>`` row per DSCP (0..63) → {dscp: tc}."""
    rows: dict[int, int] = {}
    header = False
    for raw in text.splitlines():
        words = raw.split()
        if words == ["dscp", "tc"]:
            header = True
            continue
        if header and len(words) == 2 and all(w.isascii() and w.isdigit() for w in words):
            d, tc = int(words[0]), int(words[1])
            if d > 63 or tc > 7:
                raise ParseError(source, T("DSCP {d} → TC {tc} is out of range", d=d, tc=tc))
            rows[d] = tc
    if not rows:
        raise ParseError(source, T("no `dscp tc` header followed by `<dscp> <tc>` rows"))
    return rows


def parse_speed(text: str, source: str = "hccn_tool -speed -g") -> int | None:
    """``Speed: 200000 Mb/s`` → 200000; ``Speed: Unknown!`` (no link to negotiate) → None."""
    for k, v in _kv(text):
        if k == "speed":
            m = re.fullmatch(r"(\d+)\s*Mb/s", v)
            if m:
                return int(m.group(1))
            if v.lower().startswith("unknown"):
                return None
    raise ParseError(source, T("no `Speed: <n> Mb/s` line"))


# -- gathering ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ToolAnswer:
    """One ``hccn_tool`` query: the parsed value, or how it failed."""

    argv: tuple[str, ...]
    value: object = None
    failure: str | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True, eq=False)
class HccnDevice:
    """What hccn_tool says about one device's RoCE port."""

    dev: int
    link: ToolAnswer
    net_health: ToolAnswer
    ip: ToolAnswer
    gateway: ToolAnswer
    optical: ToolAnswer
    pfc: ToolAnswer
    speed: ToolAnswer | None = None  # None: not asked (a bundle of an older doctor)
    dscp: ToolAnswer | None = None


@dataclass(frozen=True, eq=False)
class HccnState:
    """hccn.conf (None when absent) and per-device hccn_tool answers (empty when absent)."""

    conf: HccnConf | None
    conf_error: str | None = None
    tool: str | None = None  # hccn_tool's path, None when not installed
    devices: tuple[HccnDevice, ...] = ()
    device_ids: tuple[int, ...] = ()
    hung: str | None = None  # the first command that timed out; later ones were not run


QUERIES = (("link", "-link", parse_link), ("net_health", "-net_health", parse_net_health),
           ("ip", "-ip", parse_ip), ("gateway", "-gateway", parse_gateway),
           ("optical", "-optical", parse_optical), ("pfc", "-pfc", parse_pfc),
           ("speed", "-speed", parse_speed), ("dscp", "-dscp_to_tc", parse_dscp))


def _ask(host: Host, argv: list[str], parse) -> ToolAnswer:
    res = host.run(argv, timeout=HCCN_TIMEOUT_S, cap=64 * 1024)
    if not res.ok:
        return ToolAnswer(tuple(argv), failure=res.describe_failure(), timed_out=res.timed_out)
    try:
        return ToolAnswer(tuple(argv), parse(res.text, " ".join(argv)))
    except ParseError as exc:
        return ToolAnswer(tuple(argv), failure=exc.reason)


def device_ids(smi: NpuSmi | None, detail: NpuDetail | None, conf: HccnConf | None) -> list[int]:
    """hccn_tool's ``-i`` is the logic id: from ``npu-smi info -m``, else one per chip of the
    table, else the devices hccn.conf names."""
    if detail is not None and detail.map is not None:
        ids = sorted({r.logic_id for r in detail.map.rows if r.logic_id is not None})
        if ids:
            return ids[:MAX_DEVICES]
    if smi is not None and smi.info is not None and smi.info.chips:
        return list(range(min(len(smi.info.chips), MAX_DEVICES)))
    return sorted(conf.devices)[:MAX_DEVICES] if conf else []


@provider
def gather_hccn(host: Host, smi: NpuSmi | None, detail: NpuDetail | None) -> HccnState:
    conf, conf_error = None, None
    try:
        conf = parse_hccn_conf(host.read_text(HCCN_CONF))
    except SourceMissing:
        pass
    except UnicodeDecodeError as exc:
        conf_error = f"not UTF-8 text ({exc.reason})"
    except SourceError as exc:
        conf_error = str(exc)
    tool = host.which("hccn_tool")
    ids = device_ids(smi, detail, conf)
    if tool is None:
        if conf is None and conf_error is None:
            raise SourceMissing("hccn_tool", T("neither hccn_tool (driver tools) nor {conf} "
                                               "is present: no RoCE network on this host",
                                               conf=HCCN_CONF))
        return HccnState(conf, conf_error, None, (), tuple(ids))
    devices = []
    for dev in ids:
        answers = {}
        for name, flag, parse in QUERIES:
            answers[name] = a = _ask(host, ["hccn_tool", "-i", str(dev), flag, "-g"], parse)
            if a.timed_out:  # a hung hccn_tool hangs for every device: stop here
                blank = ToolAnswer(a.argv, failure="not run: an earlier query hung")
                for n2, _, _ in QUERIES:
                    answers.setdefault(n2, blank)
                devices.append(HccnDevice(dev, **answers))
                return HccnState(conf, conf_error, tool, tuple(devices), tuple(ids),
                                 " ".join(a.argv))
        devices.append(HccnDevice(dev, **answers))
    return HccnState(conf, conf_error, tool, tuple(devices), tuple(ids))


def subnet(address: str, netmask: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(f"{address}/{netmask}", strict=False)
    except ValueError:
        return None
