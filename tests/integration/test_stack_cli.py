"""The stack checks through the real console script: the demo bundle, a collected bundle
that replays, and the issue's "done when" host (real wheels, no CANN)."""

from __future__ import annotations

import json
import time

import pytest

from tests.fixtures.npusmi import A2
from tests.fixtures.ascend import DRIVER, TOOLKIT_832, VERSION_CFG
from tests.timing import budget


def findings(doc):
    return {(c["id"], f["status"], f["message"]) for c in doc["checks"] for f in c["findings"]}


def test_demo_shows_the_stack_findings(cli):
    start = time.monotonic()
    r = cli("demo", "--json")
    took = time.monotonic() - start
    doc = json.loads(r.stdout)
    by = {c["id"]: c for c in doc["checks"]}
    assert by["npu.temperature"]["status"] == "fail"
    assert any("NPU 3 chip 0 is at 86 °C" in f["message"] for f in by["npu.temperature"]["findings"])
    assert by["npu.health"]["status"] == "warn"
    assert by["npu.processes"]["status"] == "fail"
    assert by["versions.driver-active"]["status"] == "fail"
    # driver 24.1.rc3 (C19) is listed by CANN 8.3.RC2's own compatible_version (issue 15)
    assert by["versions.driver-cann"]["status"] == "pass"
    assert any("toolkit's compatible_version" in f["message"]
               for f in by["versions.driver-cann"]["findings"])
    assert by["torch_npu.import"]["status"] == "fail"
    assert "libhccl.so" in by["torch_npu.import"]["findings"][0]["message"]
    assert any("built for CANN 9.1.0" in f["message"] for f in by["versions.matrix"]["findings"])
    assert by["versions.chip"]["status"] == "pass"
    assert by["container.devices"]["status"] == "pass"
    assert took < budget(10), took  # the process start dominates; the run itself is ~0.3 s


def test_collected_bundle_replays_the_stack_checks(cli, cli_exec_sysroot, sysroot, tmp_path):
    """Check and collect in-process (the test-only opt-in runs the tree's npu-smi script),
    replay through the real console script."""
    # the toolkit's list without the driver's C15: neither file names the other, a fail
    sysroot.write("/usr/local/Ascend/ascend-toolkit/8.3.RC2/x86_64-linux/ascend_toolkit_install.info",
                  TOOLKIT_832.replace("[V100R001C15],", ""))
    sysroot.write("/usr/local/Ascend/ascend-toolkit/8.3.RC2/version.cfg", VERSION_CFG)
    sysroot.symlink("/usr/local/Ascend/ascend-toolkit/latest", "8.3.RC2")
    sysroot.write("/usr/local/Ascend/driver/version.info", DRIVER)
    sysroot.write("/opt/t.txt", A2)
    sysroot.script("/usr/local/bin/npu-smi",
                   f'[ "$*" = info ] && exec cat {sysroot.path("/opt/t.txt")}\n'
                   "echo '        Health                         : OK'\n")
    only = ["--only", "versions.driver-cann", "--only", "versions.driver-active",
            "--only", "npu", "--only", "versions.cann-upgrade"]
    live = cli_exec_sysroot("check", "--json", "--root", str(sysroot), *only)
    out = tmp_path / "b.tar.gz"
    assert cli_exec_sysroot("collect", "--root", str(sysroot), "-o", str(out)).returncode == 0
    replay = cli("check", "--json", "--bundle", str(out), *only)
    a, b = json.loads(live.stdout), json.loads(replay.stdout)
    assert findings(a) == findings(b)
    assert ("versions.driver-cann", "fail") in {(i, s) for i, s, _ in findings(a)}


@pytest.mark.slow
def test_done_when_real_wheels_without_cann(cli):
    from tests.torchenv import build
    python, kind = build()
    r = cli("check", "--json", "--python", str(python), "--only", "versions",
            "--only", "torch_npu", timeout=300)
    doc = json.loads(r.stdout)
    msgs = [f["message"] for c in doc["checks"] for f in c["findings"]]
    assert r.returncode == 1
    assert any("torch_npu 2.14.0 requires torch==2.14.0.*; found 2.13.0" in m for m in msgs) \
        or kind != "torch+torch_npu"
    assert any("vllm_ascend 0.23.0 requires torch==2.10.0" in m for m in msgs)
    assert any("vllm_ascend 0.23.0 requires torch-npu==2.10.0.post4; found 2.14.0" in m
               for m in msgs)
    assert any("import torch_npu fails" in m and
               ("libhccl.so: cannot open shared object file" in m or kind != "torch+torch_npu")
               for m in msgs)
