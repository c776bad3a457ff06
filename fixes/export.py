"""A bundle written out as a sysroot directory (files, modes, symlinks, /proc files, and the
recorded package listing as dist-info), so fixes can be applied to a real tree with --root."""

from __future__ import annotations

import json
import os
import stat as _stat
from typing import Any

from ascend_doctor import confine
from ascend_doctor.bundle import BundleData
from ascend_doctor.i18n import T

_PACKAGES_MARK = "from importlib import metadata"


def export_root(data: BundleData, root: str) -> dict[str, Any]:
    """Write ``data``'s files under ``root``; returns counts and what could not be written.

    Every write goes through doctor.confine: nothing the bundle names (``..``, a symlink it
    created earlier, an absolute link target) can place a byte outside ``root``. Links are
    created last, modes lose setuid/setgid/sticky, existing directories keep their mode.
    """
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    counts = {"files": 0, "dirs": 0, "links": 0, "proc": 0, "dist_infos": 0}
    skipped: list[str] = []
    lstat = data.index.get("lstat", {})
    reads = data.index.get("read", {})
    links: list[tuple[str, str]] = []
    for path in sorted(lstat):
        e = (lstat[path] or [None])[0]
        if not isinstance(e, dict) or not isinstance(e.get("mode"), int) or path == "/":
            continue
        confine.parts(root, path)  # refuse '..' before anything is written
        mode = e["mode"]
        if _stat.S_ISDIR(mode):
            confine.make_dir(root, path, _stat.S_IMODE(mode) & 0o777)
            counts["dirs"] += 1
        elif _stat.S_ISLNK(mode):
            links.append((path, e.get("link")))
        elif _stat.S_ISREG(mode):
            r = (reads.get(path) or [{}])[0]
            if not isinstance(r, dict) or r.get("blob") not in data.blobs:
                reason = r.get("reason") if isinstance(r, dict) else None
                skipped.append(T("{path}: {reason}", path=path,
                                 reason=str(reason) if reason else T("not readable in the bundle")))
                continue
            confine.write_file(root, path, data.blobs[r["blob"]], _stat.S_IMODE(mode) & 0o777)
            counts["files"] += 1
        else:
            skipped.append(T("{path}: {reason}", path=path,
                             reason=T("device nodes are not exported")))
    for key, seq in data.index.get("proc", {}).items():
        pid, _, name = key.partition("/")
        confine.write_file(root, f"/proc/{pid}/{name}", data.blobs[seq[0]["blob"]], 0o644)
        counts["proc"] += 1
    for key, seq in data.index.get("run", {}).items():
        argv = json.loads(key)
        if len(argv) == 3 and argv[1] == "-c" and _PACKAGES_MARK in argv[2]:
            counts["dist_infos"] += _dist_infos(root, data.blobs[seq[0]["out"]])
    for path, target in links:  # last: a link never becomes a parent of a later write
        confine.make_symlink(root, path, target)
        counts["links"] += 1
    return {"root": root, **counts, "skipped": skipped}


def _dist_infos(root: str, out: bytes) -> int:
    """The recorded interpreter listing as ``<site>/<name>-<version>.dist-info/METADATA``."""
    doc = json.loads(out)
    n = 0
    for p in doc.get("packages", {}).values():
        site = p.get("location") or "/usr/local/lib/python3/site-packages"
        d = f"{site}/{p['name'].replace('-', '_')}-{p['version']}.dist-info"
        confine.make_dir(root, d)
        meta = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
        if p.get("requires_python"):
            meta.append(f"Requires-Python: {p['requires_python']}")
        meta += [f"Requires-Dist: {r}" for r in p.get("requires", [])]
        confine.write_file(root, f"{d}/METADATA", ("\n".join(meta) + "\n").encode())
        eps: dict[str, list[str]] = {}
        for group, name, value in p.get("entry_points", []):
            eps.setdefault(group, []).append(f"{name} = {value}")
        if eps:
            confine.write_file(root, f"{d}/entry_points.txt", "".join(
                f"[{g}]\n" + "\n".join(v) + "\n\n" for g, v in eps.items()).encode())
        if p.get("files"):
            confine.write_file(root, f"{d}/RECORD",
                               "".join(f"{f},,\n" for f in p["files"]).encode())
        n += 1
    return n
