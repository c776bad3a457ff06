"""Log files to triage: ``--log FILE`` and the server's own stdout/stderr when they are regular
files (``/proc/<pid>/fd/1|2`` resolve to, e.g., /var/log/vllm/server.log).

Logs can be gigabytes: they are only ever streamed (``host.open_stream``) in blocks, past
``TAIL_BYTES`` only the tail is read (the recent part is what explains a failure), and a line
is kept to its first ``MAX_LINE`` bytes (the rest is skipped and counted as cut): memory stays
bounded on every input, a gigabyte without a newline or a .gz that inflates to one included.
"""

from __future__ import annotations

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


def iter_lines(fh: BinaryIO, size: int | None, scan: "LogScan | None" = None) -> Iterator[str]:
    """Decoded lines of a stream (each cut to MAX_LINE bytes); from the last TAIL_BYTES
    when the file is larger."""
    for block in bounded_blocks(fh, size, scan if scan is not None else LogScan()):
        for raw in _split_nl(block):
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
    """Cheap test before the regexes: a line can only match a signature if it holds the
    signature's required literal; ``extra`` literals keep further lines (the error lines
    triage reads as events)."""

    def __init__(self, patterns: "list[str]", literals: "list[str | None] | None" = None,
                 extra: "tuple[str, ...]" = ()) -> None:
        """``literals``: ``required_literal(p)`` of each pattern when already known."""
        lits = literals if literals is not None else [required_literal(p) for p in patterns]
        self.always = any(lit is None for lit in lits)
        self.literals = sorted({lit for lit in lits if lit} | {fold(x) for x in extra})
        # a literal such as "é" is not found by a byte search of the lower-cased block
        self.cased_non_ascii = any(not lit.isascii() and cased(lit) for lit in self.literals)

    def candidate(self, line: str) -> bool:
        if self.always:
            return True
        low = fold(line)
        return any(lit in low for lit in self.literals)


# what triage reads as events besides the signatures' literals (knowledge/events.py): error
# levels, tracebacks and their chains, exception lines, engine deaths, CANN codes
EVENT_LITERALS = ("error", "traceback", "exception", "above exception", "fatal", "critical",
                  "failed", "warning", "killed", "segmentation fault", "bus error",
                  "cannot open shared object", "undefined symbol", "address already in use",
                  "no space left", "permission denied", "no such file", "cannot import name",
                  "no module named", "has no attribute", "connection refused", "timed out",
                  "timeout", "error code", "runtime result", "ret is -", "dead",
                  # a traceback's frames: which package raised it (knowledge/owner.py)
                  'file "')
# a CANN code on a line without any of the words above ("EI0006: Getting socket …")
EVENT_PATTERN = re.compile(rb"E[0-9A-Z][0-9]{4}")


# ---- whole-block scanning --------------------------------------------------------------
# A block of the file is searched for the literals in a few passes (or one with Hyperscan),
# and only the lines found there are decoded and given to the exact per-line test above: the
# same line set as testing every line, at the speed of a byte search. Lower-casing a block
# only folds ASCII; the only other characters re.IGNORECASE equates with an ASCII letter are
# İ ı ſ K (U+0130 U+0131 U+017F U+212A): lines holding one are always tested. Literals with
# other non-ASCII characters are searched as their UTF-8 bytes.

BLOCK = 4 << 20
# İ ı ſ K as UTF-8, looked for only when a block holds their first byte (a memchr: 4 finds of
# the 2-3 byte sequences cost ~14 ms a 4 MiB block of CJK text, the memchr 0.2 ms)
_FOLDS_TO_ASCII = ((b"\xc4\xc5", re.compile(b"\xc4[\xb0\xb1]|\xc5\xbf")),
                   (b"\xe2", re.compile(b"\xe2\x84\xaa")))
_NON_ASCII = re.compile(rb"[\x80-\xff]")


def _has_long_line(block: bytes) -> bool:
    """Whether a line of the block is longer than MAX_LINE: from a line start, the last
    newline within MAX_LINE + 1 bytes is the next line start (about 64 steps a block)."""
    pos, n = 0, len(block)
    while n - pos > MAX_LINE:
        j = block.rfind(b"\n", pos, pos + MAX_LINE + 1)
        if j < 0:
            return True
        pos = j + 1
    return False


def _starts_of(block: bytes, needle: bytes, out: set[int]) -> None:
    """Add the start of every line of ``block`` that holds ``needle``."""
    i = block.find(needle)
    while i >= 0:
        out.add(block.rfind(b"\n", 0, i) + 1)
        j = block.find(b"\n", i)
        i = -1 if j < 0 else block.find(needle, j)


