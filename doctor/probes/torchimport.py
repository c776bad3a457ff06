"""``python -c "import torch_npu"`` in the service's interpreter and environment.

Importing torch_npu loads CANN (libhccl.so, libascendcl.so, …) and the driver; it is the
shortest honest test that the stack links. It runs in a subprocess with a timeout (an import
that hangs on a busy device must not hang the doctor), never in our own process.
"""

from __future__ import annotations


from ..errors import SourceError, SourceMissing
from ..i18n import T
from ..host import Host
from dataclasses import dataclass, field
from ..spawn import RunAs, as_service, display, isolate_python, minimal_env
from ..options import RunOptions
from ..registry import provider
from .procs import DEFAULT, DISCOVERED, NAMED, ServiceEnv, ServiceProcesses  # noqa: F401

IMPORT_TIMEOUT_S = 60.0


@dataclass(frozen=True, eq=False)
class TorchNpuImport:
    """How `import torch_npu` went in the serving interpreter."""

    interpreter: str
    interpreter_source: str
    env_source: str
    returncode: int | None
    timed_out: bool
    duration_s: float
    output: str  # stderr (else stdout), tail
    ran: str = ""  # what ran and as whom: "ran /opt/venv/bin/python -I -c … as uid 1000 (vllm)"
    context: dict = field(default_factory=dict)  # {"interpreter": origin, "env": origin}

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def last_line(self) -> str:
        lines = [ln for ln in self.output.strip().splitlines() if ln.strip()]
        return lines[-1].strip() if lines else ""


def pick_interpreter(procs: ServiceProcesses | None, options: RunOptions) -> tuple[str, str]:
    """--python when given (the user named it), else the vLLM server's, else python3."""
    python, why, _origin = interpreter_context(procs, options)
    return python, why


def interpreter_context(procs: ServiceProcesses | None, options: RunOptions
                        ) -> tuple[str, str, str]:
    """(interpreter, how it was chosen, origin): named by --python, discovered (the vLLM
    server's), or the default python3."""
    if options.python:
        return options.python, T("named: --python"), NAMED
    if procs is not None and procs.primary is not None and procs.primary.interpreter:
        if procs.pinned:
            return procs.primary.interpreter, T("named: the interpreter of --pid {pid}",
                                                pid=procs.primary.pid), NAMED
        return procs.primary.interpreter, T("discovered: the vLLM server's interpreter "
                                            "(pid {pid})", pid=procs.primary.pid), DISCOVERED
    return "python3", T("default: python3 on PATH (no vLLM server running, no --python)"), DEFAULT


def service_credentials(host: Host, procs: ServiceProcesses | None,
                        env: ServiceEnv | None, interpreter_from_service: bool = True
                        ) -> RunAs | None:
    """Whose rights the import runs with: the service's, when anything comes from its world
    (its interpreter or its environment); None (the caller's own) when nothing does — as
    with ``--python`` and no ``--pid``, whatever else runs on the host."""
    server = procs.primary if procs is not None else None
    pid = env.pid if env is not None and env.pid is not None else (
        server.proc.pid if server is not None and interpreter_from_service else None)
    if pid is None:
        return None
    proc = server.proc if server is not None and server.proc.pid == pid else None
    uid, gid = (proc.uid if proc is not None else -1), -1
    seen_uid = -1
    try:  # the gid; the uid only confirms it is the same process (a pid can be reused)
        for line in host.proc_read(pid, "status").decode("utf-8", "replace").splitlines():
            fields = line.split()
            if line.startswith("Uid:") and len(fields) > 1 and fields[1].isdigit():
                seen_uid = int(fields[1])
            elif line.startswith("Gid:") and len(fields) > 1 and fields[1].isdigit():
                gid = int(fields[1])
    except (SourceMissing, SourceError):
        pass
    if uid < 0:
        uid = seen_uid
    elif seen_uid != uid:
        gid = -1
    if uid == 0 and gid < 0:
        gid = 0
    if (uid < 0 or gid < 0) and host.kind == "bundle":
        return None  # a replay runs nothing; the collecting run made (and named) the drop
    if uid < 0 or gid < 0:
        raise SourceMissing(T("pid {pid} credentials", pid=pid),
                            T("not run: the service's uid/gid are unknown, and its code is never "
                              "run with the doctor's rights"))
    name = proc.user if proc is not None and proc.user and not proc.user.isdigit() else ""
    return RunAs(uid, gid, name or ("root" if uid == 0 else ""))


def service_pythonpath(host: Host, value: str, uid: int) -> tuple[list[str], list[tuple[str, str]]]:
    """The service's PYTHONPATH entries the import may use, and those it may not (why).

    An entry is used when it is an absolute directory owned by the service's uid (or root)
    that no other account can write: its code runs as the service anyway. Anything else
    (relative, missing, another account's, group/world-writable) is named, not used."""
    used: list[str] = []
    dropped: list[tuple[str, str]] = []
    for p in dict.fromkeys(x for x in value.split(":") if x):
        if not p.startswith("/"):
            dropped.append((p, "not an absolute path"))
            continue
        try:
            st = host.stat(p)
        except (SourceMissing, SourceError) as exc:
            dropped.append((p, str(exc.reason)))
            continue
        if not st.is_dir:
            dropped.append((p, "not a directory"))
        elif st.uid not in (0, uid):
            dropped.append((p, f"owned by uid {st.uid}, not the service's uid {uid} or root"))
        elif st.mode & 0o022:
            dropped.append((p, f"writable by other accounts (mode {st.mode & 0o777:04o})"))
        else:
            used.append(p)
    return used, dropped


@provider
def gather_torch_import(host: Host, options: RunOptions, procs: ServiceProcesses | None,
                        env: ServiceEnv | None) -> TorchNpuImport:
    python, why, origin = interpreter_context(procs, options)
    if host.which(python) is None:
        raise SourceMissing(python, T("interpreter not found ({why})", why=why))
    own = host.environ()
    environ = env.env if env is not None else own
    if environ == own:  # the caller's own environment: only what the import needs, no secrets
        environ = minimal_env(own)
    cred = service_credentials(host, procs, env, not options.python)
    used: list[str] = []
    dropped: list[tuple[str, str]] = []
    if env is not None and env.pid is not None and cred is not None and environ is env.env:
        used, dropped = service_pythonpath(host, environ.get("PYTHONPATH", ""), cred.uid)
    # ``python -I`` ignores PYTHONPATH: the service's own entries are put on sys.path by the
    # command itself, so a service that finds torch_npu through PYTHONPATH is judged as it runs
    code = (f"import sys; sys.path[0:0] = {used!r}; import torch_npu" if used
            else "import torch_npu")
    argv = [python, "-c", code]
    with as_service(cred):  # the service's interpreter and LD_PRELOAD never run as root
        res = host.run(argv, timeout=IMPORT_TIMEOUT_S, cap=256 * 1024, env=environ)
    who = cred.describe() if cred is not None else "the doctor's own user"
    ran = f"ran {display(isolate_python(tuple(argv)), 300)} as {who}" if host.kind != "bundle" else ""
    if used:
        ran += f", with the service's PYTHONPATH {':'.join(used)}"
    if dropped:
        ran += "; PYTHONPATH entries not used: " + "; ".join(f"{p} ({why})" for p, why in dropped)
    out = (res.stderr or res.stdout).decode("utf-8", "replace")
    return TorchNpuImport(python, why, env.source if env else T("the doctor's own environment"),
                          res.returncode, res.timed_out, res.duration_s, out[-8000:], ran,
                          {"interpreter": origin, "env": env.origin if env else DEFAULT})
