"""The full demo check (and the same scenario as an exported bundle) against the peer a user
runs for an issue report: ``python -m torch.utils.collect_env``.

The peer runs in a venv with torch (bench/out/torch-venv, created on demand with
``pip install torch==2.13.0``; skipped with a note when that is impossible). Import time of
``doctor.cli`` is measured with ``-X importtime`` against ``import torch``.
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
from common import OUT, doctor_exe, measure, row  # noqa: E402

TORCH_VENV = OUT / "torch-venv"
TORCH_PIN = "torch==2.13.0"


def torch_python() -> tuple[str | None, str]:
    """The peer's interpreter, creating the venv once; (None, why) when unavailable."""
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
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, "torch in bench/out/torch-venv does not import"
    return str(py), f"torch {r.stdout.strip()}"


def import_time_us(python: str, module: str) -> int:
    """Total cumulative import time (µs) of ``module`` from ``-X importtime``."""
    r = subprocess.run([python, "-X", "importtime", "-c", f"import {module}"],
                       capture_output=True, text=True, check=True)
    return total_import_us(r.stderr, module)


def total_import_us(stderr: str, module: str) -> int:
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|\s*(\S+)\s*$", line)
        if m and m.group(3) == module:
            return int(m.group(2))
    raise ValueError(f"no importtime line for {module}")


def run(quick: bool = False) -> list[dict]:
    n = 3 if quick else 7
    exe = doctor_exe()
    env = {**os.environ, "CI": "true", "NO_COLOR": "1"}
    peer_py, peer_note = torch_python()
    peer = None
    if peer_py:
        peer = measure([peer_py, "-m", "torch.utils.collect_env"], n, env=env)
    rows = []
    ours = measure([exe, "demo", "--json"], n, env=env)
    rows.append(row("demo --json (8x910B scenario, all checks)", ours,
                    "python -m torch.utils.collect_env" if peer else None, peer,
                    peer_note if peer else f"peer skipped: {peer_note}"))
    with tempfile.TemporaryDirectory() as d:
        bundle = os.path.join(d, "demo.tar.gz")
        subprocess.run([exe, "demo", "--export", bundle], check=True, capture_output=True)
        ours = measure([exe, "check", "--bundle", bundle, "--json"], n, env=env, ok_codes=(0, 1))
    rows.append(row("check --bundle <exported demo> --json", ours,
                    "python -m torch.utils.collect_env" if peer else None, peer,
                    "exit 1 expected (the demo fails)"))
    ours_us = sorted(import_time_us(sys.executable, "doctor.cli") for _ in range(n))[n // 2]
    imp = None
    if peer_py:
        imp = sorted(import_time_us(peer_py, "torch") for _ in range(n))[n // 2]
    rows.append(row("import doctor.cli (-X importtime, cumulative)", (ours_us / 1e6, 0.0),
                    "import torch" if imp else None, (imp / 1e6, 0.0) if imp else None,
                    "import time only; RSS not measured"))
    rows[-1]["ours_rss_mb"] = rows[-1]["peer_rss_mb"] = None
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r)
