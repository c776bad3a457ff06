"""The answer to a log: the decisive event and, for it, the best-founded explanation from
four layers, each saying where it came from and how sure it is.

Layers, most specific first: a curated entry (its signature matched the decisive line, or
it attaches to a code the line carries), the error-code tables (knowledge/codes.py), the
message shapes of the loader, OS and CPython (knowledge/shapes.py), the source index of the
installed stack (knowledge/srcindex.py). A curated entry marked ``generic``, one reached only
through an internal catch-all code (EE9999, 500001), and a code known only by its family rank
below all of them. Events (knowledge/events.py) decide which line is answered first.

Ranking rules, in order: an answer on the event's decisive line before one matched on another
line of it (the wrapper before the CANN line, the outer exception of a chain); then
specificity; then agreement (how many other answers on the line name a cause it names: when
the log cannot tell two causes apart, the entry that covers both comes first); then how much
of the line the signature explains; the id last, never the order of the files.

The verdict is *confident* only when its first answer is on the decisive line, specific, and
names a cause its steps fix. Otherwise triage says "no confident match" with the decisive
line and the next command rather than giving weak advice first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ascend_doctor.i18n import N_

from . import NO_CAUSE_ABOVE, Entry, KnowledgeBase, Match, pick
from .codes import Code, codes_in
from .events import Event, LogLine, _norm, events, weight
from .owner import Frame, Ownership, frame_of, read
from .shapes import ShapeHit, shapes_in
from .srcindex import Site, SourceIndex

CURATED, CODE, SHAPE, TEMPLATE = "curated", "code-table", "message-shape", "source-template"
# how much each kind of answer explains (ranking inside an event, and confidence)
# "owner": a package's defect read from the traceback's frames (knowledge/owner.py), below
# every signature, code and message shape of the line, above a bare raise site; "unshown": a
# signature of a ``needs_frames`` entry on a line that shows no frame of its packages
SPECIFICITY = {"signature": 3.0, "alias": 2.6, "code": 2.0, "shape": 1.8, "owner": 1.7,
               "unshown": 1.2, "template": 1.0, "generic": 0.6, "catchall": 0.5, "family": 0.4}
BASE_CONFIDENCE = {"signature": 0.9, "alias": 0.8, "code": 0.7, "shape": 0.65, "owner": 0.65,
                   "unshown": 0.5, "template": 0.35, "generic": 0.4, "catchall": 0.35,
                   "family": 0.3}
# an answer matched on another line of the event than its decisive one (a wrapper, the outer
# exception of a chain) explains less than any specific answer on the decisive line
OFF_CAUSE = 1.5
# a framework's import of a name the installed stack lacks ranks above the message shape of
# the import error (whose reading is vLLM against the plugin), below codes and signatures
PAIRING = SPECIFICITY["shape"] - SPECIFICITY["owner"] + 0.05
# kinds of answer that can carry a confident verdict (never generic, catch-all or family)
CONFIDENT_HOWS = ("signature", "alias", "code", "shape", "owner", "template")
CONFIDENT_MIN = 0.6
NEXT_COMMAND = "ascend-doctor check --only libs,versions,npu && ascend-doctor collect"


@dataclass
class Answer:
    """One explanation of one line, and where it came from."""

    source: str  # curated | code-table | message-shape | source-template
    how: str  # signature | alias | code | shape | template | generic | family
    confidence: float
    line: tuple[int, str]  # the line it answers
    entry: Entry | None = None
    match: Match | None = None
    code: Code | None = None
    shape: ShapeHit | None = None
    site: Site | None = None
    owned: Ownership | None = None  # an owner entry: the frame and exception it read
    coverage: float = 0.0  # a template: share of the line its fixed text covers
    # an owner answer whose frame is the raise site the source index found: ranked just above
    # that site, which says where the line comes from but not which cause to fix
    confirmed: float = 0.0
    decisive: bool = False
    on_cause: bool = True  # matched on the event's decisive line, not another line of it
    support: int = 0  # other answers on the event that name one of its causes
    groups: dict[str, str] = field(default_factory=dict)
    quoted: list[tuple[int, str]] = field(default_factory=list)  # lines shown with it

    def shown_lines(self) -> list[tuple[int, str]]:
        """The log lines that support the answer: the quoted cause, else the matched lines."""
        if self.quoted:
            return list(self.quoted)
        if self.match is not None:
            return list(self.match.lines)
        return [self.line]

    @property
    def key(self) -> str:
        if self.entry is not None:
            return self.entry.id
        if self.code is not None:
            return f"{self.code.table}:{self.code.code}"
        if self.shape is not None:
            return f"shape:{self.shape.key}"
        assert self.site is not None
        return f"src:{self.site.file}:{self.site.line}"

    @property
    def causes(self) -> tuple[str, ...]:
        if self.entry is not None:
            return self.entry.causes
        if self.shape is not None:
            return self.shape.causes
        return ()

    def title(self, lang: str = "en") -> str:
        if self.entry is not None:
            return self.entry.render_message(self.groups, lang)
        if self.code is not None:
            return f"{self.code.code}: {self.code.text(lang)}"
        if self.shape is not None:
            return pick(self.shape.meaning, lang)
        assert self.site is not None
        return (f"{self.site.kind} in {self.site.function} ({self.site.package} "
                f"{self.site.version}, {self.site.file}:{self.site.line})")

    def steps(self, lang: str = "en") -> list[str]:
        if self.entry is not None:
            return self.entry.steps_for(lang, self.groups)
        if self.code is not None:
            return [s for s in (self.code.first_step(lang),) if s]
        if self.shape is not None:
            return [s for s in (pick(self.shape.step, lang),) if s]
        assert self.site is not None
        guard = f" when `{self.site.guard}`" if self.site.guard else ""
        if lang == "zh":
            return [f"该消息由 {self.site.file}:{self.site.line} 的 {self.site.function} 发出"
                    f"{'（条件 `' + self.site.guard + '`）' if self.site.guard else ''}；"
                    f"阅读该处代码了解触发条件。"]
        return [f"The message is raised at {self.site.file}:{self.site.line} in "
                f"{self.site.function}{guard}; read that code for what triggers it."]

    def origin(self, lang: str = "en") -> str:
        """Where the answer came from, as one line (text reports in ``lang``; JSON: English)."""
        from ascend_doctor.i18n import tt

        if self.source == CURATED:
            code = self._via()
            via = {"signature": tt(lang, "signature"),
                   "alias": tt(lang, "code {code}", code=code),
                   "owner": tt(lang, "owner"),
                   "unshown": tt(lang, "signature (no frame shows which package raised the "
                                       "line)"),
                   "generic": (tt(lang, "catch-all code {code}", code=code)
                               if self.code is not None
                               else tt(lang, "generic signature"))}.get(self.how, self.how)
            if self.owned is not None:  # read from the traceback's frames (owner.py)
                who = (tt(lang, "the model's own code") if self.owned.owner == "model"
                       else self.owned.frame.package or self.owned.owner)
                via = tt(lang, "{exc} in a frame of {who}: {path}:{line}", exc=self.owned.exc,
                         who=who, path=self.owned.frame.path, line=self.owned.frame.line)
                if self.owned.weak:
                    via = tt(lang, "{reading}, a weak reading", reading=via)
            return tt(lang, "curated entry {id} ({via})",
                      id=self.entry.id if self.entry else "", via=via)
        if self.code is not None:
            return tt(lang, "error-code table {table} ({source})", table=self.code.table,
                      source=self.code.source.split(" (")[0])
        if self.shape is not None:
            return (tt(lang, "message shape {key} (broad)", key=self.shape.key)
                    if self.shape.broad else tt(lang, "message shape {key}", key=self.shape.key))
        assert self.site is not None
        return tt(lang, "source template {package} {version} {file}:{line}",
                  package=self.site.package, version=self.site.version, file=self.site.file,
                  line=self.site.line)

    def _via(self) -> str:
        return self.code.code if self.code is not None else "?"

    def to_dict(self, lang: str = "en") -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source, "how": self.how, "confidence": round(self.confidence, 2),
            "decisive": self.decisive, "on_decisive_line": self.decisive and self.on_cause,
            "line": {"line": self.line[0], "text": self.line[1]},
            "id": self.key, "title": self.title(lang), "steps": self.steps(lang),
            "origin": self.origin(), "causes": list(self.causes)}
        if self.entry is not None:
            d["fix"] = self.entry.fix
        if self.code is not None:
            d["code"] = {"table": self.code.table, "code": self.code.code,
                         "exact": self.code.exact, "catchall": self.code.catchall,
                         "document": self.code.source}
        if self.shape is not None:
            d["shape"] = {"key": self.shape.key, "document": self.shape.source}
        if self.site is not None:
            d["template"] = {**self.site.to_dict(), "coverage": round(self.coverage, 2)}
        if self.owned is not None:
            f = self.owned.frame
            d["owner"] = {"package": self.owned.owner, "exception": self.owned.exc,
                          "file": f.path, "line": f.line, "function": f.func}
        return d


@dataclass(frozen=True)
class Trace:
    """Where one error line of the log was traced: each layer that knows it."""

    line: int
    text: str
    found: tuple[dict[str, Any], ...]  # {"layer": …, and what in it}, most specific first

    @property
    def source(self) -> str | None:
        return self.found[0]["layer"] if self.found else None

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text, "source": self.source,
                "traced_to": list(self.found)}


@dataclass
class Verdict:
    """The answers to a log, the decisive line, and whether the source index was used."""

    answers: list[Answer]
    decisive: LogLine | None
    events: int
    index: Mapping[str, Any]  # {"available": bool, "packages"|"reason": …}
    matches: list[Match] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)  # every error line read, in log order

    def next_command(self) -> str:
        return NEXT_COMMAND

    @property
    def confident(self) -> bool:
        """Whether the first answer may be given as *the* answer (see the module doc)."""
        return bool(self.answers) and not self.why_not_confident()

    def why_not_confident(self) -> str:
        """Why the first answer is not a confident one ("" when it is)."""
        if not self.answers:
            return N_("nothing in the knowledge explains the decisive line")
        a = self.answers[0]
        if not a.decisive or not a.on_cause:
            return N_("the best answer explains another line than the decisive one")
        if a.how == "generic":
            return N_("only a generic signature, a broad message shape or an internal "
                      "catch-all code matched")
        if a.how == "catchall":
            return N_("the decisive line carries only an internal catch-all code")
        if a.how == "unshown":
            return N_("the best answer holds only when a package the log does not show "
                      "raised the line (no traceback frames)")
        if a.how not in CONFIDENT_HOWS:
            return N_("the code is known only by its family")
        if not a.causes:
            return N_("the answer says what the line means, not which cause to fix")
        if a.confidence < CONFIDENT_MIN:
            return N_("the best answer is weak")
        return ""


def _event_answers(ev: Event, by_line: Mapping[int, list[Match]], kb: KnowledgeBase,
                   index: SourceIndex | None) -> list[Answer]:
    cause = ev.cause
    line = (cause.n, cause.text)
    out: list[Answer] = []
    seen_entries: set[str] = set()
    shown = _packages_shown(ev)
    traced = None
    if index is not None and ev.kind in ("traceback", "code", "shape", "error", "death"):
        traced = index.trace(_message_of(cause.body))
    # curated entries whose signature matched the decisive line, then another line of it
    for ln in [cause, *[x for x in ev.lines if x is not cause]]:
        for m in by_line.get(ln.n, ()):
            if m.entry.id in seen_entries:
                continue
            seen_entries.add(m.entry.id)
            how = ("generic" if m.entry.generic or not _raised_in(m.entry, shown)
                   else "unshown" if not _raiser_known(m.entry, shown, traced)
                   else "signature")
            conf = BASE_CONFIDENCE[how] - (0.0 if ln is cause else 0.2)
            out.append(Answer(CURATED, how, conf, (ln.n, ln.text), entry=m.entry, match=m,
                              on_cause=ln is cause, groups=dict(m.groups)))
    for hit in codes_in(cause.body):
        attached = [e for e in kb.lookup(hit.code.code) if e.id not in seen_entries]
        for e in attached:
            seen_entries.add(e.id)
            # "EE9999" says something failed inside the runtime: every entry that lists it
            # is one guess among many, not the answer
            how = "generic" if hit.code.catchall or e.generic else "alias"
            out.append(Answer(CURATED, how, BASE_CONFIDENCE[how], line, entry=e,
                              code=hit.code, groups={"code": hit.code.code}))
        how = "catchall" if hit.code.catchall else "code" if hit.code.exact else "family"
        out.append(Answer(CODE, how, BASE_CONFIDENCE[how], line, code=hit.code))
    # a warning that names an error it may lead to ("… can cause fd limit errors like
    # `OSError: [Errno 24] Too many open files`") is not that error
    for sh in shapes_in(cause.body) if ev.kind != "warning" else ():
        how = "generic" if sh.broad else "shape"
        out.append(Answer(SHAPE, how, BASE_CONFIDENCE[how], line, shape=sh))
    owned = _ownership(ev) or _site_feature(cause, traced)
    if owned is not None:
        for e in sorted((e for e in kb.entries.values() if e.owner == owned.owner),
                        key=lambda e: e.id):
            if e.id in seen_entries:
                continue
            seen_entries.add(e.id)
            # a missing feature whose message names a quantisation, an operator, a chip or an
            # architecture is only a candidate: those causes have entries of their own
            how = "generic" if owned.weak else "owner"
            out.append(Answer(CURATED, how, BASE_CONFIDENCE[how], line, entry=e,
                              owned=owned, groups=_owner_groups(owned, index),
                              # a framework reaching for a name the stack lacks: the message
                              # shape's reading (vLLM against the plugin) has the wrong importer
                              confirmed=PAIRING if owned.pairing else 0.0))
    if traced is not None:
        site, cov = traced
        out.append(Answer(TEMPLATE, "template", BASE_CONFIDENCE["template"] + 0.4 * cov,
                          line, site=site, coverage=cov))
    _confirm_owner(out)
    for a in out:  # agreement: the other specific answers that name one of its causes
        mine = set(a.causes)
        a.support = sum(1 for b in out if b is not a and b.how in CONFIDENT_HOWS
                        and mine.intersection(b.causes))
    return out


def _confirm_owner(out: list[Answer]) -> None:
    """An owner answer read from the frame that raised, and the source index's raise site in
    that same file, explain one line twice: the site where it comes from, the owner answer
    also the cause. The owner answer then ranks just above the site (``confirmed``)."""
    sites = [(a, a.site) for a in out if a.site is not None]
    for a in out:
        if a.owned is None or a.how != "owner":
            continue
        path = a.owned.frame.path.replace("\\", "/")
        for t, site in sites:
            if path == site.file or path.endswith("/" + site.file):
                a.confirmed = max(a.confirmed, _spec(t) - _spec(a) + 0.01)


def _site_feature(cause: LogLine, traced: tuple[Site, float] | None) -> Ownership | None:
    """A missing feature or a refused argument read from the site the source index traced
    the line to, when no traceback frames were pasted (a bare exception line, vLLM's ERROR
    record of it, a client's error response): the site stands for the frame that raised,
    its ``raise X`` for the exception."""
    if traced is None:
        return None
    from .events import EXCEPTION
    from .owner import argument_of, feature_of

    site = traced[0]
    frame = Frame(site.file, site.line, site.function, site.package)
    message = _message_of(cause.body)
    if not site.kind.startswith("raise "):
        # an error response or an error gathered into a list: a refused argument at most
        return argument_of(site.kind, message, [frame])
    m = EXCEPTION.match(cause.body)
    exc = m.group("exc") if m else site.kind.split(" ", 1)[1]
    return feature_of(exc, message, [frame]) or argument_of(exc, message, [frame])


def _packages_shown(ev: Event) -> set[str | None] | None:
    """The packages of the traceback frames an event shows (None for a frame of no known
    package: user code, <stdin>); None when it shows no frame at all."""
    if ev.kind not in ("traceback", "death"):
        return None
    found = [frame_of(ln.body) for ln in ev.lines]
    pkgs = {f.package for f in found if f is not None}
    return pkgs or None


def _raised_in(e: Entry, shown: set[str | None] | None) -> bool:
    """Whether an entry with ``raised_in`` fits the frames shown: no frames shown (a bare
    line) fits; frames of none of its packages do not (a CUDA call from a user's script is
    no vLLM platform choice)."""
    if not e.raised_in or shown is None:
        return True
    return bool(shown.intersection(e.raised_in))


def _raiser_known(e: Entry, shown: set[str | None] | None,
                  traced: tuple[Site, float] | None) -> bool:
    """Whether the log shows what an entry with ``needs_frames`` needs: a frame (checked by
    _raised_in), or, for a bare line, the installed stack's raise site of its message in one
    of the ``raised_in`` packages. A bare "Torch not compiled with CUDA enabled" comes from
    any code that calls torch.cuda (a script, a framework), so it is the entry's cause only
    when something shows vLLM."""
    if not e.needs_frames or shown is not None:
        return True
    return traced is not None and traced[0].package in e.raised_in


def _ownership(ev: Event) -> Ownership | None:
    """The defect reading of a traceback event: its innermost exception and the frames
    printed before it (from the last "Traceback" line above it)."""
    from .events import EXCEPTION, _TRACEBACK

    if ev.kind not in ("traceback", "death") or not ev.chain or ev.cause is not ev.chain[0]:
        return None
    m = EXCEPTION.match(ev.cause.body)
    if not m:
        return None
    frames: list[Frame] = []
    source = ""  # the source line printed under the innermost frame
    for ln in ev.lines:
        if ln is ev.cause:
            break
        if _TRACEBACK.match(ln.body):
            frames, source = [], ""
            continue
        f = frame_of(ln.body)
        if f is not None:
            frames.append(f)
            source = ""
        elif frames and not source:
            source = ln.body.strip()
    return read(m.group("exc"), m.group("msg") or "", frames,
                raised=bool(_RAISES.match(source)))


# a source line that raises a new exception on purpose ("raise KeyError(" …); a bare
# "raise" or "raise exc" passes on one an operation raised
_RAISES = re.compile(r"raise [A-Za-z_][\w.]*\(")


def _owner_groups(owned: Ownership, index: SourceIndex | None) -> dict[str, str]:
    """What an owner entry's message and steps name: the exception, the frame, the version
    of the owning package when the source index knows it."""
    f = owned.frame
    # unknown without the source index ("?"): the entry's first step shows it
    version = (index.packages.get(owned.owner) if index is not None else None) or "?"
    return {"exc": owned.exc, "func": f.func, "file": f.path.rsplit("/", 1)[-1],
            "line": str(f.line), "package": owned.owner, "version": str(version),
            "path": f.path, "subject": owned.subject or "?", "home": owned.home or "?",
            "module": f.package or "?"}


def _message_of(body: str) -> str:
    """The text a raise or log call produced: an exception line without its type."""
    from .events import EXCEPTION

    m = EXCEPTION.match(body)
    return m.group("msg") if m and m.group("msg") else body


def _spec(a: Answer) -> float:
    return (SPECIFICITY[a.how] + (a.coverage if a.site is not None else 0.0) + a.confirmed
            - (0.0 if a.on_cause else OFF_CAUSE))


def _evidence(a: Answer) -> float:
    """Lines matched and text of one line explained (Match.score), less the text the
    signature only captured in a named group: a placeholder (``(?P<lib>lib[\\w.]+\\.so)``)
    accepts any value, so the entry that spells the library, code or flag out explains more
    of the same line than one that takes whatever stands there."""
    if a.match is None:
        return 0.0
    captured = sum(len(str(v)) for v in a.match.groups.values())
    return a.match.score - min(captured, 200) / 200.0


def _rank_key(a: Answer) -> tuple[float, int, float, str]:
    """Most specific first; ties: most agreed with, then the most evidence (_evidence),
    then the id."""
    return (-_spec(a), -a.support, -_evidence(a), a.key)


def decide(kb: KnowledgeBase, lines: Sequence[tuple[int, str]],
           index: SourceIndex | None = None, index_note: Mapping[str, Any] | None = None,
           matches: Iterable[Match] | None = None) -> Verdict:
    """Answers for (number, line) pairs, the decisive event's first."""
    ms = list(matches) if matches is not None else kb.match_lines((), numbered=iter(lines))
    by_line: dict[int, list[Match]] = {}
    for m in ms:
        for n, _ in m.lines:
            by_line.setdefault(n, []).append(m)
    evs = events(lines)
    covered = {ln.n for ev in evs for ln in ev.lines}
    # a line a curated signature matched that no event holds is an event of its own
    from .events import parse
    text_of = dict(lines)
    for n in sorted(by_line):
        if n not in covered and n in text_of:
            ln = parse(n, text_of[n])
            evs.append(Event("line", [ln], ln))
    if index is not None:
        evs.extend(source_events(lines, covered.union(by_line), index))
    scored: list[tuple[float, float, Event, list[Answer]]] = []
    seen_text: dict[str, int] = {}
    for ev in evs:
        # a message repeated thousands of times is answered once (its first event)
        key = _norm(ev.cause.body)
        if ev.repeats > 3 and key in seen_text and ev.cause.n not in by_line:
            continue
        seen_text.setdefault(key, ev.cause.n)
        answers = _event_answers(ev, by_line, kb, index)
        best = max((_spec(a) for a in answers), default=0.0)
        scored.append((weight(ev) + best, best, ev, answers))
    for _, _, ev, answers in scored:  # an engine death quotes the error that caused it
        for a in answers:
            if a.entry is None or not a.entry.cause_above:
                continue
            if ev.kind == "death" and ev.died_of is not None:
                c = ev.died_of.cause
                a.groups["cause"] = c.body.strip()[:300]
                a.quoted = [(ev.cause.n, ev.cause.text), (c.n, c.text)]
            else:
                a.groups.setdefault("cause", NO_CAUSE_ABOVE)
    scored.sort(key=lambda t: (-t[0], -t[1], -len(t[2].cause.body)))
    out: list[Answer] = []
    keys: set[str] = set()
    decisive = None
    for rank, (_, _, ev, answers) in enumerate(scored):
        if not answers and rank == 0:
            decisive = ev.cause
            continue
        if decisive is None and answers:
            decisive = ev.cause
        for a in sorted(answers, key=_rank_key):
            if a.key in keys:
                continue
            keys.add(a.key)
            if ev.cause is decisive:
                a.decisive = True
            else:
                a.confidence *= 0.6
            out.append(a)
    # an answer on the decisive event first; within it the rank above
    out.sort(key=lambda a: (not a.decisive, _rank_key(a) if a.decisive else ()))
    note = dict(index_note or ({"available": True, "packages": index.packages} if index else
                               {"available": False, "reason": "no installed stack to index"}))
    return Verdict(out, decisive, len(evs), note, ms, traces(evs, by_line, index))


# a line no marker calls an error ("LoRA rank 32 is greater than max_lora_rank 16", a
# client's "Error code: 400 - …") is one when the installed stack raises or logs it as one
ERROR_SITE_KINDS = ("raise ", "assert", "error response", "logger.error", "logger.exception",
                    "logger.critical", "logger.fatal")
SOURCE_LINE_MIN = 16  # characters: shorter bare lines fit too many templates
SOURCE_COVERAGE = 0.6  # share of the line the template's fixed text must explain
MAX_SOURCE_LINES = 2000  # distinct bare lines traced (a small paste keeps every line)


def _error_site(site: Site) -> bool:
    return site.kind.startswith(ERROR_SITE_KINDS) or site.kind.endswith(".append")


def source_events(lines: Sequence[tuple[int, str]], taken: set[int],
                  index: SourceIndex) -> list[Event]:
    """Lines no event holds that the source index traces to a raise, an assert, an error log
    or an error response of the installed stack, as error events of their own. Lines a level
    marks as INFO/DEBUG/WARNING, indented lines (a traceback's source lines quote the code)
    and frames are not read; each distinct message is traced once, MAX_SOURCE_LINES at most."""
    from .events import _FRAME, parse

    out: list[Event] = []
    seen: dict[str, bool] = {}
    for n, text in lines:
        if n in taken or not text[:1].strip():
            continue
        ln = parse(n, text)
        body = ln.body.strip()
        if ln.level in ("INFO", "DEBUG", "WARNING", "WARN") or len(body) < SOURCE_LINE_MIN \
                or _FRAME.match(ln.body) or body.startswith(("^", "~")):
            continue
        key = _norm(body)
        if key not in seen:
            if len(seen) >= MAX_SOURCE_LINES:
                break
            hit = index.trace(_message_of(body))
            seen[key] = hit is not None and hit[1] >= SOURCE_COVERAGE and _error_site(hit[0])
        if seen[key]:
            out.append(Event("error", [ln], ln))
    return out


MAX_TRACES = 500  # error lines reported with their provenance (a log of repeats stays short)


def traces(evs: Sequence[Event], by_line: Mapping[int, list[Match]],
           index: SourceIndex | None) -> list[Trace]:
    """For each error line the events hold (decisive lines, exception lines of a chain, the
    wrapper and its CANN line, lines a signature matched), every layer that knows it: the
    curated entries, the code tables, the message shapes, the source index's raise site.
    A repeated message is traced once and its result reused."""
    from .events import EXCEPTION, _FRAME, _has_code

    picked: dict[int, LogLine] = {}
    for ev in evs:
        if ev.kind == "warning" and ev.cause.n not in by_line:
            continue
        picked.setdefault(ev.cause.n, ev.cause)
        for ln in ev.chain:
            picked.setdefault(ln.n, ln)
        if ev.kind != "traceback":
            for ln in ev.lines:
                picked.setdefault(ln.n, ln)
        else:  # frames are no error lines; a signature may still match one, and a line
            # printed inside the traceback's span with a documented code is one (torch_npu's
            # "ERR99999 UNKNOWN applicaiton exception" after the exception it tags)
            for ln in ev.lines:
                if ln.n in by_line or not _FRAME.match(ln.body) and (
                        EXCEPTION.match(ln.body) or _has_code(ln.body)):
                    picked.setdefault(ln.n, ln)
    memo: dict[str, tuple[dict[str, Any], ...]] = {}
    out: list[Trace] = []
    for n in sorted(picked)[:MAX_TRACES]:
        ln = picked[n]
        curated = tuple({"layer": CURATED, "id": m.entry.id} for m in by_line.get(n, ()))
        key = _norm(ln.body)
        if key not in memo:
            memo[key] = _trace_layers(ln.body, index)
        out.append(Trace(n, ln.text, curated + memo[key]))
    return out


def _trace_layers(body: str, index: SourceIndex | None) -> tuple[dict[str, Any], ...]:
    found: list[dict[str, Any]] = []
    for hit in codes_in(body):
        found.append({"layer": CODE, "table": hit.code.table, "code": hit.code.code,
                      "exact": hit.code.exact})
    for sh in shapes_in(body):
        found.append({"layer": SHAPE, "shape": sh.key})
    if index is not None:
        traced = index.trace(_message_of(body))
        if traced is not None:
            site, cov = traced
            found.append({"layer": TEMPLATE, "package": site.package, "version": site.version,
                          "file": site.file, "line": site.line, "function": site.function,
                          "coverage": round(cov, 2)})
    return tuple(found)
