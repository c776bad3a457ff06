"""The full demo check (and the same scenario as an exported bundle) against the peer a user
runs for an issue report: ``python -m torch.utils.collect_env``.

The peer runs in a venv with torch (bench/out/torch-venv, created on demand with
``pip install torch==2.13.0``; skipped with a note when that is impossible). Import time of
``doctor.cli`` is measured with ``-X importtime`` against ``import torch``.

Ours runs as ``python -m ascend_doctor.cli`` with the bench's own interpreter (the console
script's shebang may name another venv). Its user cache (the parsed KB and compat
matrix: knowledge/cache.py) lives in a temporary
``XDG_CACHE_HOME`` filled by the warm-up run, as on a user's second run; one row shows the
same run with them off (``ASCEND_DOCTOR_CACHE=0``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, measure, row  # noqa: E402

TORCH_VENV = OUT / "torch-venv"
TORCH_PIN = "torch==2.13.0"


TEST_TORCH = Path(__file__).resolve().parents[1] / "tests" / ".cache" / "venv-torch-npu"
# the test venv has torch_npu too: without CANN it cannot load, so torch must not autoload it
PEER_ENV = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def torch_python() -> tuple[str | None, str]:
    """The peer's interpreter: the tests' torch venv when present, else bench/out/torch-venv
    (created once); (None, why) when unavailable."""
    py = TEST_TORCH / "bin" / "python"
    if not py.exists():
        py = TORCH_VENV / "bin" / "python"
    if not py.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "venv", str(TORCH_VENV)], capture_output=True)
        if r.returncode == 0:
            r = subprocess.run([str(py), "-m", "pip", "install", "-q", TORCH_PIN],
                               capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"no torch venv ({TORCH_PIN} not installable here)"
    r = subprocess.run([str(py), "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True, env={**os.environ, **PEER_ENV})
    if r.returncode != 0:
        return None, "torch in bench/out/torch-venv does not import"
    return str(py), f"torch {r.stdout.strip()}"


def import_time_us(python: str, module: str, env: dict | None = None) -> int:
    """Total cumulative import time (µs) of ``module`` from ``-X importtime``."""
    r = subprocess.run([python, "-X", "importtime", "-c", f"import {module}"],
                       capture_output=True, text=True, check=True, env=env)
    return total_import_us(r.stderr, module)


def total_import_us(stderr: str, module: str) -> int:
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|\s*(\S+)\s*$", line)
        if m and m.group(3) == module:
            return int(m.group(2))
    raise ValueError(f"no importtime line for {module}")


def run(quick: bool = False) -> list[dict]:
    from common import measure_pair, pyc_envs

    n = 3 if quick else 9
    exe = [sys.executable, "-m", "ascend_doctor.cli"]
    repo = str(Path(__file__).resolve().parents[1])
    peer_py, peer_note = torch_python()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "cache"), 0o700)
        base = {**os.environ, "CI": "true", "NO_COLOR": "1", "XDG_CACHE_HOME":
                os.path.join(d, "cache"),
                "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
        base.pop("ASCEND_DOCTOR_CACHE", None)
        envs = pyc_envs(base)
        envs["nocache"] = {**envs["warm"], "ASCEND_DOCTOR_CACHE": "0"}
        bundle = os.path.join(d, "demo.tar.gz")
        subprocess.run([*exe, "demo", "--export", bundle], check=True, capture_output=True,
                       env=envs["cold"])
        cases = [("demo --json (8x910B scenario, all checks)", [*exe, "demo", "--json"], (0,)),
                 ("check --bundle <exported demo> --json", [*exe, "check", "--bundle", bundle,
                                                           "--json"], (0, 1)),
                 ("check --bundle <demo> --only ldconf --json",
                  [*exe, "check", "--bundle", bundle, "--only", "ldconf", "--json"], (0, 1))]
        labels = {"warm": ".pyc warm", "cold": "no .pyc (compiled each run)",
                  "nocache": ".pyc warm, user caches off (ASCEND_DOCTOR_CACHE=0)"}
        for mode in ("warm", "nocache", "cold"):
            env = envs[mode]
            if mode == "warm":  # fill the .pyc cache (and the user caches) once
                subprocess.run(cases[0][1], env={**env}, capture_output=True)
            for name, argv, ok in (cases if mode != "nocache" else cases[:1]):
                label = f"{name}, {labels[mode]}"
                if not peer_py:
                    from common import measure
                    ours = measure(argv, n, env=env, ok_codes=ok)
                    rows.append(row(label, ours, None, None, f"peer skipped: {peer_note}"))
                    continue
                ours, peer, ratio = measure_pair(
                    argv, [peer_py, "-m", "torch.utils.collect_env"], n, env=env,
                    peer_env={**env, **PEER_ENV}, ok_codes=ok, stdout_dir=d)
                r = row(label, ours, "python -m torch.utils.collect_env", peer,
                        f"{peer_note}; ours = 1/{ratio:.1f} of collect_env")
                r["ratio"] = ratio
                rows.append(r)
        rows += _installed_rows(cases, n, base, peer_py, peer_note, d)
    ours_us = sorted(import_time_us(sys.executable, "ascend_doctor.cli", envs["warm"])
                      for _ in range(n))[n // 2]
    imp = None
    if peer_py:
        imp = sorted(import_time_us(peer_py, "torch", {**envs["warm"], **PEER_ENV})
                     for _ in range(n))[n // 2]
    rows.append(row("import ascend_doctor.cli (-X importtime, cumulative, .pyc warm)",
                    (ours_us / 1e6, 0.0), "import torch" if imp else None,
                    (imp / 1e6, 0.0) if imp else None, "import time only; RSS not measured"))
    rows[-1]["ours_rss_mb"] = rows[-1]["peer_rss_mb"] = None
    return rows


def _installed_rows(cases, n: int, base: dict, peer_py: str | None, peer_note: str,
                    tmp: str) -> list[dict]:
    """The demo and bundle runs again as a user's install runs them: the wheel in its own
    venv (bench/common.py installed_python), its .pyc from pip, no editable-install hook."""
    from common import installed_python, measure, measure_pair

    py, how = installed_python()
    if py is None:
        return [row("demo --json, installed from a wheel", (0.0, 0.0), None, None,
                    f"skipped: {how}")]
    env = {k: v for k, v in base.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONPATH")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # read pip's .pyc, write none
    subprocess.run([py, "-m", "ascend_doctor.cli", "demo", "--json"], env=env,
                   capture_output=True, check=True)  # fills the user caches, as a 2nd run
    rows = []
    for name, argv, ok in cases[:2]:
        argv = [py, "-m", "ascend_doctor.cli", *argv[3:]]
        label = f"{name}, installed from a wheel ({how})"
        if not peer_py:
            rows.append(row(label, measure(argv, n, env=env, ok_codes=ok), None, None,
                            f"peer skipped: {peer_note}"))
            continue
        ours, peer, ratio = measure_pair(argv, [peer_py, "-m", "torch.utils.collect_env"], n,
                                         env=env, peer_env={**env, **PEER_ENV}, ok_codes=ok,
                                         stdout_dir=tmp)
        r = row(label, ours, "python -m torch.utils.collect_env", peer,
                f"{peer_note}; ours = 1/{ratio:.1f} of collect_env")
        r["ratio"] = ratio
        rows.append(r)
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r)
