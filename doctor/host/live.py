"""The live host: this machine (``LiveHost("/")``), or a sysroot standing in for one
(``LiveHost(root)``: files resolved inside the root by sysroot.py, processes and sockets
from ``<root>/proc``, its binaries never executed)."""

from __future__ import annotations

import glob as _glob
import os
import platform
import posixpath
import socket
import stat as _stat
import time
from typing import BinaryIO, Mapping

from .. import cancel
from ..errors import SourceError, SourceMissing
from ..i18n import T
from ..model import HostInfo
from ..procnet import Connection, parse_proc_net
from .api import (DEFAULT_HTTP_CAP, DEFAULT_OUTPUT_CAP, DEFAULT_READ_LIMIT, CommandResult, Host,
                  HttpResponse, ProcInfo, StatInfo, _os_release, norm, proc_info_from_files)
from .run import http_get, run_capped
from .sysroot import SysrootPaths, _os_error


# binaries every userland has, whose ELF header names the root's machine
SYSROOT_ELF_PROBES = ("/bin/sh", "/usr/bin/env", "/sbin/ldconfig", "/usr/bin/python3")
# e_machine → the name ``uname -m`` prints on that machine
_UNAME_MACHINES = {62: "x86_64", 183: "aarch64", 3: "i686", 40: "armv7l", 243: "riscv64",
                   21: "ppc64le", 22: "s390x", 258: "loongarch64"}


def elf_machine_name(head: bytes) -> str | None:
    """``uname -m`` of the machine an ELF file (its first bytes) was built for; None when
    the bytes are not an ELF header or name a machine not listed."""
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] not in (1, 2):
        return None
    code = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    if code == 21 and head[5] == 2:
        return "ppc64"  # big-endian POWER; 21 little-endian is ppc64le
    return _UNAME_MACHINES.get(code)


class LiveHost(SysrootPaths, Host):
    """This machine, or a directory tree standing in for one (``root``).

    With a sysroot, absolute symlinks are resolved inside the root (as in a chroot),
    commands are looked up in the root's PATH directories, and processes and sockets come
    from ``<root>/proc`` when it exists.
    """

    SYSROOT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin",
                    "/bin", "/usr/local/Ascend/driver/tools")

    # tools a pod may run as the node's own (doctor/opening.py, ASCEND_DOCTOR_NODE_TOOLS)
    NODE_TOOLS = frozenset({"npu-smi"})

    def __init__(self, root: str = "/", env: Mapping[str, str] | None = None, *,
                 node_tools: tuple[str, ...] = (), _test_exec_sysroot: bool = False) -> None:
        """``_test_exec_sysroot`` lets tests run a sysroot's stub scripts; no CLI path sets it
        (``check --root DIR`` never runs DIR's binaries: they are data from elsewhere).
        ``node_tools`` (only names in NODE_TOOLS) are, with a root, looked up and run from the
        doctor's own filesystem, not from the root: in a pod reading the node at /host, the
        node's npu-smi and driver libraries are placed at their own paths by the Ascend Docker
        Runtime (read-only), so the binary run is the node's tool, never a file of /host."""
        self.node_tools = frozenset(node_tools) & self.NODE_TOOLS
        self.root = os.path.abspath(root)
        self.is_sysroot = self.root != "/"
        self.kind = "sysroot" if self.is_sysroot else "live"
        self._env = dict(os.environ if env is None else env)
        self._test_exec_sysroot = _test_exec_sysroot

    # -- paths -------------------------------------------------------------------------
    def read_bytes(self, path: str, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        real = self._resolve(path)
        try:
            with open(real, "rb") as fh:
                return fh.read(limit)
        except IsADirectoryError:
            raise SourceError(path, "is a directory") from None
        except OSError as exc:
            raise _os_error(path, exc) from None

    def open_stream(self, path: str, guard=None) -> BinaryIO:
        if guard is not None:
            from ..safeopen import Refused, open_guarded
            if "\0" in path:
                raise SourceError(path.replace("\0", "\\0"), "invalid path (embedded NUL byte)")
            try:
                return open_guarded(norm(path), guard, self.root)
            except Refused as exc:
                raise (SourceMissing if exc.missing else SourceError)(path, exc.reason) from None
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

    # -- commands ----------------------------------------------------------------------
    def which(self, name: str) -> str | None:
        if "\0" in name:
            return None
        if "/" in name:
            return name if self.exists(name) else None
        if not self.is_sysroot or name in self.node_tools:
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
        from .. import spawn

        argv = tuple(argv)
        if not argv:
            raise ValueError("empty argv")
        node_tool = self.is_sysroot and argv[0] in self.node_tools
        if self.is_sysroot and not node_tool and not self._test_exec_sysroot:
            raise SourceMissing(argv[0], f"sysroot binaries are not executed: `{argv[0]}` "
                                f"would run a program from {self.root} on this host")
        prog = self.which(argv[0])
        if prog is None:
            raise SourceMissing(argv[0], "command not found")
        # the file executed is the host path which() checked (norm: "./x" is "/x"), never a
        # name relative to wherever the doctor was started
        real = self._resolve(prog) if self.is_sysroot and not node_tool else norm(prog)
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
        from ..proctable import minimise
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
            raise SourceMissing("/proc", T("the sysroot has no proc/ tree"))
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
                raise SourceMissing("/proc/net/tcp", T("the sysroot has no proc/net tree"))
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
                            self._sysroot_machine(), _os_release(self))
        u = platform.uname()
        return HostInfo(u.node, u.release, u.machine, _os_release(self))

    def _sysroot_machine(self) -> str:
        """The root's own machine, read from the ELF header of its shell or loader: an arm64
        userland inspected from an x86_64 machine is an aarch64 host (its ld.so, its wheels),
        not the doctor's ``platform.machine()``, which stays the answer for a root without one."""
        for path in SYSROOT_ELF_PROBES:
            try:
                head = self.read_bytes(path, 64)
            except (SourceMissing, SourceError):
                continue
            machine = elf_machine_name(head)
            if machine:
                return machine
        return platform.machine()

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
