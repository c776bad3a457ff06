"""The answer to a log: the decisive event and, for it, the best-founded explanation from
four layers, each saying where it came from and how sure it is.

Layers, most specific first: a curated entry (its signature matched the decisive line, or
it attaches to a code the line carries), the error-code tables (knowledge/codes.py), the
message shapes of the loader, OS and CPython (knowledge/shapes.py), the source index of the
installed stack (knowledge/srcindex.py). A curated entry marked ``generic`` and a code known
only by its family rank below all of them. Events (knowledge/events.py) decide which line
is answered first; ranking never falls back to the order of the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from . import NO_CAUSE_ABOVE, Entry, KnowledgeBase, Match, pick
from .codes import Code, codes_in
from .events import Event, LogLine, _norm, events, weight
from .shapes import ShapeHit, shapes_in
from .srcindex import Site, SourceIndex

CURATED, CODE, SHAPE, TEMPLATE = "curated", "code-table", "message-shape", "source-template"
# how much each kind of answer explains (ranking inside an event, and confidence)
SPECIFICITY = {"signature": 3.0, "alias": 2.6, "code": 2.0, "shape": 1.8, "template": 1.0,
               "generic": 0.6, "family": 0.4}
BASE_CONFIDENCE = {"signature": 0.9, "alias": 0.8, "code": 0.7, "shape": 0.65,
                   "template": 0.35, "generic": 0.4, "family": 0.3}
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
    coverage: float = 0.0  # a template: share of the line its fixed text covers
    decisive: bool = False
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

    def origin(self) -> str:
        """Where the answer came from, as one line (for text reports)."""
        if self.source == CURATED:
            via = {"signature": "signature", "alias": f"code {self._via()}",
                   "generic": "generic signature"}.get(self.how, self.how)
            return f"curated entry {self.entry.id if self.entry else ''} ({via})"
        if self.code is not None:
            return f"error-code table {self.code.table} ({self.code.source.split(' (')[0]})"
        if self.shape is not None:
            return f"message shape {self.shape.key}"
        assert self.site is not None
        return f"source template {self.site.package} {self.site.version} {self.site.file}:{self.site.line}"

    def _via(self) -> str:
        return self.code.code if self.code is not None else "?"

    def to_dict(self, lang: str = "en") -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source, "how": self.how, "confidence": round(self.confidence, 2),
            "decisive": self.decisive, "line": {"line": self.line[0], "text": self.line[1]},
            "id": self.key, "title": self.title(lang), "steps": self.steps(lang),
            "origin": self.origin(), "causes": list(self.causes)}
        if self.entry is not None:
            d["fix"] = self.entry.fix
        if self.code is not None:
            d["code"] = {"table": self.code.table, "code": self.code.code,
                         "exact": self.code.exact, "document": self.code.source}
        if self.shape is not None:
            d["shape"] = {"key": self.shape.key, "document": self.shape.source}
        if self.site is not None:
            d["template"] = {**self.site.to_dict(), "coverage": round(self.coverage, 2)}
        return d


@dataclass
class Verdict:
    """The answers to a log, the decisive line, and whether the source index was used."""

    answers: list[Answer]
    decisive: LogLine | None
    events: int
    index: Mapping[str, Any]  # {"available": bool, "packages"|"reason": …}
    matches: list[Match] = field(default_factory=list)

    def next_command(self) -> str:
        return NEXT_COMMAND


def _event_answers(ev: Event, by_line: Mapping[int, list[Match]], kb: KnowledgeBase,
                   index: SourceIndex | None) -> list[Answer]:
    cause = ev.cause
    line = (cause.n, cause.text)
    out: list[Answer] = []
    seen_entries: set[str] = set()
    # curated entries whose signature matched the decisive line, then another line of it
    for ln in [cause, *[x for x in ev.lines if x is not cause]]:
        for m in by_line.get(ln.n, ()):
            if m.entry.id in seen_entries:
                continue
            seen_entries.add(m.entry.id)
            how = "generic" if m.entry.generic else "signature"
            conf = BASE_CONFIDENCE[how] - (0.0 if ln is cause else 0.1)
            out.append(Answer(CURATED, how, conf, (ln.n, ln.text), entry=m.entry, match=m,
                              groups=dict(m.groups)))
    for hit in codes_in(cause.body):
        attached = [e for e in kb.lookup(hit.code.code) if e.id not in seen_entries]
        for e in attached:
            seen_entries.add(e.id)
            out.append(Answer(CURATED, "alias", BASE_CONFIDENCE["alias"], line, entry=e,
                              code=hit.code, groups={"code": hit.code.code}))
        how = "code" if hit.code.exact else "family"
        out.append(Answer(CODE, how, BASE_CONFIDENCE[how], line, code=hit.code))
    for sh in shapes_in(cause.body):
        out.append(Answer(SHAPE, "shape", BASE_CONFIDENCE["shape"], line, shape=sh))
    if index is not None and ev.kind in ("traceback", "code", "shape", "error", "death"):
        traced = index.trace(_message_of(cause.body))
        if traced is not None:
            site, cov = traced
            out.append(Answer(TEMPLATE, "template", BASE_CONFIDENCE["template"] + 0.4 * cov,
                              line, site=site, coverage=cov))
    return out


def _message_of(body: str) -> str:
    """The text a raise or log call produced: an exception line without its type."""
    from .events import EXCEPTION

    m = EXCEPTION.match(body)
    return m.group("msg") if m and m.group("msg") else body


def _spec(a: Answer) -> float:
    return SPECIFICITY[a.how] + (a.coverage if a.site is not None else 0.0)


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
        for a in sorted(answers, key=lambda a: -_spec(a)):
            if a.key in keys:
                continue
            keys.add(a.key)
            if ev.cause is decisive:
                a.decisive = True
            else:
                a.confidence *= 0.6
            out.append(a)
    # an answer on the decisive line first; within it the most specific
    out.sort(key=lambda a: (not a.decisive, -_spec(a) if a.decisive else 0.0))
    note = dict(index_note or ({"available": True, "packages": index.packages} if index else
                               {"available": False, "reason": "no installed stack to index"}))
    return Verdict(out, decisive, len(evs), note, ms)
