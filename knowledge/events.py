"""A log read as events, not lines: which line decides what went wrong.

* A Python traceback chain ("The above exception was the direct cause …", "During handling
  of …") is one event; its cause is the innermost exception, the first one printed.
* A wrapper line (torch_npu's ``call aclnnX failed``, ``NPU/OPS/HCCL function error … error
  code is N``, ``PTA call acl api failed``) defers to the CANN line with a code that follows
  it; what was matched on the wrapper alone no longer answers first (knowledge/decide.py).
* An engine death (``EngineCore encountered a fatal error``, ``Engine core initialization
  failed``, ``EngineDeadError``) takes its cause from the traceback printed right after it,
  else from the nearest preceding error of the same process family within a window: the
  APIServer rejecting a request a minute earlier is not why the engine died.
* Repeated messages (the same text with other numbers) weigh less than a single decisive one.

Lines come as (number, text) with gaps (the prefilter leaves out lines that can hold
nothing); everything here is bounded by the number of candidate lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

# "(EngineCore_DP0 pid=415) ", "(VllmWorker rank=0 pid=12) ", "[rank0]: "
# "(VllmWorker TP0 pid=3127) ": a bare word (the worker's rank) as well as key=value
_PROC = re.compile(r"^\s*(?:\((?P<proc>[A-Za-z_][\w.-]*)(?: \w+(?:=[\w.-]+)?)*? pid=(?P<pid>\d+)\)"
                   r"|\[(?P<rank>rank\d+)\]:)\s*")
# vLLM's own records: "ERROR 08-28 02:33:28 [core.py:634] " (optional milliseconds/year)
_LEVEL = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s+"
                    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\s+\[[^\]]*\]\s?")
_CANN_LEVEL = re.compile(r"^\[(?P<level>ERROR|WARNING|INFO|EVENT)\]\s")
_GLOG = re.compile(r"^\[?(?P<level>[EWF])\d{4} \d\d:\d\d:\d\d")
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
_CHAIN = re.compile(r"^\s*(?:The above exception was the direct cause of the following exception"
                    r"|During handling of the above exception, another exception occurred)")
EXCEPTION = re.compile(
    r"^\s*(?P<exc>(?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning))"
    r"(?:\[\w+\])?(?::\s*(?P<msg>.*))?$")
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
WRAPPER = re.compile(r"call aclnn\w* failed|\b(?:NPU|OPS|HCCL|DIST) function error|"
                     r"PTA call acl api failed|call hccl api failed|"
                     r"The internal ACL of the system is incorrect|ERR\d{5} \w+ call \w+ api failed|"
                     r"\bcall \w+ failed, detail", re.IGNORECASE)
_CODE_LINE = re.compile(r"(?<![A-Za-z0-9])E[0-9A-Z]\d{4}(?![0-9A-Za-z])|\b[1-5]\d{5}\b")
DEATH = re.compile(r"EngineCore encountered a fatal error|Engine core initialization failed|"
                   r"EngineDeadError|EngineCore failed to start|Engine process failed to start|"
                   r"WorkerProc hit an exception|Worker proc \w* ?died unexpectedly", re.IGNORECASE)
# lines that report a consequence: a timeout waiting for someone else, a generic wrapper
CONSEQUENCE = re.compile(r"See (?:root cause|stack trace) above|Watchdog caught collective|"
                         r"collective operation timeout|EngineDeadError|Engine core initialization "
                         r"failed|EI0002|heartbeat|terminate called|SIGTERM|Aborted|"
                         r"Exception in worker VllmWorkerProcess|Worker proc \w* ?died|"
                         r"Worker failed with error|Failed to load the backend extension|"
                         # vLLM's registry: importing the model file failed, the import
                         # error is logged before it (vLLM troubleshooting guide)
                         r"failed to be inspected\. Please check the logs",
                         re.IGNORECASE)
# a request the server refused: the client's problem, never why an engine died
REQUEST_LINE = re.compile(r"Received request |\"(?:POST|GET) /\S* HTTP/[\d.]+\" \d{3}")
DEATH_AFTER = 8  # lines after a death line where its own traceback starts
DEATH_BEFORE = 400  # lines before a death line searched for its cause
DEATH_SECONDS = 45  # …and at most this long before it, when both lines carry a timestamp
WRAPPER_AHEAD = 40  # lines after a wrapper where its CANN line may come


@dataclass
class LogLine:
    n: int
    text: str  # as read, without the newline
    body: str  # without the process prefix and the level/timestamp
    proc: str | None  # "EngineCore", "Worker", "APIServer", "rank0" (no pid)
    pid: str | None
    level: str | None
    ts: int | None  # seconds within the year (MM-DD hh:mm:ss), for windows


@dataclass
class Event:
    """What happened, and the line that says why."""

    kind: str  # traceback | code | error | death | warning
    lines: list[LogLine]
    cause: LogLine  # the decisive line of the event
    chain: list[LogLine] = field(default_factory=list)  # exception lines, innermost first
    repeats: int = 1  # events with the same message (numbers aside)
    died_of: "Event | None" = None  # for a death: the event that caused it
    is_cause_of_death: bool = False

    @property
    def first(self) -> int:
        return self.lines[0].n

    @property
    def family(self) -> str | None:
        return family(self.cause.proc) or family(self.lines[0].proc)


def family(proc: str | None) -> str | None:
    """Processes that fail together: the API server, or the engine and its workers."""
    if not proc:
        return None
    p = proc.lower()
    if p.startswith(("apiserver", "api_server", "frontend")):
        return "api"
    return "engine"


def _ts(s: str | None) -> int | None:
    if not s:
        return None
    mo, d, hh, mm, ss = int(s[0:2]), int(s[3:5]), int(s[6:8]), int(s[9:11]), int(s[12:14])
    return ((((mo * 31) + d) * 24 + hh) * 60 + mm) * 60 + ss


def parse(n: int, text: str) -> LogLine:
    """A line's process, level and timestamp, and its body."""
    t = text.rstrip("\r\n")
    proc = pid = level = ts = None
    rest = t
    m = _PROC.match(rest)
    if m:
        proc = m.group("proc") or m.group("rank")
        pid = m.group("pid")
        rest = rest[m.end():]
    m = _LEVEL.match(rest)
    if m:
        level, ts = m.group("level"), _ts(m.group("ts"))
        rest = rest[m.end():]
    else:
        m = _CANN_LEVEL.match(rest) or _GLOG.match(rest)
        if m:
            level = {"E": "ERROR", "W": "WARNING", "F": "FATAL"}.get(m.group("level"),
                                                                     m.group("level"))
    if proc and "_" in proc and proc.split("_")[-1].startswith("DP"):
        proc = proc.rsplit("_", 1)[0]  # EngineCore_DP0 -> EngineCore
    return LogLine(n, t, rest, proc, pid, level, ts)


