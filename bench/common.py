"""Shared measuring helpers for bench/bench_*.py: fresh subprocess per run, wall time and
the child's own peak RSS (os.wait4 gives per-child rusage; RUSAGE_CHILDREN would be the
maximum over every child so far), repeated, median taken."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"


def doctor_exe() -> str:
    cand = Path(sys.executable).with_name("ascend-doctor")
    return str(cand) if cand.exists() else "ascend-doctor"


GNU_TIME = "/usr/bin/time"


def measure_once(argv: list[str], env: dict | None = None, cwd: str | None = None
                 ) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, exit code) of one fresh run of argv.

    The peak comes from GNU time (``%M``) when installed: Linux charges a child, in its
    ru_maxrss, with the resident size of the process it was forked or vfork'ed from until
    it execs, so a Python parent (tens of MiB) would inflate every small command. Without
    GNU time, os.wait4's figure is used and may include the bench's own size.
    """
    import tempfile

    use_time = os.access(GNU_TIME, os.X_OK)
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as out:
        cmd = [GNU_TIME, "-f", "%M", "-o", out.name, *argv] if use_time else argv
        import subprocess
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t0
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
        kib = float(usage.ru_maxrss)
        if use_time:
            lines = [ln for ln in out.read().split() if ln.isdigit()]
            kib = float(lines[-1]) if lines else kib
    return dt, kib / 1024.0, rc


def measure(argv: list[str], repeat: int, env: dict | None = None, cwd: str | None = None,
            ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Median seconds and median peak RSS (MiB) over ``repeat`` fresh runs (one warm-up)."""
    measure_once(argv, env, cwd)  # warm the page cache; not counted
    times, rss = [], []
    for _ in range(repeat):
        dt, mb, rc = measure_once(argv, env, cwd)
        if rc not in ok_codes:
            raise RuntimeError(f"`{' '.join(argv)}` exited {rc}")
        times.append(dt)
        rss.append(mb)
    return statistics.median(times), statistics.median(rss)


def row(name: str, ours: tuple[float, float], peer: str | None,
        theirs: tuple[float, float] | None, note: str = "") -> dict:
    return {"name": name, "ours_s": round(ours[0], 4), "peer": peer,
            "peer_s": round(theirs[0], 4) if theirs else None,
            "ours_rss_mb": round(ours[1], 1), "peer_rss_mb": round(theirs[1], 1) if theirs else None,
            "note": note}
