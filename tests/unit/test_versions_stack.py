"""The compatibility matrix, the platform plugin and the chip/build-type rules."""

from __future__ import annotations

import pytest

from ascend_doctor import knowledge
from ascend_doctor.checks.versions import chip_family, chip_match, matrix, pins, platform_plugin
from ascend_doctor.errors import ParseError
from ascend_doctor.host import CommandResult
from ascend_doctor.model import Status
from ascend_doctor.probes.kbfact import gather_knowledge
from ascend_doctor.probes.buildinfo import VllmAscendBuild, gather_build_info, parse_build_info
from ascend_doctor.probes.cann import CannStack, Toolkit, parse_toolkit_install_info
from ascend_doctor.probes.npusmi import NpuSmi, parse_npu_smi_info
from ascend_doctor.probes.packages import Package, Packages
from tests.fixtures.npusmi import A2, A3, P310P

SITE = "/usr/local/lib/python3.11/site-packages"
PLATFORM_EP = ("vllm.platform_plugins", "ascend", "vllm_ascend:register")

KNOW = gather_knowledge()  # the KB fact, as the engine provides it


def pkgs(python="3.11.7", **versions) -> Packages:
    out = {}
    for key, ver in versions.items():
        name = key.replace("_", "-")
        eps = (PLATFORM_EP,) if name == "vllm-ascend" else ()
        out[name] = Package(name, ver, entry_points=eps, location=SITE)
    return Packages(python, "/usr/bin/python3", "test", out)


def cann(version: str) -> CannStack:
    info = parse_toolkit_install_info(f"version={version}\ninnerversion=V100R001C25SPC001B212\n")
    tk = Toolkit("/usr/local/Ascend/cann", "/usr/local/Ascend/cann-" + version,
                 "/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info", info)
    return CannStack((tk,), tk, "test")


def test_matrix_data_is_strings_with_sources():
    c = knowledge.compat()
    assert c["vllm_ascend"][0]["version"] == "0.23.0"
    for table in ("vllm_ascend", "torch_npu", "torch_python"):
        for row in c[table]:
            assert row["source"] and all(isinstance(v, (str, list)) for v in row.values())


def test_released_combination_passes():
    p = pkgs(vllm_ascend="0.23.0", vllm="0.23.0", torch="2.10.0+cpu", torch_npu="2.10.0.post4")
    fs = list(matrix(p, cann("9.1.0"), KNOW))
    assert [f.status for f in fs] == [Status.PASS], [f.message for f in fs]


def test_mismatches_name_the_numbers():
    p = pkgs(python="3.13.1", vllm_ascend="0.23.0", vllm="0.22.1", torch="2.13.0",
             torch_npu="2.10.0.post4")
    msgs = {f.message: f for f in matrix(p, cann("8.3.RC2"), KNOW)}
    assert "vllm-ascend 0.23.0 is released with vllm 0.23.0; found 0.22.1" in msgs
    assert "vllm-ascend 0.23.0 is released with torch 2.10.0; found 2.13.0" in msgs
    assert any("supports Python >=3.10,<3.13; the service's interpreter is 3.13.1" in m
               for m in msgs)
    cann_warn = [f for m, f in msgs.items() if "was validated with CANN 9.1.0" in m]
    assert cann_warn and cann_warn[0].status == Status.WARN
    strict = [f for m, f in msgs.items() if "torch_npu 2.10.0.post4 is built for CANN 9.1.0" in m]
    assert strict and strict[0].status == Status.FAIL and strict[0].kb == ("ASC-VER-003",)


def test_versions_outside_matrix_are_info_not_fail():
    fs = list(matrix(pkgs(vllm_ascend="0.99.0", torch_npu="2.14.0", torch="2.14.0"), None, KNOW))
    # nothing was compared: a skip saying why, not a pass (issue 13.7)
    assert {f.status for f in fs} <= {Status.INFO, Status.SKIP}
    (skip,) = [f for f in fs if f.status == Status.SKIP]
    assert "nothing to compare against the matrix" in skip.message
    assert "vllm, CANN toolkit not found" in skip.message
    assert "vllm-ascend 0.99.0" in skip.message and "not in knowledge/compat.toml" in skip.message