def _norm(s: str) -> str:
    """The message with numbers, addresses and ids blanked: repeats compare equal."""
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "#", s.strip())[:200]


def events(lines: Iterable[tuple[int, str]]) -> list[Event]:
    """The events of (number, text) lines, in log order."""
    parsed = [parse(n, t) for n, t in lines]
    out: list[Event] = []
    i = 0
    while i < len(parsed):
        ln = parsed[i]
        body = ln.body
        if REQUEST_LINE.search(body):
            i += 1
            continue
        if _TRACEBACK.match(body) or _CHAIN.match(body) or _headless(parsed, i):
            i = _traceback(parsed, i, out)
            continue
        if DEATH.search(body):
            out.append(Event("death", [ln], ln))
        elif EXCEPTION.match(body) and not _FRAME.match(body):
            # an exception line alone (pydantic's: with the reason on the next lines)
            reason = _pydantic_reason(ln, parsed[i + 1:i + 4])
            out.append(Event("traceback", [ln] + ([reason] if reason is not ln else []),
                             reason, [ln]))
        elif _CODE_LINE.search(body) and _has_code(body):
            out.append(Event("code", [ln], ln))
        elif body[:1].isspace() or body.lstrip().startswith(("^", "~", "File \"")):
            pass  # a traceback's frame or source line whose start was not pasted
        elif ln.level not in ("INFO", "DEBUG", "WARNING", "WARN") and _has_shape(body):
            out.append(Event("shape", [ln], ln))
        elif ln.level in ("ERROR", "CRITICAL", "FATAL"):
            out.append(Event("error", [ln], ln))
        elif ln.level in ("WARNING", "WARN"):
            out.append(Event("warning", [ln], ln))
        i += 1
    out = _drop_unframed_repeats(out)
    _defer_wrappers(out, parsed)
    for ev in out:  # a traceback ending in EngineDeadError is the engine's death
        if ev.kind == "traceback" and DEATH.search(ev.cause.body):
            ev.kind = "death"
    _count_repeats(out)
    _link_deaths(out)
    return out


