"""The layer rules in pyproject.toml ([tool.importlinter]) hold for the code as it is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is in the [test] extra: pip install -e '.[test]'"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "kept, 0 broken" in r.stdout, r.stdout[-3000:]
