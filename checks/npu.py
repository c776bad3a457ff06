"""NPU health from npu-smi: the tool itself, per-chip health, temperature, HBM, processes.

Thresholds come from the seeds: temperature below 75 °C is normal (000_93c34712512482cd.txt:
"温度<75°C"), at 85 °C the 910B throttles and it must alarm (000 and 003_d72edf74e71c5e11.txt:
">85℃告警"); HBM used above 90 % for long needs capacity (003: "显存利用率（持续>90%需扩容）").
"""

from __future__ import annotations

from typing import Iterator

from doctor.errors import SourceError, SourceMissing
from doctor.host import Host
from doctor.model import Category, Finding
from doctor.probes.devices import ContainerInfo
from doctor.probes.npusmi import NpuSmi, kv_get
from doctor.probes.procs import ServiceProcesses
from doctor.registry import check

TEMP_WARN_C = 75
TEMP_FAIL_C = 85
HBM_WARN_PCT = 90.0
# npu-smi info (15 s) plus at most one hung sub-command (15 s), then margin
SMI_CHECK_TIMEOUT_S = 45.0
HEALTH_RANK = {"OK": 0, "Warning": 1, "Alarm": 2, "Critical": 3, "UNKNOWN": 2}


def _kb_for_output(text: str) -> list[str]:
    import knowledge
    return [m.entry.id for m in knowledge.load().match_lines(text.splitlines())][:3]


def _unusable(smi: NpuSmi) -> Finding | None:
    if smi.info is None:
        return Finding.skip("npu-smi info did not give a table (see npu.smi)")
    return None


@check("npu.smi", title="npu-smi answers", category=Category.NPU, tags=("npu",),
       timeout=SMI_CHECK_TIMEOUT_S)
def smi_runs(smi: NpuSmi) -> Iterator[Finding]:
    cmd = " ".join(smi.argv)
    if smi.result.timed_out:
        yield Finding.error(f"`{cmd}` did not answer within {smi.result.duration_s:.1f} s and was "
                            "killed: the driver or a device is hung (npu-smi blocks in DCMI)",
                            subject="npu-smi", evidence={"output": smi.output[-2000:]},
                            kb="ASC-NPU-004")
        return
    if smi.result.returncode != 0:
        kb = _kb_for_output(smi.output) or ["ASC-NPU-004"]
        last = (smi.output.strip().splitlines() or ["no output"])[-1]
        yield Finding.fail(f"`{cmd}` exited {smi.result.returncode}: {last}", subject="npu-smi",
                           evidence={"output": smi.output[-4000:]}, kb=kb)
        return
    if smi.parse_error:
        yield Finding.error(f"cannot parse `{cmd}` output: {smi.parse_error}", subject="npu-smi",
                            evidence={"output": smi.output[-2000:]})
        return
    info = smi.info
    hung = [s for s in smi.health.values() if s.timed_out]
    if hung:
        yield Finding.error(f"`{' '.join(hung[0].argv)}` did not answer: {hung[0].failure}",
                            subject="npu-smi", kb="ASC-NPU-004")
    yield Finding.passed(f"npu-smi {info.tool_version} (driver {info.driver_version}): "
                         f"{len(info.npu_ids)} NPU(s), {len(info.chips)} chip(s)",
                         evidence={"npus": info.npu_ids})


@check("npu.health", title="Every NPU reports health OK", category=Category.NPU,
       tags=("npu", "health"), timeout=SMI_CHECK_TIMEOUT_S)
def health(smi: NpuSmi) -> Iterator[Finding]:
    skip = _unusable(smi)
    if skip:
        yield skip
        return
    bad = 0
    for chip in smi.info.chips:
        detail = smi.health.get(chip.npu)
        words = [chip.health] + (kv_get(detail.pairs, "Health") if detail else [])
        words += kv_get(detail.pairs, "Health Status") if detail else []
        worst = max(words, key=lambda w: HEALTH_RANK.get(w, 2))
        codes = [c for c in (kv_get(detail.pairs, "Error Code") if detail else []) if c != "NA"]
        subject = f"NPU {chip.npu} chip {chip.chip}"
        msg = (f"{subject} ({chip.name}, {chip.bus_id}) health {worst}"
               + (f", error code {', '.join(codes)}" if codes else ""))
        rank = HEALTH_RANK.get(worst, 2)
        if rank == 0:
            continue
        bad += 1
        ev = {"table": chip.health, "detail": words[1:], "error_codes": codes}
        if rank == 1:
            yield Finding.warn(msg + " (minor fault)", subject=subject, evidence=ev, kb="ASC-NPU-001")
        else:
            yield Finding.fail(msg + (" (device absent or not started)" if worst == "UNKNOWN"
                                      else " (major fault)" if rank == 2 else " (critical fault)"),
                               subject=subject, evidence=ev, kb="ASC-NPU-001")
    for npu, sub in sorted(smi.health.items()):
        if sub.failure and not sub.timed_out:
            yield Finding.warn(f"`{' '.join(sub.argv)}` failed: {sub.failure}",
                               subject=f"NPU {npu}")
    if not bad:
        yield Finding.passed(f"all {len(smi.info.chips)} chip(s) report health OK")


@check("npu.temperature", title="NPU temperatures are below 75 °C", category=Category.NPU,
       tags=("npu", "health"), timeout=SMI_CHECK_TIMEOUT_S)
