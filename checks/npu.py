"""NPU health from npu-smi: the tool itself, per-chip health, temperature, HBM, processes.

Thresholds come from the seeds: temperature below 75 °C is normal (000_93c34712512482cd.txt:
"温度<75°C"), at 85 °C the 910B throttles and it must alarm (000 and 003_d72edf74e71c5e11.txt:
">85℃告警"); HBM used above 90 % for long needs capacity (003: "显存利用率（持续>90%需扩容）").
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterator

from ascend_doctor.i18n import N_, T, Texts, join
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.devices import ContainerInfo
from ascend_doctor.probes.kbfact import Knowledge
from ascend_doctor.probes.npusmi import NpuBoard, NpuSmi, NpuSmiInfo
from ascend_doctor.probes.npusmi_detail import EccCounters, NpuDetail
from ascend_doctor.probes.procs import ServiceProcesses
from ascend_doctor.probes.livepids import ProcessTable
from ascend_doctor.registry import check

TEMP_WARN_C = 75
TEMP_FAIL_C = 85
HBM_WARN_PCT = 90.0
# npu-smi info (15 s) plus at most one hung sub-command (15 s), plus the sub-commands that
# answer: an A3 node asks 16 dies' health and 8 boards, then (npu.ecc) 16-32 ECC samples, at
# roughly 0.3-1 s per npu-smi call on real hosts
SMI_CHECK_TIMEOUT_S = 90.0
HEALTH_RANK = {"OK": 0, "Warning": 1, "Alarm": 2, "Critical": 3, "UNKNOWN": 2}


def _kb_for_output(know: Knowledge, text: str) -> list[str]:
    return [m.entry.id for m in know.match_lines(text.splitlines())][:3]


def _with_table(smi: NpuSmi, rule: Callable[[NpuSmi], Iterator[Finding]]) -> Iterator[Finding]:
    """The rule over npu-smi's table, or one skip when npu-smi gave none (npu.smi says why)."""
    if smi.info is None:
        yield Finding.skip(T("npu-smi info did not give a table (see npu.smi)"))
        return
    yield from rule(smi)


@check("npu.smi", title="npu-smi answers", category=Category.NPU, tags=("npu",),
       timeout=SMI_CHECK_TIMEOUT_S)
def smi_runs(smi: NpuSmi, know: Knowledge,
             detail: NpuDetail | None = None) -> Iterator[Finding]:
    cmd = " ".join(smi.argv)
    if smi.result.timed_out:
        yield Finding.error(T("`{cmd}` did not answer within {s} s and was killed: the driver or "
                              "a device is hung (npu-smi blocks in DCMI)", cmd=cmd,
                              s=f"{smi.result.duration_s:.1f}"),
                            subject="npu-smi", evidence={"output": smi.output[-2000:]},
                            kb="ASC-NPU-004")
        return
    if smi.result.returncode != 0:
        kb = _kb_for_output(know, smi.output) or ["ASC-NPU-004"]
        last = (smi.output.strip().splitlines() or ["no output"])[-1]
        yield Finding.fail(T("`{cmd}` exited {rc}: {last}", cmd=cmd, rc=smi.result.returncode,
                             last=last), subject="npu-smi",
                           evidence={"output": smi.output[-4000:]}, kb=kb)
        return
    if smi.parse_error:
        yield Finding.error(T("cannot parse `{cmd}` output: {reason}", cmd=cmd,
                              reason=smi.parse_error), subject="npu-smi",
                            evidence={"output": smi.output[-2000:]})
        return
    info = smi.info
    hung = smi.hung
    if hung is not None:
        yield Finding.error(T("`{cmd}` did not answer: {reason}", cmd=" ".join(hung.argv),
                              reason=hung.failure),
                            subject="npu-smi", kb="ASC-NPU-004")
    yield from _boards(smi)
    yield Finding.passed(T("npu-smi {tool} (driver {driver}): {npus} NPU(s), {chips} chip(s)",
                           tool=info.tool_version, driver=info.driver_version,
                           npus=len(info.npu_ids), chips=len(info.chips)),
                         evidence={"npus": info.npu_ids,
                                   "chips": chip_table(info, detail, smi),
                                   "boards": {n: _board_ev(b) for n, b in _answered(smi).items()},
                                   # why the rows carry no logic id (npu-smi info -m failed)
                                   "map_error": detail.map_failure if detail else None})


