"""Helpers shared by the library tests: gcc-built shared objects, the real wheels."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests import artifacts

REPO = Path(__file__).resolve().parents[1]
WHEELS = {"torch_npu": "torch-npu==2.14.0", "vllm_ascend": "vllm-ascend==0.23.0"}


def gcc(out: Path, *flags: str, src: str = "int f(void){return 1;}\n") -> Path:
    """Compile a tiny shared object (skips the test when gcc is absent)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    out.parent.mkdir(parents=True, exist_ok=True)
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(c), "-Wl,--no-as-needed", *flags], check=True,
                   capture_output=True)
    c.unlink()
    return out


def wheel(pkg: str) -> Path:
    """The real wheel of ``pkg`` (torch_npu or vllm_ascend), fetched once into tests/.cache."""
    try:
        return artifacts.wheel(WHEELS[pkg], f"{pkg}-*.whl")
    except artifacts.ArtifactError as e:
        pytest.fail(str(e))


def unpack_sos(pkg: str, site: Path) -> list[str]:
    """Extract the wheel's shared objects into ``site``; returns their RECORD-style paths."""
    out = []
    with zipfile.ZipFile(wheel(pkg)) as z:
        for name in z.namelist():
            base = name.rsplit("/", 1)[-1]
            if base.endswith(".so") or ".so." in base:
                z.extract(name, site)
                out.append(name)
    return out
