"""The developer install (docs/HACKING.md: ``editable_mode=strict``) is a tree of links to
the repository's files, made at install time: a module added since is invisible to the
import system (a new check would silently not run). This names the files to reinstall for."""

from __future__ import annotations

from pathlib import Path

import ascend_doctor

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"": "doctor", "checks": "checks", "fixes": "fixes", "knowledge": "knowledge"}


def test_every_source_file_is_in_the_installed_tree():
    installed = Path(ascend_doctor.__file__).parent
    if installed.resolve() == (ROOT / "doctor").resolve():
        return  # a plain editable install: the folders themselves are on the import path
    missing = []
    for sub, folder in FOLDERS.items():
        for src in (ROOT / folder).rglob("*.py"):
            rel = src.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts or (not sub and rel.parts[0] in FOLDERS):
                continue
            if not (installed / sub / rel).exists():
                missing.append(f"{folder}/{rel.as_posix()}")
    assert not missing, ("not in the installed link tree (run the developer install of "
                         f"docs/HACKING.md again): {missing}")
