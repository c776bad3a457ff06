"""The Host API: what every host answers (files, commands, HTTP, processes, clock) and the
frozen records it answers with. ``LiveHost`` (live.py), ``BundleHost`` and ``RecordingHost``
(doctor/bundle/) implement it; probes see only this."""

from __future__ import annotations

import posixpath
import stat as _stat
from abc import ABC, abstractmethod
from typing import Any, BinaryIO, Mapping

from ..errors import SourceError, SourceMissing
from ..model import HostInfo
from ..procnet import Connection  # re-exported: ascend_doctor.host's connection type
from dataclasses import dataclass, field

DEFAULT_READ_LIMIT = 64 * 1024 * 1024
DEFAULT_OUTPUT_CAP = 1024 * 1024
DEFAULT_HTTP_CAP = 8 * 1024 * 1024


@dataclass(frozen=True, eq=False)
class StatInfo:
    """An lstat/stat answer, as the checks need it (no device or inode numbers)."""

    path: str
    mode: int  # full st_mode (type bits + permissions)
    uid: int
    gid: int
    size: int
    mtime: float
    link_target: str | None = None  # set when the path itself is a symlink (lstat)

    @property
    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return _stat.S_ISREG(self.mode)

    @property
    def is_link(self) -> bool:
        return _stat.S_ISLNK(self.mode)

    @property
    def is_char_device(self) -> bool:
        return _stat.S_ISCHR(self.mode)

    @property
    def perm(self) -> int:
        return _stat.S_IMODE(self.mode)


@dataclass(frozen=True, eq=False)
class CommandResult:
    """How a command ended: its exit code (None if killed), output and whether it was cut."""

    argv: tuple[str, ...]
    returncode: int | None  # None when it timed out and was killed
    stdout: bytes
    stderr: bytes
    duration_s: float
    timed_out: bool = False
    truncated: bool = False
    timeout_s: float | None = None  # the budget it ran under (what a timeout message names)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def describe_failure(self) -> str:
        """One line a finding can carry: what ran and how it ended."""
        cmd = " ".join(self.argv)
        if self.timed_out:
            # name the budget, not the measured time: a loaded host overshoots by scheduling
            limit = (f"{self.timeout_s:g}" if self.timeout_s is not None
                     else f"{self.duration_s:.1f}")
            return f"`{cmd}` did not finish within {limit} s (killed)"
        last = (self.stderr or self.stdout).decode("utf-8", "replace").strip().splitlines()
        tail = last[-1] if last else "no output"
        return f"`{cmd}` exited {self.returncode}: {tail}"


@dataclass(frozen=True, eq=False)
class HttpResponse:
    """One GET: the status and body, or why there is none."""

    url: str
    status: int | None  # None: no HTTP answer at all (refused, timeout, garbage)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    error: str | None = None  # why there is no usable answer
    duration_s: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and self.error is None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass(frozen=True, eq=False)
class ProcInfo:
    """One process as /proc shows it: ids, name, argv, owner, executable."""

    pid: int
    ppid: int
    name: str
    cmdline: tuple[str, ...]
    user: str = ""
    uid: int = -1
    exe: str = ""
    create_time: float = 0.0


