"""PCIe links of the NPUs from sysfs, and the owners/modes of /usr/local/Ascend.

sysfs formats: ``current_link_speed`` reads ``16.0 GT/s PCIe`` on kernels since 5.x and
``8 GT/s`` before (Linux ABI, Documentation/ABI/testing/sysfs-bus-pci), widths are plain
numbers; Huawei's vendor id is 0x19e5 and the 910B's device id 0xd802 (as ``lspci -n``
prints Ascend cards). Sysroots hold these files; the install rules run on real stat answers
of files created with the modes under test."""

from __future__ import annotations

import os

import pytest

from ascend_doctor.checks.pcie import driver_readable, link, perms
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import ParseError
from ascend_doctor.host import StatInfo
from ascend_doctor.model import Status
from ascend_doctor.probes.pcie import (AscendInstall, PciLink, PcieLinks, parse_pci_link,
                                       parse_speed)


def test_speed_and_link_parsers():
    assert parse_speed("16.0 GT/s PCIe") == 16.0 and parse_speed("8 GT/s") == 8.0
    assert parse_speed("2.5 GT/s PCIe") == 2.5 and parse_speed("Unknown") is None
    x = parse_pci_link("0000:c1:00.0", "0xd802", {"current_link_width": "8",
                                                   "max_link_width": "16",
                                                   "current_link_speed": "16.0 GT/s PCIe",
                                                   "max_link_speed": "16.0 GT/s PCIe"})
    assert (x.width, x.max_width, x.speed_gts, x.max_speed_gts) == (8, 16, 16.0, 16.0)
    with pytest.raises(ParseError):
        parse_pci_link("0000:c1:00.0", "0xd802", {})


def pci(root, addr, width="16", speed="16.0 GT/s PCIe", vendor="0x19e5", device="0xd802",
        cls="0x120000"):
    base = f"/sys/bus/pci/devices/{addr}"
    for name, value in (("vendor", vendor), ("device", device), ("class", cls),
                        ("current_link_width", width), ("max_link_width", "16"),
                        ("current_link_speed", speed), ("max_link_speed", "16.0 GT/s PCIe")):
        root.write(f"{base}/{name}", value + "\n")


def _res(root, only):
    r = run(root.host(), config=RunConfig(only=only))
    return {x.check_id: x for x in r.results}


def test_narrow_link_warns_and_nic_is_ignored(sysroot):
    pci(sysroot, "0000:c1:00.0")
    pci(sysroot, "0000:c2:00.0", width="8")
    pci(sysroot, "0000:c3:00.0", speed="2.5 GT/s PCIe")
    pci(sysroot, "0000:3d:00.0", width="4", device="0x0222", cls="0x020000")  # a Huawei NIC
    pci(sysroot, "0000:00:01.0", width="1", vendor="0x8086", cls="0x060400")
    fs = _res(sysroot, ("pcie.link",))["pcie.link"].findings
    (w,) = [f for f in fs if f.status == Status.WARN]
    assert w.subject == "0000:c2:00.0" and "x8 of x16" in w.message and "50 %" in w.message
    (i,) = [f for f in fs if f.status == Status.INFO]
    assert "2.5 GT/s of 16.0 GT/s" in i.message
    assert len(w.evidence["links"]) == 3, "the NIC and the Intel bridge are not NPUs"


def test_healthy_links_pass_and_no_sysfs_skips(sysroot):
    (f,) = _res(sysroot, ("pcie.link",))["pcie.link"].findings
    assert f.status == Status.SKIP and "/sys/bus/pci/devices" in f.message
    pci(sysroot, "0000:c1:00.0")
    (f,) = _res(sysroot, ("pcie.link",))["pcie.link"].findings
    assert f.status == Status.PASS and "1 NPU" in f.message


def test_npu_names_come_from_npu_smi_bus_ids():
    from ascend_doctor.host import CommandResult
    from ascend_doctor.probes.npusmi import NpuSmi, parse_npu_smi_info
    from tests.fixtures.npusmi import A2
    info = parse_npu_smi_info(A2)
    smi = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi", "info"), 0, b"", b"", 0.1), info)
    links = PcieLinks((PciLink("0000:c1:00.0", "0xd802", 8, 16, 16.0, 16.0),))
    (w,) = link(links, smi)
    assert w.subject == "NPU 0 chip 0 (0000:c1:00.0)"


def _st(path, mode, uid=0, gid=0, d=False):
    return StatInfo(path, (0o040000 if d else 0o100000) | mode, uid, gid, 0, 0.0)


DIRS = {"/usr/local/Ascend": _st("/usr/local/Ascend", 0o755, d=True),
        "/usr/local/Ascend/driver": _st("/usr/local/Ascend/driver", 0o755, d=True),
        "/usr/local/Ascend/driver/lib64": _st("/usr/local/Ascend/driver/lib64", 0o755, d=True)}
LIBS = (_st("/usr/local/Ascend/driver/lib64/libascend_hal.so", 0o440, 0, 1000),
        _st("/usr/local/Ascend/driver/lib64/libdrvdsmi_host.so", 0o444))


def test_install_perms_rules():
    (p,) = perms(AscendInstall(DIRS, LIBS))
    assert p.status == Status.PASS
    dirs = dict(DIRS, **{"/usr/local/Ascend/driver": _st("/usr/local/Ascend/driver", 0o777,
                                                          d=True)})
    fs = list(perms(AscendInstall(dirs, LIBS + (_st("/x/lib64/libbad.so", 0o666),))))
    assert [f.status for f in fs] == [Status.FAIL, Status.FAIL]
    assert "0o777" in fs[0].message and "everyone" in fs[0].message
    assert "libbad.so 0o666" in fs[1].message
    dirs = dict(DIRS, **{"/usr/local/Ascend": _st("/usr/local/Ascend", 0o755, uid=1000, d=True)})
    (w,) = perms(AscendInstall(dirs, LIBS))
    assert w.status == Status.WARN and "uid 1000" in w.message


def test_driver_readable_by_the_service_uid():
    (s,) = driver_readable(AscendInstall(DIRS, LIBS, None))
    assert s.status == Status.SKIP
    (p,) = driver_readable(AscendInstall(DIRS, LIBS, (4711, 1000, (1000,))))
    assert p.status == Status.PASS and "all 2" in p.message
    (f,) = driver_readable(AscendInstall(DIRS, LIBS, (4711, 1001, (1001,))))
    assert f.status == Status.FAIL and "libascend_hal.so 0o440" in f.message
    assert "libdrvdsmi_host.so" not in f.message
    closed = dict(DIRS, **{"/usr/local/Ascend/driver": _st("/usr/local/Ascend/driver", 0o750,
                                                            d=True)})
    (g,) = driver_readable(AscendInstall(closed, LIBS, (4711, 1001, ())))
    assert g.status == Status.FAIL and "cannot enter /usr/local/Ascend/driver" in g.message


def test_install_perms_on_a_sysroot(sysroot):
    sysroot.mkdir("/usr/local/Ascend/driver/lib64")
    sysroot.write("/usr/local/Ascend/driver/lib64/libascend_hal.so", b"\x7fELF", mode=0o644)
    assert _res(sysroot, ("install.perms",))["install.perms"].status == Status.PASS
    os.chmod(sysroot.path("/usr/local/Ascend/driver/lib64"), 0o777)
    (f,) = _res(sysroot, ("install.perms",))["install.perms"].findings
    assert f.status == Status.FAIL and "/usr/local/Ascend/driver/lib64 has mode 0o777" in f.message
