"""Log files to triage: ``--log FILE`` and the server's own stdout/stderr when they are regular
files (``/proc/<pid>/fd/1|2`` resolve to, e.g., /var/log/vllm/server.log).

Logs can be gigabytes: they are only ever streamed (``host.open_stream``) line by line, and
past ``TAIL_BYTES`` only the tail is read (the recent part is what explains a failure).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
import time
from typing import BinaryIO, Iterator

from ..casefold import fold
from ..errors import SourceError, SourceMissing
from ..i18n import T
from ..host import Host
from ..inputs import user_files
from ..options import RunOptions
from dataclasses import dataclass
from ..registry import provider
from ..safeopen import Guard
from .svcaccess import refusal, service_creds
from .procs import ServiceProcesses

TAIL_BYTES = 256 * 1024 * 1024
MAX_LINE = 64 * 1024
# a log is read up to its size when opened (a log growing faster than it is read would
# otherwise never end) and for at most READ_BUDGET_S, well inside the logs check's 60 s: what
# was read is kept and the finding says where it stopped
READ_BUDGET_S = 40.0


@dataclass(frozen=True, eq=False)
class LogFile:
    """A log to read: where it is, who named it, its size or why it cannot be read."""

    path: str
    origin: str  # "--log" or "stdout of pid 4711"
    size: int | None = None
    error: str | None = None  # why it cannot be read
    via: str | None = None  # what is opened: /proc/PID/fd/N for the service's own streams
    reader: "tuple[int, tuple[int, ...]] | None" = None  # the service's uid and groups


@dataclass(frozen=True, eq=False)
class LogSources:
    """The logs to scan: --log files and the service's own output."""

    files: tuple[LogFile, ...]
    user: Host | None = None  # where --log files are read (the user's files, not the host's)

    def open(self, host: Host, lf: LogFile) -> BinaryIO:
        """A --log file from the user's filesystem; a service's stdout/stderr from the host,
        through ``/proc/PID/fd/N`` itself (the very file the process holds, never its name
        again) and only when the service's own uid could read it (doctor/safeopen.py)."""
        if lf.origin == "--log":
            return (self.user or host).open_stream(lf.path, guard=Guard())
        return host.open_stream(lf.via or lf.path, guard=Guard(reader=lf.reader))


@provider
def gather_log_sources(host: Host, options: RunOptions, procs: ServiceProcesses | None
                       ) -> LogSources:
    files: list[LogFile] = []
    seen: set[str] = set()

    user = user_files(host)

    def add(path: str, origin: str, via: str | None = None,
            reader: "tuple[int, tuple[int, ...]] | None" = None) -> None:
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
        files.append(LogFile(path, origin, st.size, None, via, reader))

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
                creds = service_creds(host, sp.pid, sp.proc.uid)
                try:
                    why = refusal(host, target, sp.pid, sp.proc.uid)  # read it with the service's rights
                except (SourceMissing, SourceError):
                    why = None  # absent or unreadable: add() names it
                if (why or creds is None) and target not in seen:
                    seen.add(target)
                    files.append(LogFile(target, f"{name} of pid {sp.pid}", None,
                                         why or f"not read: cannot tell the uid of pid {sp.pid}"))
                    continue
                # the name is only shown: what is read is the descriptor itself, decided on
                # its fstat at open time (a name checked, then opened again, can be swapped)
                add(target, f"{name} of pid {sp.pid}", f"/proc/{sp.pid}/fd/{fd}", creds)
    if not files:
        raise SourceMissing(T("log files"), T("no --log given and the server's stdout/stderr "
                                              "are not regular files"))
    return LogSources(tuple(files), user)


def _seek_tail(fh: BinaryIO, size: int | None) -> None:
    """Position ``fh`` at the first whole line of its last TAIL_BYTES when it is larger."""
    if size is not None and size > TAIL_BYTES:
        try:
            fh.seek(size - TAIL_BYTES)
            fh.readline()  # drop the partial first line
        except OSError:
            pass


def iter_lines(fh: BinaryIO, size: int | None) -> Iterator[str]:
    """Decoded lines of a stream; from the last TAIL_BYTES when the file is larger."""
    _seek_tail(fh, size)
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
    """vLLM's periodic stats line: throughput, running and waiting requests, KV cache use."""

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


_REGEX_SPECIAL = frozenset(".^$*+?{}[]\\|()")  # outside these, sre parses every char as LITERAL


def required_literal(pattern: str) -> str | None:
    """The longest literal run every match of ``pattern`` must contain (lower-cased), or None.

    Only top-level literals (and literals inside plain top-level groups) count: anything under
    an alternation, an optional or a repeat may be absent from a match. A pattern without
    one special character (half the KB's signatures) is all literal: the parse is skipped.
    """
    if not _REGEX_SPECIAL.intersection(pattern):
        best = fold(pattern)
        return best if len(best) >= 3 else None
    return _literal_by_parse(pattern)


def _literal_by_parse(pattern: str) -> str | None:
    """required_literal from the regex parser's tree (any pattern)."""
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
    best = fold(best)
    return best if len(best) >= 3 else None


