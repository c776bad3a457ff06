"""CANN / driver / firmware version files (real formats, facts/ascend-stack.md §2.3) and the
driver-accepts-CANN, partial-upgrade and reboot-pending rules."""

from __future__ import annotations

import pytest

from ascend_doctor.checks.versions import cann_upgrade, driver_active, driver_cann
from ascend_doctor.errors import ParseError
from ascend_doctor.host import CommandResult
from ascend_doctor.model import Status
from ascend_doctor.probes.cann import (CannStack, Toolkit, c_number, gather_cann,
                                parse_driver_version_info, parse_firmware_version_info,
                                parse_toolkit_install_info, parse_version_cfg)
from ascend_doctor.probes.npusmi import NpuSmi, parse_npu_smi_info
from ascend_doctor.probes.procs import ServiceEnv
from tests.fixtures.ascend import DRIVER, DRIVER_2501, FIRMWARE, TOOLKIT_832, VERSION_CFG
from tests.fixtures.npusmi import A2, with_version

TOOLKIT_850 = TOOLKIT_832.replace("8.3.RC2", "8.5.0").replace(
    "V100R001C23SPC002B210", "V100R001C25SPC001B212").replace(
    "/usr/local/Ascend/ascend-toolkit/8.5.0", "/usr/local/Ascend/cann-8.5.0")


def test_parse_toolkit_install_info_real():
    info = parse_toolkit_install_info(TOOLKIT_832)
    assert (info.version, info.c_number, info.arch) == ("8.3.RC2", "V100R001C23", "aarch64")
    assert info.compatible_version[-1] == "V100R001C23" and len(info.compatible_version) == 6


def test_parse_version_cfg_real_and_partial_upgrade():
    cfg = parse_version_cfg(VERSION_CFG)
    assert cfg.components["hccl"]["running"].cann == "8.0.0"
    assert cfg.components["runtime"]["installed"].inner == "7.6.0.1.220"
    assert cfg.partial_upgrades() == []
    broken = parse_version_cfg(VERSION_CFG.replace("hccl_installed_version=[7.6.0.1.220:8.0.0]",
                                                   "hccl_installed_version=[7.7.0.1.238:8.1.RC1]"))
    (comp, run, inst), = broken.partial_upgrades()
    assert comp == "hccl" and run.cann == "8.0.0" and inst.cann == "8.1.RC1"


def test_parse_driver_and_firmware_capitalised_keys():
    drv = parse_driver_version_info(DRIVER)
    assert drv.version == "24.1.rc1" and drv.innerversion == "V100R001C15SPC006B220"
    assert drv.compatible_version == ("V100R001C30", "V100R001C13", "V100R001C15", "V100R001C17")
    assert drv.compatible_version_fw == ("7.0.0,7.2.99",)
    assert drv.accepts("V100R001C15SPC001B100") is True
    assert drv.accepts("V100R001C23SPC002B210") is False
    assert drv.accepts("") is None
    fw = parse_firmware_version_info(FIRMWARE)
    assert fw.version == "7.1.0.11.220" and fw.package_version == "23.0.7"
    assert c_number("v100r001c25spc001") == "V100R001C25"


@pytest.mark.parametrize("text", ["", "garbage without equals\n", "arch=x86_64\n"])
def test_malformed_toolkit_info_is_a_named_parse_error(text):
    with pytest.raises(ParseError) as exc:
        parse_toolkit_install_info(text, "/x/ascend_toolkit_install.info")
    assert exc.value.source == "/x/ascend_toolkit_install.info"


def classic(root, info=TOOLKIT_832, arch="aarch64"):
    root.write(f"/usr/local/Ascend/ascend-toolkit/8.3.RC2/{arch}-linux/ascend_toolkit_install.info",
               info)
    root.write("/usr/local/Ascend/ascend-toolkit/8.3.RC2/version.cfg", VERSION_CFG)
    root.symlink("/usr/local/Ascend/ascend-toolkit/latest", "8.3.RC2")


