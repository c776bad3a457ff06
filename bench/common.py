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


def measure_once(argv: list[str], env: dict | None = None, cwd: str | None = None,
                 stdout: str | None = None) -> tuple[float, float, int]:
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
        sink = open(stdout, "wb") if stdout else None  # a file: /dev/null lets grep stop early
        try:
            proc = subprocess.Popen(cmd, stdout=sink or subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=env, cwd=cwd)
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if sink:
                sink.close()
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


def measure_pair(ours: list[str], peer: list[str], repeat: int, env: dict | None = None,
                 peer_env: dict | None = None, ok_codes: tuple[int, ...] = (0,),
                 stdout_dir: str | None = None) -> tuple[tuple[float, float], tuple[float, float],
                                                          float]:
    """Ours and the peer alternately (one warm-up each), so load from others on a shared
    machine falls on both: (ours median s, RSS), (peer median s, RSS), median of the
    per-pair time ratios peer/ours. Each writes its output to a file under ``stdout_dir``."""
    out_a = os.path.join(stdout_dir, "ours.out") if stdout_dir else None
    out_b = os.path.join(stdout_dir, "peer.out") if stdout_dir else None
    measure_once(ours, env, stdout=out_a)
    measure_once(peer, peer_env if peer_env is not None else env, stdout=out_b)
    a, b, ra, rb, ratios = [], [], [], [], []
    for _ in range(repeat):
        dt_a, mb_a, rc = measure_once(ours, env, stdout=out_a)
        if rc not in ok_codes:
            raise RuntimeError(f"`{' '.join(ours)[:200]}` exited {rc}")
        dt_b, mb_b, rc_b = measure_once(peer, peer_env if peer_env is not None else env,
                                        stdout=out_b)
        if rc_b not in (0, 1):  # grep and tcpdump exit 1 on no match
            raise RuntimeError(f"`{' '.join(peer)[:200]}` exited {rc_b}")
        a.append(dt_a)
        b.append(dt_b)
        ra.append(mb_a)
        rb.append(mb_b)
        ratios.append(dt_b / dt_a)
    med = statistics.median
    return (med(a), med(ra)), (med(b), med(rb)), med(ratios)


def drop_project_pycache() -> int:
    """Remove ``__pycache__`` under the project's own packages (doctor/ checks/ fixes/
    knowledge/): left by a test run, they would make the ``cold`` rows warm. Returns how
    many were removed (they are caches: Python writes them again when allowed)."""
    import shutil

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    n = 0
    for top in ("doctor", "checks", "fixes", "knowledge"):
        for dirpath, dirnames, _ in os.walk(os.path.join(repo, top)):
            if "__pycache__" in dirnames:
                shutil.rmtree(os.path.join(dirpath, "__pycache__"), ignore_errors=True)
                dirnames.remove("__pycache__")
                n += 1
    return n


def pyc_envs(base: dict | None = None) -> dict[str, dict]:
    """The two bytecode situations: ``cold`` is this environment's default
    (PYTHONDONTWRITEBYTECODE, no __pycache__ in a checkout: every project module compiled on
    each run; stray ones are removed first); ``warm`` reads .pyc from a cache filled by one
    earlier run, as an installed wheel does (PYTHONPYCACHEPREFIX; the caller runs once to
    fill it)."""
    import tempfile

    drop_project_pycache()
    base = dict(os.environ if base is None else base)
    cold = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
    cold.pop("PYTHONPYCACHEPREFIX", None)
    warm = {**base, "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="bench-pyc-")}
    warm.pop("PYTHONDONTWRITEBYTECODE", None)
    return {"cold": cold, "warm": warm}
