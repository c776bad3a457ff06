"""Knowledge-base signatures and vLLM's last stats line, per log file: the reading half of
``logs.signatures`` (the check only rules on what this fact holds).

Every file is streamed once: each line goes through ``KnowledgeBase.match_lines`` (the same
matcher ``ascend-doctor triage`` uses) and through the stats-line parser, which stands in for
/metrics when the server runs without it (docs/HACKING.md, "Existing facts to reuse").
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from ..errors import SourceError, SourceMissing
from ..host import Host
from dataclasses import dataclass, field
from ..registry import provider
from .kbfact import Knowledge
from .logs import (LinePrefilter, LogFile, LogScan, LogSources, StatsLine, scan_lines,
                   stream_size)
from .srcindex import StackIndex

CHUNK = 4096


@dataclass(eq=False)
class _Acc:
    """One KB entry's evidence as a file is scanned."""

    entry: object
    count: int = 0
    lines: list = field(default_factory=list)
    groups: dict = field(default_factory=dict)


def match_stream(kb, lines: Iterable[str], on_line=None) -> list[_Acc]:
    """``kb.match_lines`` over a stream, a chunk of candidate lines at a time (the literal
    prefilter skips lines no signature can match), with the file's own line numbers."""
    pre = prefilter(kb)

    def numbered() -> Iterator[tuple[int, str]]:
        for n, line in enumerate(lines, 1):
            if on_line is not None:
                on_line(n, line)
            if pre.candidate(line):
                yield n, line
    return match_numbered(kb, numbered())


def match_file(kb, fh, size: int | None, result: LogScan, engine=None,
               keep: "Callable[[int, str], None] | None" = None) -> list[_Acc]:
    """What ``match_stream(kb, iter_lines(fh, size))`` gives, from one scan of each block
    (doctor/probes/logs.py ``scan_lines``); ``result`` gets the line count and last stats.
    With ``keep``, the scan also keeps the lines read as events (errors, tracebacks, codes)
    and hands each to ``keep``; only the signatures' candidates reach the matcher."""
    if keep is None:
        return match_numbered(kb, scan_lines(fh, size, prefilter(kb), result, engine))
    import re

    from .logs import EVENT_PATTERN

    sig = prefilter(kb)
    wide = prefilter(kb, events=True)
    pats = (re.compile(EVENT_PATTERN.pattern),)

    def both() -> Iterator[tuple[int, str]]:
        for n, line in scan_lines(fh, size, wide, result, engine, patterns=pats):
            keep(n, line)
            if sig.candidate(line):
                yield n, line
    return match_numbered(kb, both())


def prefilter(kb, events: bool = False) -> LinePrefilter:
    """The literal prefilter over every KB signature; with ``events`` also the lines triage
    reads as events (errors, tracebacks, codes: probes/logs.py ``EVENT_LITERALS``)."""
    from .logs import EVENT_LITERALS

    return LinePrefilter(kb.signatures(), kb.literals(), EVENT_LITERALS if events else ())


def match_numbered(kb, candidates: Iterable[tuple[int, str]]) -> list[_Acc]:
    """``kb.match_lines`` over (line number, line) candidates, CHUNK lines at a time."""
    acc: dict[str, _Acc] = {}
    chunk: list[str] = []
    numbers: list[int] = []

    def flush() -> None:
        for m in kb.match_lines(chunk):
            a = acc.setdefault(m.entry.id, _Acc(m.entry))
            a.count += int(m.score)
            for n, text in m.lines:
                if len(a.lines) < 5:
                    a.lines.append((numbers[n - 1], text))
            for k, v in m.groups.items():
                a.groups.setdefault(k, v)
        chunk.clear()
        numbers.clear()

    for n, line in candidates:
        chunk.append(line)
        numbers.append(n)
        if len(chunk) >= CHUNK:
            flush()
    if chunk:
        flush()
    return sorted(acc.values(), key=lambda a: (-a.count, a.entry.id))


@dataclass(frozen=True, eq=False)
class LogFileMatches:
    """One log file: why it could not be read, or its matches, line count and last stats."""

    file: LogFile
    error: str | None = None
    matches: tuple[_Acc, ...] = ()
    lines: int = 0
    last_stats: StatsLine | None = None
    cut: str | None = None  # why the read stopped early (what was read still counts)
    read_to: int | None = None
    size: int | None = None  # the file's size when opened
    verdict: object | None = None  # knowledge/decide.py Verdict: the decisive line, answers
    cut_lines: int = 0  # lines longer than probes/logs.py MAX_LINE, cut


@dataclass(frozen=True, eq=False)
class LogMatches:
    """KB matches per log file."""

    files: tuple[LogFileMatches, ...] = ()


KEPT_BYTES = 16 << 20  # event lines kept per file (the most recent), text plus overhead


def scan_source(host: Host, sources: LogSources, lf: LogFile, kb,
                stack: "StackIndex | None" = None) -> LogFileMatches:
    """Stream one file once; an unreadable one is recorded, not raised (the others go on).
    The lines read as events decide the file's decisive line (knowledge/decide.py)."""
    from collections import deque

    from ..knowledge.decide import decide

    if lf.error:
        return LogFileMatches(lf, lf.error)
    try:
        fh = sources.open(host, lf)
    except (SourceMissing, SourceError) as exc:
        return LogFileMatches(lf, exc.reason)
    scan = LogScan()
    kept: deque = deque()
    kept_size = [0]

    def keep(n: int, line: str) -> None:
        short = line[:4096]
        kept.append((n, short))
        kept_size[0] += len(short) + 400
        while kept_size[0] > KEPT_BYTES:
            kept_size[0] -= len(kept.popleft()[1]) + 400

    try:
        # the size of what was opened, not of the name stat'ed earlier: a growing log is
        # read to where it ended when opened
        size = stream_size(fh)
        matches = match_file(kb, fh, lf.size if size is None else size, scan, keep=keep)
    finally:
        fh.close()
    index = stack.index if stack is not None else None
    note = stack.note if stack is not None else {"available": False,
                                                 "reason": "the service's packages are unknown"}
    verdict = decide(kb, list(kept), index, note)
    return LogFileMatches(lf, None, tuple(matches), scan.lines, scan.last_stats, scan.cut,
                          scan.read_to, size, verdict, scan.cut_lines)


@provider
def gather_log_matches(host: Host, sources: LogSources, know: Knowledge,
                       stack: StackIndex | None = None) -> LogMatches:
    return LogMatches(tuple(scan_source(host, sources, lf, know.kb, stack)
                            for lf in sources.files))
