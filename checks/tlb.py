"""TLB / page-table pressure of the serving processes (seed 000_93c34712512482cd.txt).

≈12 000 minor faults/s with 0 major faults is the seed's signature of TLB misses and page
table churn from small KV pages, not swapping: the advice is a larger block size and
hugepages. Major faults at a real rate mean memory is paged from disk instead.
"""

from __future__ import annotations

from typing import Iterator

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
        where = f"over {fr.seconds:.1f} s on pid {fr.server_pid} and {len(fr.procs) - 1} children"
        text = f"minor faults {_fmt(minor)}/s, major {_fmt(major)}/s, {where}"
        if major >= MAJOR_WARN_PER_S:
            yield Finding.warn(text + ": major faults read pages from disk (swap or page cache "
                               "under memory pressure), not a TLB problem", subject=f"pid {fr.server_pid}",
                               evidence=ev, kb="ASC-PERF-002")
            continue
        hint = []
        if i == 0 and effective is not None:
            hint.append(f"block size {effective}" + (f" (--block-size {block} requested)"
                                                     if block is not None and block != effective
                                                     else ""))
        elif block is not None:
            hint.append(f"--block-size {block}")
        if hp is not None:
            hint.append(f"THP {hp.thp_mode or '?'}, HugePages_Total {hp.total}")
        suffix = f" ({'; '.join(hint)})" if hint else ""
        small_pages = SMALL_PAGES if hp is not None and _small_pages_only(hp) else ()
        params = {"pid": fr.server_pid, "thp": "always" if (hp and hp.thp_mode != "always") else None}
        if minor >= MINOR_FAIL_PER_S:
            yield Finding.fail(text + ": TLB / page-table pressure, not swapping (≈12 000/s with "
                               "0 major is the TLB-miss signature)" + suffix, subject=f"pid {fr.server_pid}", evidence=ev,
                               kb=("ASC-PERF-001", "ASC-CFG-001"), fix="tlb.hugepages",
                               fix_params=params, explained_by=small_pages)
        elif minor >= MINOR_WARN_PER_S:
            yield Finding.warn(text + ": elevated page-table churn" + suffix,
                               subject=f"pid {fr.server_pid}", evidence=ev, kb="ASC-PERF-001",
                               fix="tlb.hugepages", fix_params=params)
        else:
            yield Finding.passed(text, subject=f"pid {fr.server_pid}", evidence=ev)
        for pid in fr.vanished:
            yield Finding.info(f"pid {pid} exited during the sampling window",
                               subject=f"pid {fr.server_pid}")


@check("tlb.hugepages", title="Transparent hugepages and HugePages for large KV caches",
       category=Category.PERFORMANCE, tags=("tlb", "memory"))
def hugepages(hp: HugePages) -> Iterator[Finding]:
    ev = {"thp_enabled": hp.thp_mode, "thp_defrag": hp.thp_defrag,
          "HugePages_Total": hp.total, "HugePages_Free": hp.free, "Hugepagesize_kB": hp.size_kb,
          "AnonHugePages_kB": hp.anon_huge_kb, "errors": list(hp.errors)}
    if _small_pages_only(hp):
        yield Finding.warn("transparent hugepages are off ([never]) and no HugePages are reserved: "
                           "every host mapping uses 4 KiB pages, so large pinned KV/host buffers "
                           "cost many TLB entries", evidence=ev, kb="ASC-PERF-001",
                           fix="tlb.hugepages", fix_params={"thp": "madvise"}, cause=SMALL_PAGES)
    else:
        yield Finding.info(f"THP [{hp.thp_mode or '?'}], HugePages {hp.total} × "
                           f"{hp.size_kb} kB ({hp.free} free), AnonHugePages {hp.anon_huge_kb} kB",
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
    msg = (f"dTLB load misses {_fmt((p.misses or 0) / p.seconds)}/s on pid {p.pid}"
           + (f" ({ratio * 100:.2f} % of loads)" if ratio is not None else ""))
    if ratio is not None and ratio > 0.01:
        yield Finding.warn(msg + ": more than 1 % of loads miss the TLB", evidence=ev,
                           kb="ASC-PERF-001", fix="tlb.hugepages", fix_params={"pid": p.pid})
    else:
        yield Finding.info(msg, evidence=ev)
