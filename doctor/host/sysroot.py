"""Sysroot resolution: a directory tree standing in for a machine (``--root``, tests).
Each path component is resolved inside the root as in a chroot (absolute symlinks land in
the root, ``..`` stops at it), and globbing goes one component at a time for the same
reason. ``LiveHost`` uses these for every file question when its root is not "/"."""

from __future__ import annotations

import errno
import fnmatch
import glob as _glob
import os
import posixpath
from typing import Iterable

from ..errors import SourceError, SourceMissing
from .api import norm


def _os_error(path: str, exc: OSError) -> Exception:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return SourceMissing(path, "not found")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return SourceError(path, "permission denied")
    if exc.errno == errno.ELOOP:
        return SourceError(path, "too many levels of symbolic links")
    return SourceError(path, exc.strerror or str(exc))


class SysrootPaths:
    """Mixin: host path <-> real path for a host whose files live under ``self.root``."""

    root: str
    is_sysroot: bool

    def _resolve(self, path: str, follow: bool = True) -> str:
        """Map a host path to a real path, following symlinks inside the root."""
        if "\0" in path:  # os.* would raise ValueError, which no caller expects
            raise SourceError(path.replace("\0", "\\0"), "invalid path (embedded NUL byte)")
        path = norm(path)
        if not self.is_sysroot:
            return path
        parts = [p for p in path.split("/") if p]
        resolved: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = os.path.join(self.root, *resolved, part)
            last = not parts
            if os.path.islink(candidate) and (follow or not last):
                hops += 1
                if hops > 40:
                    raise SourceError(path, "too many levels of symbolic links")
                target = os.readlink(candidate)
                if target.startswith("/"):
                    resolved = []
                parts = [p for p in target.split("/") if p and p != "."] + parts
                continue
            resolved.append(part)
        return os.path.join(self.root, *resolved)

    def _host_path(self, real: str) -> str:
        if not self.is_sysroot:
            return real
        rel = os.path.relpath(real, self.root)
        return "/" if rel == "." else "/" + rel

    def _glob_in_root(self, pattern: str) -> Iterable[str]:
        """Glob one component at a time so symlinks resolve inside the root."""
        current = ["/"]
        for part in [p for p in pattern.split("/") if p]:
            nxt = []
            for base in current:
                if _glob.has_magic(part):
                    try:
                        names = self.listdir(base)
                    except (SourceMissing, SourceError):
                        continue
                    nxt.extend(posixpath.join(base, n) for n in fnmatch.filter(names, part)
                               if not n.startswith(".") or part.startswith("."))
                else:
                    cand = posixpath.join(base, part)
                    if self.exists(cand) or os.path.islink(os.path.join(self.root, cand[1:])):
                        nxt.append(cand)
            current = nxt
        return [c for c in current if c != "/"]