def _drop_unframed_repeats(evs: list[Event]) -> list[Event]:
    """An exception line alone whose message a traceback with frames in the same log repeats
    (a paste that names the error first, then gives its traceback) is that traceback's
    exception: its lines join the traceback, so the traceback's frames say whose code
    raised it and the line is read as another line of that event."""
    framed = [ev for ev in evs
              if ev.kind == "traceback" and any(_FRAME.match(ln.body) for ln in ev.lines)]
    if not framed:
        return evs
    with_frames = {_norm(ev.cause.body): ev for ev in framed}
    framed_ids = {id(ev) for ev in framed}
    out = []
    for ev in evs:
        home = None if ev.kind != "traceback" or id(ev) in framed_ids else \
            with_frames.get(_norm(ev.cause.body))
        if home is None:
            out.append(ev)
            continue
        home.lines = sorted(home.lines + ev.lines, key=lambda ln: ln.n)
    return out


def _headless(parsed: list[LogLine], i: int) -> bool:
    """Whether a traceback starts at ``parsed[i]`` although its "Traceback (most recent call
    last):" line was not pasted: a frame line, then only frames and the source lines echoed
    under them (a blog or chat paste strips their indentation), then an exception line. The
    frames then say whose code raised, as in a whole traceback."""
    if not _FRAME.match(parsed[i].body):
        return False
    prev_frame = False
    for ln in parsed[i:i + 400]:
        body = ln.body
        if _FRAME.match(body):
            prev_frame = True
            continue
        if EXCEPTION.match(body):
            return True
        if not (prev_frame or body[:1].isspace() or body.lstrip().startswith(("^", "~"))):
            return False
        prev_frame = False
    return False


def _has_code(body: str) -> bool:
    from .codes import codes_in

    return any(h.code.exact for h in codes_in(body))


def _has_shape(body: str) -> bool:
    from .shapes import shapes_in

    # a context shape (a CANN report frame, an access-log 500) traces a line, never makes it
    # an event of its own (knowledge/shapes.py)
    return any(not h.context for h in shapes_in(body))


def _traceback(parsed: list[LogLine], i: int, out: list[Event]) -> int:
    """One traceback chain from ``parsed[i]``: returns the index after it."""
    start = parsed[i]
    proc = start.proc
    lines: list[LogLine] = []
    chain: list[LogLine] = []
    j = i
    last_n = start.n
    while j < len(parsed):
        ln = parsed[j]
        if ln.n - last_n > 200 or (proc and ln.proc and ln.proc != proc and chain):
            break
        body = ln.body
        if lines and (_TRACEBACK.match(body) or _CHAIN.match(body)) and not chain_open(lines):
            if not _CHAIN.match(body) and not _chain_marker_before(lines):
                break
        if lines and DEATH.search(body) and chain:
            break
        lines.append(ln)
        last_n = ln.n
        if EXCEPTION.match(body) and not _FRAME.match(body):
            chain.append(ln)
        elif chain and not _TRACEBACK.match(body) and not _CHAIN.match(body) \
                and not _FRAME.match(body) and ln.level in ("INFO",):
            lines.pop()
            break
        j += 1
        if len(lines) > 2000:
            break
    cause = chain[0] if chain else lines[-1]
    cause = _pydantic_reason(cause, lines)
    out.append(Event("traceback", lines, cause, chain))
    return max(j, i + 1)


# pydantic (vLLM's config classes from 0.10 on) prints "N validation error for ModelConfig"
# and the reason on the next line: "  Value error, <the message vLLM raised> [type=…]"; a
# field's own constraint names the field on one line and the reason on the next:
# "gpu_memory_utilization" / "  Input should be less than or equal to 1 [type=…]"
_PYDANTIC_HEAD = re.compile(r"\d+ validation errors? for \w+\s*$")
_PYDANTIC_REASON = re.compile(r"^\s*(?:(?:Value error|Assertion failed), \S|Input should be )")


def _pydantic_reason(cause: LogLine, after: list[LogLine]) -> LogLine:
    """For pydantic's header line, the line that carries the refused value's message."""
    if not _PYDANTIC_HEAD.search(cause.body):
        return cause
    nxt = [ln for ln in after if 0 < ln.n - cause.n <= 3]
    return next((ln for ln in nxt if _PYDANTIC_REASON.match(ln.body)), cause)


def chain_open(lines: list[LogLine]) -> bool:
    """Whether the traceback read so far has no exception line yet (frames still coming)."""
    for ln in reversed(lines):
        if EXCEPTION.match(ln.body) and not _FRAME.match(ln.body):
            return False
        if _TRACEBACK.match(ln.body):
            return True
    return True


def _chain_marker_before(lines: list[LogLine]) -> bool:
    return any(_CHAIN.match(ln.body) for ln in lines[-3:])