def _answered(smi: NpuSmi) -> dict[int, NpuBoard]:
    return {n: s.value for n, s in sorted(smi.boards.items()) if isinstance(s.value, NpuBoard)}


def _board_ev(b: NpuBoard) -> dict:
    return {"software": b.software_version, "firmware": b.firmware_version,
            "compatibility": b.compatibility, "bus": b.bus}


def _boards(smi: NpuSmi) -> Iterator[Finding]:
    """``npu-smi info -t board`` per card: a card on other firmware than the rest (missed by
    an upgrade), or one whose firmware the driver does not accept (``Compatibility``)."""
    boards = _answered(smi)
    for npu, sub in sorted(smi.boards.items()):
        if sub.failure and not sub.timed_out:
            yield Finding.warn(T("`{cmd}` failed: {reason}", cmd=" ".join(sub.argv),
                                 reason=sub.failure), subject=f"NPU {npu}")
    for npu, b in boards.items():
        if b.compatibility is not None and b.compatibility.upper() != "OK":
            yield Finding.fail(T("NPU {npu}: npu-smi reports firmware {fw} as {compat} with "
                                 "driver {sw}: upgrade the firmware to a version this driver "
                                 "accepts", npu=npu, fw=b.firmware_version or "?",
                                 compat=b.compatibility, sw=b.software_version or "?"),
                               subject=f"NPU {npu}", evidence=_board_ev(b), kb="ASC-HW-008")
    fws = Counter(b.firmware_version for b in boards.values() if b.firmware_version)
    if len(fws) > 1:
        main = fws.most_common(1)[0][0]
        odd = {n: b.firmware_version for n, b in boards.items()
               if b.firmware_version and b.firmware_version != main}
        yield Finding.warn(T("NPU firmware differs between cards: {n} run {main}, {odd}: a "
                             "card was missed by the last firmware upgrade",
                             n=fws[main], main=main,
                             odd=", ".join(f"NPU {k} {v}" for k, v in sorted(odd.items()))),
                           subject=", ".join(f"NPU {k}" for k in sorted(odd)),
                           evidence={"firmware": {n: b.firmware_version
                                                  for n, b in boards.items()}},
                           kb="ASC-HW-008")


def _latest_ecc(detail: NpuDetail | None, key: tuple[int, int]) -> EccCounters | None:
    if detail is None:
        return None
    for samples in (detail.second, detail.first):
        s = samples.get(key)
        if s is not None and s.counters is not None:
            return s.counters
    return None


def _bad_cells(c, ecc: EccCounters | None, rising: bool, codes: list[str],
               ch=None) -> list[str]:
    """The names of this row's cells a reader should look at (the report marks them)."""
    bad = []
    if c.health != "OK" or codes or (ch is not None and ch.status != "OK"):
        bad.append("health")
    if c.temp_c is not None and c.temp_c >= TEMP_WARN_C:
        bad.append("temp_c")
    ut = c.device_used_total
    if ut and ut[1] and 100.0 * ut[0] / ut[1] >= HBM_WARN_PCT:
        bad.append("hbm")
    if ecc is not None and (ecc.double or rising):
        bad.append("ecc")
    return bad


def chip_table(info: NpuSmiInfo, detail: NpuDetail | None = None,
               smi: NpuSmi | None = None) -> list[dict]:
    """One row per chip (as ``npu-smi info`` prints them) for the report's per-NPU table.

    ``logic_id`` comes from ``npu-smi info -m``, ``ecc_single``/``ecc_double`` from
    ``npu-smi info -t ecc``; ``bad`` names the cells that a check found wrong."""
    procs: dict[tuple[int, int], list[str]] = {}
    for p in info.processes:
        procs.setdefault((p.npu, p.chip), []).append(f"{p.pid} {p.name} ({p.mem_mb} MB)")
    rows = []
    for c in info.chips:
        key = (c.npu, c.chip)
        ecc = _latest_ecc(detail, key)
        rising = detail is not None and ecc_rising(detail, key) is not None
        ch = smi.chip_health(c.npu, c.chip) if smi is not None else None
        codes = list(ch.codes) if ch is not None else []
        rows.append({"npu": c.npu, "chip": c.chip, "name": c.name, "health": c.health,
                     "temp_c": c.temp_c, "power_w": c.power_w, "aicore_pct": c.aicore_pct,
                     "hbm_used_mb": c.hbm_used_mb, "hbm_total_mb": c.hbm_total_mb,
                     "processes": procs.get(key, []),
                     "logic_id": detail.map.logic_of(*key) if detail and detail.map else None,
                     "ecc_single": ecc.single if ecc else None,
                     "ecc_double": ecc.double if ecc else None,
                     "alarms": codes,
                     "health_detail": ch.status if ch is not None else None,
                     "bad": _bad_cells(c, ecc, rising, codes, ch)})
    return rows


