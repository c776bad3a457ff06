"""Replaying a bundle: ``BundleHost`` answers every Host question from a BundleData, in
the recorded order. Entries are untrusted: a malformed one is a SourceError naming the
question. The optional overlay (a sysroot consulted first for files) is how a fix applied
to a bundle or the demo materialises; its writes go through doctor/confine.py."""

from __future__ import annotations

import bisect
import fnmatch
import io
import json
import posixpath
import re
import threading
from typing import Any, BinaryIO

from ..i18n import T
from ..errors import SourceError, SourceMissing
from ..host import (DEFAULT_HTTP_CAP, DEFAULT_OUTPUT_CAP, DEFAULT_READ_LIMIT, CommandResult,
                    Connection, Host, HostInfo, HttpResponse, ProcInfo, StatInfo, norm)
from ..redact import redact_argv, redact_text
from .format import MAX_BLOB, BundleData, _key, _raise, _short


def _glob_match(path: str, pattern: str) -> bool:
    """Shell-glob semantics: ``*`` never crosses a ``/``."""
    a, b = path.split("/"), pattern.split("/")
    return len(a) == len(b) and all(fnmatch.fnmatchcase(x, y) for x, y in zip(a, b))


_GLOB_KINDS = ("read", "stat", "lstat", "listdir")
_GLOB_CHARS = re.compile(r"[*?\[]")
_PROC_FD = re.compile(r"^/proc/\d+/fd/\d+$")


def _glob_keys(keys: list[str], pattern: str) -> set[str]:
    """The sorted ``keys`` that ``_glob_match`` accepts for ``pattern``, testing only those
    that share its literal prefix (found by bisection): the same answer, without matching
    every recorded path against every pattern."""
    m = _GLOB_CHARS.search(pattern)
    prefix = pattern[:m.start()] if m else pattern
    parts = pattern.count("/")
    out = set()
    for i in range(bisect.bisect_left(keys, prefix), len(keys)):
        k = keys[i]
        if not k.startswith(prefix):
            break
        if k.count("/") == parts and _glob_match(k, pattern):
            out.add(k)
    return out



class _SparseStream(io.RawIOBase):
    """Serves the recorded ranges of a file; reading outside them is a SourceError."""

    def __init__(self, path: str, size: int, ranges: list[tuple[int, bytes]]) -> None:
        self._path, self._size, self._ranges, self._pos = path, size, ranges, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        if self._pos >= self._size:
            return 0
        for off, data in self._ranges:
            if off <= self._pos < off + len(data):
                chunk = data[self._pos - off:self._pos - off + len(b)]
                b[:len(chunk)] = chunk
                self._pos += len(chunk)
                return len(chunk)
        raise SourceError(self._path, f"byte {self._pos} of this file was not collected in the "
                          "bundle")



