"""Hanging and flooding commands, and checks that never return: each is named within its
timeout and the run always completes with a report."""

from __future__ import annotations

import os
import time

import pytest

from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import SourceMissing
from ascend_doctor.host import Host
from ascend_doctor.model import Category, Finding, Status
from ascend_doctor.registry import CheckSpec, Registry, check, provider
from dataclasses import dataclass
from tests.timing import budget

NPU_SMI = "/usr/local/Ascend/driver/tools/npu-smi"


def hanging_npu_smi(sysroot, seconds: int = 60):
    """An npu-smi stand-in that hangs the way a wedged driver does (and forks a child)."""
    pidfile = sysroot.path("/tmp/npu-smi.child")
    sysroot.mkdir("/tmp")
    sysroot.script(NPU_SMI, f"sleep {seconds} &\necho $! > {pidfile}\nwait\n")
    return pidfile


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_run_timeout_kills_the_whole_group(sysroot):
    pidfile = hanging_npu_smi(sysroot)
    t0 = time.monotonic()
    res = sysroot.host().run(["npu-smi", "info"], timeout=1.0)
    took = time.monotonic() - t0
    assert res.timed_out and res.returncode is None and not res.ok
    assert took < budget(3.0, cap=30), f"run took {took:.1f} s for a 1 s timeout"
    assert "`npu-smi info` did not finish within" in res.describe_failure()
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the npu-smi child (sleep) survived the timeout"


def test_flood_is_capped(sysroot):
    sysroot.script("/usr/bin/flood", "exec /usr/bin/yes 'NPU   0  910B3  OK  93.6 W'\n")
    sysroot.script("/usr/bin/burst", "head -c 50000000 /dev/zero | tr '\\0' x\necho done >&2\n")
    host = sysroot.host()
    t0 = time.monotonic()
    res = host.run(["flood"], timeout=1.0, cap=64 * 1024)
    assert res.timed_out and res.truncated and len(res.stdout) == 64 * 1024
    assert time.monotonic() - t0 < budget(3.0, cap=15)  # yes never ends
    res = host.run(["burst"], timeout=20.0, cap=100_000)
    assert res.ok and res.truncated and len(res.stdout) == 100_000
    assert res.stderr == b"done\n"


# -- checks that hang, through a custom Registry with test-only check modules ---------------
@dataclass(frozen=True)
class NpuInfo:
    text: str


@provider
def gather_npu(host: Host) -> NpuInfo:
    res = host.run(["npu-smi", "info"], timeout=60.0)  # longer than the check's timeout
    if res.timed_out:
        raise SourceMissing("npu-smi info", res.describe_failure())
    return NpuInfo(res.text)


@check("fault.npu", title="npu-smi answers", category=Category.NPU)
def npu_check(npu: NpuInfo):
    yield Finding.passed(f"npu-smi printed {len(npu.text)} bytes")


@check("fault.npu_twice", title="a second asker of the same hanging fact", category=Category.NPU)
def npu_check_2(npu: NpuInfo):
    yield Finding.passed("unreachable")


@check("fault.sleeper", title="a check that never returns", category=Category.SERVICE, timeout=0.5)
def sleeper():
    time.sleep(3600)
    yield Finding.passed("unreachable")


@check("fault.healthy", title="a healthy check", category=Category.LIBS)
def healthy():
    yield Finding.passed("fine")


def _registry() -> Registry:
    import sys
    reg = Registry()
    reg.add_module(sys.modules[__name__])
    return reg


def test_hanging_checks_time_out_and_the_run_completes(sysroot):
    hanging_npu_smi(sysroot, seconds=60)  # killed when its check is abandoned
    t0 = time.monotonic()
    report = run(sysroot.host(), registry=_registry(), config=RunConfig(timeout=1.0))
    took = time.monotonic() - t0
    assert took < budget(3.5, cap=30), f"the run took {took:.1f} s"  # npu-smi sleeps 60 s
    by = {r.check_id: r for r in report.results}
    assert set(by) == {"fault.npu", "fault.npu_twice", "fault.sleeper", "fault.healthy"}
    assert by["fault.healthy"].status == Status.PASS
    assert by["fault.sleeper"].status == Status.ERROR
    assert by["fault.sleeper"].findings[0].message == \
        "timed out after 0.5 s (the check was abandoned)"
    # both askers of NpuInfo share one deadline: whichever computes it is abandoned first, and
    # the other reports the same timeout or, if it gets there first, the abandoned fact
    messages = {by[cid].findings[0].message for cid in ("fault.npu", "fault.npu_twice")}
    assert all(by[cid].status == Status.ERROR for cid in ("fault.npu", "fault.npu_twice"))
    assert "timed out after 1 s (the check was abandoned)" in messages
    assert messages <= {"timed out after 1 s (the check was abandoned)",
                        "could not gather NpuInfo: abandoned: the check computing it timed out"}


def test_npu_smi_timing_out_inside_its_own_budget_is_named(sysroot):
    sysroot.script(NPU_SMI, "sleep 60\n")

    @provider
    def quick_npu(host: Host) -> NpuInfo:
        res = host.run(["npu-smi", "info"], timeout=0.5)
        if res.timed_out:
            raise SourceMissing("npu-smi info", res.describe_failure())
        return NpuInfo(res.text)

    reg = Registry()
    reg.add_check(npu_check.__ascend_doctor_check__)
    reg.add_provider(quick_npu.__ascend_doctor_provider__)
    report = run(sysroot.host(), registry=reg, config=RunConfig(timeout=5.0))
    (r,) = report.results
    assert r.status == Status.SKIP
    assert "`npu-smi info` did not finish within 0.5 s (killed)" in r.findings[0].message


def test_cli_run_with_a_hanging_npu_smi_completes(cli_exec_sysroot, sysroot):
    """The CLI over a sysroot whose npu-smi hangs (in-process: only a test may let --root run
    the tree's scripts): a report, within the timeout."""
    hanging_npu_smi(sysroot)
    from tests.fixtures.sysroots import broken_ldconf
    broken_ldconf(sysroot)
    t0 = time.monotonic()
    r = cli_exec_sysroot("check", "--root", str(sysroot), "--json", "--timeout", "2")
    assert r.returncode in (0, 1), r.stderr
    assert time.monotonic() - t0 < 30
    import json
    doc = json.loads(r.stdout)
    assert doc["summary"]["fail"] >= 1  # the ldconf check still ran
    for c in doc["checks"]:
        if c["status"] == "error":
            assert c["findings"][0]["message"]
