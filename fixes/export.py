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

    The whole bundle is validated first (every path, blob, listing and the tree's shape) and
    nothing is written unless all of it can be: a hostile bundle leaves no half-exported
    root. Every write then goes through doctor.confine: nothing the bundle names (``..``, a
    symlink it created earlier, an absolute link target) can place a byte outside ``root``.
    Links are created last; modes lose setuid/setgid, directories keep the sticky bit (a
    1777 directory stays sticky, never world-writable without it); existing directories
    keep their mode.
    """
    root = os.path.abspath(root)
    plan, skipped = _plan(data, root)
    os.makedirs(root, exist_ok=True)
    counts = {"files": 0, "dirs": 0, "links": 0, "proc": 0, "dist_infos": 0}
    links: list[tuple[str, str]] = []
    for op, path, arg, mode in plan:
        if op == "dir":
            confine.make_dir(root, path, mode)
            counts["dirs"] += 1
        elif op == "file":
            confine.write_file(root, path, arg, mode)
            counts["files"] += 1
        elif op == "proc":
            confine.write_file(root, path, arg, mode)
            counts["proc"] += 1
        elif op == "dist":
            counts["dist_infos"] += _dist_infos(root, arg)
        elif op == "link":
            links.append((path, arg))
    for path, target in links:  # last: a link never becomes a parent of a later write
        confine.make_symlink(root, path, target)
        counts["links"] += 1
    return {"root": root, **counts, "skipped": skipped}


def _refuse(root: str, path: Any, reason: str) -> confine.ConfinementError:
    return confine.ConfinementError(root, str(path), reason)


def _plan(data: BundleData, root: str) -> tuple[list[tuple[str, str, Any, int]], list[str]]:
    """Every write export_root would make, validated before the first one: a path with
    '..' or NUL, a blob the bundle does not hold, a listing that is not JSON, a file or link
    that another entry needs as a directory — each refuses the whole export."""
    plan: list[tuple[str, str, Any, int]] = []
    skipped: list[str] = []
    lstat = data.index.get("lstat", {})
    reads = data.index.get("read", {})
    if not isinstance(lstat, dict) or not isinstance(reads, dict):
        raise _refuse(root, "index.json", "lstat/read are not tables")
    kinds: dict[tuple[str, ...], str] = {}  # components -> "dir" / "file" / "link"

    def claim(path: str, kind: str) -> None:
        comps = tuple(confine.parts(root, path))
        if not comps:
            raise _refuse(root, path, "names the root itself")
        for i in range(1, len(comps)):
            k = kinds.setdefault(comps[:i], "dir")
            if k != "dir":
                raise _refuse(root, path, f"/{'/'.join(comps[:i])} is a {k}, not a directory")
        old = kinds.get(comps)
        if old is not None and old != kind:
            raise _refuse(root, path, f"named twice ({old} and {kind})")
        kinds[comps] = kind

    for path in sorted(lstat):
        e = (lstat[path] or [None])[0] if isinstance(lstat[path], list) else None
        if not isinstance(e, dict) or not isinstance(e.get("mode"), int) or path == "/":
            continue
        mode = e["mode"]
        if _stat.S_ISDIR(mode):
            claim(path, "dir")
            plan.append(("dir", path, None, _stat.S_IMODE(mode) & 0o1777))
        elif _stat.S_ISLNK(mode):
            target = e.get("link")
            if not isinstance(target, str) or not target or "\0" in target:
                raise _refuse(root, path, "symlink target is not a valid path")
            claim(path, "link")
            plan.append(("link", path, target, 0))
        elif _stat.S_ISREG(mode):
            r = (reads.get(path) or [{}])[0] if isinstance(reads.get(path) or [], list) else {}
            if not isinstance(r, dict) or r.get("blob") not in data.blobs:
                reason = r.get("reason") if isinstance(r, dict) else None
                skipped.append(T("{path}: {reason}", path=path,
                                 reason=str(reason) if reason else T("not readable in the bundle")))
                continue
            claim(path, "file")
            plan.append(("file", path, data.blobs[r["blob"]], _stat.S_IMODE(mode) & 0o777))
        else:
            confine.parts(root, path)
            skipped.append(T("{path}: {reason}", path=path,
                             reason=T("device nodes are not exported")))
    procs = data.index.get("proc", {})
    for key, seq in (procs.items() if isinstance(procs, dict) else ()):
        pid, _, name = str(key).partition("/")
        blob = seq[0].get("blob") if isinstance(seq, list) and seq and isinstance(seq[0], dict) \
            else None
        if not pid.isdigit() or not name or "/" in name or blob not in data.blobs:
            raise _refuse(root, f"/proc/{key}", "not a /proc/PID/NAME entry with its blob")
        path = f"/proc/{pid}/{name}"
        claim(path, "file")
        plan.append(("proc", path, data.blobs[blob], 0o644))
    runs = data.index.get("run", {})
    for key, seq in (runs.items() if isinstance(runs, dict) else ()):
        try:
            argv = json.loads(key)
        except ValueError:
            continue
        if not (isinstance(argv, list) and len(argv) == 3 and argv[1] == "-c"
                and isinstance(argv[2], str) and _PACKAGES_MARK in argv[2]):
            continue
        out = seq[0].get("out") if isinstance(seq, list) and seq and isinstance(seq[0], dict) \
            else None
        if out not in data.blobs:
            raise _refuse(root, "index.json", "a package listing without its output blob")
        for d, files in _dist_plan(root, data.blobs[out]):
            claim(d, "dir")
            for f in files:
                claim(f, "file")
        plan.append(("dist", "", data.blobs[out], 0))
    return plan, skipped


def _dist_plan(root: str, out: bytes) -> list[tuple[str, list[str]]]:
    """The dist-info directories and files ``_dist_infos`` writes for a listing (validated:
    a listing that is not the recorded JSON shape refuses the export)."""
    try:
        doc = json.loads(out)
        res = []
        for p in doc.get("packages", {}).values():
            site = p.get("location") or "/usr/local/lib/python3/site-packages"
            d = f"{site}/{p['name'].replace('-', '_')}-{p['version']}.dist-info"
            if not all(isinstance(x, str) for x in (site, p["name"], p["version"])):
                raise TypeError("not text")
            res.append((d, [f"{d}/METADATA", f"{d}/entry_points.txt", f"{d}/RECORD"]))
        return res
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _refuse(root, "index.json", f"the package listing is not usable ({exc})") from None


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
