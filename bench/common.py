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
                 stdout: str | None = None, cpu: "list[float] | None" = None
                 ) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, exit code) of one fresh run of argv; ``cpu`` gets its
    user + system CPU seconds (what load from other processes distorts least).

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
        if cpu is not None:
            cpu.append(usage.ru_utime + usage.ru_stime)
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
                 stdout_dir: str | None = None, warm: bool = True,
                 cpu: "dict | None" = None
                 ) -> tuple[tuple[float, float], tuple[float, float], float]:
    """Ours and the peer alternately (one warm-up each unless ``warm`` is False: runs of
    minutes on an input just written), so load from others on a shared machine falls on
    both: (ours median s, RSS), (peer median s, RSS), median of the per-pair time ratios
    peer/ours. Each writes its output to a file under ``stdout_dir``. ``cpu`` gets the
    median CPU seconds (user + system) of each side, ``ours`` and ``peer``."""
    out_a = os.path.join(stdout_dir, "ours.out") if stdout_dir else None
    out_b = os.path.join(stdout_dir, "peer.out") if stdout_dir else None
    if warm:
        measure_once(ours, env, stdout=out_a)
        measure_once(peer, peer_env if peer_env is not None else env, stdout=out_b)
    a, b, ra, rb, ratios, ca, cb = [], [], [], [], [], [], []
    for _ in range(repeat):
        dt_a, mb_a, rc = measure_once(ours, env, stdout=out_a, cpu=ca)
        if rc not in ok_codes:
            raise RuntimeError(f"`{' '.join(ours)[:200]}` exited {rc}")
        dt_b, mb_b, rc_b = measure_once(peer, peer_env if peer_env is not None else env,
                                        stdout=out_b, cpu=cb)
        if rc_b not in (0, 1):  # grep and tcpdump exit 1 on no match
            raise RuntimeError(f"`{' '.join(peer)[:200]}` exited {rc_b}")
        a.append(dt_a)
        b.append(dt_b)
        ra.append(mb_a)
        rb.append(mb_b)
        ratios.append(dt_b / dt_a)
    med = statistics.median
    if cpu is not None:
        cpu.update(ours=med(ca), peer=med(cb))
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


WHEEL_VENV = OUT / "wheel-venv"


def installed_python() -> tuple[str | None, str]:
    """An interpreter that has ascend-doctor as a user installs it: the project built into a
    wheel and installed into bench/out/wheel-venv, with the .pyc files pip compiles at install
    and no editable-install import hook (that hook alone loads pathlib and importlib.util
    into every process of a ``pip install -e .`` venv: ~13 ms of a bare ``python -c pass``).
    The dependencies come from this bench's own venv through a .pth file (same versions, no
    download). Rebuilt on every call, so it always holds the checkout's code. (None, why)
    when it cannot be built."""
    import glob
    import shutil
    import site
    import subprocess
    import tempfile

    shutil.rmtree(WHEEL_VENV, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="bench-wheel-") as d:
        steps = [[sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", d, str(REPO)],
                 [sys.executable, "-m", "venv", str(WHEEL_VENV)]]
        for argv in steps:
            r = subprocess.run(argv, capture_output=True, text=True)
            if r.returncode != 0:
                return None, f"could not build the wheel venv ({' '.join(argv[:4])}: " \
                             f"{(r.stderr or r.stdout).strip()[-200:]})"
        py = str(WHEEL_VENV / "bin" / "python")
        wheels = glob.glob(os.path.join(d, "ascend_doctor-*.whl"))
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", *wheels],
                           capture_output=True, text=True)
        if r.returncode != 0 or len(wheels) != 1:
            return None, f"could not install the wheel ({r.stderr.strip()[-200:]})"
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    deps = [p for p in site.getsitepackages() if os.path.isdir(p)]
    with open(os.path.join(purelib, "bench-deps.pth"), "w") as fh:
        fh.write("\n".join(deps) + "\n")
    return py, "a wheel in a fresh venv (.pyc compiled by pip at install)"
