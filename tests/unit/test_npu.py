"""npu-smi layouts (A2, A3 two-chip, 310P, 310B), key/value sub-commands, and the NPU checks
on sysroots where shell scripts stand in for npu-smi (healthy, hot, DCMI failure, hang)."""

from __future__ import annotations

import pytest

import ascend_doctor.probes.npusmi as npusmi
from ascend_doctor.checks.npu import health, hbm, processes, smi_runs, temperature
from ascend_doctor.probes.livepids import ProcessTable
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import ParseError
from ascend_doctor.model import Status
from ascend_doctor.probes.kbfact import gather_knowledge
from ascend_doctor.probes.npusmi import kv_get, parse_npu_smi_info, parse_npu_smi_kv
from tests.fixtures.npusmi import (A2, A3, COMMON, DCMI_8005, HEALTH_ALARM, HEALTH_CARD_OK,
                                   HEALTH_CHIP, P310B, P310P, smi_stub, with_temp_and_health)

NPU_CHECKS = ("npu.smi", "npu.health", "npu.temperature", "npu.hbm", "npu.processes")

KNOW = gather_knowledge()  # the KB fact, as the engine provides it


def test_parse_a2_table_and_process_section():
    info = parse_npu_smi_info(A2)
    assert (info.tool_version, info.driver_version) == ("24.1.rc3", "24.1.rc3")
    c0, c1 = info.chips
    assert (c0.npu, c0.name, c0.health, c0.power_w, c0.temp_c) == (0, "910B1", "OK", 94.6, 49)
    assert (c0.bus_id, c0.hbm_used_mb, c0.hbm_total_mb) == ("0000:C1:00.0", 3373, 65536)
    assert c1.hbm_used_mb == 20701, "the space before / may disappear"
    (p,) = info.processes
    assert (p.npu, p.chip, p.pid, p.name, p.mem_mb) == (0, 0, 124528, "python3.8", 17400)
    assert info.idle_npus == (1,)


def test_parse_a3_two_chips_per_npu():
    info = parse_npu_smi_info(A3)
    assert [(c.npu, c.chip, c.phy_id) for c in info.chips] == [(0, 0, 0), (0, 1, 1), (1, 0, 2),
                                                                (1, 1, 3)]
    assert info.chips[1].power_w is None, "the second chip's power is '-'"
    assert info.chips[3].hbm_used_mb == 10568 and info.npu_ids == [0, 1]
    assert info.processes[0].pid == 990711 and info.idle_npus == (0,)


def test_parse_310_layouts_without_hbm_column():
    p = parse_npu_smi_info(P310P)
    assert [(c.npu, c.chip, c.name) for c in p.chips] == [(1, 0, "310P3"), (1, 1, "310P3")]
    assert p.chips[0].hbm_total_mb is None and p.chips[0].device_used_total == (16302, 44280)
    assert p.chips[0].power_w is None and len(p.processes) == 2
    b = parse_npu_smi_info(P310B)
    assert (b.chips[0].health, b.chips[0].bus_id, b.chips[0].device_used_total) == (
        "Alarm", "NA", (3628, 15609))


def test_parse_kv_subcommands():
    pairs = parse_npu_smi_kv(HEALTH_CARD_OK)
    assert kv_get(pairs, "Health") == ["OK", "OK"] and kv_get(pairs, "NPU ID") == ["0"]
    assert dict(parse_npu_smi_kv(COMMON))["Temperature(C)"] == "41"
    assert kv_get(parse_npu_smi_kv(HEALTH_CHIP), "Error Code") == ["80E21007"]


def test_garbage_is_a_named_parse_error():
    with pytest.raises(ParseError):
        parse_npu_smi_info("command not found\n")
    with pytest.raises(ParseError):
        parse_npu_smi_kv("no pairs here\n")


def smi_script(root, table: str, health_text: str | None = None):
    smi_stub(root, table, **({"health": health_text} if health_text else {}))


def results(root, only=NPU_CHECKS):
    r = run(root.host(), config=RunConfig(only=only))
    return {x.check_id: x for x in r.results}