class LinePrefilter:
    """Cheap test before the regexes: a line can only match an entry if it holds one of the
    entry's required literals. Entries without one are always tried."""

    def __init__(self, patterns: "list[str]", literals: "list[str | None] | None" = None) -> None:
        """``literals``: ``required_literal(p)`` of each pattern when already known (the KB
        caches them, see ``KnowledgeBase.signature_keys``)."""
        lits = literals if literals is not None else [required_literal(p) for p in patterns]
        self.always = any(lit is None for lit in lits)
        self.literals = sorted({lit for lit in lits if lit})

    def candidate(self, line: str) -> bool:
        if self.always:
            return True
        low = fold(line)
        return any(lit in low for lit in self.literals)


# ---- whole-buffer scanning -------------------------------------------------------------
# Line by line, the prefilter costs 143 substring tests per line (89 % of a 10⁶-line triage).
# Instead each block of the file is scanned once for every literal, and only the lines found
# there are decoded and given to the exact per-line test above, so the result is the same
# line set: an engine only has to return a superset of the lines that hold a literal.

BLOCK = 4 << 20
# a line of MAX_LINE bytes or more (newline not counted) is split by readline(MAX_LINE): such
# a block is read the old way, piece by piece
_LONG_LINE = re.compile(rb"\n[^\n]{%d}" % MAX_LINE)
_NON_ASCII = re.compile(rb"[\x80-\xff]")


class _PyEngine:
    """Pure Python: one ``bytes.find`` pass per ASCII literal over the lower-cased block."""

    name = "python"

    def __init__(self, literals: list[bytes]) -> None:
        self.literals = literals

    def line_starts(self, block: bytes) -> set[int]:
        low = block.lower()  # ASCII only: lines with other bytes are tested separately
        out: set[int] = set()
        for lit in self.literals:
            i = low.find(lit)
            while i >= 0:
                out.add(low.rfind(b"\n", 0, i) + 1)
                j = low.find(b"\n", i)
                i = -1 if j < 0 else low.find(lit, j)
        return out


class _HsEngine:
    """Hyperscan (the ``fast`` extra): every literal in one caseless pass over the block."""

    name = "hyperscan"

    def __init__(self, literals: list[bytes]) -> None:
        import hyperscan

        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.db.compile(expressions=[b"".join(b"\\x%02x" % c for c in lit) for lit in literals],
                        ids=list(range(len(literals))),
                        flags=[hyperscan.HS_FLAG_CASELESS] * len(literals))

    def line_starts(self, block: bytes) -> set[int]:
        ends: list[int] = []
        self.db.scan(block, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to))
        rfind = block.rfind
        return {rfind(b"\n", 0, to - 1) + 1 for to in ends}


HS_AFTER = 512 << 10  # bytes read before the accelerated engine is worth loading (measured)
SMALL_BLOCK = 8 << 10  # below, the line-by-line test is faster than the engine (measured)


def _minimal(literals: list[str]) -> list[bytes]:
    """The ASCII literals as bytes, up to a newline, without those holding another (a
    literal holding another is found through it: only the minimal ones are searched)."""
    found = sorted({lit.encode().split(b"\n")[0] for lit in literals if lit.isascii()} - {b""})
    # every literal in one newline-joined string: one C-speed count per literal finds those
    # that occur inside another (pairwise ``in`` tests cost 4.6 ms for the KB's ~150)
    joined = b"\n".join(found)
    starts, at = [], 0
    for lit in found:
        starts.append(at)
        at += len(lit) + 1
    holders: set[int] = set()
    for lit in found:
        if joined.count(lit) > 1:
            i = joined.find(lit)
            while i >= 0:
                k = bisect.bisect_right(starts, i) - 1
                if found[k] != lit:
                    holders.add(k)
                i = joined.find(lit, i + 1)
    return [a for k, a in enumerate(found) if k not in holders]


def scan_engine(literals: list[str], prefer: str | None = None) -> "_PyEngine | _HsEngine":
    """Hyperscan when installed (``pip install ascend-doctor[fast]``), else pure Python.

    Only ASCII literals are searched, and only up to a newline (no line holds one before its
    end): lines with other bytes always reach the exact test.
    """
    # ASCEND_DOCTOR_SCAN_ENGINE=python|hyperscan picks one (to rule the accelerator out, or in)
    prefer = prefer or os.environ.get("ASCEND_DOCTOR_SCAN_ENGINE") or None
    lits = _minimal(literals)
    if prefer != "python" and lits:
        try:
            return _HsEngine(lits)
        except Exception:  # not installed, or no build for this CPU
            if prefer == "hyperscan":
                raise
    return _PyEngine(lits)


@dataclass(eq=False)
class LogScan:
    """What one pass over a log gives the logs check besides the candidate lines."""
    lines: int = 0
    last_stats: StatsLine | None = None
    cut: str | None = None  # why the read stopped before the end (time budget, a gap)
    read_to: int | None = None  # the offset the read reached