class Host(ABC):
    """Every access to the machine, as one interface with three implementations."""

    kind: str = "live"

    # -- files -------------------------------------------------------------------------
    @abstractmethod
    def read_bytes(self, path: str, limit: int = DEFAULT_READ_LIMIT) -> bytes: ...

    def read_text(self, path: str, limit: int = DEFAULT_READ_LIMIT) -> str:
        """UTF-8 text; undecodable bytes become U+FFFD (parsers that care use read_bytes)."""
        return self.read_bytes(path, limit).decode("utf-8", "replace")

    @abstractmethod
    def open_stream(self, path: str, guard: Any = None) -> BinaryIO:
        """A binary stream for inputs too large to hold (pcaps, gigabyte logs).

        ``guard`` (a ``doctor.safeopen.Guard``) is for files another account can steer:
        opened once without trusting links, and refused unless the accounts that could
        change the path (and ``guard.reader``) could read it themselves. A replayed bundle
        ignores it (the collection applied it)."""

    @abstractmethod
    def listdir(self, path: str) -> list[str]: ...

    @abstractmethod
    def stat(self, path: str, follow: bool = True) -> StatInfo: ...

    @abstractmethod
    def realpath(self, path: str) -> str: ...

    @abstractmethod
    def glob(self, pattern: str) -> list[str]: ...

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except (SourceMissing, SourceError):
            return False

    def is_dir(self, path: str) -> bool:
        try:
            return self.stat(path).is_dir
        except (SourceMissing, SourceError):
            return False

    # -- commands, network, processes --------------------------------------------------
    @abstractmethod
    def which(self, name: str) -> str | None: ...

    @abstractmethod
    def run(self, argv: list[str] | tuple[str, ...], timeout: float = 10.0,
            cap: int = DEFAULT_OUTPUT_CAP, env: Mapping[str, str] | None = None
            ) -> CommandResult:
        """Run argv (never through a shell). A missing program raises SourceMissing."""

    @abstractmethod
    def http_get(self, url: str, timeout: float = 2.0, headers: Mapping[str, str] | None = None,
                 cap: int = DEFAULT_HTTP_CAP) -> HttpResponse: ...

    @abstractmethod
    def processes(self) -> list[ProcInfo]: ...

    @abstractmethod
    def proc_read(self, pid: int, name: str) -> bytes:
        """Bytes of /proc/<pid>/<name> (stat, status, environ, maps, cmdline, ...)."""

    @abstractmethod
    def connections(self) -> list[Connection]: ...

    def capture(self, iface: str, bpf: str, seconds: float) -> BinaryIO:
        """A pcap stream of ``seconds`` of live traffic matching ``bpf`` on ``iface``."""
        raise SourceMissing("live capture", f"a {self.kind} host cannot capture traffic")

    # -- the doctor's own context ------------------------------------------------------
    @abstractmethod
    def environ(self) -> dict[str, str]:
        """The environment the doctor itself runs in (the fallback service environment)."""

    @abstractmethod
    def info(self) -> HostInfo: ...

    @abstractmethod
    def monotonic(self, tag: str) -> float:
        """A clock reading; ``tag`` keys the sequence so a bundle replays it per sampler."""

    @abstractmethod
    def sleep(self, seconds: float) -> None: ...


# ---------------------------------------------------------------------------------------


def norm(path: str) -> str:
    """Normalise an absolute host path ("/a/./b/../c" -> "/a/c")."""
    if not path.startswith("/"):
        path = "/" + path
    return posixpath.normpath(path).replace("//", "/")


def _os_release(host: Host) -> str:
    try:
        text = host.read_text("/etc/os-release", 65536)
    except (SourceMissing, SourceError):
        return ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return ""


def _int_or(text: str, default: int) -> int:
    """An ASCII decimal, else ``default`` ("²".isdigit() is true but int() refuses it)."""
    t = text[1:] if text.startswith("-") else text
    return int(text) if t.isascii() and t.isdigit() else default


def proc_info_from_files(pid: int, cmdline: bytes, stat: bytes, status: bytes) -> ProcInfo:
    """Build a ProcInfo from raw /proc files (used by sysroots and bundles)."""
    text = stat.decode("utf-8", "replace")
    lpar, rpar = text.find("("), text.rfind(")")
    name = text[lpar + 1:rpar] if lpar >= 0 and rpar > lpar else ""
    rest = text[rpar + 2:].split() if rpar > 0 else []
    ppid = _int_or(rest[1], 0) if len(rest) > 1 else 0
    uid = -1
    for line in status.decode("utf-8", "replace").splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            if len(fields) > 1:
                uid = _int_or(fields[1], -1)
    argv = tuple(a.decode("utf-8", "replace") for a in cmdline.split(b"\0") if a)
    return ProcInfo(pid, ppid, name, argv, "root" if uid == 0 else (str(uid) if uid >= 0 else ""),
                    uid)