def test_healthy_a2_host_passes(sysroot):
    smi_script(sysroot, A2)
    for pid, name in ((124528, "python3.8"),):
        sysroot.write(f"/proc/{pid}/stat", f"{pid} ({name}) S 1 {pid} {pid} 0 -1\n")
        sysroot.write(f"/proc/{pid}/cmdline", f"{name}\0-m\0x\0")
    res = results(sysroot)
    assert {k: v.status for k, v in res.items()} == {
        "npu.smi": Status.PASS, "npu.health": Status.PASS, "npu.temperature": Status.PASS,
        "npu.hbm": Status.PASS, "npu.processes": Status.PASS}
    assert "2 NPU(s)" in res["npu.smi"].findings[0].message


def test_hot_warning_and_leaked_npu(sysroot):
    table = with_temp_and_health(A2, "| 1     910B1", 86, "Warning")
    table = with_temp_and_health(table, "| 0     910B1", 77)
    smi_script(sysroot, table)
    sysroot.mkdir("/proc/1")  # a process table without pid 124528: its memory leaked
    sysroot.write("/proc/1/stat", "1 (init) S 0 1 1 0 -1\n")
    sysroot.write("/proc/1/cmdline", "/sbin/init\0")
    res = results(sysroot)
    t = {f.subject: f for f in res["npu.temperature"].findings}
    assert t["NPU 1 chip 0"].status == Status.FAIL and "86 °C" in t["NPU 1 chip 0"].message
    assert t["NPU 0 chip 0"].status == Status.WARN and "77 °C" in t["NPU 0 chip 0"].message
    (h,) = [f for f in res["npu.health"].findings if f.status != Status.PASS]
    assert h.status == Status.WARN and h.subject == "NPU 1 chip 0" and "Warning" in h.message
    leak = [f for f in res["npu.processes"].findings if f.status == Status.FAIL]
    assert len(leak) == 1 and "17400 MB held by pid 124528" in leak[0].message


def test_health_detail_alarm_overrides_table_ok(sysroot):
    smi_script(sysroot, A2, health_text=HEALTH_ALARM)
    res = results(sysroot, ("npu.health",))
    fails = [f for f in res["npu.health"].findings if f.status == Status.FAIL]
    assert len(fails) == 2 and all("Alarm" in f.message for f in fails)
    # all three codes of the one `Error Code` line are named, with npu-smi's information
    assert "A4025021, 8C03A000, 8C084E00" in fails[0].message
    assert "ascend_monitor adda heart beat lost error" in fails[0].message
    assert len(fails[0].evidence["error_information"]) == 3


def test_hbm_over_90_percent_warns(sysroot):
    smi_script(sysroot, A2.replace("20701/ 65536", "64200/ 65536"))
    (f,) = [x for x in results(sysroot, ("npu.hbm",))["npu.hbm"].findings]
    assert f.status == Status.WARN and "64200 / 65536 MB" in f.message and "98.0 %" in f.message


def test_dcmi_failure_is_a_fail_with_its_output(sysroot):
    sysroot.script("/usr/local/bin/npu-smi", f"printf '{DCMI_8005}' >&2\nexit 255\n")
    res = results(sysroot)
    (f,) = res["npu.smi"].findings
    assert f.status == Status.FAIL and "exited 255" in f.message and "-8005" in f.message
    assert "ASC-NPU-004" in f.kb
    assert res["npu.temperature"].status == Status.SKIP


def test_hanging_npu_smi_is_an_error_naming_it(sysroot, monkeypatch):
    monkeypatch.setattr(npusmi, "SMI_TIMEOUT_S", 1.0)
    sysroot.script("/usr/local/bin/npu-smi", "exec sleep 1000\n")
    res = results(sysroot, ("npu.smi",))
    (f,) = res["npu.smi"].findings
    assert f.status == Status.ERROR and "npu-smi info" in f.message and "killed" in f.message


def test_missing_npu_smi_is_a_skip_naming_it(sysroot):
    res = results(sysroot, ("npu.smi",))
    (f,) = res["npu.smi"].findings
    assert f.status == Status.SKIP and "npu-smi" in f.message


def test_garbled_output_is_an_error(sysroot):
    sysroot.script("/usr/local/bin/npu-smi", "echo 'Segmentation fault'\n")
    (f,) = results(sysroot, ("npu.smi",))["npu.smi"].findings
    assert f.status == Status.ERROR and "cannot parse" in f.message


