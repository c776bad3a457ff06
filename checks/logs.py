"""Knowledge-base signatures in the service's logs, and vLLM's periodic stats lines.

The reading (one stream per file through the KB matcher and the stats-line parser) is the
``LogMatches`` fact (doctor/probes/logmatch.py); this check is the rule over it. A matched
entry is reported at the status its KB severity ranks at (``ranking.status_for``), and
carries that severity, so the report's order and the finding's status agree.
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.checks.hccn import explained_by_roce
from ascend_doctor.memfix import fix_for
from ascend_doctor.i18n import T, Texts
from ascend_doctor.model import Category, Finding, Severity
from ascend_doctor.probes.logmatch import (CHUNK, LogFileMatches, LogMatches, match_file,
                                           match_numbered, match_stream)
from ascend_doctor.probes.logs import TAIL_BYTES, LinePrefilter
from ascend_doctor.ranking import status_for
from ascend_doctor.registry import check
from ascend_doctor.redact import redact_text

# the matcher moved to probes/logmatch.py; tests/unit/test_logs_scan.py and bench/bench_logs.py
# still import it from here
__all__ = ["CHUNK", "LinePrefilter", "match_file", "match_numbered", "match_stream",
           "signatures", "QUEUE_DEEP"]

QUEUE_DEEP = "service.queue-deep"  # cause key shared with service.metrics' queue finding
QUEUE_FAIL = 100
KV_WARN_PCT = 90.0


def _severity(value: str) -> Severity:
    try:
        return Severity(value)
    except ValueError:
        return Severity.MEDIUM  # an entry without a known severity: worth a look, not alarm


@check("logs.signatures", title="Known error signatures in the service's logs",
       category=Category.LOGS, tags=("logs", "service"), timeout=120.0)
def signatures(logs: LogMatches) -> Iterator[Finding]:
    for fm in logs.files:
        yield from _file_findings(fm)


def _file_findings(fm: LogFileMatches) -> Iterator[Finding]:
    lf = fm.file
    if fm.error:
        yield Finding.error(T("cannot read log {path} ({origin}): {reason}", path=lf.path,
                              origin=lf.origin, reason=fm.error),
                            subject=lf.path, evidence={"path": lf.path, "reason": fm.error})
        return
    if fm.cut:
        yield Finding.info(T("{path}: read up to byte {at} of {size}, then stopped ({why}); "
                             "the rest of the log was not scanned", path=lf.path,
                             at=fm.read_to or 0, size=fm.size if fm.size is not None else "?",
                             why=fm.cut),
                           subject=lf.path, evidence={"path": lf.path, "read_to": fm.read_to,
                                                      "size": fm.size, "cut": fm.cut})
    verdict = fm.verdict
    answers = {a.key: a for a in (verdict.answers if verdict is not None else ())}
    for m in fm.matches:
        e = m.entry
        first_no, first = m.lines[0]
        sev = _severity(e.severity)
        # a memory failure's fix follows its cause (capacity: lower a flag; fragmentation:
        # the expandable allocator), read from the matched line
        fix_id, fix_params = fix_for(e.id, e.fix, first)
        a = answers.get(e.id)
        origin = ({"source": a.source, "how": a.how, "confidence": round(a.confidence, 2),
                   "decisive": a.decisive} if a is not None else
                  {"source": "curated", "how": "signature", "confidence": None,
                   "decisive": False})
        yield Finding.make(
            status_for(sev),
            T("{path}: {count} line(s) match {entry} ({title}); first at line {line}: {text}",
              path=lf.path, count=m.count, entry=e.id, title=Texts(e.title), line=first_no,
              text=redact_text(first.strip())[:160]),
            severity=sev, subject=lf.path,
            evidence={"path": lf.path, "origin": lf.origin, "entry": e.id,
                      "lines": [{"line": n, "text": redact_text(t)} for n, t in m.lines],
                      "groups": {k: redact_text(v) for k, v in m.groups.items()},
                      "answer": origin},
            kb=e.id, fix=fix_id, fix_params=fix_params,
            # entries matching the same line describe one event: one problem
            cause=f"logs.line:{lf.path}:{first_no}",
            # an HCCL timeout on a node whose RoCE port is down is that port (checks/hccn.py)
            explained_by=explained_by_roce(e.aliases))
    yield from _decisive_findings(fm, {m.entry.id for m in fm.matches})
    st = fm.last_stats
    if st is not None:
        ev = {"path": lf.path, "line": st.line_no, "running": st.running,
              "waiting": st.waiting, "kv_cache_percent": st.kv_percent,
              "prompt_tps": st.prompt_tps, "generation_tps": st.gen_tps}
        args = {"path": lf.path, "line": st.line_no, "running": st.running,
                "waiting": st.waiting, "kv": f"{st.kv_percent:.1f}"}
        if st.waiting > QUEUE_FAIL:
            yield Finding.fail(T("last stats line ({path}:{line}): {running} running, {waiting} "
                                 "waiting, KV cache {kv} % — queue deeper than 100", **args),
                               subject=lf.path, evidence=ev, kb="ASC-SVC-008", cause=QUEUE_DEEP)
        elif st.kv_percent >= KV_WARN_PCT:
            yield Finding.warn(T("last stats line ({path}:{line}): {running} running, {waiting} "
                                 "waiting, KV cache {kv} % — KV cache nearly full", **args),
                               subject=lf.path, evidence=ev, kb="ASC-SVC-007")
        else:
            yield Finding.info(T("last stats line ({path}:{line}): {running} running, {waiting} "
                                 "waiting, KV cache {kv} %", **args),
                               subject=lf.path, evidence=ev)
    if not fm.matches and not (verdict is not None and verdict.answers):
        tail = T(" (last 256 MiB)") if lf.size and lf.size > TAIL_BYTES else ""
        yield Finding.passed(T("{path}: {lines} lines{tail}, no known signature", path=lf.path,
                               lines=fm.lines, tail=tail),
                             subject=lf.path, evidence={"path": lf.path, "lines": fm.lines})


def _decisive_findings(fm: LogFileMatches, reported: set[str]) -> Iterator[Finding]:
    """The decisive line when no curated entry explains it: the answer of the code table,
    the message shape or the source index (with where it came from and how sure), or, with
    nothing known, the line itself and the command to run next."""
    v = fm.verdict
    lf = fm.file
    if v is None or v.decisive is None:
        return
    first = next((a for a in v.answers if a.decisive), None)
    if first is not None and first.entry is not None and first.entry.id in reported:
        return  # the curated finding above is the decisive answer
    d = v.decisive
    line = redact_text(d.text.strip())[:160]
    ev = {"path": lf.path, "line": d.n, "text": redact_text(d.text),
          "source_index": dict(v.index)}
    if first is None:
        yield Finding.info(
            T("{path}: decisive line {line}, no knowledge explains it: {text}; next: "
              "{command}", path=lf.path, line=d.n, text=line, command=v.next_command()),
            subject=lf.path, evidence={**ev, "answer": None}, cause=f"logs.line:{lf.path}:{d.n}")
        return
    if not v.confident:  # a weak candidate is named, never given as the answer (no kb, fix)
        yield Finding.info(
            T("{path}: decisive line {line}, no confident match ({why}): {text}; best "
              "candidate {id} (source: {origin}; confidence {conf}); next: {command}",
              path=lf.path, line=d.n, why=T(v.why_not_confident()), text=line, id=first.key,
              origin=first.origin(), conf=f"{first.confidence:.2f}",
              command=v.next_command()),
            subject=lf.path,
            evidence={**ev, "answer": {"source": first.source, "how": first.how,
                                       "id": first.key, "confident": False,
                                       "confidence": round(first.confidence, 2)}},
            cause=f"logs.line:{lf.path}:{d.n}")
        return
    yield Finding.warn(
        T("{path}: decisive line {line}: {title} (source: {origin}; confidence {conf})",
          path=lf.path, line=d.n, title=redact_text(first.title()), origin=first.origin(),
          conf=f"{first.confidence:.2f}"),
        subject=lf.path, kb=first.entry.id if first.entry is not None else None,
        evidence={**ev, "answer": {"source": first.source, "how": first.how, "id": first.key,
                                   "confident": True, "confidence": round(first.confidence, 2),
                                   "steps": first.steps()}},
        cause=f"logs.line:{lf.path}:{d.n}")
