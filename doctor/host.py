"""The Host: the only door to the machine.

Probes never touch the file system, run commands or open sockets themselves; they ask a
Host. ``LiveHost(root="/")`` is this machine, ``LiveHost(root=SYSROOT)`` answers file
questions from a directory tree (tests, ``--root``) and ``BundleHost`` (doctor/bundle.py)
answers from a collected bundle. Absent sources raise ``SourceMissing``; unreadable ones
``SourceError``.
"""

from __future__ import annotations

import errno
import fnmatch
import glob as _glob
import os
import platform
import posixpath
import socket
import stat as _stat
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, Mapping

from . import cancel
from .errors import SourceError, SourceMissing
from .model import HostInfo
from .procnet import Connection, parse_proc_net  # Connection re-exported: doctor.host's type

DEFAULT_READ_LIMIT = 64 * 1024 * 1024
DEFAULT_OUTPUT_CAP = 1024 * 1024
DEFAULT_HTTP_CAP = 8 * 1024 * 1024


@dataclass(frozen=True)
class StatInfo:
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


@dataclass(frozen=True)
class CommandResult:
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


@dataclass(frozen=True)
class HttpResponse:
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


@dataclass(frozen=True)
class ProcInfo:
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
    def open_stream(self, path: str) -> BinaryIO:
        """A binary stream for inputs too large to hold (pcaps, gigabyte logs)."""

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


def _os_error(path: str, exc: OSError) -> Exception:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return SourceMissing(path, "not found")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return SourceError(path, "permission denied")
    if exc.errno == errno.ELOOP:
        return SourceError(path, "too many levels of symbolic links")
    return SourceError(path, exc.strerror or str(exc))