def _fold_starts(block: bytes, out: set[int]) -> None:
    """Add the start of every line holding İ ı ſ or K."""
    for leads, rx in _FOLDS_TO_ASCII:
        if any(block.find(lead) >= 0 for lead in leads):
            for m in rx.finditer(block):
                out.add(block.rfind(b"\n", 0, m.start()) + 1)


# An anchor is one byte of a literal followed by at least _TAIL bytes of it: ``re`` finds a
# literal first byte at memchr speed, so one pass per anchor byte, with a lookahead on what
# follows, finds every literal that holds it. The bytes are chosen on the log itself
# (rare ones, and few passes): _ATTEMPT weighs a pass by how often its byte starts an
# attempt (measured: a pass over 4 MiB ~1.2 ms, each attempt ~30 pass-bytes).
_TAIL = 3
_LOOKAHEAD = 8  # bytes of the rest checked by the regex; the whole literal is checked after
_ATTEMPT = 30.0
PLAN_SAMPLE = 1 << 20


def _usable(lit: bytes) -> bytes:
    """The bytes of ``lit`` an anchor may start at (a short literal: its first)."""
    return lit[:max(len(lit) - _TAIL, 1)]


def _trie(tails: "list[bytes]") -> bytes:
    """A regex matching any of ``tails`` at a position, as a trie (shared prefixes once)."""
    root: dict = {}
    for t in tails:
        node = root
        for c in t:
            node = node.setdefault(c, {})
        node[None] = {}

    def emit(node: dict) -> bytes:
        if None in node:  # a shorter tail already matches here
            return b""
        alts = [re.escape(bytes([c])) + emit(sub) for c, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
    return emit(root)


def anchor_plan(literals: "list[bytes]", sample: bytes
                ) -> "list[tuple[re.Pattern[bytes], tuple[tuple[int, bytes], ...]]]":
    """Per pass: the regex of one anchor byte (and what follows it in each literal), and
    (offset of the byte, literal) of the literals it stands for. A greedy cover: the byte
    that stands for the most literals left per unit of cost in ``sample`` (lower-cased) first."""
    n = max(len(sample), 1)
    cost = {c: 1.0 + _ATTEMPT * sample.count(bytes([c])) / n
            for c in sorted(set(b"".join(_usable(lit) for lit in literals)))}
    left = list(literals)
    plan = []
    while left:
        c = max(cost, key=lambda c: sum(c in _usable(lit) for lit in left) / cost[c])
        group = tuple((_usable(lit).index(c), lit) for lit in left if c in _usable(lit))
        left = [lit for lit in left if c not in _usable(lit)]
        tails = [lit[k + 1:k + 1 + _LOOKAHEAD] for k, lit in group]
        body = re.escape(bytes([c]))
        if all(tails):
            body += b"(?=" + _trie(tails) + b")"
        plan.append((re.compile(body), group))
    return plan


def _anchored_starts(low: bytes, rx: "re.Pattern[bytes]", group: "tuple[tuple[int, bytes], ...]",
                     out: set[int]) -> None:
    """Add the start of every line of ``low`` holding a literal of ``group`` (found through
    its anchor ``rx``; a hit is kept only when the whole literal is there)."""
    search, pos = rx.search, 0
    while (m := search(low, pos)) is not None:
        p = m.start()
        s = low.rfind(b"\n", 0, p) + 1
        if s not in out and not any(p >= k and low.startswith(lit, p - k) for k, lit in group):
            pos = p + 1
            continue
        out.add(s)
        pos = low.find(b"\n", p) + 1  # the line is found: go on from the next
        if not pos:
            return


class _PyEngine:
    """Pure Python: a few ``re`` passes over the lower-cased block, one per anchor byte
    (``anchor_plan``, made on the first block), each hit checked against its literals."""

    name = "python"

    def __init__(self, literals: list[bytes], patterns: "tuple[re.Pattern[bytes], ...]" = ()
                 ) -> None:
        self.literals = literals
        self.patterns = patterns
        self.plan: "list[tuple[re.Pattern[bytes], tuple[tuple[int, bytes], ...]]] | None" = None

    def line_starts(self, block: bytes) -> set[int]:
        low = block.lower()  # ASCII only; see _FOLDS_TO_ASCII for the rest
        if self.plan is None:
            self.plan = anchor_plan(self.literals, low[:PLAN_SAMPLE])
        out: set[int] = set()
        for rx, group in self.plan:
            _anchored_starts(low, rx, group, out)
        for rx in self.patterns:
            for m in rx.finditer(block):
                out.add(block.rfind(b"\n", 0, m.start()) + 1)
        return out


class _HsEngine:
    """Hyperscan (the ``fast`` extra): every literal in one caseless pass over the block."""

    name = "hyperscan"

    def __init__(self, literals: list[bytes], patterns: "tuple[re.Pattern[bytes], ...]" = ()
                 ) -> None:
        import hyperscan

        exprs = [b"".join(b"\\x%02x" % c for c in lit) for lit in literals]
        flags = [hyperscan.HS_FLAG_CASELESS] * len(literals)
        for rx in patterns:  # plain byte patterns (EVENT_PATTERN), case as written
            exprs.append(rx.pattern)
            flags.append(0)
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.db.compile(expressions=exprs, ids=list(range(len(exprs))), flags=flags)

    def line_starts(self, block: bytes) -> set[int]:
        ends: list[int] = []
        self.db.scan(block, match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to))
        rfind = block.rfind
        return {rfind(b"\n", 0, to - 1) + 1 for to in ends}