def test_absent_stack_is_a_skip_naming_what_is_absent():
    empty = pkgs()
    (p,) = pins(empty)
    assert p.status == Status.SKIP and "vllm-ascend, vllm, torch-npu, torch" in p.message
    assert p.evidence["absent"][:4] == ["vllm-ascend", "vllm", "torch-npu", "torch"]
    (m,) = matrix(empty, None, KNOW)
    assert m.status == Status.SKIP
    assert "vllm-ascend, vllm, torch, torch-npu, CANN toolkit not found" in m.message
    # an installed stack whose pins hold is still a pass
    (ok,) = pins(pkgs(torch="2.10.0"))
    assert ok.status == Status.PASS and "torch 2.10.0" in ok.message


def test_platform_plugin_missing_is_cuda_only_vllm():
    (f,) = platform_plugin(pkgs(vllm="0.23.0", torch="2.10.0"))
    assert f.status == Status.FAIL and "vllm.platform_plugins" in f.message
    assert f.kb == ("ASC-VER-007",) and f.fix.params["requirement"] == "vllm-ascend==0.23.0"
    (f,) = platform_plugin(pkgs(vllm="0.23.0", vllm_ascend="0.23.0"))
    assert f.status == Status.PASS and "vllm_ascend:register" in f.message
    (f,) = platform_plugin(pkgs(torch="2.10.0"))
    assert f.status == Status.SKIP


def test_parse_build_info_real_line():
    assert parse_build_info("# Auto-generated file\n__device_type__ = 'A2'\n") == "A2"
    assert parse_build_info('__device_type__: str = "310P"\n') == "310P"
    with pytest.raises(ParseError):
        parse_build_info("__version__ = '0.23.0'\n")


def _smi(text) -> NpuSmi:
    return NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi",), 0, text.encode(), b"", 0.1),
                  parse_npu_smi_info(text))


def test_chip_family_and_rule():
    assert [chip_family(n) for n in ("910B1", "910B4", "Ascend910", "310P3", "xyz")] == [
        "A2", "A2", "A3", "310P", None]
    build = VllmAscendBuild(f"{SITE}/vllm_ascend/_build_info.py", "A2")
    assert [f.status for f in chip_match(build, _smi(A2))] == [Status.PASS]
    (f,) = chip_match(build, _smi(A3))
    assert f.status == Status.FAIL and "built for A2" in f.message and "Ascend910" in f.message
    (f,) = chip_match(build, _smi(P310P))
    assert f.status == Status.FAIL and "310P" in f.message


def test_build_info_read_through_host_at_package_location(sysroot):
    sysroot.write(f"{SITE}/vllm_ascend/_build_info.py", "__device_type__ = 'A3'\n")
    b = gather_build_info(sysroot.host(), pkgs(vllm_ascend="0.23.0"))
    assert (b.device_type, b.path) == ("A3", f"{SITE}/vllm_ascend/_build_info.py")


def test_nnal_version_file_and_mismatch(sysroot):
    from ascend_doctor.probes.cann import gather_cann, parse_nnal_version_info
    assert parse_nnal_version_info("version=9.1.0\n") == "9.1.0"
    sysroot.write("/usr/local/Ascend/cann-9.1.0/x86_64-linux/ascend_toolkit_install.info",
                  "version=9.1.0\ninnerversion=V100R001C30SPC001B100\n")
    sysroot.symlink("/usr/local/Ascend/cann", "cann-9.1.0")
    sysroot.write("/usr/local/Ascend/nnal/atb/latest/version.info", "version=8.5.0\n")
    st = gather_cann(sysroot.host(), None)
    assert st.nnal == "8.5.0"
    p = pkgs(vllm_ascend="0.23.0", vllm="0.23.0", torch="2.10.0", torch_npu="2.10.0.post4")
    (f,) = matrix(p, st, KNOW)
    assert f.status == Status.WARN and "NNAL/ATB 8.5.0 differs from CANN 9.1.0" in f.message