class LiveHost(Host):
    """This machine, or a directory tree standing in for one (``root``).

    With a sysroot, absolute symlinks are resolved inside the root (as in a chroot),
    commands are looked up in the root's PATH directories, and processes and sockets come
    from ``<root>/proc`` when it exists.
    """

    SYSROOT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin",
                    "/bin", "/usr/local/Ascend/driver/tools")

    def __init__(self, root: str = "/", env: Mapping[str, str] | None = None, *,
                 _test_exec_sysroot: bool = False) -> None:
        """``_test_exec_sysroot`` lets tests run a sysroot's stub scripts; no CLI path sets it
        (``check --root DIR`` never runs DIR's binaries: they are data from elsewhere)."""
        self.root = os.path.abspath(root)
        self.is_sysroot = self.root != "/"
        self.kind = "sysroot" if self.is_sysroot else "live"
        self._env = dict(os.environ if env is None else env)
        self._test_exec_sysroot = _test_exec_sysroot

    # -- paths -------------------------------------------------------------------------
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

    def read_bytes(self, path: str, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        real = self._resolve(path)
        try:
            with open(real, "rb") as fh:
                return fh.read(limit)
        except IsADirectoryError:
            raise SourceError(path, "is a directory") from None
        except OSError as exc:
            raise _os_error(path, exc) from None

    def open_stream(self, path: str) -> BinaryIO:
        try:
            return open(self._resolve(path), "rb")
        except OSError as exc:
            raise _os_error(path, exc) from None

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._resolve(path)))
        except OSError as exc:
            raise _os_error(path, exc) from None

    def stat(self, path: str, follow: bool = True) -> StatInfo:
        real = self._resolve(path, follow=follow)
        try:
            st = os.stat(real) if follow else os.lstat(real)
            target = os.readlink(real) if _stat.S_ISLNK(st.st_mode) else None
        except OSError as exc:
            raise _os_error(path, exc) from None
        return StatInfo(norm(path), st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime,
                        target)

    def realpath(self, path: str) -> str:
        return self._host_path(self._resolve(path)) if self.is_sysroot else os.path.realpath(path)

    def glob(self, pattern: str) -> list[str]:
        pattern = norm(pattern)
        if not self.is_sysroot:
            return sorted(_glob.glob(pattern))
        return sorted(self._glob_in_root(pattern))

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

    # -- commands ----------------------------------------------------------------------
    def which(self, name: str) -> str | None:
        if "\0" in name:
            return None
        if "/" in name:
            return name if self.exists(name) else None
        if not self.is_sysroot:
            import shutil
            path = self._env.get("PATH", os.defpath) + ":" + ":".join(self.SYSROOT_PATH)
            return shutil.which(name, path=path)
        for d in self.SYSROOT_PATH:
            cand = posixpath.join(d, name)
            try:
                st = self.stat(cand)
            except (SourceMissing, SourceError):
                continue
            if st.is_file and st.perm & 0o111:
                return cand
        return None

    def run(self, argv, timeout=10.0, cap=DEFAULT_OUTPUT_CAP, env=None) -> CommandResult:
        """Run through doctor/spawn.py's rules: cwd "/", ``python -I``, an allowlisted
        environment unless ``env`` is given, the service's credentials inside
        ``spawn.as_service``; a sysroot's binaries are never executed."""
        from . import spawn

        argv = tuple(argv)
        if not argv:
            raise ValueError("empty argv")
        if self.is_sysroot and not self._test_exec_sysroot:
            raise SourceMissing(argv[0], f"sysroot binaries are not executed: `{argv[0]}` "
                                f"would run a program from {self.root} on this host")
        prog = self.which(argv[0])
        if prog is None:
            raise SourceMissing(argv[0], "command not found")
        # the file executed is the host path which() checked (norm: "./x" is "/x"), never a
        # name relative to wherever the doctor was started
        real = self._resolve(prog) if self.is_sysroot else norm(prog)
        cred = spawn.current_run_as()
        creds = spawn.credentials_for(cred, argv[0])
        spawn.refuse_unsafe_binary(real, argv[0], cred)
        child_env = spawn.minimal_env(self._env) if env is None else dict(env)
        return run_capped(spawn.isolate_python((real, *argv[1:])), argv, timeout, cap,
                          child_env, cancel.current(), popen_extra=creds)

    # -- network -----------------------------------------------------------------------
    def http_get(self, url, timeout=2.0, headers=None, cap=DEFAULT_HTTP_CAP) -> HttpResponse:
        return http_get(url, timeout, headers or {}, cap)

    # -- processes ---------------------------------------------------------------------
    def processes(self) -> list[ProcInfo]:
        """The process table; other processes' argv only as far as the checks need it
        (doctor/proctable.py: full argv for candidate servers and their descendants)."""
        from .proctable import minimise
        return minimise(self._sysroot_processes() if self.is_sysroot else self._live_processes())

    def _live_processes(self) -> list[ProcInfo]:
        import psutil
        out = []
        for p in psutil.process_iter(["pid", "ppid", "name", "cmdline", "username", "uids",
                                      "exe", "create_time"]):
            i = p.info
            uids = i.get("uids")
            out.append(ProcInfo(i["pid"], i.get("ppid") or 0, i.get("name") or "",
                                tuple(i.get("cmdline") or ()), i.get("username") or "",
                                uids.real if uids else -1, i.get("exe") or "",
                                i.get("create_time") or 0.0))
        return out

    def _sysroot_processes(self) -> list[ProcInfo]:
        if not os.path.isdir(os.path.join(self.root, "proc")):
            raise SourceMissing("/proc", "the sysroot has no proc/ tree")
        out = []
        for name in self.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            try:
                out.append(proc_info_from_files(pid, self.proc_read(pid, "cmdline"),
                                                self.proc_read(pid, "stat"),
                                                self._maybe(pid, "status")))
            except (SourceMissing, SourceError):
                continue
        return out

    def _maybe(self, pid: int, name: str) -> bytes:
        try:
            return self.proc_read(pid, name)
        except (SourceMissing, SourceError):
            return b""

    def proc_read(self, pid: int, name: str) -> bytes:
        path = f"/proc/{int(pid)}/{name}"
        if self.is_sysroot:
            return self.read_bytes(path)
        try:
            with open(path, "rb") as fh:
                return fh.read(DEFAULT_READ_LIMIT)
        except OSError as exc:
            err = _os_error(path, exc)
            if isinstance(err, SourceMissing):
                raise SourceMissing(path, "no such process (it may have exited)") from None
            raise err from None

    def connections(self) -> list[Connection]:
        if self.is_sysroot:
            conns: list[Connection] = []
            found = False
            for proto in ("tcp", "tcp6", "udp", "udp6"):
                try:
                    conns.extend(parse_proc_net(self.read_text(f"/proc/net/{proto}"), proto))
                    found = True
                except SourceMissing:
                    continue
            if not found:
                raise SourceMissing("/proc/net/tcp", "the sysroot has no proc/net tree")
            return conns
        import psutil
        try:
            raw = psutil.net_connections(kind="inet")
        except (psutil.AccessDenied, PermissionError):
            raise SourceError("net_connections", "permission denied") from None
        out = []
        for c in raw:
            fam = "inet6" if c.family == socket.AF_INET6 else "inet"
            typ = "udp" if c.type == socket.SOCK_DGRAM else "tcp"
            raddr = (c.raddr.ip, c.raddr.port) if c.raddr else None
            out.append(Connection(fam, typ, (c.laddr.ip, c.laddr.port), raddr,
                                  c.status or "NONE", c.pid))
        return out

    def capture(self, iface: str, bpf: str, seconds: float) -> BinaryIO:
        """Sniff with scapy (tcpdump when scapy cannot) into an unlinked temp file."""
        if self.is_sysroot:
            raise SourceMissing("live capture", "a sysroot has no interfaces to capture on")
        if os.geteuid() != 0:
            raise SourceError("live capture", "capturing needs root (CAP_NET_RAW); "
                              "run as root or pass --pcap FILE")
        import tempfile
        tmp = tempfile.TemporaryFile(prefix="ascend-doctor-", suffix=".pcap")
        try:
            from scapy.all import PcapWriter, sniff  # heavy: only when sniffing
            writer = PcapWriter(tmp, sync=True, linktype=None)
            sniff(iface=None if iface in ("", "any") else iface, filter=bpf, timeout=seconds,
                  store=False, prn=writer.write)
            writer.flush()
            if tmp.tell() == 0:  # nothing matched: still a valid, empty capture
                import struct
                tmp.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        except Exception as exc:  # scapy missing, no libpcap for the filter, bad iface...
            tmp.close()
            return self._capture_tcpdump(iface, bpf, seconds, f"{type(exc).__name__}: {exc}")
        tmp.seek(0)
        return tmp

    def _capture_tcpdump(self, iface: str, bpf: str, seconds: float, why: str) -> BinaryIO:
        import tempfile
        if self.which("tcpdump") is None:
            raise SourceError("live capture", f"scapy could not capture ({why}) and tcpdump "
                              "is not installed")
        fd, path = tempfile.mkstemp(prefix="ascend-doctor-", suffix=".pcap")
        os.close(fd)
        try:
            r = self.run(["tcpdump", "-i", iface or "any", "-U", "-n", "-w", path, bpf],
                         timeout=seconds)
            if not r.timed_out and r.returncode != 0:
                raise SourceError("live capture", r.describe_failure())
            return open(path, "rb")
        finally:
            os.unlink(path)

    # -- context -----------------------------------------------------------------------
    def environ(self) -> dict[str, str]:
        return dict(self._env)

    def info(self) -> HostInfo:
        if self.is_sysroot:
            hostname = self._first_line("/etc/hostname") or "sysroot"
            return HostInfo(hostname, self._first_line("/proc/sys/kernel/osrelease"),
                            platform.machine(), _os_release(self))
        u = platform.uname()
        return HostInfo(u.node, u.release, u.machine, _os_release(self))

    def _first_line(self, path: str) -> str:
        try:
            return self.read_text(path, 4096).strip().splitlines()[0]
        except (SourceMissing, SourceError, IndexError):
            return ""

    def monotonic(self, tag: str) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        token = cancel.current()
        if token is None:
            time.sleep(seconds)
        elif token.wait(seconds):  # an abandoned check's sampler stops sleeping at once
            token.check()


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


