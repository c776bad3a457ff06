"""The alert rules ship in the package: the package-data copy equals deploy/prometheus/ (the
file promtool tests), pyproject's package-data ships it, and `exporter --print-rules` prints
it through the real entry point."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

from ascend_doctor.cli_exporter import RULES_RESOURCE, rules_bytes
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "prometheus" / "ascend-doctor-rules.yml"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_package_copy_equals_deploy():
    installed = files("ascend_doctor").joinpath(RULES_RESOURCE).read_bytes()
    assert installed == DEPLOY.read_bytes(), (
        f"doctor/{RULES_RESOURCE} differs from {DEPLOY.relative_to(REPO)}: copy one onto the other")
    assert rules_bytes() == installed


def test_pyproject_package_data_ships_the_rules():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = meta["tool"]["setuptools"]["package-data"]["ascend_doctor"]
    assert any(fnmatch.fnmatch(RULES_RESOURCE, g) for g in globs), globs


def test_print_rules_through_the_cli(tmp_path):
    r = run_cli("exporter", "--print-rules")
    assert r.returncode == 0, r.stderr
    assert r.stdout == DEPLOY.read_text()
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    out = tmp_path / "rules.yml"
    out.write_text(r.stdout)
    p = subprocess.run([promtool, "check", "rules", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "SUCCESS" in p.stdout + p.stderr, p.stdout + p.stderr