SMALL_BLOCK = 8 << 10  # below, the line-by-line test is faster than the engine (measured)
HS_AFTER = 512 << 10  # bytes read before the accelerated engine is worth loading (measured)


def cased(text: str) -> bool:
    """Whether ``text`` has letters with an upper and a lower case (é, not 重)."""
    return text.upper() != text.lower()


def _minimal(literals: list[str]) -> list[bytes]:
    """The literals as UTF-8 bytes, up to a newline, without those holding another (a
    literal holding another is found through it). A non-ASCII literal with case (é) is
    left out: its lines are tested whole (``LinePrefilter.cased_non_ascii``)."""
    found = sorted({lit.encode("utf-8").split(b"\n")[0] for lit in literals
                    if lit.isascii() or not cased(lit)} - {b""}, key=lambda b: (len(b), b))
    out: list[bytes] = []
    for lit in found:
        if not any(o in lit for o in out):
            out.append(lit)
    return out


class _LineEngine:
    """No block search: every line decoded and given the exact test (the plain path the
    engines are measured against, and give the same lines as)."""

    name = "line"


def scan_engine(literals: list[str], prefer: str | None = None,
                patterns: "tuple[re.Pattern[bytes], ...]" = ()
                ) -> "_PyEngine | _HsEngine | _LineEngine":
    """Hyperscan when installed (``pip install ascend-doctor[fast]``), else pure Python."""
    # ASCEND_DOCTOR_SCAN_ENGINE=python|hyperscan|line picks one (to rule the accelerator out,
    # or in; ``line`` is the plain line-by-line path)
    prefer = prefer or os.environ.get("ASCEND_DOCTOR_SCAN_ENGINE") or None
    if prefer == "line":
        return _LineEngine()
    lits = _minimal(literals)
    if prefer != "python" and lits:
        try:
            return _HsEngine(lits, patterns)
        except Exception:  # not installed, or no build for this CPU
            if prefer == "hyperscan":
                raise
    return _PyEngine(lits, patterns)


@dataclass(eq=False)
class LogScan:
    """What one pass over a log gives besides the candidate lines: the line count, the
    last stats line, and the lines cut at MAX_LINE (bytes skipped)."""
    lines: int = 0
    last_stats: StatsLine | None = None
    cut: str | None = None  # why the read stopped before the end (time budget, a gap)
    read_to: int | None = None  # the offset the read reached
    cut_lines: int = 0
    cut_bytes: int = 0


def stream_size(fh: BinaryIO) -> int | None:
    """The size of an open stream now (the end a read of it stops at), None if unknown."""
    try:
        pos = fh.tell()
        end = fh.seek(0, os.SEEK_END)
        fh.seek(pos)
        return end
    except (OSError, ValueError):
        return None


def _split_nl(block: bytes) -> list[bytes]:
    """The block's lines, each with its b"\\n" (only b"\\n" ends a line, as readline)."""
    parts = block.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _cut_long(block: bytes, scan: LogScan) -> bytes:
    """The block with every line longer than MAX_LINE cut to it (rare: one regex finds
    whether there is any)."""
    if not _has_long_line(block):
        return block
    parts = block.split(b"\n")
    for k, part in enumerate(parts):
        if len(part) > MAX_LINE:
            scan.cut_lines += 1
            scan.cut_bytes += len(part) - MAX_LINE
            parts[k] = part[:MAX_LINE]
    return b"\n".join(parts)


