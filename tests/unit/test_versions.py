"""Pins from Requires-Dist, evaluated with packaging, on METADATA files in a sysroot."""

from __future__ import annotations

from ascend_doctor.engine import RunConfig, run
from ascend_doctor.model import Status
from ascend_doctor.probes.packages import parse_metadata

SITE = "/usr/local/lib/python3.11/site-packages"

VLLM_ASCEND_METADATA = """Metadata-Version: 2.4
Name: vllm_ascend
Version: 0.23.0
Summary: vLLM Ascend backend plugin
Requires-Python: >=3.10
Requires-Dist: torch==2.10.0
Requires-Dist: torch-npu==2.10.0.post4
Requires-Dist: torchvision==0.25.0
Requires-Dist: fastapi<0.124.0
Requires-Dist: pytest; extra == "test"
"""


def install(root, name, version, requires=()):
    lines = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    root.write(f"{SITE}/{name}-{version}.dist-info/METADATA", "\n".join(lines) + "\n")


def test_parse_real_metadata():
    p = parse_metadata(VLLM_ASCEND_METADATA)
    assert (p.name, p.version) == ("vllm_ascend", "0.23.0")
    assert "torch-npu==2.10.0.post4" in p.requires and p.requires_python == ">=3.10"


def test_broken_pins_name_the_numbers(sysroot):
    sysroot.write(f"{SITE}/vllm_ascend-0.23.0.dist-info/METADATA", VLLM_ASCEND_METADATA)
    install(sysroot, "torch", "2.13.0")
    install(sysroot, "torch_npu", "2.14.0", ["torch==2.14.0.*", "numpy"])
    r = run(sysroot.host(), config=RunConfig(only=("versions.pins",))).results[0]
    msgs = [f.message for f in r.findings]
    assert r.status == Status.FAIL
    assert "vllm_ascend 0.23.0 requires torch==2.10.0; found 2.13.0" in msgs
    assert "vllm_ascend 0.23.0 requires torch-npu==2.10.0.post4; found 2.14.0" in msgs
    assert "torch_npu 2.14.0 requires torch==2.14.0.*; found 2.13.0" in msgs
    assert not any("pytest" in m for m in msgs), "extras are not required"


def test_matching_pins_pass(sysroot):
    sysroot.write(f"{SITE}/vllm_ascend-0.23.0.dist-info/METADATA", VLLM_ASCEND_METADATA)
    install(sysroot, "torch", "2.10.0")
    install(sysroot, "torch_npu", "2.10.0.post4", ["torch==2.10.0.*"])
    install(sysroot, "torchvision", "0.25.0")
    install(sysroot, "fastapi", "0.118.0")
    r = run(sysroot.host(), config=RunConfig(only=("versions.pins",))).results[0]
    assert r.status == Status.PASS, [f.message for f in r.findings]
