"""Writing a bundle during `collect`: ``RecordingHost`` wraps a live Host and records every
answer it gives, redacted (a bundle never holds a secret), into a BundleData."""

from __future__ import annotations

import io
import time
from typing import Any, BinaryIO, Mapping

from .. import __version__
from ..cancel import Cancelled
from ..errors import SourceError, SourceMissing
from ..host import (DEFAULT_HTTP_CAP, DEFAULT_OUTPUT_CAP, DEFAULT_READ_LIMIT, CommandResult,
                    Connection, Host, HttpResponse, ProcInfo, StatInfo, norm)
from ..redact import (is_binary, redact_argv, redact_bytes, redact_env, redact_environ_blob,
                      redact_obj, redact_text)
from .format import FORMAT, FORMAT_VERSION, MAX_BLOB, BundleData, _err_entry, _key, _short


def redact_cmdline_blob(data: bytes) -> bytes:
    """Redact a NUL-separated /proc/<pid>/cmdline image as an argv, byte-exact around the
    redactions (invalid UTF-8 is carried through surrogateescape, never a crash)."""
    argv = [x.decode("utf-8", "surrogateescape") for x in data.split(b"\0")]
    return b"\0".join(a.encode("utf-8", "surrogateescape") for a in redact_argv(argv))


def _redact_file(path: str, data: bytes) -> bytes:
    """Redact a file's bytes; /proc environ and cmdline images are redacted in their own
    (NUL-separated) format, everything else line-wise by redact_bytes, which keeps invalid
    UTF-8 and NULs byte-exact and leaves only executables/archives alone."""
    parts = path.split("/")
    if len(parts) == 4 and parts[1] == "proc" and parts[2].isdigit():
        if parts[3] == "environ":
            return redact_environ_blob(data)
        if parts[3] == "cmdline":
            return redact_cmdline_blob(data)
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

    def open_stream(self, path, guard=None):
        """A stream that records the byte ranges a probe actually reads.

        An ELF parser reads a few kilobytes of a 97 MB libtorch_npu.so; a log reader reads
        it all. Either way the bundle holds exactly what was read (up to MAX_BLOB).
        """
        p = norm(path)
        try:
            inner = self.inner.open_stream(p, guard) if guard is not None \
                else self.inner.open_stream(p)
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
                    "body": self.data.blob(redact_bytes(r.body)),
                    "error": redact_text(r.error) if r.error else r.error,
                    "duration": r.duration_s, "truncated": r.truncated}
        # the key is the URL redacted (user:password@, ?token=, Signature=): a replay looks
        # it up the same way
        return self._record("http", redact_text(url),
                            lambda: self.inner.http_get(url, timeout, headers, cap),
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
                b = redact_cmdline_blob(b)
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
            "options": redact_obj({k: v for k, v in options.items() if k != "api_key"}),
            "collection_failures": self.failures,
        }
        if report is not None:
            from ..report.jsonreport import report_dict

            self.data.manifest["findings_at_collection"] = report.summary
            self.data.manifest["checks_at_collection"] = redact_obj([
                {"id": c["id"], "status": c["status"],
                 "findings": [[f["status"], f["message"]] for f in c["findings"]]}
                for c in report_dict(report)["checks"]])
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

