"""Page-fault rates of the vLLM server, its workers and their threads, plus THP / HugePages.

Seed 000_93c34712512482cd.txt: ≈12 000 minor faults/s with 0 major faults under load meant
TLB / page-table pressure (small KV pages), not swapping. The sampler reads
``/proc/<pid>/stat`` (and ``task/<tid>/stat``) twice, ``RunOptions.sample_seconds`` apart,
timed with ``host.monotonic("tlb:<pid>")`` so a bundle replays the same window.
"""

from __future__ import annotations

import re
from typing import Mapping

from ..i18n import N_, T, join
from ..errors import ParseError, SourceError, SourceMissing
from ..host import Host
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from .procs import ServiceProcesses

MAX_PROCS = 64
MAX_THREADS = 256
PERF_SECONDS = 1.0


@dataclass(frozen=True, eq=False)
class ProcStat:
    """The fields of /proc/<pid>/stat the fault checks use."""

    pid: int
    comm: str
    state: str
    ppid: int
    minflt: int
    majflt: int
    num_threads: int
    rss_pages: int


def parse_proc_stat(text: str) -> ProcStat:
    """One /proc/<pid>/stat line. ``comm`` may hold spaces and parentheses: it ends at the
    *last* ')' of the line (proc(5))."""
    text = text.strip()
    lpar, rpar = text.find("("), text.rfind(")")
    if lpar <= 0 or rpar < lpar:
        raise ParseError("/proc/<pid>/stat", T("no '(comm)' field"))
    pid_s = text[:lpar].strip()
    rest = text[rpar + 1:].split()
    if not pid_s.isdigit():
        raise ParseError("/proc/<pid>/stat", T("pid field {text} is not a number",
                                               text=repr(pid_s[:20])))
    # fields after comm: 3 state, 4 ppid, ... 10 minflt, 12 majflt, 20 num_threads, 24 rss
    if len(rest) < 22:
        raise ParseError("/proc/<pid>/stat", T("{n} fields, expected at least 24", n=len(rest) + 2))
    try:
        return ProcStat(int(pid_s), text[lpar + 1:rpar], rest[0], int(rest[1]), int(rest[7]),
                        int(rest[9]), int(rest[17]), int(rest[21]))
    except ValueError as exc:
        raise ParseError("/proc/<pid>/stat", T("non-numeric field ({exc})", exc=str(exc))) from None


def parse_thp_mode(text: str) -> str:
    """``always [madvise] never`` → ``madvise``."""
    m = re.search(r"\[(\w+)\]", text)
    if not m:
        raise ParseError("/sys/kernel/mm/transparent_hugepage/enabled", T("no [selected] mode"))
    return m.group(1)


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo → {key: value} (kB for sized keys, pages for HugePages_*)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if sep and parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0])
    if not out:
        raise ParseError("/proc/meminfo", T("no 'Key: value' lines"))
    return out


@dataclass(frozen=True, eq=False)
class ProcRate:
    """A process's page faults over the sampling window."""

    pid: int
    comm: str
    minflt: int  # delta over the window
    majflt: int
    seconds: float

    @property
    def minor_per_s(self) -> float:
        return self.minflt / self.seconds if self.seconds > 0 else 0.0

    @property
    def major_per_s(self) -> float:
        return self.majflt / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True, eq=False)
class FaultRates:
    """Fault deltas of one server's process tree over one sampling window."""

    server_pid: int
    seconds: float
    procs: tuple[ProcRate, ...]
    top_threads: tuple[ProcRate, ...] = ()
    vanished: tuple[int, ...] = ()  # exited during the window

    @property
    def minor_per_s(self) -> float:
        return sum(p.minor_per_s for p in self.procs)

    @property
    def major_per_s(self) -> float:
        return sum(p.major_per_s for p in self.procs)


def rates_between(a: Mapping[int, ProcStat], b: Mapping[int, ProcStat], seconds: float
                  ) -> list[ProcRate]:
    """Per-pid deltas (a pid reused by another comm is skipped; counters never go back)."""
    out = []
    for pid, s1 in b.items():
        s0 = a.get(pid)
        if s0 is None or s0.comm != s1.comm:
            continue
        out.append(ProcRate(pid, s1.comm, max(0, s1.minflt - s0.minflt),
                            max(0, s1.majflt - s0.majflt), seconds))
    return out


def _read_stats(host: Host, pids: list[int]) -> dict[int, ProcStat]:
    out = {}
    for pid in pids:
        try:
            out[pid] = parse_proc_stat(host.proc_read(pid, "stat").decode("utf-8", "replace"))
        except SourceMissing:
            continue
    return out


def _threads(host: Host, pid: int) -> list[int]:
    try:
        names = host.listdir(f"/proc/{pid}/task")
    except (SourceMissing, SourceError):
        return []
    return [int(n) for n in names if n.isdigit()][:MAX_THREADS]


def _read_thread_stats(host: Host, pid: int, tids: list[int]) -> dict[int, ProcStat]:
    out = {}
    for tid in tids:
        try:
            out[tid] = parse_proc_stat(host.proc_read(pid, f"task/{tid}/stat")
                                       .decode("utf-8", "replace"))
        except (SourceMissing, ParseError):
            continue
    return out


