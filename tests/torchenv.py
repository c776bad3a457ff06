"""A venv with CPU torch 2.13.0 and the real torch_npu 2.14.0 wheel (``--no-deps``), built
once into tests/.cache and reused: the host without CANN that the import probe must name.

Run ``python -m tests.torchenv`` to build it ahead of a test session.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests import artifacts

WHEELS = artifacts.WHEELS

CACHE = Path(__file__).resolve().parent / ".cache"
VENV = CACHE / "venv-torch-npu"
TORCH = "torch==2.13.0"
TORCH_NPU = "torch-npu==2.14.0"
VLLM_ASCEND = "vllm-ascend==0.23.0"
TORCH_INSTALL_BUDGET_S = 180.0


def wheel(spec: str, pattern: str) -> Path:
    """The wheel for ``spec`` in tests/.cache, fetched from the registry once."""
    return artifacts.wheel(spec, pattern)


def build() -> tuple[Path, str]:
    """(python of the venv, what it holds: "torch+torch_npu" or "torch_npu only")."""
    python = VENV / "bin" / "python"
    marker = VENV / "ascend-doctor-ready"
    if marker.exists():
        _add_vllm_ascend(python)
        return python, marker.read_text().strip()
    if VENV.exists():
        shutil.rmtree(VENV)
    npu_whl = wheel(TORCH_NPU, "torch_npu-2.14.0-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    kind = "torch+torch_npu"
    start = time.monotonic()
    try:
        subprocess.run([str(python), "-m", "pip", "install", "-q", TORCH], check=True,
                       timeout=TORCH_INSTALL_BUDGET_S, capture_output=True)
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
        kind = "torch_npu only"  # documented fallback: no torch, torch_npu alone
    took = time.monotonic() - start
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(npu_whl)],
                   check=True, capture_output=True)
    marker.write_text(kind + "\n")
    (VENV / "torch-install-seconds").write_text(f"{took:.1f}\n")
    _add_vllm_ascend(python)
    return python, kind


def _add_vllm_ascend(python: Path) -> None:
    """The real vllm_ascend 0.23.0 wheel beside torch_npu (``--no-deps``: no vLLM, no CANN)."""
    marker = VENV / "vllm-ascend-ready"
    if marker.exists():
        return
    whl = wheel(VLLM_ASCEND, "vllm_ascend-0.23.0-*.whl")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(whl)],
                   check=True, capture_output=True)
    marker.write_text("ok\n")


if __name__ == "__main__":
    py, kind = build()
    print(py, kind)
