"""Bundles: everything the checks read on one host, replayable offline.

A bundle is a gzip'd tar holding ``manifest.json`` (tool, host, time, what could not be
collected), ``index.json`` (every answer the Host gave, keyed by the question) and
``blobs/<sha256>`` (file contents, command output, HTTP bodies). ``RecordingHost`` wraps a
live Host and writes one; ``BundleHost`` answers the same questions from it. The demo
scenario is a bundle built by ``doctor/demo/build.py`` with ``BundleWriter``.

Secrets are redacted when recorded: a bundle never holds them.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import json
import posixpath
import stat as _stat
import tarfile
import threading
import time
from typing import Any, BinaryIO, Mapping

from . import __version__, boundedjson
from .cancel import Cancelled
from .errors import BundleError, SourceError, SourceMissing
from .host import (DEFAULT_HTTP_CAP, DEFAULT_OUTPUT_CAP, DEFAULT_READ_LIMIT, CommandResult,
                   Connection, Host, HostInfo, HttpResponse, ProcInfo, StatInfo, norm)
from .redact import (is_binary, redact_argv, redact_bytes, redact_env, redact_environ_blob,
                     redact_text)

FORMAT = "ascend-doctor-bundle"
FORMAT_VERSION = 1
MAX_BLOB = 64 * 1024 * 1024
# Reading bounds (a bundle is hostile input; peak RSS must stay well under 256 MiB).
MAX_INDEX = 32 * 1024 * 1024        # manifest.json / index.json
MAX_INFLATED = 160 * 1024 * 1024    # the whole tar after gunzip, skipped members included
MAX_RATIO = 200                     # inflated / compressed, once past RATIO_FREE bytes
RATIO_FREE = 8 * 1024 * 1024


def _key(*parts: Any) -> str:
    return json.dumps(parts, separators=(",", ":"))


class BundleData:
    """The in-memory content of a bundle: index entries and blobs."""

    def __init__(self) -> None:
        self.manifest: dict[str, Any] = {}
        # answers keyed by question; each value is a list (a sequence replayed in order)
        self.index: dict[str, dict[str, list[Any]]] = {}
        self.blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            self.blobs.setdefault(digest, data)
        return digest

    def put(self, kind: str, key: str, value: Any, sequence: bool = False) -> None:
        with self._lock:
            table = self.index.setdefault(kind, {})
            if sequence:
                table.setdefault(key, []).append(value)
            else:
                table[key] = [value]

    def get(self, kind: str, key: str) -> list[Any] | None:
        return self.index.get(kind, {}).get(key)

    # -- on disk -----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """A deterministic tar.gz: sorted members, fixed mtimes, gzip mtime 0."""
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            def add(name: str, data: bytes) -> None:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 0
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
            add("manifest.json", json.dumps(self.manifest, indent=1, sort_keys=True).encode())
            add("index.json", json.dumps(self.index, sort_keys=True,
                                         separators=(",", ":")).encode())
            for digest in sorted(self.blobs):
                add(f"blobs/{digest}", self.blobs[digest])
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
            gz.write(raw.getvalue())
        return out.getvalue()

    def write(self, path: str) -> None:
        from .atomic import atomic_write
        atomic_write(path, self.to_bytes(), mode=0o600)

    @classmethod
    def load(cls, path_or_bytes: "str | bytes") -> "BundleData":
        """Read a bundle from a path or bytes. Bundles come from strangers: the tar is
        streamed through a bounded inflater, only regular members with plain relative
        names are accepted, and the JSON members are depth- and size-bounded; anything
        else is a one-line BundleError."""
        name = path_or_bytes if isinstance(path_or_bytes, str) else "<bundle>"
        try:
            if isinstance(path_or_bytes, str):
                fh: BinaryIO = open(path_or_bytes, "rb")
            else:
                fh = io.BytesIO(path_or_bytes)
        except OSError as exc:
            raise BundleError(f"cannot read bundle {name}: {exc.strerror or exc}") from None
        data = cls()
        try:
            with fh, tarfile.open(fileobj=_BoundedInflater(fh), mode="r|") as tar:
                for member in tar:
                    _check_member(member)
                    if member.isdir():
                        continue
                    cap = MAX_INDEX if member.name.endswith(".json") else MAX_BLOB
                    if member.size > cap:
                        raise BundleError(f"member {member.name!r} is {member.size} bytes "
                                          f"(limit {cap})")
                    src = tar.extractfile(member)
                    content = src.read(member.size) if src else b""
                    if member.name == "manifest.json":
                        data.manifest = boundedjson.loads(content)
                    elif member.name == "index.json":
                        data.index = boundedjson.loads(content)
                    elif member.name.startswith("blobs/"):
                        data.blobs[member.name[6:]] = content
        except BundleError as exc:
            raise BundleError(f"{name} is refused: {exc}") from None
        except (tarfile.TarError, EOFError, OSError, zlib_error()) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            if reason.startswith("file could not be opened"):
                reason = "not a tar or tar.gz file"
            raise BundleError(f"{name} is not a readable bundle (corrupt or truncated: "
                              f"{reason[:160]})") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise BundleError(f"{name}: bundle metadata is not valid JSON "
                              f"({str(exc)[:160]})") from None
        if not isinstance(data.manifest, dict) or data.manifest.get("format") != FORMAT:
            raise BundleError(f"{name} is not an ascend-doctor bundle (no manifest.json "
                              "with format=ascend-doctor-bundle)")
        version = data.manifest.get("format_version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise BundleError(f"{name}: manifest.json format_version {version!r} is not a number")
        if version > FORMAT_VERSION:
            raise BundleError(f"{name} has bundle format {version}; "
                              f"this ascend-doctor reads up to {FORMAT_VERSION}")
        if not isinstance(data.index, dict):
            raise BundleError(f"{name}: index.json is not an object")
        for kind, table in data.index.items():
            if not isinstance(table, dict):
                raise BundleError(f"{name}: index.json {kind!r} is not an object")
            for key, entries in table.items():
                if not isinstance(entries, list):
                    raise BundleError(f"{name}: index.json {kind} {key!r} is not a list")
                for e in entries:
                    if not isinstance(e, dict):
                        continue
                    for field in ("blob", "out", "err", "body"):
                        if field not in e or (field == "body" and e[field] in (None, "")):
                            continue
                        ref = e[field]
                        if not isinstance(ref, str) or ref not in data.blobs:
                            raise BundleError(f"{name} is truncated: blob {str(ref)[:12]}… "
                                              f"for a {kind} entry is missing")
        return data


def _short(argv, width: int = 80) -> str:
    text = " ".join(str(a) for a in argv).replace("\n", " ")
    return text if len(text) <= width else text[:width - 1] + "…"


def _glob_match(path: str, pattern: str) -> bool:
    """Shell-glob semantics: ``*`` never crosses a ``/``."""
    a, b = path.split("/"), pattern.split("/")
    return len(a) == len(b) and all(fnmatch.fnmatchcase(x, y) for x, y in zip(a, b))


def zlib_error() -> type:
    import zlib
    return zlib.error


def _check_member(member: tarfile.TarInfo) -> None:
    """Only regular files and directories with plain relative names: a bundle never
    needs links, devices, FIFOs, absolute names or ``..`` (raise BundleError naming it)."""
    n = member.name
    if n.startswith("/"):
        raise BundleError(f"member {n!r} has an absolute name")
    if "\\" in n:
        raise BundleError(f"member {n!r} has a backslash in its name")
    if ".." in n.split("/"):
        raise BundleError(f"member {n!r} has a '..' component")
    if "\0" in n or not n.strip("/."):
        raise BundleError(f"member {n!r} has an invalid name")
    if member.issym() or member.islnk():
        raise BundleError(f"member {n!r} is a link (to {member.linkname!r})")
    if member.isdev():
        raise BundleError(f"member {n!r} is a device or FIFO")
    if not (member.isreg() or member.isdir()):
        raise BundleError(f"member {n!r} is not a regular file (tar type {member.type!r})")


class _BoundedInflater(io.RawIOBase):
    """A gzip (or plain tar) stream that inflates incrementally and stops at the caps:
    total inflated bytes and the inflation ratio. tarfile's stream mode reads through it,
    so skipped members count too and memory stays at one chunk's worth."""

    CHUNK_IN = 64 * 1024
    CHUNK_OUT = 256 * 1024

    def __init__(self, raw: BinaryIO) -> None:
        import zlib
        self._raw = raw
        self._in = 0
        self._out = 0
        self._inbuf = raw.read(self.CHUNK_IN)
        self._in = len(self._inbuf)
        self._z = (zlib.decompressobj(16 + zlib.MAX_WBITS)
                   if self._inbuf[:2] == b"\x1f\x8b" else None)
        self._pending = b""
        self._pos = 0
        self._eof = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        import zlib
        out = b""
        while not out and not self._eof:
            if not self._inbuf:
                self._inbuf = self._raw.read(self.CHUNK_IN)
                self._in += len(self._inbuf)
                if not self._inbuf:
                    self._eof = True
                    if self._z is not None:
                        out = self._z.flush()
                    break
            if self._z is None:
                out, self._inbuf = self._inbuf, b""
                continue
            out = self._z.decompress(self._inbuf, self.CHUNK_OUT)
            self._inbuf = self._z.unconsumed_tail
            if self._z.eof:
                rest = self._z.unused_data.lstrip(b"\0")
                if rest:  # concatenated gzip members
                    self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    self._inbuf = rest
                else:
                    self._eof = True
        self._pending, self._pos = out, 0
        self._out += len(out)
        if self._out > MAX_INFLATED:
            raise BundleError(f"it inflates past {MAX_INFLATED >> 20} MiB")
        if self._out > RATIO_FREE and self._out > MAX_RATIO * max(self._in, 1):
            raise BundleError(f"it inflates more than {MAX_RATIO}:1 (a compression bomb)")

    def readinto(self, b) -> int:
        if self._pos >= len(self._pending):
            self._fill()
        n = min(len(b), len(self._pending) - self._pos)
        b[:n] = self._pending[self._pos:self._pos + n]
        self._pos += n
        return n


