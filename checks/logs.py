"""Knowledge-base signatures in the service's logs, and vLLM's periodic stats lines.

Every file is streamed once: each line goes through ``KnowledgeBase.match_lines`` (the same
matcher ``ascend-doctor triage`` uses) and through the stats-line parser, which stands in for
/metrics when the server runs without it (facts/vllm-internals.md §2.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from ascend_doctor.errors import SourceError, SourceMissing
from ascend_doctor.host import Host
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.logs import LinePrefilter, LogScan, LogSources, scan_lines
from ascend_doctor.registry import check
from ascend_doctor.redact import redact_text

CHUNK = 4096


@dataclass
class _Acc:
    entry: object
    count: int = 0
    lines: list = field(default_factory=list)
    groups: dict = field(default_factory=dict)


def match_stream(kb, lines: Iterable[str], on_line=None) -> list[_Acc]:
    """``kb.match_lines`` over a stream, a chunk of candidate lines at a time (the literal
    prefilter skips lines no signature can match), with the file's own line numbers."""
    pre = LinePrefilter([p for e in kb.entries.values() for p in e.signatures])

    def numbered() -> Iterator[tuple[int, str]]:
        for n, line in enumerate(lines, 1):
            if on_line is not None:
                on_line(n, line)
            if pre.candidate(line):
                yield n, line
    return match_numbered(kb, numbered())


def match_file(kb, fh, size: int | None, result: LogScan, engine=None) -> list[_Acc]:
    """What ``match_stream(kb, iter_lines(fh, size))`` gives, from one scan of each block
    (doctor/probes/logs.py ``scan_lines``); ``result`` gets the line count and last stats."""
    pre = LinePrefilter([p for e in kb.entries.values() for p in e.signatures])
    return match_numbered(kb, scan_lines(fh, size, pre, result, engine))


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


QUEUE_DEEP = "service.queue-deep"  # cause key shared with service.metrics' queue finding
_STATUS = {"critical": Finding.fail, "high": Finding.fail, "medium": Finding.warn,
           "low": Finding.info}


@check("logs.signatures", title="Known error signatures in the service's logs",
       category=Category.LOGS, tags=("logs", "service"), timeout=60.0)
def signatures(host: Host, sources: LogSources) -> Iterator[Finding]:
    from ascend_doctor import knowledge
    kb = knowledge.load()
    for lf in sources.files:
        if lf.error:
            yield Finding.error(f"cannot read log {lf.path} ({lf.origin}): {lf.error}",
                                subject=lf.path, evidence={"path": lf.path, "reason": lf.error})
            continue
        try:
            fh = sources.open(host, lf)
        except (SourceMissing, SourceError) as exc:
            yield Finding.error(f"cannot read log {lf.path} ({lf.origin}): {exc.reason}",
                                subject=lf.path, evidence={"path": lf.path, "reason": exc.reason})
            continue
        scan = LogScan()
        try:
            matches = match_file(kb, fh, lf.size, scan)
        finally:
            fh.close()
        last_stats = [scan.last_stats] if scan.last_stats else []
        count = [scan.lines]
        tail = " (last 256 MiB)" if lf.size and lf.size > 256 * 1024 * 1024 else ""
        for m in matches:
            e = m.entry
            first_no, first = m.lines[0]
            make = _STATUS.get(e.severity, Finding.warn)
            yield make(f"{lf.path}: {m.count} line(s) match {e.id} ({e.text('title')}); "
                       f"first at line {first_no}: {redact_text(first.strip())[:160]}",
                       subject=lf.path,
                       evidence={"path": lf.path, "origin": lf.origin, "entry": e.id,
                                 "lines": [{"line": n, "text": redact_text(t)} for n, t in m.lines],
                                 "groups": {k: redact_text(v) for k, v in m.groups.items()}},
                       kb=e.id, fix=e.fix,
                       # entries matching the same line describe one event: one problem
                       cause=f"logs.line:{lf.path}:{first_no}")
        if last_stats:
            st = last_stats[0]
            ev = {"path": lf.path, "line": st.line_no, "running": st.running,
                  "waiting": st.waiting, "kv_cache_percent": st.kv_percent,
                  "prompt_tps": st.prompt_tps, "generation_tps": st.gen_tps}
            text = (f"last stats line ({lf.path}:{st.line_no}): {st.running} running, "
                    f"{st.waiting} waiting, KV cache {st.kv_percent:.1f} %")
            if st.waiting > 100:
                yield Finding.fail(text + " — queue deeper than 100", subject=lf.path, evidence=ev,
                                   kb="ASC-SVC-008", cause=QUEUE_DEEP)
            elif st.kv_percent >= 90.0:
                yield Finding.warn(text + " — KV cache nearly full", subject=lf.path, evidence=ev,
                                   kb="ASC-SVC-007")
            else:
                yield Finding.info(text, subject=lf.path, evidence=ev)
        if not matches:
            yield Finding.passed(f"{lf.path}: {count[0]} lines{tail}, no known signature",
                                 subject=lf.path, evidence={"path": lf.path, "lines": count[0]})