@check("npu.health", title="Every NPU reports health OK", category=Category.NPU,
       tags=("npu", "health"), timeout=SMI_CHECK_TIMEOUT_S)
def health(smi: NpuSmi, know: Knowledge | None = None) -> Iterator[Finding]:
    yield from _with_table(smi, lambda s: _health(s, know))


HEALTH_WORDS = {1: N_("minor fault"), 2: N_("major fault"), 3: N_("critical fault")}


def alarm_entry(know: Knowledge | None, code: str):
    """The KB entry documenting a health alarm code (``80E01809`` or ``0x80E01809``)."""
    if know is None:
        return None
    c = code.strip().upper().removeprefix("0X")
    return know.kb.get(c) or know.kb.get("0x" + c)


def _health(smi: NpuSmi, know: Knowledge | None = None) -> Iterator[Finding]:
    bad = 0
    for chip in smi.info.chips:
        ch = smi.chip_health(chip.npu, chip.chip)
        words = [chip.health] + ([ch.status] if ch is not None else [])
        worst = max(words, key=lambda w: HEALTH_RANK.get(w, 2))
        codes = list(ch.codes) if ch is not None else []
        subject = T("NPU {npu} chip {chip}", npu=chip.npu, chip=chip.chip)
        rank = HEALTH_RANK.get(worst, 2)
        if rank == 0:
            continue
        bad += 1
        infos = list(ch.infos) if ch is not None else []
        entries = [e for e in (alarm_entry(know, c) for c in codes) if e is not None]
        ev = {"table": chip.health, "detail": words[1:], "error_codes": codes,
              "error_information": infos, "documented": [e.id for e in entries],
              "npu": chip.npu, "chip": chip.chip}
        what = (T("device absent or not started") if worst == "UNKNOWN"
                else T(HEALTH_WORDS.get(rank, "critical fault")))
        meaning = ""
        if entries:
            meaning = T(": {meaning}", meaning=Texts(entries[0].title))
        elif infos:
            meaning = T(": {meaning}", meaning=infos[0])
        msg = T("{subject} ({name}, {bus}) health {worst}{codes}{meaning} ({what})",
                subject=subject, name=chip.name, bus=chip.bus_id, worst=worst, what=what,
                codes=T(", error code {codes}", codes=", ".join(codes)) if codes else "",
                meaning=meaning)
        make = Finding.warn if rank == 1 else Finding.fail
        yield make(msg, subject=subject, evidence=ev,
                   kb=[e.id for e in entries] + ["ASC-NPU-001"])
    for (npu, c), sub in sorted(smi.health.items()):
        if sub.failure and not sub.timed_out:
            yield Finding.warn(T("`{cmd}` failed: {reason}", cmd=" ".join(sub.argv),
                                 reason=sub.failure),
                               subject=T("NPU {npu} chip {chip}", npu=npu, chip=c))
    if not bad:
        yield Finding.passed(T("all {n} chip(s) report health OK", n=len(smi.info.chips)))


def hot_key(npu: object) -> str:
    """Cause key "this NPU runs hot": npu-smi and the exporter's metric are one problem."""
    return f"npu.hot:{npu}"


@check("npu.temperature", title="NPU temperatures are below 75 °C", category=Category.NPU,
       tags=("npu", "health"), timeout=SMI_CHECK_TIMEOUT_S)
def temperature(smi: NpuSmi) -> Iterator[Finding]:
    yield from _with_table(smi, _temperature)


