"""Log files to triage: ``--log FILE`` and the server's own stdout/stderr when they are regular
files (``/proc/<pid>/fd/1|2`` resolve to, e.g., /var/log/vllm/server.log).

Logs can be gigabytes: they are only ever streamed (``host.open_stream``) line by line, and
past ``TAIL_BYTES`` only the tail is read (the recent part is what explains a failure).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from ..errors import SourceError, SourceMissing
from ..host import Host
from ..inputs import user_files
from ..options import RunOptions
from ..registry import provider
from .svcaccess import refusal
from .procs import ServiceProcesses

TAIL_BYTES = 256 * 1024 * 1024
MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class LogFile:
    path: str
    origin: str  # "--log" or "stdout of pid 4711"
    size: int | None = None
    error: str | None = None  # why it cannot be read


@dataclass(frozen=True)
class LogSources:
    files: tuple[LogFile, ...]
    user: Host | None = None  # where --log files are read (the user's files, not the host's)

    def open(self, host: Host, lf: LogFile) -> BinaryIO:
        """A --log file from the user's filesystem; a service's stdout/stderr from the host."""
        return (self.user or host).open_stream(lf.path) if lf.origin == "--log" \
            else host.open_stream(lf.path)


@provider
def gather_log_sources(host: Host, options: RunOptions, procs: ServiceProcesses | None
                       ) -> LogSources:
    files: list[LogFile] = []
    seen: set[str] = set()

    user = user_files(host)

    def add(path: str, origin: str) -> None:
        if path in seen:
            return
        seen.add(path)
        try:
            st = (user if origin == "--log" else host).stat(path)
        except (SourceMissing, SourceError) as exc:
            files.append(LogFile(path, origin, None, exc.reason))
            return
        if not st.is_file:
            if origin == "--log":
                files.append(LogFile(path, origin, None, "not a regular file"))
            return
        files.append(LogFile(path, origin, st.size))

    for p in options.logs:
        add(p, "--log")
    for sp in (procs.servers if procs else ())[:4]:
        for fd, name in ((1, "stdout"), (2, "stderr")):
            try:
                target = host.realpath(f"/proc/{sp.pid}/fd/{fd}")
            except (SourceMissing, SourceError):
                continue
            if target.startswith("/") and not target.startswith(("/dev/", "/proc/")) \
                    and "socket:" not in target and "pipe:" not in target:
                try:
                    why = refusal(host, target, sp.pid, sp.proc.uid)  # read it with the service's rights
                except (SourceMissing, SourceError):
                    why = None  # absent or unreadable: add() names it
                if why and target not in seen:
                    seen.add(target)
                    files.append(LogFile(target, f"{name} of pid {sp.pid}", None, why))
                    continue
                add(target, f"{name} of pid {sp.pid}")
    if not files:
        raise SourceMissing("log files", "no --log given and the server's stdout/stderr are not "
                            "regular files")
    return LogSources(tuple(files), user)


def iter_lines(fh: BinaryIO, size: int | None) -> Iterator[str]:
    """Decoded lines of a stream; from the last TAIL_BYTES when the file is larger."""
    if size is not None and size > TAIL_BYTES:
        try:
            fh.seek(size - TAIL_BYTES)
            fh.readline()  # drop the partial first line
        except OSError:
            pass
    while True:
        raw = fh.readline(MAX_LINE)
        if not raw:
            return
        yield raw.decode("utf-8", "replace")


# vLLM's periodic stats line (V1 loggers.py; V0 has Pending instead of Waiting)
STATS_LINE = re.compile(
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation throughput: "
    r"(?P<gen>[\d.]+) tokens/s, Running: (?P<running>\d+) reqs, (?:Swapped: \d+ reqs, )?"
    r"(?:Waiting|Pending): (?P<waiting>\d+) reqs, GPU KV cache usage: (?P<kv>[\d.]+)%")


@dataclass(frozen=True)
class StatsLine:
    line_no: int
    prompt_tps: float
    gen_tps: float
    running: int
    waiting: int
    kv_percent: float


def parse_stats_line(line: str, line_no: int = 0) -> StatsLine | None:
    m = STATS_LINE.search(line)
    if not m:
        return None
    return StatsLine(line_no, float(m["prompt"]), float(m["gen"]), int(m["running"]),
                     int(m["waiting"]), float(m["kv"]))


def required_literal(pattern: str) -> str | None:
    """The longest literal run every match of ``pattern`` must contain (lower-cased), or None.

    Only top-level literals (and literals inside plain top-level groups) count: anything under
    an alternation, an optional or a repeat may be absent from a match.
    """
    try:
        from re import _parser as sre  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover
        import sre_parse as sre  # type: ignore[no-redef]
    try:
        tree = sre.parse(pattern)
    except Exception:
        return None
    best, run = "", []

    def flush() -> None:
        nonlocal best
        s = "".join(run)
        if len(s) > len(best):
            best = s
        run.clear()

    def walk(items) -> None:
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                run.append(chr(av))
            elif name == "SUBPATTERN":
                walk(av[-1])
            elif name in ("AT",):
                continue
            else:
                flush()
    walk(tree)
    flush()
    best = best.lower()
    return best if len(best) >= 3 else None


class LinePrefilter:
    """Cheap test before the regexes: a line can only match an entry if it holds one of the
    entry's required literals. Entries without one are always tried."""

    def __init__(self, patterns: "list[str]") -> None:
        lits = [required_literal(p) for p in patterns]
        self.always = any(lit is None for lit in lits)
        self.literals = sorted({lit for lit in lits if lit})

    def candidate(self, line: str) -> bool:
        if self.always:
            return True
        low = line.lower()
        return any(lit in low for lit in self.literals)
