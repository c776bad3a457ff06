"""PCIe link of each NPU against its capability, and the install's owners and modes.

A narrower link than the card and slot support (x8 of x16) halves host↔device bandwidth:
warn. A slower link speed alone is only info: cards drop the link to a lower rate to save
power while idle and retrain under load. The install rules are the offline installer's:
root owns ``/usr/local/Ascend`` and the driver, nobody else can write them, and the
service's account can read the driver's libraries.
"""

from __future__ import annotations

import stat as statmod
from typing import Iterator

from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.npusmi import NpuSmi
from ascend_doctor.probes.pcie import DRIVER_LIB64, AscendInstall, PcieLinks
from ascend_doctor.probes.svcaccess import may
from ascend_doctor.registry import check


def _npu_of(smi: NpuSmi | None) -> dict[str, str]:
    """PCI address (lower case) → "NPU n chip c" from npu-smi's Bus-Id column."""
    out: dict[str, str] = {}
    if smi is not None and smi.info is not None:
        for c in smi.info.chips:
            out[c.bus_id.lower()] = f"NPU {c.npu} chip {c.chip}"
    return out


@check("pcie.link", title="Every NPU's PCIe link runs at its full width",
       category=Category.NPU, tags=("npu", "pcie", "host"))
def link(pci: PcieLinks, smi: NpuSmi | None = None) -> Iterator[Finding]:
    names = _npu_of(smi)
    for addr, reason in pci.unreadable:
        yield Finding.warn(T("{addr}: cannot read its PCIe link: {reason}", addr=addr,
                             reason=reason), subject=addr)
    narrow = 0
    table = {x.address: f"x{x.width}/x{x.max_width} {x.speed_gts}/{x.max_speed_gts} GT/s"
             for x in pci.links}
    for x in pci.links:
        who = names.get(x.address.lower(), "")
        subject = f"{who} ({x.address})" if who else x.address
        if x.width is not None and x.max_width is not None and x.width < x.max_width:
            narrow += 1
            yield Finding.warn(T("{subject}: PCIe link trained at x{w} of x{max} — host↔device "
                                 "copies run at {pct} % of the bandwidth; reseat the card or "
                                 "check the riser/slot", subject=subject, w=x.width,
                                 max=x.max_width, pct=round(100 * x.width / x.max_width)),
                               subject=subject, evidence={"links": table}, kb="ASC-HW-006")
        elif (x.speed_gts is not None and x.max_speed_gts is not None
              and x.speed_gts < x.max_speed_gts):
            yield Finding.info(T("{subject}: PCIe link at {s} GT/s of {max} GT/s (full width "
                                 "x{w}); idle cards lower the rate and retrain under load",
                                 subject=subject, s=x.speed_gts, max=x.max_speed_gts,
                                 w=x.width), subject=subject)
    if pci.links and not narrow:
        yield Finding.passed(T("{n} NPU PCIe link(s) at full width", n=len(pci.links)),
                             evidence={"links": table})


def _mode(st) -> str:
    return oct(statmod.S_IMODE(st.mode))


@check("install.perms", title="The Ascend install is owned by root and writable by no one else",
       category=Category.HOST, tags=("install", "driver", "security"))
def perms(inst: AscendInstall) -> Iterator[Finding]:
    bad = 0
    for path, st in inst.dirs.items():
        if st.mode & 0o022:
            bad += 1
            yield Finding.fail(T("{path} has mode {mode}: {who} can replace the driver or "
                                 "toolkit that root processes load", path=path,
                                 mode=_mode(st), who=T("everyone") if st.mode & 0o002
                                 else T("its group")),
                               subject=path, evidence={"mode": _mode(st), "uid": st.uid,
                                                       "gid": st.gid}, kb="ASC-HW-007")
        elif st.uid != 0:
            bad += 1
            yield Finding.warn(T("{path} is owned by uid {uid}, not root: the installer "
                                 "installs the driver as root and refuses to upgrade it "
                                 "otherwise", path=path, uid=st.uid),
                               subject=path, evidence={"uid": st.uid}, kb="ASC-HW-007")
    writable = [s for s in inst.libs if s.mode & 0o022]
    if writable:
        bad += 1
        yield Finding.fail(T("{n} driver librar(ies) in {dir} are group/world-writable: {names}",
                             n=len(writable), dir=DRIVER_LIB64,
                             names=", ".join(f"{s.path.rsplit('/', 1)[-1]} {_mode(s)}"
                                             for s in writable[:5])),
                           subject=DRIVER_LIB64, kb="ASC-HW-007")
    if not bad:
        yield Finding.passed(T("{dirs} owned by root, not writable by others ({n} driver "
                               "libraries)", dirs=", ".join(inst.dirs), n=len(inst.libs)))


@check("install.driver_readable", title="The service's account can read the driver's libraries",
       category=Category.HOST, tags=("install", "driver", "service"))
def driver_readable(inst: AscendInstall) -> Iterator[Finding]:
    if inst.service is None:
        yield Finding.skip(T("no vLLM service process found (or its uid is unknown)"))
        return
    pid, uid, gids = inst.service
    if uid == 0:
        yield Finding.passed(T("the service (pid {pid}) runs as root", pid=pid))
        return
    for d, st in inst.dirs.items():
        if not may(st, uid, gids, 1):
            yield Finding.fail(T("the service (pid {pid}, uid {uid}) cannot enter {dir} "
                                 "(mode {mode}, owner {owner}:{group})", pid=pid, uid=uid,
                                 dir=d, mode=_mode(st), owner=st.uid, group=st.gid),
                               subject=d, kb="ASC-HW-007")
            return
    if not inst.libs:
        yield Finding.skip(T("no shared library listed in {dir}", dir=DRIVER_LIB64))
        return
    denied = [s for s in inst.libs if not may(s, uid, gids, 4)]
    if denied:
        yield Finding.fail(T("the service (pid {pid}, uid {uid}) cannot read {n} of {total} "
                             "driver libraries: {names}", pid=pid, uid=uid, n=len(denied),
                             total=len(inst.libs),
                             names=", ".join(f"{s.path.rsplit('/', 1)[-1]} {_mode(s)}"
                                             for s in denied[:5])),
                           subject=DRIVER_LIB64, kb="ASC-HW-007",
                           evidence={"denied": [s.path for s in denied]})
    else:
        yield Finding.passed(T("the service (pid {pid}, uid {uid}) can read all {n} driver "
                               "libraries", pid=pid, uid=uid, n=len(inst.libs)))