def _temperature(smi: NpuSmi) -> Iterator[Finding]:
    temps = {f"{c.npu}/{c.chip}": c.temp_c for c in smi.info.chips}
    bad = 0
    for c in smi.info.chips:
        if c.temp_c is None:
            continue
        subject = T("NPU {npu} chip {chip}", npu=c.npu, chip=c.chip)
        if c.temp_c >= TEMP_FAIL_C:
            bad += 1
            yield Finding.fail(T("{subject} is at {t} °C (≥ {limit} °C: the chip throttles; check "
                                 "fans and airflow)", subject=subject, t=c.temp_c,
                                 limit=TEMP_FAIL_C), subject=subject,
                               evidence={"temp_c": c.temp_c, "all": temps, "npu": c.npu,
                                         "chip": c.chip}, kb="ASC-NPU-002",
                               cause=hot_key(c.npu))
        elif c.temp_c >= TEMP_WARN_C:
            bad += 1
            yield Finding.warn(T("{subject} is at {t} °C (≥ {limit} °C, normal is below; "
                                 "throttling starts at {fail} °C)", subject=subject, t=c.temp_c,
                                 limit=TEMP_WARN_C, fail=TEMP_FAIL_C), subject=subject,
                               evidence={"temp_c": c.temp_c, "all": temps, "npu": c.npu,
                                         "chip": c.chip}, kb="ASC-NPU-002")
    if not bad:
        known = [t for t in temps.values() if t is not None]
        yield Finding.passed(T("hottest chip {t} °C (< {limit} °C)", t=max(known),
                               limit=TEMP_WARN_C) if known else
                             T("npu-smi reports no temperatures"), evidence={"all": temps})


def _service_procs(procs: ServiceProcesses | None) -> list:
    out = []
    for s in procs.servers if procs is not None else ():
        out += [s.proc, *s.children]
    return out


def _same_name(holder: str, names: set[str]) -> bool:
    """npu-smi names a process by its comm (15 characters at most)."""
    return bool(holder) and any(holder == n or holder == n[:15] for n in names)


def owned_by_service(holders, procs: ServiceProcesses | None,
                     in_container: bool) -> tuple[list, list]:
    """(the service's, the others'): by pid, or in a container by name.

    npu-smi reports host pids; inside a container the service's processes have other pids
    (their own pid namespace), so a pid match fails there and the process name is the link.
    """
    svc = _service_procs(procs)
    pids = {p.pid for p in svc}
    names = {p.name for p in svc}
    mine, others = [], []
    for h in holders:
        if h.pid in pids or (in_container and _same_name(h.name, names)):
            mine.append(h)
        else:
            others.append(h)
    return mine, others


def _chips(cs) -> str:
    return ", ".join(f"NPU {c.npu} chip {c.chip}" if c.chip else f"NPU {c.npu}" for c in cs)


@check("npu.hbm", title="NPU memory (HBM) has headroom", category=Category.NPU,
       tags=("npu", "memory"), timeout=SMI_CHECK_TIMEOUT_S)
def hbm(smi: NpuSmi, procs: ServiceProcesses | None,
        container: ContainerInfo | None = None) -> Iterator[Finding]:
    """One finding per cause: the service's own preallocation, or memory held by others."""
    yield from _with_table(smi, lambda s: _hbm(s, procs, container))


def _hbm(smi: NpuSmi, procs: ServiceProcesses | None,
         container: ContainerInfo | None) -> Iterator[Finding]:
    in_ctr = container is not None and container.in_container
    service_full, other_full = [], []
    for c in smi.info.chips:
        ut = c.device_used_total
        if ut is None or ut[1] <= 0:
            continue
        used, total = ut
        pct = 100.0 * used / total
        if pct < HBM_WARN_PCT:
            continue
        holders = [p for p in smi.info.processes if (p.npu, p.chip) == (c.npu, c.chip)]
        mine, others = owned_by_service(holders, procs, in_ctr)
        row = (c, used, total, pct, holders)
        (service_full if holders and not others else other_full).append(row)

    def ev(rows):
        return {"chips": [{"npu": c.npu, "chip": c.chip, "used_mb": u, "total_mb": t,
                           "pct": round(p, 1), "holders": [[h.pid, h.name, h.mem_mb] for h in hs]}
                          for c, u, t, p, hs in rows]}

    def figures(rows):
        return "; ".join(f"{_chips([c])} {u} / {t} MB ({p:.1f} %)" for c, u, t, p, _ in rows)

    if service_full:
        yield Finding.info(T("HBM ≥ {limit} % on {n} NPU chip(s), held by the vLLM service: vLLM "
                             "preallocates --gpu-memory-utilization of each device ({figures})",
                             limit=f"{HBM_WARN_PCT:.0f}", n=len(service_full),
                             figures=figures(service_full)),
                           subject=_chips([r[0] for r in service_full]), evidence=ev(service_full))
    if other_full:
        who = sorted({f"pid {h.pid} {h.name}" for *_, hs in other_full for h in hs}) or ["no process"]
        yield Finding.warn(T("HBM ≥ {limit} % on {n} NPU chip(s) not explained by the vLLM "
                             "service: {figures}; held by {who}{more}",
                             limit=f"{HBM_WARN_PCT:.0f}", n=len(other_full),
                             figures=figures(other_full), who=", ".join(who[:8]),
                             more=f" and {len(who) - 8} more" if len(who) > 8 else ""),
                           subject=_chips([r[0] for r in other_full]), evidence=ev(other_full),
                           kb="ASC-NPU-003")
    if not other_full and not service_full:
        pcts = [100.0 * c.device_used_total[0] / c.device_used_total[1]
                for c in smi.info.chips if c.device_used_total and c.device_used_total[1]]
        yield Finding.passed(T("highest HBM use {pct} % (< {limit} %)", pct=f"{max(pcts):.1f}",
                               limit=f"{HBM_WARN_PCT:.0f}")
                             if pcts else T("npu-smi reports no HBM figures"))