def stream_size(fh: BinaryIO) -> int | None:
    """The size of an open stream now (the end a read of it stops at), None if unknown."""
    try:
        pos = fh.tell()
        end = fh.seek(0, os.SEEK_END)
        fh.seek(pos)
        return end
    except (OSError, ValueError):
        return None


def _pieces(block: bytes) -> Iterator[bytes]:
    """The block as ``readline(MAX_LINE)`` draws it (the block starts where a line does)."""
    import io

    bio = io.BytesIO(block)
    while True:
        raw = bio.readline(MAX_LINE)
        if not raw:
            return
        yield raw


def _blocks(fh: BinaryIO, size: int | None, result: LogScan | None = None,
            deadline: float | None = None) -> Iterator[bytes]:
    """The stream (its last TAIL_BYTES when larger) in blocks that each start a line; never
    past ``size`` (what the file held when opened) nor past ``deadline`` (time.monotonic):
    a cut read ends with ``result.cut`` saying why."""
    _seek_tail(fh, size)
    carry = b""
    try:
        pos = fh.tell()
    except (OSError, ValueError):
        pos = 0
    while True:
        want = BLOCK if size is None else min(BLOCK, size - pos)
        if deadline is not None and want > 0 and time.monotonic() > deadline:
            if result is not None:
                result.cut = f"read for {READ_BUDGET_S:g} s"
            want = 0
        try:
            data = fh.read(want) if want > 0 else b""
        except SourceError as exc:  # a replayed bundle whose collection stopped there
            if result is None:
                raise
            result.cut, data = exc.reason, b""
        pos += len(data)
        if result is not None:
            result.read_to = pos
        if not data:
            if carry:
                yield carry
            return
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n") + 1
        if cut == 0:  # no newline: readline yields MAX_LINE pieces from the line's start
            cut = len(buf) - len(buf) % MAX_LINE
        if cut:
            yield buf[:cut]
        carry = buf[cut:]


def scan_lines(fh: BinaryIO, size: int | None, pre: LinePrefilter, result: LogScan,
               engine: "_PyEngine | _HsEngine | None" = None) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line ``pre.candidate`` accepts, numbered and decoded as
    ``iter_lines`` yields them; ``result`` gets the line count and the last stats line."""
    # Hyperscan costs 15-80 ms to import and compile, the pure-Python engine ~34 ms a MiB:
    # it is loaded only for a block that takes the read past HS_AFTER bytes (both engines
    # return the same lines; an explicit choice is honoured from the start)
    auto = engine is None and not os.environ.get("ASCEND_DOCTOR_SCAN_ENGINE")
    if engine is None and not auto:
        engine = scan_engine(pre.literals)
    n, read = 0, 0
    deadline = time.monotonic() + READ_BUDGET_S
    for block in _blocks(fh, size, result, deadline):
        read += len(block)
        if auto and read > HS_AFTER:
            engine, auto = scan_engine(pre.literals), False
        first = block.find(b"\n")
        # a small block (the demo's log, a pasted excerpt) is cheaper line by line than
        # building the engine's literal list (_minimal, ~0.5 ms): the same lines either way
        if pre.always or first < 0 or first >= MAX_LINE or (auto and len(block) < SMALL_BLOCK) \
                or _LONG_LINE.search(block):
            for raw in _pieces(block):  # the line-by-line path
                n += 1
                line = raw.decode("utf-8", "replace")
                if "throughput" in line:
                    st = parse_stats_line(line, n)
                    if st is not None:
                        result.last_stats = st
                if pre.candidate(line):
                    yield n, line
            continue
        if engine is None:
            engine = _PyEngine(_minimal(pre.literals))
        starts = engine.line_starts(block)
        if not block.isascii():
            pos = 0
            while (m := _NON_ASCII.search(block, pos)) is not None:
                s = block.rfind(b"\n", 0, m.start()) + 1
                starts.add(s)
                e = block.find(b"\n", m.start())
                if e < 0:
                    break
                pos = e + 1
        prev, base = 0, n
        for s in sorted(starts):
            base += block.count(b"\n", prev, s)
            prev = s
            e = block.find(b"\n", s) + 1 or len(block)
            line = block[s:e].decode("utf-8", "replace")
            if pre.candidate(line):
                yield base + 1, line
        # the last stats line of the block: lines with "throughput", from the end
        end = len(block)
        while (i := block.rfind(b"throughput", 0, end)) >= 0:
            s = block.rfind(b"\n", 0, i) + 1
            e = block.find(b"\n", i) + 1 or len(block)
            # the line number is counted only for the line that parses: counting it for
            # every "throughput" line that is not a stats line made a block quadratic (a
            # 15 MB log of such lines took > 60 s)
            st = parse_stats_line(block[s:e].decode("utf-8", "replace"), 0)
            if st is not None:
                result.last_stats = dataclasses.replace(
                    st, line_no=n + block.count(b"\n", 0, s) + 1)
                break
            end = s
        n += block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        result.lines = n
    result.lines = n