def temperature(smi: NpuSmi) -> Iterator[Finding]:
    skip = _unusable(smi)
    if skip:
        yield skip
        return
    temps = {f"{c.npu}/{c.chip}": c.temp_c for c in smi.info.chips}
    bad = 0
    for c in smi.info.chips:
        if c.temp_c is None:
            continue
        subject = f"NPU {c.npu} chip {c.chip}"
        if c.temp_c >= TEMP_FAIL_C:
            bad += 1
            yield Finding.fail(f"{subject} is at {c.temp_c} °C (≥ {TEMP_FAIL_C} °C: the chip "
                               "throttles; check fans and airflow)", subject=subject,
                               evidence={"temp_c": c.temp_c, "all": temps}, kb="ASC-NPU-002")
        elif c.temp_c >= TEMP_WARN_C:
            bad += 1
            yield Finding.warn(f"{subject} is at {c.temp_c} °C (≥ {TEMP_WARN_C} °C, normal is "
                               f"below; throttling starts at {TEMP_FAIL_C} °C)", subject=subject,
                               evidence={"temp_c": c.temp_c, "all": temps}, kb="ASC-NPU-002")
    if not bad:
        known = [t for t in temps.values() if t is not None]
        yield Finding.passed(f"hottest chip {max(known)} °C (< {TEMP_WARN_C} °C)" if known else
                             "npu-smi reports no temperatures", evidence={"all": temps})


@check("npu.hbm", title="NPU memory (HBM) has headroom", category=Category.NPU,
       tags=("npu", "memory"), timeout=SMI_CHECK_TIMEOUT_S)
def hbm(smi: NpuSmi, procs: ServiceProcesses | None) -> Iterator[Finding]:
    skip = _unusable(smi)
    if skip:
        yield skip
        return
    service = set()
    if procs is not None:
        for s in procs.servers:
            service |= {s.pid} | {c.pid for c in s.children}
    bad = 0
    for c in smi.info.chips:
        ut = c.device_used_total
        if ut is None or ut[1] <= 0:
            continue
        used, total = ut
        pct = 100.0 * used / total
        if pct < HBM_WARN_PCT:
            continue
        holders = [p for p in smi.info.processes if (p.npu, p.chip) == (c.npu, c.chip)]
        subject = f"NPU {c.npu} chip {c.chip}"
        ev = {"used_mb": used, "total_mb": total, "pct": round(pct, 1),
              "holders": [(p.pid, p.name, p.mem_mb) for p in holders]}
        who = ", ".join(f"pid {p.pid} {p.name} {p.mem_mb} MB" for p in holders) or "no process"
        if holders and all(p.pid in service for p in holders):
            yield Finding.info(f"{subject}: HBM {used} / {total} MB ({pct:.1f} %), held by the "
                               f"vLLM service ({who}): vLLM preallocates --gpu-memory-utilization",
                               subject=subject, evidence=ev)
            continue
        bad += 1
        yield Finding.warn(f"{subject}: HBM {used} / {total} MB used ({pct:.1f} % ≥ "
                           f"{HBM_WARN_PCT:.0f} %), held by {who}", subject=subject,
                           evidence=ev, kb="ASC-NPU-003")
    if not bad:
        pcts = [100.0 * c.device_used_total[0] / c.device_used_total[1]
                for c in smi.info.chips if c.device_used_total and c.device_used_total[1]]
        yield Finding.passed(f"highest HBM use {max(pcts):.1f} % (< {HBM_WARN_PCT:.0f} %)"
                             if pcts else "npu-smi reports no HBM figures")


@check("npu.processes", title="NPU memory belongs to live processes", category=Category.NPU,
       tags=("npu", "memory", "processes"), timeout=SMI_CHECK_TIMEOUT_S)
def processes(smi: NpuSmi, host: Host, container: ContainerInfo | None) -> Iterator[Finding]:
    skip = _unusable(smi)
    if skip:
        yield skip
        return
    per_npu: dict[int, list[str]] = {}
    for p in smi.info.processes:
        per_npu.setdefault(p.npu, []).append(f"{p.pid} {p.name} ({p.mem_mb} MB)")
    listing = "; ".join(f"NPU {n}: {', '.join(v)}" for n, v in sorted(per_npu.items()))
    ev = {"per_npu": per_npu, "idle": list(smi.info.idle_npus)}
    if not smi.info.processes:
        yield Finding.passed("no process holds NPU memory"
                             + ("" if smi.info.has_process_section else
                                " (npu-smi printed no process section)"), evidence=ev)
        return
    try:
        live = {p.pid for p in host.processes()}
    except (SourceMissing, SourceError) as exc:
        yield Finding.skip(f"cannot compare with the process table: {exc}")
        return
    ghosts = [p for p in smi.info.processes if p.pid not in live]
    in_ctr = container is not None and container.in_container
    for p in ghosts:
        msg = (f"NPU {p.npu} chip {p.chip}: {p.mem_mb} MB held by pid {p.pid} ({p.name}), "
               "which is not in the process table")
        ev = {"pid": p.pid, "name": p.name, "mem_mb": p.mem_mb}
        if in_ctr:
            yield Finding.warn(msg + " — in a container npu-smi shows host pids, so it may live "
                               "outside this pid namespace; check on the host",
                               subject=f"NPU {p.npu}", evidence=ev, kb="ASC-NPU-005")
        else:
            yield Finding.fail(msg + ": device memory leaked by an exited process (reset the "
                               "NPU or find the zombie)", subject=f"NPU {p.npu}", evidence=ev,
                               kb="ASC-NPU-005")
    if not ghosts:
        yield Finding.passed(f"all {len(smi.info.processes)} NPU process(es) are alive: {listing}",
                             evidence=ev)
    else:
        yield Finding.info(f"processes per NPU: {listing}", evidence=ev)
