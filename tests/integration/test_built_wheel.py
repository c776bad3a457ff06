"""The wheel a user installs, not the editable checkout: built with pip from the repository,
installed into a fresh directory, and run from there.

Why: package data is easy to lose in a wheel (the package-data keys once named folders and
a built wheel shipped without the demo tarball, the KB and the schema). An editable install
never notices, because it reads the source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

# What the installed tool reads at run time, as paths inside the wheel.
NEEDED = [
    "ascend_doctor/demo/scenario.tar.gz",
    "ascend_doctor/tui/app.tcss",
    "ascend_doctor/locale/zh_CN/LC_MESSAGES/ascend-doctor.mo",
    "ascend_doctor/data/prometheus/ascend-doctor-rules.yml",
    "ascend_doctor/knowledge/compat.toml",
    "ascend_doctor/knowledge/libs.toml",
]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the built wheel, the directory it is installed into)."""
    out = tmp_path_factory.mktemp("wheel")
    src = out / "src"
    # a clean copy of the tracked tree, so an untracked file in a checkout cannot help
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                           capture_output=True).stdout.split(b"\0")
    for rel in filter(None, files):
        p = ROOT / os.fsdecode(rel)
        if p.is_file() and not p.is_symlink():
            dst = src / os.fsdecode(rel)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(p.read_bytes())
    dist = out / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src),
                    "-w", str(dist)], check=True, capture_output=True, timeout=600)
    (whl,) = dist.glob("ascend_doctor-*.whl")
    target = out / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(whl)], check=True, capture_output=True, timeout=300)
    return whl, target


def _run(target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_DOCTOR")}
    env["PYTHONPATH"] = str(target)
    env["ASCEND_DOCTOR_CACHE"] = "0"
    return subprocess.run([sys.executable, "-c",
                           "import sys, ascend_doctor, ascend_doctor.cli as c;"
                           "print(ascend_doctor.__file__, file=sys.stderr);"
                           "sys.argv[0] = 'ascend-doctor'; c.main()", *args],
                          capture_output=True, text=True, env=env, timeout=120,
                          cwd=target.parent)


def test_the_wheel_holds_what_the_tool_reads(installed: tuple[Path, Path]) -> None:
    whl, _ = installed
    names = set(zipfile.ZipFile(whl).namelist())
    missing = [n for n in NEEDED if n not in names]
    assert not missing, f"the wheel lacks {missing}"
    # every KB file of the source tree, no more and no less
    kb = {f"ascend_doctor/knowledge/{p.name}" for p in (ROOT / "knowledge").glob("*.toml")}
    assert kb <= names
    # the entry point a user types
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "ascend-doctor" in zipfile.ZipFile(whl).read(entry).decode()


def test_the_installed_demo_runs_from_the_wheel_in_both_languages(
        installed: tuple[Path, Path]) -> None:
    _, target = installed
    en = _run(target, "demo", "--json")
    # it really ran the installed copy, not the checkout
    assert en.stderr.splitlines()[0].startswith(str(target)), en.stderr[-2000:]
    doc = json.loads(en.stdout)
    assert len(doc["problems"]) >= 10
    assert sum(c["status"] == "fail" for c in doc["checks"]) >= 10
    zh = _run(target, "demo", "--text", "--lang", "zh")
    assert zh.returncode == en.returncode, zh.stderr[-2000:]
    # the catalog was found: the verdict line is Chinese
    first = zh.stdout.splitlines()[0]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in first), first