class BundleHost(Host):
    """Answers every Host question from a bundle; files may be overlaid by a directory.

    The overlay (used when a fix is applied to the demo or a bundle) is a sysroot that is
    consulted first for files, so a fix's effect is visible to the re-run check.
    """

    kind = "bundle"

    def __init__(self, data: BundleData, overlay: str | None = None) -> None:
        self.data = data
        self.overlay = overlay
        self._pos: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.kind = "bundle"

    @classmethod
    def open(cls, path: str, overlay: str | None = None) -> "BundleHost":
        return cls(BundleData.load(path), overlay)

    # -- replay ------------------------------------------------------------------------
    def _next(self, kind: str, key: str) -> Any:
        entries = self.data.get(kind, key)
        if not entries:
            return None
        with self._lock:
            i = self._pos.get((kind, key), 0)
            self._pos[(kind, key)] = i + 1
        return entries[min(i, len(entries) - 1)]

    def _blob(self, digest: str) -> bytes:
        return self.data.blobs[digest]

    def _overlay_host(self):
        from ..host import LiveHost
        return LiveHost(self.overlay) if self.overlay else None

    def _overlay_has(self, path: str) -> bool:
        import os
        if not self.overlay:
            return False
        return os.path.lexists(os.path.join(self.overlay, norm(path).lstrip("/")))

    def _file_entry(self, path: str) -> Any:
        """The recorded entry for a file, following recorded symlinks in the scenario."""
        p = norm(path)
        for _ in range(40):
            e = self._next("read", p)
            if e is not None:
                return e
            target = self._link_target(p)
            if target is None:
                return None
            p = target
        return {"error": "error", "source": path, "reason": "too many levels of symbolic links"}

    def _link_target(self, path: str) -> str | None:
        """Resolve the first symlinked component of ``path`` from lstat entries."""
        parts = [x for x in norm(path).split("/") if x]
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            e = self._next("lstat", prefix)
            if isinstance(e, dict) and e.get("link"):
                link = e["link"]
                base = link if link.startswith("/") else posixpath.join(
                    posixpath.dirname(prefix), link)
                return norm("/".join([base] + parts[i:]))
        return None

    # -- files -------------------------------------------------------------------------
    def read_bytes(self, path, limit=DEFAULT_READ_LIMIT):
        if self._overlay_has(path):
            return self._overlay_host().read_bytes(path, limit)
        e = self._file_entry(path)
        if e is None:
            raise SourceMissing(norm(path), T("not in the bundle"))
        if "error" in e:
            _raise(e)
        return self._blob(e["blob"])[:limit]

    def open_stream(self, path, guard=None) -> BinaryIO:
        """The recorded stream (``guard`` was applied when it was collected)."""
        p = norm(path)
        if self._overlay_has(p):
            return self._overlay_host().open_stream(p)
        e = self._next("stream", p)
        if e is None and _PROC_FD.match(p):
            # bundles before the fd itself was opened recorded the stream under its target
            target = self.data.get("realpath", p)
            if target and isinstance(target[-1], str) and target[-1] != p:
                e = self._next("stream", norm(target[-1]))
        if e is None:
            return io.BytesIO(self.read_bytes(p, MAX_BLOB))
        if "error" in e:
            _raise(e)
        return io.BufferedReader(_SparseStream(p, e["size"],
                                              [(off, self._blob(d)) for off, d in e["ranges"]]))

    def listdir(self, path):
        p = norm(path)
        if self._overlay_has(p) and self._overlay_host().is_dir(p):
            names = set(self._overlay_host().listdir(p))
            try:
                names |= set(self._listdir_recorded(p))
            except (SourceMissing, SourceError):
                pass
            return sorted(names)
        return self._listdir_recorded(p)

    def _listdir_recorded(self, p: str) -> list[str]:
        e = self._next("listdir", p)
        if e is None:
            target = self._link_target(p)
            if target and target != p:
                return self._listdir_recorded(target)
            raise SourceMissing(p, T("not in the bundle"))
        if isinstance(e, dict):
            _raise(e)
        return list(e)

    def stat(self, path, follow=True):
        p = norm(path)
        if self._overlay_has(p):
            return self._overlay_host().stat(p, follow)
        e = self._next("stat" if follow else "lstat", p)
        if e is None and follow:
            target = self._link_target(p)
            if target and target != p:
                return self.stat(target, follow)
        if e is None:
            raise SourceMissing(p, T("not in the bundle"))
        if "error" in e:
            _raise(e)
        return StatInfo(p, e["mode"], e["uid"], e["gid"], e["size"], e["mtime"], e.get("link"))

    def realpath(self, path):
        p = norm(path)
        e = self._next("realpath", p)
        if isinstance(e, str):
            return e
        if isinstance(e, dict):
            _raise(e)
        for _ in range(40):
            target = self._link_target(p)
            if target is None or target == p:
                return p
            p = target
        return p

    def _recorded_paths(self) -> list[str]:
        """Every path a file question was recorded for, sorted; rebuilt when the index grew."""
        tables = [self.data.index.get(kind, {}) for kind in _GLOB_KINDS]
        size = sum(len(t) for t in tables)
        cached = getattr(self, "_paths_cache", None)
        if cached is None or cached[0] != size:
            cached = (size, sorted({k for t in tables for k in t}))
            self._paths_cache = cached
        return cached[1]

    def glob(self, pattern):
        p = norm(pattern)
        e = self._next("glob", p)
        if isinstance(e, list):
            found = set(e)
        else:
            found = _glob_keys(self._recorded_paths(), p)
        if self.overlay:
            found |= set(self._overlay_host().glob(p))
        return sorted(found)

    # -- commands, network, processes --------------------------------------------------
    def which(self, name):
        e = self.data.get("which", name)
        if e:
            return e[0]
        # a scenario records commands by argv; a command it ran is "installed"
        for key in self.data.index.get("run", {}):
            if json.loads(key)[0] == name:
                return name
        return None

    def run(self, argv, timeout=10.0, cap=DEFAULT_OUTPUT_CAP, env=None):
        key = _key(*redact_argv(list(argv)))
        e = self._next("run", key)
        if e is None:
            raise SourceMissing(str(argv[0]), T("`{cmd}` was not recorded in the bundle", cmd=_short(argv)))
        if "error" in e:
            _raise(e)
        return CommandResult(tuple(argv), e["rc"], self._blob(e["out"])[:cap],
                             self._blob(e["err"])[:cap], e.get("duration", 0.0),
                             e.get("timed_out", False), e.get("truncated", False))

    def http_get(self, url, timeout=2.0, headers=None, cap=DEFAULT_HTTP_CAP):
        e = self._next("http", url)
        if e is None:  # recorded under the URL redacted (user:password@, ?token=)
            e = self._next("http", redact_text(url))
        if e is None:
            return HttpResponse(url, None, error="not recorded in the bundle (the service was "
                                "not reachable at collection time)")
        if "error" in e and e.get("status") is None and "body" not in e:
            _raise(e)
        return HttpResponse(url, e.get("status"), dict(e.get("headers") or {}),
                            self._blob(e["body"])[:cap] if e.get("body") else b"",
                            e.get("error"), e.get("duration", 0.0), e.get("truncated", False))

    def processes(self):
        e = self._next("processes", "")
        if e is None:
            raise SourceMissing(T("process table"), T("not in the bundle"))
        if isinstance(e, dict):
            _raise(e)
        from ..proctable import minimise  # a bundle from an older doctor may hold full argv
        return minimise(ProcInfo(p["pid"], p["ppid"], p["name"], tuple(p["cmdline"]),
                                 p.get("user", ""), p.get("uid", -1), p.get("exe", ""),
                                 p.get("create_time", 0.0)) for p in e)

    def proc_read(self, pid, name):
        e = self._next("proc", f"{int(pid)}/{name}")
        if e is None:
            raise SourceMissing(f"/proc/{pid}/{name}", T("not in the bundle"))
        if "error" in e:
            _raise(e)
        return self._blob(e["blob"])

    def connections(self):
        e = self._next("connections", "")
        if e is None:
            raise SourceMissing(T("socket table"), T("not in the bundle"))
        if isinstance(e, dict):
            _raise(e)
        return [Connection(c["family"], c["type"], tuple(c["laddr"]),
                           tuple(c["raddr"]) if c.get("raddr") else None, c["status"],
                           c.get("pid")) for c in e]

    def capture(self, iface, bpf, seconds):
        e = self._next("capture", "")
        if e is None:
            raise SourceMissing(T("live capture"), T("no capture was recorded in the bundle"))
        if "error" in e:
            _raise(e)
        return io.BytesIO(self._blob(e["blob"]))

    def environ(self):
        e = self.data.get("environ", "")
        return dict(e[0]) if e else {}

    def info(self):
        e = self.data.get("info", "")
        d = e[0] if e else self.data.manifest.get("host", {})
        return HostInfo(d.get("hostname", ""), d.get("kernel", ""), d.get("arch", ""),
                        d.get("os", ""))

    def monotonic(self, tag):
        e = self._next("clock", tag)
        return float(e) if e is not None else 0.0

    def sleep(self, seconds):
        return None