# -----------------------------------------------------------------------------------------
def _err_entry(exc: Exception) -> dict[str, Any]:
    kind = "missing" if isinstance(exc, SourceMissing) else "error"
    return {"error": kind, "source": getattr(exc, "source", ""),
            "reason": getattr(exc, "reason", str(exc))}


def _raise(entry: Mapping[str, Any]) -> None:
    if entry.get("error") == "missing":
        raise SourceMissing(entry.get("source", ""), entry.get("reason", "not found"))
    raise SourceError(entry.get("source", ""), entry.get("reason", "unreadable"))


def _redact_file(path: str, data: bytes) -> bytes:
    """Redact a file's bytes; /proc environ and cmdline images are redacted in their own
    (NUL-separated) format, everything else line-wise by redact_bytes, which keeps invalid
    UTF-8 and NULs byte-exact and leaves only executables/archives alone."""
    parts = path.split("/")
    if len(parts) == 4 and parts[1] == "proc" and parts[2].isdigit():
        if parts[3] == "environ":
            return redact_environ_blob(data)
        if parts[3] == "cmdline":
            return b"\0".join(a.encode() for a in redact_argv(
                [x.decode("utf-8", "replace") for x in data.split(b"\0")]))
    return redact_bytes(data)


def _stat_entry(st: StatInfo) -> dict[str, Any]:
    return {"mode": st.mode, "uid": st.uid, "gid": st.gid, "size": st.size,
            "mtime": st.mtime, "link": st.link_target}


