"""An abandoned check's commands die with it (issue 9).

The stand-in npu-smi hangs for 60 s and forks a `sleep 60` of its own; the checks' timeouts
are 1 s. The run must end near 1 s, name the timeout, and leave no process behind: neither
the command's group nor a zombie child of the doctor.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass

import psutil
import pytest

from ascend_doctor import cancel
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.facts import ABANDONED, FactStore
from ascend_doctor.host import Host, run_capped
from ascend_doctor.model import Category, Finding, Status
from ascend_doctor.registry import Registry, check, provider
from tests.timing import budget

NPU_SMI = "/usr/local/Ascend/driver/tools/npu-smi"


def hanging_npu_smi(sysroot, seconds: int = 60):
    """npu-smi that hangs like a wedged driver; every pid it makes is appended to a file."""
    pids = sysroot.path("/tmp/npu-smi.pids")
    sysroot.mkdir("/tmp")
    sysroot.script(NPU_SMI, f"echo $$ >> {pids}\nsleep {seconds} &\necho $! >> {pids}\n"
                            f"sleep {seconds}\n")
    return pids


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting for its parent)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pids(pidfile) -> list[int]:
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:  # the script writes its pids as it starts
        if pidfile.exists():
            pids = [int(x) for x in pidfile.read_text().split()]
            if len(pids) >= 2 and len(pids) % 2 == 0:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"the npu-smi stand-in never wrote its pids to {pidfile}")


def assert_all_dead(pids: list[int], within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    survivors = [p for p in pids if _alive(p)]
    assert not survivors, f"processes of the abandoned check survived: {survivors}"


def assert_no_children() -> None:
    """No child of this (doctor) process remains, alive or zombie."""
    kids = psutil.Process().children(recursive=True)
    assert not kids, f"the doctor left children behind: {[(k.pid, k.name()) for k in kids]}"


# -- test-only checks, in custom registries --------------------------------------------------
@check("cancel.direct", title="a check that runs a hanging npu-smi itself", category=Category.NPU)
def direct(host: Host):
    res = host.run(["npu-smi", "info"], timeout=60.0)
    yield Finding.passed(f"unreachable: {res.describe_failure()}")


@dataclass(frozen=True)
class SmiText:
    text: str


@provider
def smi_text(host: Host) -> SmiText:
    return SmiText(host.run(["npu-smi", "info"], timeout=60.0).text)


@check("cancel.owner", title="computes the shared fact, times out", category=Category.NPU,
       timeout=1.0)
def owner(smi: SmiText):
    yield Finding.passed("unreachable")


@check("cancel.waiter", title="waits for the same fact, with a long timeout",
       category=Category.NPU, timeout=30.0)
def waiter(store: FactStore):
    time.sleep(0.3)  # let cancel.owner be the one computing SmiText
    smi = store.get(SmiText)
    yield Finding.passed(f"unreachable: {smi}")


@dataclass(frozen=True)
class Stuck:
    pass


@provider
def stuck(host: Host) -> Stuck:
    time.sleep(8)  # pure Python, nothing to kill: waiters must still stop waiting
    return Stuck()


@check("cancel.stuck-owner", title="computes a fact stuck in Python", category=Category.NPU,
       timeout=1.0)
def stuck_owner(s: Stuck):
    yield Finding.passed("unreachable")


@check("cancel.stuck-waiter", title="waits for the stuck fact", category=Category.NPU,
       timeout=30.0)
def stuck_waiter(store: FactStore):
    time.sleep(0.3)
    store.get(Stuck)
    yield Finding.passed("unreachable")


def _registry(*funcs, providers=()) -> Registry:
    reg = Registry()
    for f in funcs:
        reg.add_check(f.__ascend_doctor_check__)
    for p in providers:
        reg.add_provider(p.__ascend_doctor_provider__)
    return reg


# -- tests -------------------------------------------------------------------------------------
def test_abandoned_check_kills_its_command(sysroot):
    pidfile = hanging_npu_smi(sysroot)
    t0 = time.monotonic()
    report = run(sysroot.host(), registry=_registry(direct), config=RunConfig(timeout=1.0))
    took = time.monotonic() - t0
    assert took < budget(5.0, cap=30), f"the run took {took:.1f} s for a 1 s check timeout"  # the command sleeps 60 s
    (r,) = report.results
    assert r.status == Status.ERROR
    assert r.findings[0].message == "timed out after 1 s (the check was abandoned)"
    pids = _pids(pidfile)
    assert len(pids) == 2  # the script and its `sleep 60`
    assert_all_dead(pids)
    assert_no_children()


def test_waiter_of_an_abandoned_fact_gets_an_error(sysroot):
    pidfile = hanging_npu_smi(sysroot)
    t0 = time.monotonic()
    report = run(sysroot.host(), registry=_registry(owner, waiter, providers=[smi_text]),
                 config=RunConfig(timeout=30.0))
    took = time.monotonic() - t0
    assert took < budget(5.0, cap=25), f"the run took {took:.1f} s: the waiter hung on the abandoned fact"
    by = {r.check_id: r for r in report.results}
    assert by["cancel.owner"].status == Status.ERROR
    assert by["cancel.owner"].findings[0].message.startswith("timed out after 1 s")
    w = by["cancel.waiter"]
    assert w.status == Status.ERROR
    assert w.findings[0].message == f"could not gather SmiText: {ABANDONED}"
    assert w.duration_s < budget(4.0, cap=25)  # its own timeout is 30 s
    assert_all_dead(_pids(pidfile))
    assert_no_children()


def test_waiter_stops_even_when_the_provider_is_stuck_in_python(sysroot):
    t0 = time.monotonic()
    report = run(sysroot.host(),
                 registry=_registry(stuck_owner, stuck_waiter, providers=[stuck]),
                 config=RunConfig(timeout=30.0))
    assert time.monotonic() - t0 < budget(5.0, cap=7)  # the provider is stuck for 8 s
    by = {r.check_id: r for r in report.results}
    assert by["cancel.stuck-owner"].findings[0].message.startswith("timed out after 1 s")
    assert by["cancel.stuck-waiter"].findings[0].message == f"could not gather Stuck: {ABANDONED}"


def test_cli_check_only_npu_with_a_hanging_npu_smi(cli_exec_sysroot, sysroot):
    """The CLI (in-process: only a test may let --root run the tree's npu-smi):
    `check --only npu --timeout 1` ends near 1 s and kills every npu-smi."""
    pidfile = hanging_npu_smi(sysroot)
    t0 = time.monotonic()
    r = cli_exec_sysroot("check", "--root", str(sysroot), "--only", "npu", "--json", "--timeout", "1")
    took = time.monotonic() - t0
    assert r.returncode in (0, 1), r.stderr
    assert took < budget(8.0, cap=40), f"the CLI took {took:.1f} s with --timeout 1"  # with interpreter start; smi sleeps 60 s
    doc = json.loads(r.stdout)
    smi = {c["id"]: c for c in doc["checks"] if c["id"].startswith("npu.")}
    assert set(smi) >= {"npu.smi", "npu.health", "npu.hbm"}
    # they share the NpuSmi fact and one deadline: the check computing it is abandoned, the
    # others time out too or, a few ms earlier than their own deadline, get the failed fact
    messages = {c["findings"][0]["message"] for c in smi.values()}
    assert all(c["status"] == "error" for c in smi.values())
    # the one computing it was abandoned: an npu.* check, or under load as often another
    # check `--only npu` selects that asks for NpuSmi first (pcie.link, versions.chip, …)
    assert "timed out after 1 s (the check was abandoned)" in {
        f["message"] for c in doc["checks"] for f in c["findings"]}
    assert messages <= {"timed out after 1 s (the check was abandoned)",
                        f"could not gather NpuSmi: {ABANDONED}"}
    pids = _pids(pidfile)
    assert_all_dead(pids)  # the CLI has exited: it must have killed them, not orphaned them


def test_run_capped_without_a_token_is_unchanged(sysroot):
    """Outside any check (no token) the command's own timeout still applies."""
    hanging_npu_smi(sysroot, seconds=5)
    res = sysroot.host().run(["npu-smi", "info"], timeout=0.5)
    assert res.timed_out and res.returncode is None
    assert_no_children()


def test_cancel_kills_a_running_command_and_raises():
    token = cancel.CancelToken("t")
    box: dict[str, object] = {}

    def target() -> None:
        try:
            run_capped(["sleep", "60"], ["sleep", "60"], 60.0, 1024, dict(os.environ), token)
        except cancel.Cancelled as exc:
            box["exc"] = exc

    t = threading.Thread(target=target)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    token.cancel("the check timed out after 1 s")
    assert_no_children()  # cancel() returned after killing and reaping the group
    t.join(timeout=budget(3, cap=30))
    assert not t.is_alive() and time.monotonic() - t0 < budget(3, cap=30)  # sleep 60
    assert isinstance(box.get("exc"), cancel.Cancelled)
    assert box["exc"].reason == "the check timed out after 1 s"
    with pytest.raises(cancel.Cancelled):  # a cancelled check starts nothing new
        run_capped(["true"], ["true"], 5.0, 1024, dict(os.environ), token)


def test_cancelled_token_interrupts_host_sleep(sysroot):
    token = cancel.CancelToken("t")
    threading.Timer(0.2, token.cancel, args=("timed out",)).start()
    t0 = time.monotonic()
    with cancel.bound(token), pytest.raises(cancel.Cancelled):
        sysroot.host().sleep(30)
    assert time.monotonic() - t0 < budget(2, cap=20)  # the sleep is 30 s
    assert cancel.current() is None


def test_collect_records_the_killed_command_and_the_replay_names_it(sysroot):
    """RecordingHost delegates (the same kill), and the bundle says why the answer is absent."""
    from ascend_doctor.bundle import BundleData, BundleHost, RecordingHost

    pidfile = hanging_npu_smi(sysroot)
    rec = RecordingHost(sysroot.host())
    t0 = time.monotonic()
    report = run(rec, registry=_registry(direct), config=RunConfig(timeout=1.0))
    assert time.monotonic() - t0 < budget(5.0, cap=30)
    assert report.results[0].findings[0].message.startswith("timed out after 1 s")
    assert_all_dead(_pids(pidfile))
    assert_no_children()
    data = BundleData.load(rec.finish("sysroot", {}).to_bytes())
    replay = run(BundleHost(data), registry=_registry(direct), config=RunConfig(timeout=5.0))
    (r,) = replay.results
    assert r.status == Status.ERROR, r.findings[0].message
    assert r.findings[0].message == ("cannot read npu-smi info: killed at collection time: "
                                     "the check timed out after 1 s")