def sample_faults(host: Host, server_pid: int, pids: list[int], seconds: float) -> FaultRates:
    """Two reads ``seconds`` apart; the clock is tagged by the server pid."""
    pids = pids[:MAX_PROCS]
    tids = {pid: _threads(host, pid) for pid in pids}
    t0 = host.monotonic(f"tlb:{server_pid}")
    a = _read_stats(host, pids)
    ta = {pid: _read_thread_stats(host, pid, tids[pid]) for pid in a}
    if server_pid not in a:
        raise SourceMissing(f"/proc/{server_pid}/stat", T("the server exited"))
    host.sleep(seconds)
    b = _read_stats(host, list(a))
    tb = {pid: _read_thread_stats(host, pid, tids[pid]) for pid in b}
    t1 = host.monotonic(f"tlb:{server_pid}")
    dt = t1 - t0
    if dt <= 0:
        raise ParseError(f"tlb:{server_pid} clock", T("window of {dt} s", dt=f"{dt:g}"))
    threads: list[ProcRate] = []
    for pid in b:
        threads.extend(rates_between(ta.get(pid, {}), tb.get(pid, {}), dt))
    threads.sort(key=lambda r: -r.minflt)
    return FaultRates(server_pid, dt, tuple(rates_between(a, b, dt)), tuple(threads[:5]),
                      tuple(sorted(set(a) - set(b))))


@dataclass(frozen=True, eq=False)
class ServiceFaults:
    """Fault rates of each vLLM server found (the pinned one with --pid)."""

    rates: tuple[FaultRates, ...]


@provider
def gather_service_faults(host: Host, options: RunOptions, procs: ServiceProcesses
                          ) -> ServiceFaults:
    if not procs.servers:
        raise SourceMissing(T("vLLM server process"), T("none running (pass --pid)"))
    seconds = max(0.2, min(float(options.sample_seconds or 3.0), 60.0))
    out = []
    for sp in procs.servers[:4]:
        pids = [sp.pid] + [c.pid for c in sp.children]
        try:
            out.append(sample_faults(host, sp.pid, pids, seconds))
        except SourceMissing:
            continue
    if not out:
        raise SourceMissing("/proc/<pid>/stat", T("every vLLM server exited during sampling"))
    return ServiceFaults(tuple(out))


@dataclass(frozen=True, eq=False)
class HugePages:
    """Transparent huge page settings and the hugepage lines of /proc/meminfo."""

    thp_mode: str | None
    thp_defrag: str | None
    meminfo: Mapping[str, int] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.meminfo.get("HugePages_Total", 0)

    @property
    def free(self) -> int:
        return self.meminfo.get("HugePages_Free", 0)

    @property
    def size_kb(self) -> int:
        return self.meminfo.get("Hugepagesize", 0)

    @property
    def anon_huge_kb(self) -> int:
        return self.meminfo.get("AnonHugePages", 0)


@provider
def gather_hugepages(host: Host) -> HugePages:
    errors = []
    modes: dict[str, str | None] = {}
    for key in ("enabled", "defrag"):
        path = f"/sys/kernel/mm/transparent_hugepage/{key}"
        try:
            modes[key] = parse_thp_mode(host.read_text(path, 4096))
        except (SourceMissing, SourceError) as exc:
            modes[key] = None
            errors.append(f"{path}: {exc.reason}")
    try:
        mem = parse_meminfo(host.read_text("/proc/meminfo", 65536))
    except (SourceMissing, SourceError) as exc:
        mem = {}
        errors.append(f"/proc/meminfo: {exc.reason}")
    if modes["enabled"] is None and not mem:
        raise SourceMissing(N_("/proc/meminfo and /sys/kernel/mm/transparent_hugepage"),
                            join("; ", errors))
    return HugePages(modes["enabled"], modes["defrag"], mem, tuple(errors))


@dataclass(frozen=True, eq=False)
class PerfTlb:
    """``perf stat -e dTLB-load-misses`` on the server for a second, or why not."""

    pid: int
    misses: int | None
    loads: int | None
    seconds: float
    skipped: str | None = None


def parse_perf_csv(text: str) -> dict[str, int | None]:
    """``perf stat -x,`` lines: ``count,unit,event,...``; ``<not supported>`` → None."""
    out: dict[str, int | None] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        count, event = parts[0].strip(), parts[2].strip()
        if not event:
            continue
        out[event.split(":")[0]] = int(count) if count.isdigit() else None
    return out


@provider
def gather_perf_tlb(host: Host, procs: ServiceProcesses) -> PerfTlb:
    if not procs.servers:
        raise SourceMissing(T("vLLM server process"), T("none running"))
    pid = procs.servers[0].pid
    if host.which("perf") is None:
        return PerfTlb(pid, None, None, 0.0, T("perf is not installed"))
    res = host.run(["perf", "stat", "-x", ",", "-e", "dTLB-load-misses,dTLB-loads", "-p", str(pid),
                    "--", "sleep", f"{PERF_SECONDS:g}"], timeout=PERF_SECONDS + 5)
    counts = parse_perf_csv(res.stderr.decode("utf-8", "replace"))
    misses = counts.get("dTLB-load-misses")
    if not res.ok or misses is None:
        tail = res.describe_failure() if not res.ok else "dTLB-load-misses <not supported>"
        return PerfTlb(pid, None, None, PERF_SECONDS, T("perf could not count: {tail}", tail=tail[:278]))
    return PerfTlb(pid, misses, counts.get("dTLB-loads"), PERF_SECONDS)
