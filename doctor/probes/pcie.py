"""PCIe link of each Ascend NPU (sysfs) and the install's owners and modes.

A card that trained at x8 in an x16 slot (a dirty or half-seated connector, a riser) runs,
but host↔device copies (weights loading, KV swap, D2H of logits) take twice as long; sysfs
says so in ``current_link_width`` against ``max_link_width``. The offline installer wants
``/usr/local/Ascend`` and the driver owned by root and writable by nobody else, and the
service's account must be able to read ``driver/lib64``; both are read here with ``stat``.
"""

from __future__ import annotations

import posixpath
import re

from ..errors import ParseError, SourceError, SourceMissing
from ..host import Host, StatInfo
from ..i18n import T
from dataclasses import dataclass, field
from ..registry import provider
from .procs import ServiceProcesses
from .svcaccess import service_creds

PCI_ROOT = "/sys/bus/pci/devices"
HUAWEI_VENDOR = "0x19e5"
# Ascend device ids (310, 310P, 310B, 910, 910B, 910_93); any 0x19e5 processing accelerator
# (class 0x12xxxx) counts too, so a new chip is not missed
ASCEND_DEVICE_IDS = frozenset({"0xd100", "0xd105", "0xd107", "0xd500", "0xd801", "0xd802",
                               "0xd803"})
LINK_FILES = ("current_link_width", "max_link_width", "current_link_speed", "max_link_speed")
MAX_PCI = 4096
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")


@dataclass(frozen=True, eq=False)
class PciLink:
    """One NPU function's negotiated and maximal link."""

    address: str
    device: str
    width: int | None
    max_width: int | None
    speed_gts: float | None
    max_speed_gts: float | None


def parse_speed(text: str) -> float | None:
    """``16.0 GT/s PCIe`` (newer kernels) or ``8 GT/s`` → 16.0 / 8.0; ``Unknown`` → None."""
    m = _SPEED.match(text)
    return float(m.group(1)) if m else None


def parse_width(text: str) -> int | None:
    t = text.strip()
    return int(t) if t.isascii() and t.isdigit() else None


def parse_pci_link(address: str, device: str, files: dict[str, str]) -> PciLink:
    """The link of one function from its sysfs files; none readable is a ParseError."""
    if not any(files.get(k, "").strip() for k in LINK_FILES):
        raise ParseError(f"{PCI_ROOT}/{address}", T("no link width or speed file"))
    return PciLink(address, device, parse_width(files.get("current_link_width", "")),
                   parse_width(files.get("max_link_width", "")),
                   parse_speed(files.get("current_link_speed", "")),
                   parse_speed(files.get("max_link_speed", "")))


@dataclass(frozen=True, eq=False)
class PcieLinks:
    """The Ascend functions found under /sys/bus/pci/devices and their links."""

    links: tuple[PciLink, ...] = ()
    unreadable: tuple[tuple[str, str], ...] = ()  # (address, reason)


def _read(host: Host, path: str) -> str:
    try:
        return host.read_text(path, limit=256).strip()
    except (SourceMissing, SourceError):
        return ""


@provider
def gather_pcie(host: Host) -> PcieLinks:
    try:
        names = sorted(host.listdir(PCI_ROOT))[:MAX_PCI]
    except SourceMissing:
        raise SourceMissing(PCI_ROOT, T("no PCI devices in sysfs (not Linux, or /sys not "
                                        "mounted into the container)")) from None
    links, bad = [], []
    for name in names:
        base = posixpath.join(PCI_ROOT, name)
        if _read(host, base + "/vendor").lower() != HUAWEI_VENDOR:
            continue
        device = _read(host, base + "/device").lower()
        if device not in ASCEND_DEVICE_IDS and not _read(host, base + "/class").startswith("0x12"):
            continue
        files = {k: _read(host, f"{base}/{k}") for k in LINK_FILES}
        try:
            links.append(parse_pci_link(name, device, files))
        except ParseError as exc:
            bad.append((name, exc.reason))
    if not links and not bad:
        raise SourceMissing(PCI_ROOT, T("no Huawei (0x19e5) Ascend PCI function"))
    return PcieLinks(tuple(links), tuple(bad))


# -- the install's owners and modes --------------------------------------------------------
ASCEND_ROOT = "/usr/local/Ascend"
INSTALL_DIRS = (ASCEND_ROOT, ASCEND_ROOT + "/driver", ASCEND_ROOT + "/driver/lib64")
DRIVER_LIB64 = ASCEND_ROOT + "/driver/lib64"
MAX_LIBS = 2000


@dataclass(frozen=True, eq=False)
class AscendInstall:
    """stat of the install's directories and driver libraries, and the service's identity."""

    dirs: dict[str, StatInfo] = field(default_factory=dict)
    libs: tuple[StatInfo, ...] = ()
    service: tuple[int, int, tuple[int, ...]] | None = None  # (pid, uid, gids)


@provider
def gather_install(host: Host, procs: ServiceProcesses | None) -> AscendInstall:
    dirs: dict[str, StatInfo] = {}
    for d in INSTALL_DIRS:
        try:
            dirs[d] = host.stat(d)
        except SourceMissing:
            continue
    if ASCEND_ROOT not in dirs:
        raise SourceMissing(ASCEND_ROOT, T("no Ascend install on this host"))
    libs = []
    try:
        for name in sorted(host.listdir(DRIVER_LIB64))[:MAX_LIBS]:
            if ".so" in name:
                try:
                    libs.append(host.stat(posixpath.join(DRIVER_LIB64, name)))
                except (SourceMissing, SourceError):
                    continue
    except (SourceMissing, SourceError):
        pass
    service = None
    sp = procs.primary if procs is not None else None
    if sp is not None:
        creds = service_creds(host, sp.pid, sp.proc.uid)
        if creds is not None:
            service = (sp.pid, creds[0], creds[1])
    return AscendInstall(dirs, tuple(libs), service)