def run_capped(real_argv, shown_argv, timeout: float, cap: int, env: dict[str, str],
               token: "cancel.CancelToken | None" = None, popen_extra: dict | None = None
               ) -> CommandResult:
    """Run without a shell; keep at most ``cap`` bytes per stream; kill the group on timeout.

    With a ``token`` (the calling check's), cancelling it kills the group at once, from the
    cancelling thread, and this raises ``Cancelled``: an abandoned check's command does not
    outlive the check's timeout, whatever its own ``timeout`` says.
    """
    import signal

    import shutil

    from .spawn import no_new_privs_prefix

    if token is not None:
        token.check()
    # the program is found here, not by the no_new_privs wrapper, so "not found" / "not
    # executable" stay errors of this call rather than a wrapper's exit code
    prog = str(real_argv[0])
    found = prog if "/" in prog else shutil.which(prog, path=env.get("PATH", os.defpath))
    if found is None or not os.path.exists(found):
        raise SourceMissing(shown_argv[0], "command not found")
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise SourceError(shown_argv[0], "permission denied (not executable)")
    start = time.monotonic()
    try:  # cwd "/": nothing is imported or loaded from where the operator stands
        proc = subprocess.Popen([*no_new_privs_prefix(), found, *real_argv[1:]],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True, cwd="/",
                                close_fds=True, **(popen_extra or {}))
    except FileNotFoundError:
        raise SourceMissing(shown_argv[0], "command not found") from None
    except PermissionError:
        raise SourceError(shown_argv[0], "permission denied (not executable)") from None
    except OSError as exc:
        raise SourceError(shown_argv[0], f"cannot execute: {exc.strerror or exc}") from None
    except ValueError as exc:  # an argument with a NUL byte
        raise SourceError(shown_argv[0], f"cannot execute: {exc}") from None
    bufs: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}
    over = {"out": False, "err": False}

    def drain(stream, key: str) -> None:
        while True:
            chunk = stream.read(65536)
            if not chunk:
                break
            room = cap - len(bufs[key])
            if room > 0:
                bufs[key] += chunk[:room]
            if len(chunk) > max(room, 0):
                over[key] = True
        stream.close()

    threads = [threading.Thread(target=drain, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, "err"), daemon=True)]
    for t in threads:
        t.start()
    def kill_group() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        try:
            proc.wait(timeout=2.0)  # reaped before cancel() returns: no zombie outlives the run
        except subprocess.TimeoutExpired:
            pass

    unregister = token.on_cancel(kill_group) if token is not None else (lambda: None)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group()
        proc.wait()
    finally:
        unregister()
    for t in threads:
        t.join(timeout=1.0)
    if token is not None:
        token.check()  # killed by the cancel: nobody will read this result
    return CommandResult(tuple(shown_argv), None if timed_out else proc.returncode,
                         bytes(bufs["out"]), bytes(bufs["err"]), time.monotonic() - start,
                         timed_out, over["out"] or over["err"], timeout)