def test_gather_classic_layout_follows_latest(sysroot):
    classic(sysroot)
    sysroot.write("/usr/local/Ascend/driver/version.info", DRIVER)
    sysroot.write("/usr/local/Ascend/firmware/version.info", FIRMWARE)
    st = gather_cann(sysroot.host(), None)
    assert [t.info.version for t in st.toolkits] == ["8.3.RC2"]
    tk = st.active
    assert tk.home == "/usr/local/Ascend/ascend-toolkit/latest"
    assert tk.real == "/usr/local/Ascend/ascend-toolkit/8.3.RC2"
    assert tk.version_cfg is not None and st.driver.version == "24.1.rc1"
    assert st.firmware.version == "7.1.0.11.220" and st.problems == ()


def test_gather_new_layout_and_home_install_via_service_env(sysroot):
    sysroot.write("/usr/local/Ascend/cann-8.5.0/x86_64-linux/ascend_toolkit_install.info",
                  TOOLKIT_850)
    sysroot.symlink("/usr/local/Ascend/cann", "cann-8.5.0")
    sysroot.write("/home/svc/Ascend/ascend-toolkit/8.3.RC2/x86_64-linux/ascend_toolkit_install.info",
                  TOOLKIT_832)
    sysroot.symlink("/home/svc/Ascend/ascend-toolkit/latest", "8.3.RC2")
    env = ServiceEnv({"HOME": "/home/svc",
                      "ASCEND_HOME_PATH": "/home/svc/Ascend/ascend-toolkit/latest"},
                     "/proc/4711/environ", 4711)
    st = gather_cann(sysroot.host(), env)
    assert {t.info.version for t in st.toolkits} == {"8.3.RC2", "8.5.0"}
    assert st.active.info.version == "8.3.RC2" and "ASCEND_HOME_PATH" in st.active_reason
    # without the env var the first standard root wins (the cann link)
    st2 = gather_cann(sysroot.host(), ServiceEnv({}, "own"))
    assert st2.active.info.version == "8.5.0" and st2.active.real == "/usr/local/Ascend/cann-8.5.0"


def test_gather_nothing_is_missing_source(sysroot):
    from ascend_doctor.errors import SourceMissing
    with pytest.raises(SourceMissing):
        gather_cann(sysroot.host(), None)


def test_corrupt_files_become_error_findings(sysroot):
    classic(sysroot, info="\x00\x01 not a version file")
    sysroot.write("/usr/local/Ascend/driver/version.info", DRIVER)
    st = gather_cann(sysroot.host(), None)
    assert st.toolkits == () and st.problems
    fs = list(driver_cann(st))
    assert fs[0].status == Status.ERROR and "ascend_toolkit_install.info" in fs[0].message


def _stack(driver=DRIVER, info=TOOLKIT_832, cfg=VERSION_CFG) -> CannStack:
    tk = Toolkit("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/ascend-toolkit/8.3.RC2",
                 "/usr/local/Ascend/ascend-toolkit/8.3.RC2/aarch64-linux/ascend_toolkit_install.info",
                 parse_toolkit_install_info(info), parse_version_cfg(cfg) if cfg else None)
    return CannStack((tk,), tk, "test", parse_driver_version_info(driver) if driver else None)


def test_driver_cann_rule():
    # driver 24.1.rc1 (C15) does not list CANN 8.3.RC2's C23, but the toolkit lists C15
    (f,) = driver_cann(_stack())
    assert f.status == Status.PASS and "V100R001C15 is in the toolkit's compatible_version" in f.message
    assert "ascend_toolkit_install.info" in f.message and f.evidence["accepted_by"] == "toolkit"
    # neither side names the other (the toolkit's list narrowed to lines after the driver's)
    narrow = TOOLKIT_832.replace("[V100R001C15],", "")
    (f,) = driver_cann(_stack(info=narrow))
    assert f.status == Status.FAIL and "V100R001C23" in f.message and "24.1.rc1" in f.message
    assert "neither file names the other" in f.message and "CANN Software Installation Guide" in f.message
    assert f.kb == ("ASC-VER-004",)
    ok = DRIVER.replace("[V100R001C17]", "[V100R001C17],[V100R001C23]")
    (f,) = driver_cann(_stack(driver=ok, info=narrow))
    assert f.status == Status.PASS and f.evidence["accepted_by"] == "driver"
    assert [x.status for x in driver_cann(_stack(driver=None))] == [Status.SKIP]


