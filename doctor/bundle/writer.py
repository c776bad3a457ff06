"""Building a bundle by hand (the demo scenario, tests): ``BundleWriter`` declares files,
commands, HTTP answers and processes in real formats and derives the rest."""

from __future__ import annotations

import posixpath
import stat as _stat
from typing import Any, Mapping

from ..host import Connection, HostInfo, norm
from ..redact import redact_argv, redact_env
from .format import FORMAT, FORMAT_VERSION, BundleData, _key


class BundleWriter:
    """Build a bundle by hand, as the demo scenario does: declare files, commands, HTTP
    answers and processes in real formats; directory listings and stats are derived."""

    def __init__(self, host: HostInfo, context: str = "demo", created: str = "2026-01-01T00:00:00Z"
                 ) -> None:
        self.data = BundleData()
        self._files: dict[str, dict[str, Any]] = {}
        self.host = host
        self.context = context
        self.created = created
        self._procs: list[dict[str, Any]] = []

    def file(self, path: str, content: "bytes | str", mode: int = 0o644, uid: int = 0,
             gid: int = 0, mtime: float = 1767225600.0) -> None:
        data = content.encode() if isinstance(content, str) else content
        p = norm(path)
        self._files[p] = {"type": "file", "mode": _stat.S_IFREG | mode, "uid": uid, "gid": gid,
                          "size": len(data), "mtime": mtime, "blob": self.data.blob(data)}

    def unreadable(self, path: str, mode: int = 0o600, uid: int = 0, mtime: float = 1767225600.0
                   ) -> None:
        """A file that exists but the collector could not read (permission denied)."""
        p = norm(path)
        self._files[p] = {"type": "file", "mode": _stat.S_IFREG | mode, "uid": uid, "gid": 0,
                          "size": 0, "mtime": mtime, "denied": True}

    def dir(self, path: str, mode: int = 0o755, uid: int = 0, mtime: float = 1767225600.0) -> None:
        self._files[norm(path)] = {"type": "dir", "mode": _stat.S_IFDIR | mode, "uid": uid,
                                   "gid": 0, "size": 4096, "mtime": mtime}

    def symlink(self, path: str, target: str) -> None:
        self._files[norm(path)] = {"type": "link", "mode": _stat.S_IFLNK | 0o777, "uid": 0,
                                   "gid": 0, "size": len(target), "mtime": 1767225600.0,
                                   "target": target}

    def device(self, path: str, mode: int = 0o660, uid: int = 0, gid: int = 0) -> None:
        self._files[norm(path)] = {"type": "chr", "mode": _stat.S_IFCHR | mode, "uid": uid,
                                   "gid": gid, "size": 0, "mtime": 1767225600.0}

    def command(self, argv: list[str], stdout: "bytes | str" = b"", rc: int | None = 0,
                stderr: "bytes | str" = b"", timed_out: bool = False, duration: float = 0.05
                ) -> None:
        out = stdout.encode() if isinstance(stdout, str) else stdout
        err = stderr.encode() if isinstance(stderr, str) else stderr
        self.data.put("run", _key(*redact_argv(list(argv))), {"rc": rc, "out": self.data.blob(out),
                                          "err": self.data.blob(err), "duration": duration,
                                          "timed_out": timed_out, "truncated": False},
                      sequence=True)

    def http(self, url: str, status: int | None, body: "bytes | str" = b"",
             headers: Mapping[str, str] | None = None, error: str | None = None,
             duration: float = 0.003) -> None:
        b = body.encode() if isinstance(body, str) else body
        self.data.put("http", url, {"status": status, "headers": dict(headers or {}),
                                    "body": self.data.blob(b), "error": error,
                                    "duration": duration, "truncated": False}, sequence=True)

    def process(self, pid: int, ppid: int, cmdline: list[str], *, user: str = "root",
                uid: int = 0, environ: Mapping[str, str] | None = None, exe: str = "",
                files: Mapping[str, "bytes | str | list[bytes | str]"] | None = None,
                create_time: float = 1767225600.0) -> None:
        """A process and its /proc files; a list value is a sequence of successive reads."""
        name = posixpath.basename(cmdline[0]) if cmdline else ""
        self._procs.append({"pid": pid, "ppid": ppid, "name": name[:15], "cmdline": cmdline,
                            "user": user, "uid": uid, "exe": exe or (cmdline[0] if cmdline else ""),
                            "create_time": create_time})
        procfiles: dict[str, Any] = dict(files or {})
        procfiles.setdefault("cmdline", b"\0".join(a.encode() for a in cmdline) + b"\0")
        if environ is not None:
            procfiles["environ"] = b"\0".join(f"{k}={v}".encode() for k, v in
                                              redact_env(environ).items()) + b"\0"
        for fname, content in procfiles.items():
            seq = content if isinstance(content, list) else [content]
            for item in seq:
                data = item.encode() if isinstance(item, str) else item
                self.data.put("proc", f"{pid}/{fname}", {"blob": self.data.blob(data)},
                              sequence=True)

    def connections(self, conns: list[Connection]) -> None:
        """Add sockets to the one socket table (parts add theirs; none replaces another's)."""
        current = (self.data.get("connections", "") or [[]])[0]
        self.data.put("connections", "", current + [
            {"family": c.family, "type": c.type, "laddr": list(c.laddr),
             "raddr": list(c.raddr) if c.raddr else None, "status": c.status, "pid": c.pid}
            for c in conns])

    def clock(self, tag: str, values: list[float]) -> None:
        for v in values:
            self.data.put("clock", tag, v, sequence=True)

    def environ(self, env: Mapping[str, str]) -> None:
        self.data.put("environ", "", redact_env(env))

    def finish(self, options: Mapping[str, Any] | None = None) -> BundleData:
        """Derive listings and stats from the declared tree and write the manifest."""
        files = dict(self._files)
        for p in list(files):  # every ancestor is a directory
            d = posixpath.dirname(p)
            while d and d not in files:
                files[d] = {"type": "dir", "mode": _stat.S_IFDIR | 0o755, "uid": 0, "gid": 0,
                            "size": 4096, "mtime": 1767225600.0}
                if d == "/":
                    break
                d = posixpath.dirname(d)
        children: dict[str, set[str]] = {}
        for p in files:
            if p != "/":
                children.setdefault(posixpath.dirname(p), set()).add(posixpath.basename(p))
        for p, node in sorted(files.items()):
            st = {k: node[k] for k in ("mode", "uid", "gid", "size", "mtime")}
            st["link"] = node.get("target")
            self.data.put("lstat", p, st)
            if node["type"] == "link":
                continue
            self.data.put("stat", p, st)
            if node["type"] == "dir":
                self.data.put("listdir", p, sorted(children.get(p, ())))
            elif node.get("denied"):
                self.data.put("read", p, {"error": "error", "source": p,
                                          "reason": "permission denied"})
            elif node["type"] == "file":
                self.data.put("read", p, {"blob": node["blob"]})
        self.data.put("processes", "", sorted(self._procs, key=lambda x: x["pid"]))
        self.data.put("info", "", {"hostname": self.host.hostname, "kernel": self.host.kernel,
                                   "arch": self.host.arch, "os": self.host.os})
        self.data.manifest = {"format": FORMAT, "format_version": FORMAT_VERSION,
                              "tool_version": "scenario", "created": self.created,
                              "context": self.context, "host": self.data.get("info", "")[0],
                              "options": dict(options or {}), "collection_failures": []}
        return self.data
