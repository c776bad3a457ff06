"""TLB / page-table pressure of the serving processes (seed 000_93c34712512482cd.txt).

≈12 000 minor faults/s with 0 major faults is the seed's signature of TLB misses and page
table churn from small KV pages, not swapping: the advice is a larger block size and
hugepages. Major faults at a real rate mean memory is paged from disk instead.
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.i18n import T, join
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.faults import HugePages, PerfTlb, ServiceFaults
from ascend_doctor.probes.procs import ServiceProcesses
from ascend_doctor.probes.service import ServiceHttp, cache_config
from ascend_doctor.registry import check

MINOR_FAIL_PER_S = 10_000.0  # the seed's ≈12 000/s
MINOR_WARN_PER_S = 2_000.0
MAJOR_WARN_PER_S = 10.0


def _fmt(n: float) -> str:
    return f"{n:,.0f}".replace(",", " ")


SMALL_PAGES = "tlb.small-pages"  # cause key: no THP and no HugePages (tlb.faults names it)


def _small_pages_only(hp: HugePages) -> bool:
    return hp.thp_mode == "never" and hp.total == 0


@check("tlb.faults", title="Page-fault rates of the vLLM server and its workers",
       category=Category.PERFORMANCE, tags=("tlb", "service", "memory"), timeout=75.0)
def faults(sf: ServiceFaults, hp: HugePages | None, procs: ServiceProcesses | None,
           http: ServiceHttp | None) -> Iterator[Finding]:
    effective = cache_config(http).get("block_size")
    for i, fr in enumerate(sf.rates):
        minor, major = fr.minor_per_s, fr.major_per_s
        sp = next((s for s in (procs.servers if procs else ()) if s.pid == fr.server_pid), None)
        block = sp.args.get("block-size") if sp else None
        ev = {"seconds": round(fr.seconds, 3), "minor_per_s": round(minor, 1),
              "major_per_s": round(major, 2),
              "processes": [{"pid": p.pid, "comm": p.comm, "minor_per_s": round(p.minor_per_s, 1),
                             "major_per_s": round(p.major_per_s, 2)} for p in fr.procs],
              "top_threads": [{"tid": t.pid, "comm": t.comm, "minor_per_s": round(t.minor_per_s, 1)}
                              for t in fr.top_threads],
              "block_size_flag": block, "block_size_effective": effective if i == 0 else None,
              "thp": hp.thp_mode if hp else None,
              "hugepages_total": hp.total if hp else None}
        text = T("minor faults {minor}/s, major {major}/s, over {seconds} s on pid {pid} and "
                 "{children} children", minor=_fmt(minor), major=_fmt(major),
                 seconds=f"{fr.seconds:.1f}", pid=fr.server_pid, children=len(fr.procs) - 1)
        if major >= MAJOR_WARN_PER_S:
            yield Finding.warn(T("{text}: major faults read pages from disk (swap or page cache "
                                 "under memory pressure), not a TLB problem", text=text),
                               subject=f"pid {fr.server_pid}",
                               evidence=ev, kb="ASC-PERF-002")
            continue
        hint: list[str] = []
        if i == 0 and effective is not None:
            hint.append(T("block size {size} (--block-size {block} requested)", size=effective,
                          block=block) if block is not None and block != effective
                        else T("block size {size}", size=effective))
        elif block is not None:
            hint.append(f"--block-size {block}")
        if hp is not None:
            hint.append(f"THP {hp.thp_mode or '?'}, HugePages_Total {hp.total}")
        suffix = T(" ({hints})", hints=join("; ", hint)) if hint else ""
        small_pages = SMALL_PAGES if hp is not None and _small_pages_only(hp) else ()
        params = {"pid": fr.server_pid, "thp": "always" if (hp and hp.thp_mode != "always") else None}
        if minor >= MINOR_FAIL_PER_S:
            yield Finding.fail(T("{text}: TLB / page-table pressure, not swapping (≈12 000/s with "
                                 "0 major is the TLB-miss signature){suffix}", text=text,
                                 suffix=suffix), subject=f"pid {fr.server_pid}", evidence=ev,
                               kb=("ASC-PERF-001", "ASC-CFG-001"), fix="tlb.hugepages",
                               fix_params=params, explained_by=small_pages)
        elif minor >= MINOR_WARN_PER_S:
            yield Finding.warn(T("{text}: elevated page-table churn{suffix}", text=text,
                                 suffix=suffix),
                               subject=f"pid {fr.server_pid}", evidence=ev, kb="ASC-PERF-001",
                               fix="tlb.hugepages", fix_params=params)
        else:
            yield Finding.passed(text, subject=f"pid {fr.server_pid}", evidence=ev)
        for pid in fr.vanished:
            yield Finding.info(T("pid {pid} exited during the sampling window", pid=pid),
                               subject=f"pid {fr.server_pid}")


@check("tlb.hugepages", title="Transparent hugepages and HugePages for large KV caches",
       category=Category.PERFORMANCE, tags=("tlb", "memory"))
def hugepages(hp: HugePages) -> Iterator[Finding]:
    ev = {"thp_enabled": hp.thp_mode, "thp_defrag": hp.thp_defrag,
          "HugePages_Total": hp.total, "HugePages_Free": hp.free, "Hugepagesize_kB": hp.size_kb,
          "AnonHugePages_kB": hp.anon_huge_kb, "errors": list(hp.errors)}
    if _small_pages_only(hp):
        yield Finding.warn(T("transparent hugepages are off ([never]) and no HugePages are "
                             "reserved: every host mapping uses 4 KiB pages, so large pinned "
                             "KV/host buffers cost many TLB entries"),
                           evidence=ev, kb="ASC-PERF-001",
                           fix="tlb.hugepages", fix_params={"thp": "madvise"}, cause=SMALL_PAGES)
    else:
        yield Finding.info(T("THP [{mode}], HugePages {total} × {size} kB ({free} free), "
                             "AnonHugePages {anon} kB", mode=hp.thp_mode or "?", total=hp.total,
                             size=hp.size_kb, free=hp.free, anon=hp.anon_huge_kb),
                           evidence=ev)


@check("tlb.perf", title="dTLB load misses of the server (perf stat, when available)",
       category=Category.PERFORMANCE, tags=("tlb",), timeout=15.0)
def perf(p: PerfTlb) -> Iterator[Finding]:
    if p.skipped:
        yield Finding.skip(p.skipped, evidence={"pid": p.pid})
        return
    ratio = (p.misses / p.loads) if (p.misses is not None and p.loads) else None
    ev = {"pid": p.pid, "dTLB_load_misses": p.misses, "dTLB_loads": p.loads,
          "miss_ratio": round(ratio, 5) if ratio is not None else None, "seconds": p.seconds}
    rate = _fmt((p.misses or 0) / p.seconds)
    msg = (T("dTLB load misses {rate}/s on pid {pid} ({share} % of loads)", rate=rate,
             pid=p.pid, share=f"{ratio * 100:.2f}") if ratio is not None
           else T("dTLB load misses {rate}/s on pid {pid}", rate=rate, pid=p.pid))
    if ratio is not None and ratio > 0.01:
        yield Finding.warn(T("{text}: more than 1 % of loads miss the TLB", text=msg), evidence=ev,
                           kb="ASC-PERF-001", fix="tlb.hugepages", fix_params={"pid": p.pid})
    else:
        yield Finding.info(msg, evidence=ev)