def test_driver_2501_with_cann_832_passes_on_the_toolkits_list():
    """Issue 15: driver 25.0.rc1.1 (C21, lists C17…C21) runs CANN 8.3.RC2 (C23), whose
    ascend_toolkit_install.info lists C21 — real files on both sides."""
    drv = parse_driver_version_info(DRIVER_2501)
    assert drv.innerversion == "V100R001C21SPC002B220" and drv.accepts("V100R001C23SPC002B210") is False
    (f,) = driver_cann(_stack(driver=DRIVER_2501))
    assert f.status == Status.PASS, f.message
    assert "CANN 8.3.RC2 accepts driver 25.0.rc1.1 (V100R001C21 is in the toolkit's" in f.message
    assert f.evidence["toolkit_compatible_version"][-2:] == ["V100R001C21", "V100R001C23"]


def test_driver_cann_without_lists_is_info():
    bare = "\n".join(x for x in DRIVER.splitlines() if not x.startswith(("Innerversion", "compatible_version=")))
    (f,) = driver_cann(_stack(driver=bare))
    assert f.status == Status.INFO and "cannot be compared" in f.message


def test_cann_upgrade_rule():
    assert [f.status for f in cann_upgrade(_stack())] == [Status.PASS]
    bad = VERSION_CFG.replace("opp_installed_version=[7.6.0.1.220:8.0.0]",
                              "opp_installed_version=[7.7.0.1.238:8.1.RC1]")
    (f,) = cann_upgrade(_stack(cfg=bad))
    assert f.status == Status.FAIL and "opp: running 7.6.0.1.220:8.0.0, installed 7.7.0.1.238:8.1.RC1" in f.message
    assert [f.status for f in cann_upgrade(_stack(cfg=None))] == [Status.SKIP]


def _smi(version: str) -> NpuSmi:
    text = with_version(A2, version)
    res = CommandResult(("npu-smi", "info"), 0, text.encode(), b"", 0.1)
    return NpuSmi(("npu-smi", "info"), res, parse_npu_smi_info(text))


def test_driver_active_rule_reboot_pending():
    (f,) = driver_active(_stack(), _smi("23.0.3"))
    assert f.status == Status.FAIL and "24.1.rc1 is installed" in f.message
    assert "reports 23.0.3" in f.message and f.kb == ("ASC-VER-006",)
    (f,) = driver_active(_stack(), _smi("24.1.rc1"))
    assert f.status == Status.PASS


def test_end_to_end_sysroot_with_npu_smi_script(sysroot):
    from ascend_doctor.engine import RunConfig, run
    classic(sysroot, info=TOOLKIT_832.replace("[V100R001C15],", ""))  # lists no C15 driver
    sysroot.write("/usr/local/Ascend/driver/version.info", DRIVER)
    sysroot.script("/usr/local/bin/npu-smi",
                   "if [ \"$#\" = 1 ]; then cat <<'X'\n" + with_version(A2, "23.0.3")
                   + "X\nelse echo '        Health                         : OK'; fi\n")
    r = run(sysroot.host(), config=RunConfig(only=("versions.driver-active", "versions.driver-cann")))
    st = {x.check_id: x.status for x in r.results}
    assert st == {"versions.driver-active": Status.FAIL, "versions.driver-cann": Status.FAIL}


def test_driver_firmware_range():
    from ascend_doctor.checks.versions import driver_firmware
    st = _stack()
    ok = CannStack(st.toolkits, st.active, "", st.driver, parse_firmware_version_info(FIRMWARE))
    (f,) = driver_firmware(ok)
    assert f.status == Status.PASS and "7.1.0.11.220 is within" in f.message
    old = parse_firmware_version_info(FIRMWARE.replace("Version=7.1.0.11.220", "Version=6.4.12.1.241"))
    (f,) = driver_firmware(CannStack(st.toolkits, st.active, "", st.driver, old))
    assert f.status == Status.FAIL and "outside driver 24.1.rc1's compatible_version_fw [7.0.0,7.2.99]" in f.message
    assert [x.status for x in driver_firmware(st)] == [Status.SKIP]