def test_rules_on_310_and_a3_facts():
    from ascend_doctor.host import CommandResult
    from ascend_doctor.probes.npusmi import NpuSmi
    for text in (P310B, A3):
        smi = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi",), 0, text.encode(), b"", 0.1),
                     parse_npu_smi_info(text))
        statuses = [f.status for f in health(smi)]
        assert (Status.FAIL in statuses) == (text is P310B)
        assert [f.status for f in temperature(smi)] == [Status.PASS]
        assert [f.status for f in hbm(smi, None)] == [Status.PASS]
        assert smi_runs(smi, KNOW)


def _a2_eight(used_mb: int, holders: dict[int, tuple[int, str]]) -> str:
    """An 8-NPU A2 table in the real layout of A2 above, one holder row per NPU."""
    bar = "+===========================+===============+====================================================+\n"
    rows = A2.split(bar)[0] + bar
    for n in range(8):
        rows += (f"| {n:<5} 910B1               | OK            | 94.6        49                0    / 0             |\n"
                 f"| 0                         | 0000:C{n}:00.0  | 0           0    / 0          {used_mb:<5}/ 65536         |\n"
                 + bar)
    rows += ("+---------------------------+---------------+----------------------------------------------------+\n"
             "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n" + bar)
    for n, (pid, name) in sorted(holders.items()):
        rows += (f"| {n:<7} 0                 | {pid:<13} | {name:<24} | {used_mb - 3000:<23} |\n"
                 "+---------------------------+---------------+----------------------------------------------------+\n")
    return rows


def _container_service(names: list[str]):
    from ascend_doctor.host import ProcInfo
    from ascend_doctor.probes.devices import ContainerInfo
    from ascend_doctor.probes.procs import ServiceProcess, ServiceProcesses
    api = ProcInfo(7, 1, "python3", ("python3", "-m", "vllm.entrypoints.openai.api_server"))
    kids = tuple(ProcInfo(100 + i, 7, n, (n,)) for i, n in enumerate(names))
    return (ServiceProcesses((ServiceProcess(api, kids),)),
            ContainerInfo(True, ("/.dockerenv",), {}), {7, *(k.pid for k in kids)})


def test_container_service_at_point_nine_is_one_info_not_sixteen_warnings():
    """8 workers at --gpu-memory-utilization 0.9 in a container: npu-smi lists host pids."""
    from ascend_doctor.host import CommandResult
    from ascend_doctor.probes.npusmi import NpuSmi
    workers = [f"VLLMWorker_TP{i}" for i in range(8)]
    text = _a2_eight(60000, {n: (3_000_100 + n, workers[n][:15]) for n in range(8)})
    smi = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi",), 0, text.encode(), b"", 0.1),
                 parse_npu_smi_info(text))
    procs, ctr, pids = _container_service(workers)
    hb = list(hbm(smi, procs, ctr))
    assert [f.status for f in hb] == [Status.INFO] and "8 NPU chip(s)" in hb[0].message
    pr = [f for f in processes(smi, ProcessTable(frozenset(pids)), ctr, procs) if f.status != Status.INFO]
    assert pr == []
    # the same table on a bare host whose process table lacks those pids: one fail, not eight
    bare = [f for f in processes(smi, ProcessTable(frozenset({1})), None, None) if f.status == Status.FAIL]
    assert len(bare) == 1 and "8 NPU process(es)" in bare[0].message
    # a foreign process in the container holding a full NPU is still a warning
    text2 = _a2_eight(60000, {0: (3_000_100, workers[0][:15]), 1: (4_000_000, "sshd")})
    smi2 = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi",), 0, text2.encode(), b"", 0.1),
                  parse_npu_smi_info(text2))
    hb2 = {f.status: f for f in hbm(smi2, procs, ctr)}
    assert Status.WARN in hb2 and "pid 4000000 sshd" in hb2[Status.WARN].message
    assert "NPU 0" in hb2[Status.INFO].subject


def test_processes_is_a_rule_over_the_table_fact():
    """npu.processes reads no host: an unreadable table is a skip naming why, never a crash."""
    from ascend_doctor.host import CommandResult
    from ascend_doctor.probes.npusmi import NpuSmi
    smi = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi",), 0, A2.encode(), b"", 0.1),
                 parse_npu_smi_info(A2))
    (f,) = processes(smi, ProcessTable(frozenset(), "/proc: permission denied"), None, None)
    assert f.status == Status.SKIP and "permission denied" in f.message
    held = [f for f in processes(smi, ProcessTable(frozenset({124528})), None, None)]
    assert all(f.status != Status.FAIL for f in held)
