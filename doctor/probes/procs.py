"""The vLLM service processes and the environment they actually run with.

Seed 000: a variable exported in a login shell never reached the service, so every
library question must be asked in the *service's* environment (/proc/<pid>/environ), and
only when no service runs in the doctor's own (which the finding then says).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from ..errors import SourceError, SourceMissing
from ..host import Host, ProcInfo
from ..options import RunOptions
from ..registry import provider

_SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")


def is_vllm_server(cmdline: tuple[str, ...]) -> bool:
    """`vllm serve …` (any path to the vllm script) or `python -m vllm.entrypoints…`."""
    if not cmdline:
        return False
    for i, arg in enumerate(cmdline):
        base = posixpath.basename(arg)
        if base == "vllm" and i + 1 < len(cmdline) and cmdline[i + 1] == "serve":
            return True
        if arg in _SERVER_MODULES or any(arg.endswith(m.replace(".", "/") + ".py")
                                         for m in _SERVER_MODULES):
            return True
    return False


def parse_environ(raw: bytes) -> dict[str, str]:
    """A NUL-separated /proc/<pid>/environ image."""
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


@dataclass(frozen=True)
class ServiceProcess:
    proc: ProcInfo
    children: tuple[ProcInfo, ...] = ()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def interpreter(self) -> str:
        """The Python that runs the server (exe, else argv[0] when it is a python)."""
        exe = self.proc.exe or ""
        if "python" in posixpath.basename(exe):
            return exe
        a0 = self.proc.cmdline[0] if self.proc.cmdline else ""
        return a0 if "python" in posixpath.basename(a0) else exe or a0


@dataclass(frozen=True)
class ServiceProcesses:
    """Every vLLM server on the host (``--pid`` pins one), with its worker children."""

    servers: tuple[ServiceProcess, ...] = field(default_factory=tuple)
    pinned: bool = False

    @property
    def primary(self) -> ServiceProcess | None:
        return self.servers[0] if self.servers else None


@dataclass(frozen=True)
class ServiceEnv:
    """The environment library and import questions are asked in."""

    env: dict[str, str]
    source: str  # "/proc/<pid>/environ" or "the doctor's own environment"
    pid: int | None = None
    unreadable_reason: str | None = None  # why the service's env could not be read


def find_servers(procs: list[ProcInfo], pid: int | None) -> ServiceProcesses:
    by_parent: dict[int, list[ProcInfo]] = {}
    for p in procs:
        by_parent.setdefault(p.ppid, []).append(p)

    def descendants(pid_: int) -> tuple[ProcInfo, ...]:
        out, todo = [], list(by_parent.get(pid_, ()))
        while todo and len(out) < 256:
            c = todo.pop(0)
            out.append(c)
            todo.extend(by_parent.get(c.pid, ()))
        return tuple(out)

    if pid is not None:
        chosen = [p for p in procs if p.pid == pid]
        return ServiceProcesses(tuple(ServiceProcess(p, descendants(p.pid)) for p in chosen),
                                pinned=True)
    servers = [p for p in procs if is_vllm_server(p.cmdline)]
    pids = {p.pid for p in servers}
    top = [p for p in servers if p.ppid not in pids]  # a server's own re-exec is not another
    return ServiceProcesses(tuple(ServiceProcess(p, descendants(p.pid))
                                  for p in sorted(top, key=lambda p: p.pid)))


@provider
def gather_service_processes(host: Host, options: RunOptions) -> ServiceProcesses:
    found = find_servers(host.processes(), options.pid)
    if options.pid is not None and not found.servers:
        raise SourceMissing(f"pid {options.pid}", "no such process")
    return found


@provider
def gather_service_env(host: Host, procs: ServiceProcesses | None) -> ServiceEnv:
    if procs is not None and procs.primary is not None:
        pid = procs.primary.pid
        try:
            env = parse_environ(host.proc_read(pid, "environ"))
            return ServiceEnv(env, f"/proc/{pid}/environ", pid)
        except (SourceMissing, SourceError) as exc:
            return ServiceEnv(host.environ(), "the doctor's own environment", pid,
                              f"/proc/{pid}/environ: {exc.reason}")
    return ServiceEnv(host.environ(), "the doctor's own environment (no vLLM server running)")