@check("npu.processes", title="NPU memory belongs to live processes", category=Category.NPU,
       tags=("npu", "memory", "processes"), timeout=SMI_CHECK_TIMEOUT_S)
def processes(smi: NpuSmi, table: ProcessTable, container: ContainerInfo | None,
              procs: ServiceProcesses | None = None) -> Iterator[Finding]:
    yield from _with_table(smi, lambda s: _processes(s, table, container, procs))


def _processes(smi: NpuSmi, table: ProcessTable, container: ContainerInfo | None,
               procs: ServiceProcesses | None) -> Iterator[Finding]:
    per_npu: dict[int, list[str]] = {}
    for p in smi.info.processes:
        per_npu.setdefault(p.npu, []).append(f"{p.pid} {p.name} ({p.mem_mb} MB)")
    listing = "; ".join(f"NPU {n}: {', '.join(v)}" for n, v in sorted(per_npu.items()))
    ev = {"per_npu": per_npu, "idle": list(smi.info.idle_npus)}
    if not smi.info.processes:
        yield Finding.passed(T("no process holds NPU memory") if smi.info.has_process_section
                             else T("no process holds NPU memory (npu-smi printed no process "
                                    "section)"), evidence=ev)
        return
    if table.error is not None:
        yield Finding.skip(T("cannot compare with the process table: {reason}",
                             reason=table.error))
        return
    live = table.pids
    in_ctr = container is not None and container.in_container
    absent = [p for p in smi.info.processes if p.pid not in live]
    mine, ghosts = owned_by_service(absent, procs, in_ctr)
    if mine:
        yield Finding.info(T("{n} NPU process(es) have host pids outside this container's pid "
                             "namespace and the names of the vLLM service's processes "
                             "({names}): counted as the service's", n=len(mine),
                             names=", ".join(sorted({p.name for p in mine}))),
                           evidence={"pids": [p.pid for p in mine]})
    if ghosts:
        total = sum(p.mem_mb for p in ghosts)
        where = join("; ", [T("NPU {npu} chip {chip}: {mb} MB held by pid {pid} ({name})", npu=p.npu,
                              chip=p.chip, mb=p.mem_mb, pid=p.pid, name=p.name) for p in ghosts[:8]]
                     + ([T("and {n} more", n=len(ghosts) - 8)] if len(ghosts) > 8 else []))
        gev = {"ghosts": [[p.npu, p.chip, p.pid, p.name, p.mem_mb] for p in ghosts]}
        subject = _chips(sorted({(p.npu, p.chip): p for p in ghosts}.values(), key=lambda p: (p.npu, p.chip)))
        if in_ctr:
            yield Finding.warn(T("{n} NPU process(es) ({mb} MB) are not in this process table: "
                                 "{where} — in a container npu-smi shows host pids, so they may "
                                 "live outside this pid namespace; check on the host",
                                 n=len(ghosts), mb=total, where=where),
                               subject=subject, evidence=gev, kb="ASC-NPU-005")
        else:
            yield Finding.fail(T("{n} NPU process(es) ({mb} MB) are not in the process table: "
                                 "{where}: device memory leaked by exited processes (reset the "
                                 "NPU or find the zombie)", n=len(ghosts), mb=total, where=where),
                               subject=subject, evidence=gev,
                               kb="ASC-NPU-005")
    if not absent:
        yield Finding.passed(T("all {n} NPU process(es) are alive: {listing}",
                               n=len(smi.info.processes), listing=listing),
                             evidence=ev)
    else:
        yield Finding.info(T("processes per NPU: {listing}", listing=listing), evidence=ev)


