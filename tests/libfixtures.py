"""Helpers shared by the library tests: gcc-built shared objects, the real wheels."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "tests" / ".cache" / "wheels"
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
    """The real wheel, cached under tests/.cache (copied from /work/cache when present)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"{pkg}-*.whl"))
    if found:
        return found[0]
    local = Path("/work/cache/wheels")
    if local.is_dir():
        for w in local.glob(f"{pkg}-*.whl"):
            shutil.copy(w, CACHE / w.name)
            return CACHE / w.name
    r = subprocess.run(["pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64",
                        "-d", str(CACHE), WHEELS[pkg]], capture_output=True, text=True)
    found = sorted(CACHE.glob(f"{pkg}-*.whl"))
    if not found:
        pytest.fail(f"cannot obtain {WHEELS[pkg]}: {r.stderr[-500:]}")
    return found[0]


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