class RecordingHost(Host):
    """A live Host that records every answer into a BundleData (redacted)."""

    def __init__(self, inner: Host, data: BundleData | None = None) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.data = data or BundleData()
        self.failures: list[dict[str, str]] = []

    def _record(self, kind: str, key: str, fn, encode, sequence: bool = False):
        try:
            value = fn()
        except (SourceMissing, SourceError) as exc:
            self.data.put(kind, key, _err_entry(exc), sequence)
            if isinstance(exc, SourceError):
                self.failures.append({"what": f"{kind} {key}", "reason": str(exc)})
            raise
        self.data.put(kind, key, encode(value), sequence)
        return value

    def read_bytes(self, path, limit=DEFAULT_READ_LIMIT):
        p = norm(path)
        def enc(b: bytes):
            return {"blob": self.data.blob(_redact_file(p, b)), "limit": limit}
        value = self._record("read", p, lambda: self.inner.read_bytes(p, limit), enc)
        return value

    def open_stream(self, path):
        """A stream that records the byte ranges a probe actually reads.

        An ELF parser reads a few kilobytes of a 97 MB libtorch_npu.so; a log reader reads
        it all. Either way the bundle holds exactly what was read (up to MAX_BLOB).
        """
        p = norm(path)
        try:
            inner = self.inner.open_stream(p)
        except (SourceMissing, SourceError) as exc:
            self.data.put("stream", p, _err_entry(exc))
            raise
        return io.BufferedReader(_RecordingStream(inner, p, self))

    def _store_ranges(self, path: str, size: int, ranges: list[tuple[int, bytes]]) -> None:
        merged: list[list[Any]] = []
        for off, chunk in sorted(ranges, key=lambda r: r[0]):
            if merged and off <= merged[-1][0] + len(merged[-1][1]):
                start, data = merged[-1]
                end = off + len(chunk)
                if end > start + len(data):
                    data = data[:off - start] + chunk
                merged[-1] = [start, data]
            else:
                merged.append([off, chunk])
        total, kept = 0, []
        for off, data in merged:
            if total >= MAX_BLOB:
                break
            data = data[:MAX_BLOB - total]
            total += len(data)
            # every range of a text file is redacted (a log read in ranges or still growing);
            # an executable's ranges keep their offsets (redact_bytes leaves binaries alone)
            binary = bool(merged) and merged[0][0] == 0 and is_binary(merged[0][1])
            kept.append([off, self.data.blob(data if binary else redact_bytes(data))])
        self.data.put("stream", path, {"size": size, "ranges": kept})

    def listdir(self, path):
        p = norm(path)
        return self._record("listdir", p, lambda: self.inner.listdir(p), list)

    def stat(self, path, follow=True):
        p = norm(path)
        return self._record("stat" if follow else "lstat", p,
                            lambda: self.inner.stat(p, follow), _stat_entry)

    def realpath(self, path):
        p = norm(path)
        return self._record("realpath", p, lambda: self.inner.realpath(p), str)

    def glob(self, pattern):
        p = norm(pattern)
        return self._record("glob", p, lambda: self.inner.glob(p), list)

    def which(self, name):
        value = self.inner.which(name)
        self.data.put("which", name, value)
        return value

    def run(self, argv, timeout=10.0, cap=DEFAULT_OUTPUT_CAP, env=None):
        key = _key(*redact_argv(list(argv)))
        def enc(r: CommandResult):
            return {"rc": r.returncode, "out": self.data.blob(redact_bytes(r.stdout)),
                    "err": self.data.blob(redact_bytes(r.stderr)), "duration": r.duration_s,
                    "timed_out": r.timed_out, "truncated": r.truncated}
        try:
            return self._record("run", key, lambda: self.inner.run(argv, timeout, cap, env), enc,
                                sequence=True)
        except Cancelled as exc:  # killed with its abandoned check: a replay names that
            self.data.put("run", key, {"error": "error", "source": _short(redact_argv(list(argv))),
                                       "reason": f"killed at collection time: {exc.reason}"},
                          True)
            raise

    def http_get(self, url, timeout=2.0, headers=None, cap=DEFAULT_HTTP_CAP):
        def enc(r: HttpResponse):
            hdrs = {k: (redact_text(f"{k}: {v}").split(": ", 1)[1]) for k, v in r.headers.items()}
            return {"status": r.status, "headers": hdrs,
                    "body": self.data.blob(redact_bytes(r.body)), "error": r.error,
                    "duration": r.duration_s, "truncated": r.truncated}
        return self._record("http", url, lambda: self.inner.http_get(url, timeout, headers, cap),
                            enc, sequence=True)

    def processes(self):
        def enc(procs: list[ProcInfo]):
            return [{"pid": p.pid, "ppid": p.ppid, "name": p.name,
                     "cmdline": redact_argv(list(p.cmdline)), "user": p.user, "uid": p.uid,
                     "exe": p.exe, "create_time": p.create_time} for p in procs]
        return self._record("processes", "", self.inner.processes, enc, sequence=True)

    def proc_read(self, pid, name):
        def enc(b: bytes):
            if name == "environ":
                b = redact_environ_blob(b)
            elif name == "cmdline":
                b = b"\0".join(a.encode() for a in redact_argv(
                    [x.decode("utf-8", "replace") for x in b.split(b"\0")]))
            else:
                b = redact_bytes(b)
            return {"blob": self.data.blob(b)}
        return self._record("proc", f"{int(pid)}/{name}", lambda: self.inner.proc_read(pid, name),
                            enc, sequence=True)

    def connections(self):
        def enc(conns: list[Connection]):
            return [{"family": c.family, "type": c.type, "laddr": list(c.laddr),
                     "raddr": list(c.raddr) if c.raddr else None, "status": c.status,
                     "pid": c.pid} for c in conns]
        return self._record("connections", "", self.inner.connections, enc, sequence=True)

    def capture(self, iface, bpf, seconds):
        def enc(stream):
            return {"blob": self.data.blob(stream.read(MAX_BLOB))}
        stream = self._record("capture", "", lambda: self.inner.capture(iface, bpf, seconds), enc)
        stream.close()
        e = self.data.get("capture", "")[-1]
        return io.BytesIO(self.data.blobs[e["blob"]])

    def environ(self):
        env = self.inner.environ()
        self.data.put("environ", "", redact_env(env))
        return env

    def info(self):
        i = self.inner.info()
        self.data.put("info", "", {"hostname": i.hostname, "kernel": i.kernel, "arch": i.arch,
                                   "os": i.os})
        return i

    def monotonic(self, tag):
        value = self.inner.monotonic(tag)
        self.data.put("clock", tag, value, sequence=True)
        return value

    def sleep(self, seconds):
        self.inner.sleep(seconds)

    def finish(self, context: str, options: Mapping[str, Any], report: Any = None
               ) -> BundleData:
        """Write the manifest; with the collecting run's ``report``, also what it concluded,
        so a replay (`check --bundle`) can be compared with the live run."""
        self.info()
        self.environ()
        self.data.manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "tool_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "context": context, "host": self.data.index.get("info", {}).get("", [{}])[0],
            "options": {k: v for k, v in options.items() if k != "api_key"},
            "collection_failures": self.failures,
        }
        if report is not None:
            from .report.jsonreport import report_dict

            self.data.manifest["findings_at_collection"] = report.summary
            self.data.manifest["checks_at_collection"] = [
                {"id": c["id"], "status": c["status"],
                 "findings": [[f["status"], f["message"]] for f in c["findings"]]}
                for c in report_dict(report)["checks"]]
        return self.data