def bounded_blocks(fh: BinaryIO, size: int | None, scan: LogScan,
                   deadline: float | None = None) -> Iterator[bytes]:
    """The stream (its last TAIL_BYTES when larger) in blocks of whole lines, every line
    cut to MAX_LINE bytes; never past ``size`` (what the file held when opened) nor past
    ``deadline`` (time.monotonic): a cut read ends with ``scan.cut`` saying why. Memory: one
    read (BLOCK) plus one line head (MAX_LINE), whatever the input; a line without an end is
    skipped at byte-search speed."""
    _seek_tail(fh, size)
    carry = b""
    skipping = False  # inside a line already cut: drop bytes up to its newline
    try:  # a pasted log on stdin comes through a wrapper that cannot tell
        pos = fh.tell()
    except (AttributeError, OSError, ValueError):
        pos = 0
    while True:
        want = BLOCK if size is None else min(BLOCK, size - pos)
        if deadline is not None and want > 0 and time.monotonic() > deadline:
            scan.cut = f"read for {READ_BUDGET_S:g} s"  # the checks' budget
            want = 0
        try:
            data = fh.read(want) if want > 0 else b""
        except SourceError as exc:  # a replayed bundle whose collection stopped there
            scan.cut, data = exc.reason, b""
        pos += len(data)
        scan.read_to = pos
        if not data:
            if carry:
                yield carry
            return
        if skipping:
            i = data.find(b"\n")
            if i < 0:
                scan.cut_bytes += len(data)
                continue
            scan.cut_bytes += i
            data = data[i:]
            skipping = False
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n") + 1
        tail = buf[cut:]
        if len(tail) > MAX_LINE:  # a line longer than the limit, its end not read yet
            scan.cut_lines += 1
            scan.cut_bytes += len(tail) - MAX_LINE
            tail = tail[:MAX_LINE]
            skipping = True
        carry = tail
        if cut:
            yield _cut_long(buf[:cut], scan)


def scan_lines(fh: BinaryIO, size: int | None, pre: LinePrefilter, result: LogScan,
               engine: "_PyEngine | _HsEngine | _LineEngine | None" = None,
               every: bool = False,
               patterns: "tuple[re.Pattern[bytes], ...]" = (),
               budget: float | None = READ_BUDGET_S) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line ``pre.candidate`` accepts (with ``every``: every
    line), decoded; ``result`` gets the line count, the last stats line and the cuts.
    ``patterns``: byte regexes whose lines are kept too (EVENT_PATTERN). ``budget``: seconds
    of reading before the read stops (None: to the end, for a log the user hands over)."""
    # Hyperscan costs 15-80 ms to import and compile: loaded only once the read passes
    # HS_AFTER bytes (both engines give the same lines; an explicit choice holds from the start)
    auto = engine is None and not os.environ.get("ASCEND_DOCTOR_SCAN_ENGINE")
    if engine is None and not auto:
        engine = scan_engine(pre.literals, patterns=patterns)
    n, read = 0, 0
    deadline = None if budget is None else time.monotonic() + budget
    for block in bounded_blocks(fh, size, result, deadline):
        read += len(block)
        if auto and read > HS_AFTER:
            engine, auto = scan_engine(pre.literals, patterns=patterns), False
        if every or pre.always or isinstance(engine, _LineEngine) or \
                (auto and len(block) < SMALL_BLOCK):
            for raw in _split_nl(block):  # the line-by-line path
                n += 1
                line = raw.decode("utf-8", "replace")
                if "throughput" in line:
                    st = parse_stats_line(line, n)
                    if st is not None:
                        result.last_stats = st
                if every or pre.candidate(line) or any(rx.search(raw) for rx in patterns):
                    yield n, line
            result.lines = n
            continue
        if engine is None:
            engine = _PyEngine(_minimal(pre.literals), patterns)
        # the engine's lines hold a literal as found (or a pattern): no second test; lines
        # with a character that folds to ASCII get the exact test
        found = engine.line_starts(block)
        maybe: set[int] = set()
        if not block.isascii():
            if pre.cased_non_ascii:
                for m in _NON_ASCII.finditer(block):
                    maybe.add(block.rfind(b"\n", 0, m.start()) + 1)
            _fold_starts(block, maybe)
        prev, base = 0, n
        for s in sorted(found | maybe):
            base += block.count(b"\n", prev, s)
            prev = s
            e = block.find(b"\n", s) + 1 or len(block)
            raw = block[s:e]
            line = raw.decode("utf-8", "replace")
            if s in found or pre.candidate(line) or any(rx.search(raw) for rx in patterns):
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
                # counted from the last line yielded when it lies before (one pass a block)
                before = base + block.count(b"\n", prev, s) if s >= prev else \
                    n + block.count(b"\n", 0, s)
                result.last_stats = dataclasses.replace(st, line_no=before + 1)
                break
            end = s
        n = base + block.count(b"\n", prev) + (0 if block.endswith(b"\n") else 1)
        result.lines = n
    result.lines = n
