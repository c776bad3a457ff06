"""The process table as the doctor keeps it: other processes' argv only as far as checks need.

Every account's command line is visible in /proc, and it is where people put passwords
(``sshpass -p PW``, ``curl -u user:PW``, a launcher's positional token). Redaction catches
the shapes it knows; this keeps the rest out by not keeping it at all. Full argv is kept
only for candidate servers — a vLLM server (``vllm serve``, ``python -m vllm.entrypoints…``),
an engine/worker process, or anything that mentions vLLM or passes ``--model`` — and their
descendants. Every other process keeps its argv[0] basename plus the few words the checks
look for (load tools: ``bench``, ``-m``, ``-jar``, a ``*jmeter*.jar`` or ``*locust*.py``
basename, a dotted module name that names a load tool). ``--pid`` asks for one process by
name; its full argv is then read from /proc/PID/cmdline (probes/procs.py).

Invalid UTF-8 in a command line never crashes a report: surrogate-escaped bytes (psutil's
decoding) become U+FFFD here, after the argv was classified, so everything downstream is
valid text; bundles redact /proc cmdline images byte-exact (bundle/record.py).

Pure: no I/O, no import of the Host (host.py calls ``minimise`` on every process table).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from .host import ProcInfo

SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
WORKER_MARKS = ("EngineCore", "Worker_TP", "VLLMWorker", "VLLM::Worker")

# words other processes keep (the load-client and local-cache detection in probes/dns.py)
_KEEP_WORDS = frozenset({"vllm", "serve", "bench", "-m", "-jar"})
_HINT = re.compile(r"(?i)jmeter|locust|bench|loadtest|load_test|stress|evalscope|llmperf|vllm")
_SCRIPT = re.compile(r"^[\w.+-]{1,80}\.(?:py|jar)$")
_MODULE = re.compile(r"^[A-Za-z_]\w{0,40}(?:\.[A-Za-z_]\w{0,40}){1,6}$")
_IDENT = re.compile(r"^[A-Za-z_]\w{0,40}$")
_MENTIONS_VLLM = re.compile(r"(?i)(?<![a-z0-9])vllm(?![a-z0-9])")


def is_vllm_server(cmdline: "tuple[str, ...] | list[str]") -> bool:
    """`vllm serve …` (any path to the vllm script) or `python -m vllm.entrypoints…`."""
    if not cmdline:
        return False
    for i, arg in enumerate(cmdline):
        base = posixpath.basename(arg)
        if (base == "vllm" or arg == "vllm.entrypoints.cli.main") and i + 1 < len(cmdline) \
                and cmdline[i + 1] == "serve":
            return True
        if arg in SERVER_MODULES or any(arg.endswith(m.replace(".", "/") + ".py")
                                        for m in SERVER_MODULES):
            return True
    return False


def is_worker_argv(name: str, cmdline: "tuple[str, ...] | list[str]") -> bool:
    """EngineCore / VLLMWorker_TP* children (their process titles, or their cmdline)."""
    text = name + " " + " ".join(cmdline[:2])
    return any(m in text for m in WORKER_MARKS)


def is_candidate(name: str, cmdline: "tuple[str, ...] | list[str]") -> bool:
    """Could this be (part of) the service? Then the checks need its whole argv."""
    if is_vllm_server(cmdline) or is_worker_argv(name, cmdline):
        return True
    return any(a == "--model" or a.startswith("--model=") or _MENTIONS_VLLM.search(a)
               for a in cmdline[:256])


def _valid(text: str) -> str:
    """Surrogate-escaped bytes (invalid UTF-8 in /proc/PID/cmdline) as U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _keep_word(arg: str, prev: str) -> str | None:
    if arg in _KEEP_WORDS:
        return arg
    base = posixpath.basename(arg)
    module = _MODULE.match(arg) or (prev == "-m" and _IDENT.match(arg))  # python -m locust
    if (_SCRIPT.match(base) or module) and _HINT.search(base):
        return base
    return None


def minimal_argv(cmdline: "tuple[str, ...] | list[str]") -> tuple[str, ...]:
    """What a non-candidate process keeps: argv[0]'s basename and the checks' words."""
    if not cmdline:
        return ()
    kept = [posixpath.basename(cmdline[0]) or cmdline[0][:64]]
    kept += [w for w in (_keep_word(a, p) for p, a in zip(cmdline[:63], cmdline[1:64]))
             if w is not None]
    return tuple(_valid(a)[:128] for a in kept)


def minimise(procs: Iterable["ProcInfo"]) -> list["ProcInfo"]:
    """The table with full argv for candidate servers and their descendants only."""
    procs = list(procs)
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    keep = {p.pid for p in procs if is_candidate(p.name, p.cmdline)}
    todo = list(keep)
    while todo and len(keep) < 65536:
        for c in children.get(todo.pop(), ()):
            if c not in keep:
                keep.add(c)
                todo.append(c)
    out = []
    for p in procs:
        argv = (tuple(_valid(a) for a in p.cmdline) if p.pid in keep
                else minimal_argv(p.cmdline))
        name = _valid(p.name)
        exe = _valid(p.exe)
        if argv != p.cmdline or name != p.name or exe != p.exe:
            p = dataclasses.replace(p, cmdline=argv, name=name, exe=exe)
        out.append(p)
    return out