class _RecordingStream(io.RawIOBase):
    """Wraps a real stream; remembers (offset, bytes) of every read for the bundle."""

    def __init__(self, inner: BinaryIO, path: str, host: "RecordingHost") -> None:
        self._inner, self._path, self._host = inner, path, host
        self._ranges: list[tuple[int, bytes]] = []
        self._recorded = 0
        try:
            inner.seek(0, io.SEEK_END)
            self._size = inner.tell()
            inner.seek(0)
        except (OSError, ValueError):
            self._size = -1

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._inner.seek(offset, whence)

    def tell(self) -> int:
        return self._inner.tell()

    def readinto(self, b) -> int:
        pos = self._inner.tell()
        data = self._inner.read(len(b))
        n = len(data)
        b[:n] = data
        if n and self._recorded < MAX_BLOB:
            self._ranges.append((pos, bytes(data)))
            self._recorded += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._host._store_ranges(self._path, self._size, self._ranges)
            self._inner.close()
        super().close()


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


# -----------------------------------------------------------------------------------------
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
        from .host import LiveHost
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
            raise SourceMissing(norm(path), "not in the bundle")
        if "error" in e:
            _raise(e)
        return self._blob(e["blob"])[:limit]

    def open_stream(self, path) -> BinaryIO:
        p = norm(path)
        if self._overlay_has(p):
            return self._overlay_host().open_stream(p)
        e = self._next("stream", p)
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
            raise SourceMissing(p, "not in the bundle")
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
            raise SourceMissing(p, "not in the bundle")
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

    def glob(self, pattern):
        p = norm(pattern)
        e = self._next("glob", p)
        if isinstance(e, list):
            found = set(e)
        else:
            found = {k for kind in ("read", "stat", "lstat", "listdir")
                     for k in self.data.index.get(kind, {}) if _glob_match(k, p)}
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
            raise SourceMissing(str(argv[0]), f"`{_short(argv)}` was not recorded in the bundle")
        if "error" in e:
            _raise(e)
        return CommandResult(tuple(argv), e["rc"], self._blob(e["out"])[:cap],
                             self._blob(e["err"])[:cap], e.get("duration", 0.0),
                             e.get("timed_out", False), e.get("truncated", False))

    def http_get(self, url, timeout=2.0, headers=None, cap=DEFAULT_HTTP_CAP):
        e = self._next("http", url)
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
            raise SourceMissing("process table", "not in the bundle")
        if isinstance(e, dict):
            _raise(e)
        return [ProcInfo(p["pid"], p["ppid"], p["name"], tuple(p["cmdline"]), p.get("user", ""),
                         p.get("uid", -1), p.get("exe", ""), p.get("create_time", 0.0))
                for p in e]

    def proc_read(self, pid, name):
        e = self._next("proc", f"{int(pid)}/{name}")
        if e is None:
            raise SourceMissing(f"/proc/{pid}/{name}", "not in the bundle")
        if "error" in e:
            _raise(e)
        return self._blob(e["blob"])

    def connections(self):
        e = self._next("connections", "")
        if e is None:
            raise SourceMissing("socket table", "not in the bundle")
        if isinstance(e, dict):
            _raise(e)
        return [Connection(c["family"], c["type"], tuple(c["laddr"]),
                           tuple(c["raddr"]) if c.get("raddr") else None, c["status"],
                           c.get("pid")) for c in e]

    def capture(self, iface, bpf, seconds):
        e = self._next("capture", "")
        if e is None:
            raise SourceMissing("live capture", "no capture was recorded in the bundle")
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


# -----------------------------------------------------------------------------------------
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