def http_get(url: str, timeout: float, headers: Mapping[str, str], cap: int) -> HttpResponse:
    """One bounded GET with http.client: no redirects followed, no retries, no proxies.

    ``timeout`` bounds the whole exchange, not each socket read: a server that trickles a
    byte a second is cut off at the deadline (a watchdog shuts the socket down) and named.
    """
    import http.client
    from urllib.parse import urlsplit

    start = time.monotonic()
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return HttpResponse(url, None, error=f"unsupported URL {url!r} (bad port)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return HttpResponse(url, None, error=f"unsupported URL {url!r}")
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, port, timeout=timeout)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    expired = threading.Event()
    held: list[socket.socket] = []  # http.client drops conn.sock once a response will close

    def cut_off() -> None:
        expired.set()
        for sock in held:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # a little after the per-read timeout, so a silent server is named by that one first
    watchdog = threading.Timer(timeout + min(0.25, timeout / 4), cut_off)
    watchdog.daemon = True
    watchdog.start()

    def late(got: int) -> HttpResponse:
        return HttpResponse(url, None, error=f"no complete answer within {timeout:g} s "
                            f"({got} bytes received)", duration_s=time.monotonic() - start)

    try:
        conn.connect()
        held.append(conn.sock)
        if expired.is_set():
            cut_off()
        conn.request("GET", path, headers={"User-Agent": "ascend-doctor", **headers})
        resp = conn.getresponse()
        body = resp.read(cap + 1)
        if expired.is_set():
            return late(len(body))
        truncated = len(body) > cap
        declared = resp.getheader("content-length") or ""
        if not truncated and declared.isascii() and declared.isdigit() and \
                int(declared) > len(body):  # read(amt) returns a short body without raising
            return HttpResponse(url, None, body=body,
                                error=f"connection closed mid-body after {len(body)} bytes "
                                      f"(of {int(declared)})",
                                duration_s=time.monotonic() - start)
        return HttpResponse(url, resp.status, {k.lower(): v for k, v in resp.getheaders()},
                            body[:cap], None, time.monotonic() - start, truncated)
    except socket.timeout:
        return HttpResponse(url, None, error=f"no answer within {timeout:g} s",
                            duration_s=time.monotonic() - start)
    except ConnectionRefusedError:
        return HttpResponse(url, None, error="connection refused (nothing listens there)",
                            duration_s=time.monotonic() - start)
    except http.client.IncompleteRead as exc:
        if expired.is_set():
            return late(len(exc.partial))
        return HttpResponse(url, None, body=bytes(exc.partial[:cap]),
                            error=f"connection closed mid-body after {len(exc.partial)} bytes",
                            duration_s=time.monotonic() - start)
    except (http.client.HTTPException, ValueError) as exc:
        if expired.is_set():
            return late(0)
        return HttpResponse(url, None, error=f"not an HTTP answer ({type(exc).__name__}: {exc})",
                            duration_s=time.monotonic() - start)
    except OSError as exc:
        if expired.is_set():
            return late(0)
        return HttpResponse(url, None, error=f"{exc.strerror or exc}",
                            duration_s=time.monotonic() - start)
    finally:
        watchdog.cancel()
        conn.close()
