"""The layer rules in pyproject.toml ([tool.importlinter]) hold for the code as it is.

The installed package ``ascend_doctor`` maps the repository's folders (doctor/ is the core,
checks/ is ascend_doctor.checks, ...); import-linter reads a package from one directory, so
the test lays that mapping out as a tree of symlinks in a tmp dir and points it there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAPPED = ("checks", "fixes", "knowledge")


def _shadow(tmp: Path) -> Path:
    pkg = tmp / "ascend_doctor"
    pkg.mkdir()
    for entry in (ROOT / "doctor").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in MAPPED:
        (pkg / name).symlink_to(ROOT / name)
    return tmp


def test_import_contracts_are_kept(tmp_path):
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is in the [test] extra: pip install -e '.[test]'"
    env = {**os.environ, "PYTHONPATH": str(_shadow(tmp_path))}
    # the shadow tree comes first on sys.path, ahead of the editable install's finder
    r = subprocess.run([exe, "--no-cache", "--config", str(ROOT / "pyproject.toml")], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "kept, 0 broken" in r.stdout, r.stdout[-3000:]