_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def _guard_replay(cls: type) -> type:
    """A bundle is untrusted input: an entry of the wrong shape (a mutated or hand-edited
    index.json) becomes SourceError naming the question, never a stray exception."""
    import functools

    def wrap(name: str, fn):
        @functools.wraps(fn)
        def guarded(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except _MALFORMED as exc:
                what = f"bundle answer to {name}({', '.join(repr(a) for a in args[:1])})"
                raise SourceError(what, f"malformed entry ({type(exc).__name__}: {exc})"
                                  ) from None
        return guarded

    for name in ("read_bytes", "listdir", "stat", "realpath", "glob", "run", "http_get",
                 "processes", "proc_read", "connections", "environ"):
        setattr(cls, name, wrap(name, cls.__dict__[name]))

    def safe(name: str, fn, default):
        @functools.wraps(fn)
        def guarded(self, *args, **kwargs):  # called outside checks: a default, not an error
            try:
                return fn(self, *args, **kwargs)
            except _MALFORMED:
                return default()
        return guarded

    cls.info = safe("info", cls.__dict__["info"], lambda: HostInfo("", "", "", ""))
    cls.monotonic = safe("monotonic", cls.__dict__["monotonic"], lambda: 0.0)
    which = cls.__dict__["which"]
    cls.which = lambda self, name: (lambda v: v if isinstance(v, str) else None)(
        safe("which", which, lambda: None)(self, name))
    return cls


_guard_replay(BundleHost)
