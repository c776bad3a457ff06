"""A bundle written out as a sysroot directory (files, modes, symlinks, /proc files, and the
recorded package listing as dist-info), so fixes can be applied to a real tree with --root."""

from __future__ import annotations

import json
import os
import stat as _stat
from typing import Any

from doctor.bundle import BundleData

_PACKAGES_MARK = "from importlib import metadata"


def _target(root: str, path: str) -> str:
    real = os.path.normpath(os.path.join(root, path.lstrip("/")))
    if not (real == root or real.startswith(root + os.sep)):
        raise ValueError(f"{path!r} escapes the root")
    return real


def export_root(data: BundleData, root: str) -> dict[str, Any]:
    """Write ``data``'s files under ``root``; returns counts and what could not be written."""
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    counts = {"files": 0, "dirs": 0, "links": 0, "proc": 0, "dist_infos": 0}
    skipped: list[str] = []
    lstat = data.index.get("lstat", {})
    reads = data.index.get("read", {})
    for path in sorted(lstat):
        e = lstat[path][0]
        if not isinstance(e, dict) or "mode" not in e or path == "/":
            continue
        real = _target(root, path)
        mode = e["mode"]
        if _stat.S_ISDIR(mode):
            os.makedirs(real, exist_ok=True)
            os.chmod(real, _stat.S_IMODE(mode))
            counts["dirs"] += 1
        elif _stat.S_ISLNK(mode):
            os.makedirs(os.path.dirname(real), exist_ok=True)
            if os.path.lexists(real):
                os.unlink(real)
            os.symlink(e["link"], real)
            counts["links"] += 1
        elif _stat.S_ISREG(mode):
            r = (reads.get(path) or [{}])[0]
            if "blob" not in r:
                skipped.append(f"{path}: {r.get('reason', 'not readable in the bundle')}")
                continue
            os.makedirs(os.path.dirname(real), exist_ok=True)
            with open(real, "wb") as fh:
                fh.write(data.blobs[r["blob"]])
            os.chmod(real, _stat.S_IMODE(mode))
            counts["files"] += 1
        else:
            skipped.append(f"{path}: device nodes are not exported")
    for key, seq in data.index.get("proc", {}).items():
        pid, _, name = key.partition("/")
        real = _target(root, f"/proc/{pid}/{name}")
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "wb") as fh:
            fh.write(data.blobs[seq[0]["blob"]])
        counts["proc"] += 1
    for key, seq in data.index.get("run", {}).items():
        argv = json.loads(key)
        if len(argv) == 3 and argv[1] == "-c" and _PACKAGES_MARK in argv[2]:
            counts["dist_infos"] += _dist_infos(root, data.blobs[seq[0]["out"]])
    return {"root": root, **counts, "skipped": skipped}


def _dist_infos(root: str, out: bytes) -> int:
    """The recorded interpreter listing as ``<site>/<name>-<version>.dist-info/METADATA``."""
    doc = json.loads(out)
    n = 0
    for p in doc.get("packages", {}).values():
        site = p.get("location") or "/usr/local/lib/python3/site-packages"
        d = _target(root, f"{site}/{p['name'].replace('-', '_')}-{p['version']}.dist-info")
        os.makedirs(d, exist_ok=True)
        meta = [f"Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
        if p.get("requires_python"):
            meta.append(f"Requires-Python: {p['requires_python']}")
        meta += [f"Requires-Dist: {r}" for r in p.get("requires", [])]
        with open(os.path.join(d, "METADATA"), "w") as fh:
            fh.write("\n".join(meta) + "\n")
        eps: dict[str, list[str]] = {}
        for group, name, value in p.get("entry_points", []):
            eps.setdefault(group, []).append(f"{name} = {value}")
        if eps:
            with open(os.path.join(d, "entry_points.txt"), "w") as fh:
                fh.write("".join(f"[{g}]\n" + "\n".join(v) + "\n\n" for g, v in eps.items()))
        if p.get("files"):
            with open(os.path.join(d, "RECORD"), "w") as fh:
                fh.write("".join(f"{f},,\n" for f in p["files"]))
        n += 1
    return n