def _defer_wrappers(evs: list[Event], parsed: list[LogLine]) -> None:
    """A wrapper's decisive line is the CANN line with a documented code after it."""
    from .codes import codes_in

    index = {ln.n: k for k, ln in enumerate(parsed)}
    for ev in evs:
        if not WRAPPER.search(ev.cause.body):
            continue
        k = index.get(ev.cause.n)
        if k is None:
            continue
        wrapper_codes = {h.code.code for h in codes_in(ev.cause.body)}
        for ln in parsed[k + 1:]:
            if ln.n - ev.cause.n > WRAPPER_AHEAD:
                break
            if WRAPPER.search(ln.body):
                continue
            hits = [h for h in codes_in(ln.body) if h.code.code not in wrapper_codes]
            # an acl code the table lists, or any CANN error code (E<module><4 digits>, its
            # family known even when the number is not): the wrapper's own code is only
            # what the wrapped call returned
            if any((h.code.exact and h.code.table == "acl")
                   or (h.code.table == "cann" and h.code.code.startswith("E")) for h in hits):
                detail = _detail_of(ln, parsed[index[ln.n] + 1:])
                for x in (ln, detail):  # the header stays one of the event's lines
                    if x not in ev.lines:
                        ev.lines.append(x)
                ev.cause = detail
                break


# CANN prints a code's header ("EE9999: Inner Error!") and then the same code again with
# what failed ("EE9999: [PID: 1] … get error: phyid:0 …[FUNC:…]"): the header says nothing
_CANN_HEADER = re.compile(r"^\s*(?P<code>E[0-9A-Z]\d{4}):\s*(?:Inner Error!?|\w+ Error!?)?\s*$")
DETAIL_AHEAD = 4  # lines after a header where its detail line may come


def _detail_of(ln: LogLine, after: list[LogLine]) -> LogLine:
    """The line that says what failed, for a CANN header line; else the line itself."""
    m = _CANN_HEADER.match(ln.body)
    if not m:
        return ln
    for nxt in after[:DETAIL_AHEAD]:
        if nxt.n - ln.n > DETAIL_AHEAD:
            break
        if nxt.body.lstrip().startswith(m.group("code") + ":") and not _CANN_HEADER.match(nxt.body):
            return nxt
    return ln


def _count_repeats(evs: list[Event]) -> None:
    seen: dict[str, list[Event]] = {}
    for ev in evs:
        seen.setdefault(_norm(ev.cause.body), []).append(ev)
    for group in seen.values():
        for ev in group:
            ev.repeats = len(group)


def _link_deaths(evs: list[Event]) -> None:
    """Each death's cause: its own traceback just after it, else the nearest preceding
    error of the engine's processes within the window. The API server prints the death too
    ("Engine core initialization failed. See root cause above") but its own errors (a
    rejected request) never kill the engine: causes come from the engine family."""
    for k, ev in enumerate(evs):
        if ev.kind != "death":
            continue
        fam = "engine"
        cause = None
        for nxt in evs[k + 1:]:
            if nxt.first - ev.cause.n > DEATH_AFTER:
                break
            if nxt.kind in ("traceback", "code", "shape") and _same_family(fam, nxt) \
                    and not CONSEQUENCE.search(nxt.cause.body):
                cause = nxt
                break
        # before it: the nearest exception, code or loader/OS message of the engine's
        # processes; a plain ERROR line ("Dumping scheduler stats") only when there is none
        for kinds in (("traceback", "code", "shape"), ("error",)):
            if cause is not None:
                break
            for prev in reversed(evs[:k]):
                if ev.cause.n - prev.cause.n > DEATH_BEFORE:
                    break
                if ev.cause.ts is not None and prev.cause.ts is not None \
                        and ev.cause.ts - prev.cause.ts > DEATH_SECONDS:
                    break
                if prev.kind in kinds and _same_family(fam, prev) \
                        and not DEATH.search(prev.cause.body) \
                        and not CONSEQUENCE.search(prev.cause.body):
                    cause = prev
                    break
        if cause is not None:
            ev.died_of = cause
            cause.is_cause_of_death = True


def _same_family(fam: str | None, ev: Event) -> bool:
    other = ev.family
    return fam is None or other is None or other == fam


KIND_WEIGHT = {"traceback": 3.0, "code": 3.0, "shape": 3.0, "error": 2.0, "death": 1.0, "warning": 0.3}


def weight(ev: Event) -> float:
    """How much an event decides what went wrong, before any knowledge is applied."""
    w = KIND_WEIGHT.get(ev.kind, 1.0)
    if ev.is_cause_of_death:
        w += 4.0
    if CONSEQUENCE.search(ev.cause.body):
        w -= 1.5
    if ev.repeats > 3:
        w *= 0.5  # repeated noise: a decisive event is rare
    return w