# -- ECC ---------------------------------------------------------------------------------
def ecc_rising(detail: NpuDetail, key: tuple[int, int]) -> tuple[int, int] | None:
    """(first, second) single+double error counts when they rose between the two samples."""
    a, b = detail.first.get(key), detail.second.get(key)
    if a is None or b is None or a.counters is None or b.counters is None:
        return None
    before = a.counters.single + a.counters.double
    after = b.counters.single + b.counters.double
    return (before, after) if after > before else None


def ecc_key(npu: object, chip: object) -> str:
    """Cause key "this chip's memory is failing": ECC and the alarms it raises are one problem."""
    return f"npu.ecc:{npu}/{chip}"


@check("npu.ecc", title="NPU memory reports no uncorrectable or rising ECC errors",
       category=Category.NPU, tags=("npu", "health", "memory"), timeout=SMI_CHECK_TIMEOUT_S)
def ecc(detail: NpuDetail) -> Iterator[Finding]:
    samples = detail.first
    if not samples:
        yield Finding.skip(T("no ECC sample was taken (npu-smi info -m or the table hung)"))
        return
    hung = [s for s in samples.values() if s.timed_out]
    failed = [s for s in samples.values() if s.failure and not s.timed_out]
    good = [s.counters for s in samples.values() if s.counters is not None]
    for s in hung[:1]:
        yield Finding.error(T("`{cmd}` did not answer: {reason}", cmd=" ".join(s.argv),
                              reason=s.failure), subject="npu-smi", kb="ASC-NPU-004")
    if failed and not good:
        s = failed[0]
        yield Finding.skip(T("`{cmd}` gave no ECC counters on any of {n} chip(s): {reason}",
                             cmd=" ".join(s.argv), n=len(failed), reason=s.failure))
        return
    for s in failed:
        yield Finding.warn(T("`{cmd}` gave no ECC counters: {reason}", cmd=" ".join(s.argv),
                             reason=s.failure), subject=" ".join(s.argv))
    bad = 0
    for c in good:
        key = (c.npu, c.chip)
        subject = T("NPU {npu} chip {chip}", npu=c.npu, chip=c.chip)
        ev = {"counters": {" ".join(k): v for k, v in sorted(c.counters.items())},
              "npu": c.npu, "chip": c.chip}  # the report marks this chip's row
        rise = ecc_rising(detail, key)
        if c.double:
            bad += 1
            mems = sorted({m for (m, b, k), v in c.counters.items() if b == "double" and v})
            yield Finding.fail(T("{subject}: {n} uncorrectable (double-bit) ECC error(s) in {mem}, "
                                 "{pages} page(s) isolated — the memory is failing",
                                 subject=subject, n=c.double, mem="/".join(mems),
                                 pages=sum(c.get(m, "double", "isolated") for m in mems)),
                               subject=subject, evidence=ev, kb="ASC-HW-003",
                               cause=ecc_key(c.npu, c.chip))
        elif rise is not None:
            bad += 1
            yield Finding.warn(T("{subject}: correctable ECC errors rose from {a} to {b} within "
                                 "{s} s — the memory is degrading", subject=subject, a=rise[0],
                                 b=rise[1], s=f"{detail.gap_s:.1f}"),
                               subject=subject, evidence={**ev, "first": rise[0],
                                                          "second": rise[1]},
                               kb="ASC-HW-003", cause=ecc_key(c.npu, c.chip))
        elif c.single:
            yield Finding.info(T("{subject}: {n} correctable (single-bit) ECC error(s) since the "
                                 "driver loaded, not rising over {s} s", subject=subject,
                                 n=c.single, s=f"{detail.gap_s:.1f}"),
                               subject=subject, evidence=ev)
    if not bad and good:
        yield Finding.passed(T("no uncorrectable or rising ECC errors on {n} chip(s)",
                               n=len(good)))
