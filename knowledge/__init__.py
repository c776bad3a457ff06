"""The knowledge base: TOML data files in this package, one per domain.

An entry explains a finding (cause, numbered steps with literal commands), matches log lines
and tracebacks (``signatures``, for triage), says where it applies (``applies_to`` version
ranges, chips, models) and names its fix recipe. Texts are bilingual: ``{en = …, zh = …}``.
Versions stay strings. ``compat.toml`` holds the compatibility matrix (not entries).
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Any, Iterable, Mapping

from ..casefold import fold
from dataclasses import dataclass, field


def _tomllib() -> Any:
    """tomllib (tomli before 3.11)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib

LANGS = ("en", "zh")
DATA_FILES_EXCLUDED = {"compat.toml"}


class KnowledgeError(ValueError):
    """A knowledge file that cannot be used: not UTF-8, not TOML, or an entry of the wrong
    shape. Names the file (and the entry when known); a ValueError for older callers."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    """One knowledge base entry: what it means, why, what to do, how to recognise it."""

    id: str
    title: Mapping[str, str]
    cause: Mapping[str, str]
    steps: tuple[Mapping[str, str], ...]
    signatures: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    fix: str | None = None
    applies_to: Mapping[str, Any] = field(default_factory=dict)
    advice: tuple[Mapping[str, Any], ...] = ()  # version-conditional notes
    sources: tuple[str, ...] = ()
    severity: str = "medium"
    domain: str = ""
    message: Mapping[str, str] = field(default_factory=dict)  # triage template, {group} names
    generic: bool = False  # its signatures fit many causes: ranked only when nothing specific
    # the line names no cause, the exception above it does ("Engine core initialization
    # failed. See root cause above"): triage quotes that line as the {cause} group
    cause_above: bool = False
    examples: tuple[str, ...] = ()  # real log lines its signatures must match (kb lint)
    # the root causes (tests/corpus/threads/CAUSES.md keys) its first step fixes
    causes: tuple[str, ...] = ()
    # the package (knowledge/owner.py) whose defect the entry answers: reached through the
    # frames of a traceback, not through a signature
    owner: str | None = None
    # packages whose code the failure comes from: a traceback whose frames are shown and
    # hold none of them is not this entry's failure (vLLM's platform choice needs vLLM frames)
    raised_in: tuple[str, ...] = ()
    # a bare line (no frames, no raise site of the installed stack in raised_in) is only a
    # candidate: any code prints the signature ("Torch not compiled with CUDA enabled")
    needs_frames: bool = False

    def advice_for(self, versions: Mapping[str, str | None], lang: str = "en") -> list[str]:
        """The advice texts whose ``when`` holds for ``versions`` (unknown version: not held).

        ``versions`` maps a stack component (``vllm_ascend``, ``vllm``, ``cann``, ``driver``,
        ``torch``, ``torch_npu``, ``chip``) to what was found on the host.
        """
        return [pick(a, lang) for a in self.advice if condition_holds(a.get("when", {}), versions)]

    def advice_table(self, lang: str = "en") -> list[tuple[str, str]]:
        """Every advice item as (its condition in words, its text), for hosts not looked at."""
        return [(describe_when(a.get("when", {})), pick(a, lang)) for a in self.advice]

    def applies(self, versions: Mapping[str, str | None]) -> bool | None:
        """Whether ``applies_to`` holds: True/False, None when a needed version is unknown."""
        if not self.applies_to:
            return True
        verdicts = [_one_holds(k, v, versions.get(k)) for k, v in self.applies_to.items()]
        if False in verdicts:
            return False
        return None if None in verdicts else True

    def render_message(self, groups: Mapping[str, str], lang: str = "en") -> str:
        """The triage message with the signature's named groups filled in."""
        tmpl = pick(self.message, lang) if self.message else self.text("title", lang)
        return fill(tmpl, groups)

    def to_dict(self, lang: str | None = None) -> dict[str, Any]:
        """A JSON-able view; with ``lang`` the texts are resolved to that language."""
        def t(m: Mapping[str, str]) -> Any:
            return pick(m, lang) if lang else dict(m)
        return {"id": self.id, "domain": self.domain, "severity": self.severity,
                "title": t(self.title), "cause": t(self.cause),
                "steps": [({"text": pick(s, lang), "cmd": s.get("cmd")} if lang else dict(s))
                          for s in self.steps],
                "signatures": list(self.signatures), "aliases": list(self.aliases),
                "checks": list(self.checks), "fix": self.fix,
                "applies_to": dict(self.applies_to),
                "advice": [{"when": dict(a.get("when", {})),
                            **({"text": pick(a, lang)} if lang else
                               {k: a[k] for k in LANGS if k in a})} for a in self.advice],
                "sources": list(self.sources), "causes": list(self.causes)}

    def text(self, name: str, lang: str = "en") -> str:
        value = getattr(self, name)
        return value.get(lang) or value.get("en") or next(iter(value.values()), "")

    def steps_for(self, lang: str = "en", groups: Mapping[str, str] | None = None) -> list[str]:
        """Numbered step texts, each with its literal command when it has one.

        With ``groups`` (what the log line said) a step's ``{name}`` is filled in and a step
        whose ``when_value`` does not hold for the value found is left out: advice depends
        on the value ("lower to 0.85" is never given to a service already at 0.6).
        """
        out = []
        for s in self.steps:
            if groups is not None and value_holds(s.get("when_value"), groups) is False:
                continue
            t = s.get(lang) or s.get("en", "")
            if groups:
                t = fill(t, groups)
            if s.get("cmd"):
                cmd = fill(s["cmd"], groups) if groups else s["cmd"]
                t = f"{t} `{cmd}`"
            out.append(t)
        return out

    @functools.cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in self.signatures)


_VALUE_COND = re.compile(r"^\s*(\w+)\s*(<=|>=|<|>|==|!=)\s*(-?[\d.]+)\s*$")


def value_holds(cond: Any, groups: Mapping[str, str]) -> bool | None:
    """``"utilization < 0.95"`` against the captured groups: True/False (False too when the
    log did not give the value: the step needs it), None when there is no condition or it
    is not of that form, or the value is not a number (the step is then shown)."""
    if not isinstance(cond, str):
        return None
    m = _VALUE_COND.match(cond)
    if not m:
        return None
    if not groups.get(m.group(1)):
        return False
    try:
        found = float(str(groups[m.group(1)]).replace(",", "").rstrip("%"))
        ref = float(m.group(3))
    except ValueError:
        return None
    return {"<": found < ref, "<=": found <= ref, ">": found > ref, ">=": found >= ref,
            "==": found == ref, "!=": found != ref}[m.group(2)]


_FIELD = re.compile(r"\{(\w+)\}")


def fill(text: str, groups: Mapping[str, str]) -> str:
    """``{name}`` replaced by the group of that name; every other brace stays as written
    (a command's `{print $1}` or `{"NPU": 8}`)."""
    return _FIELD.sub(lambda m: str(groups[m.group(1)]) if groups.get(m.group(1)) else m.group(0),
                      text)


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def pick(m: Mapping[str, Any], lang: str | None) -> str:
    """The text in ``lang``, falling back to English, then to any language."""
    return m.get(lang or "en") or m.get("en") or next(
        (v for k, v in m.items() if k in LANGS), "")


VERSION_KEYS = ("vllm_ascend", "vllm", "cann", "driver", "hdk", "firmware", "torch", "torch_npu",
                "python")
LIST_KEYS = ("chip", "model")


def _canon_version(v: str) -> str:
    """CANN/driver spellings (8.0.RC1, 23.0.rc3, 8.3.RC1.alpha002) as PEP 440 (8.0rc1)."""
    s = v.strip()
    s = re.sub(r"\.(?i:rc)(\d+)", r"rc\1", s)
    s = re.sub(r"\.(?i:alpha)(\d+)", r".dev\1", s)
    s = re.sub(r"\.(?i:t)(\d+)$", r".post\1", s)
    return s


def _one_holds(key: str, spec: Any, found: str | None) -> bool | None:
    if found is None or found == "":
        return None
    if key in LIST_KEYS or isinstance(spec, (list, tuple)):
        wanted = [spec] if isinstance(spec, str) else list(spec)
        return any(str(w).lower() in str(found).lower() for w in wanted)
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version
    try:
        return SpecifierSet(_canon_spec(str(spec))).contains(
            Version(_canon_version(str(found))), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def _canon_spec(spec: str) -> str:
    return ",".join(re.sub(r"([0-9][0-9A-Za-z.]*)", lambda m: _canon_version(m.group(1)), p)
                    for p in spec.split(","))


def condition_holds(when: Mapping[str, Any], versions: Mapping[str, str | None]) -> bool:
    """Every key of ``when`` holds for the versions found (an unknown one does not)."""
    return all(_one_holds(k, v, versions.get(k)) is True for k, v in when.items())


def describe_when(when: Mapping[str, Any]) -> str:
    if not when:
        return "always"
    return ", ".join(f"{k} {'in ' + '/'.join(v) if isinstance(v, list) else v}"
                     for k, v in when.items())


@dataclass(frozen=True, eq=False)
class Match:
    """An entry matched by log lines: how strongly, which lines, what they captured."""

    entry: Entry
    score: float
    lines: tuple[tuple[int, str], ...]  # (line number, text)
    groups: Mapping[str, str]


class KnowledgeBase:
    def __init__(self, entries: Iterable[Entry]) -> None:
        self.entries: dict[str, Entry] = {}
        for e in entries:
            if e.id in self.entries:
                raise ValueError(f"duplicate knowledge id {e.id}")
            self.entries[e.id] = e

    def get(self, id: str) -> Entry | None:
        """An entry by id (any case) or by one of its aliases (EZ9999, 207018, ...)."""
        found = self.lookup(id)
        return found[0] if found else None

    def lookup(self, id: str) -> list[Entry]:
        """Every entry with this id or alias: an id first, then aliases in id order."""
        e = self.entries.get(id) or self.entries.get(id.strip().upper())
        if e is not None:
            return [e]
        key = id.strip().lower()
        return sorted((c for c in self.entries.values()
                       if key in (a.lower() for a in c.aliases)), key=lambda c: c.id)

    def titles(self, ids: Iterable[str], lang: str = "en") -> dict[str, str]:
        return {i: self.entries[i].text("title", lang) for i in ids if i in self.entries}

    def search(self, text: str, lang: str | None = None) -> list[Entry]:
        """Entries whose id, alias, title, cause or steps contain every word of ``text``.

        Ranked: an id/alias hit first, then title hits (in ``lang`` when given), then the rest.
        """
        words = [w.lower() for w in text.split() if w]
        scored = []
        for e in self.entries.values():
            steps = [v for s in e.steps for k, v in s.items() if k in (*LANGS, "cmd")]
            hay = " ".join([e.id, *e.aliases, *e.title.values(), *e.cause.values(), *steps,
                            *e.checks, e.fix or ""]).lower()
            if not all(w in hay for w in words):
                continue
            ids = " ".join([e.id, *e.aliases]).lower()
            title = (pick(e.title, lang) if lang else " ".join(e.title.values())).lower()
            score = sum(3 for w in words if w in ids) + sum(1 for w in words if w in title)
            scored.append((-score, e.id, e))
        return [e for _, _, e in sorted(scored, key=lambda t: (t[0], t[1]))]

    def _flat(self) -> tuple[list[tuple[str, "re.Pattern[str]"]], list[str]]:
        """Every (entry id, compiled signature) in entry order, and the literal each needs
        in the folded line (``probes.logs.required_literal``)."""
        if not hasattr(self, "_flat_cache"):
            from ascend_doctor.probes.logs import required_literal

            flat = [(e.id, rx) for e in self.entries.values() for rx in e.compiled]
            lits = [required_literal(p) or "" for p in self.signatures()]
            self._flat_cache = (flat, lits)
        return self._flat_cache

    def signatures(self) -> list[str]:
        """Every signature, in entry order (the order of ``_flat`` and ``literals``)."""
        return [p for e in self.entries.values() for p in e.signatures]

    def literals(self) -> list[str | None]:
        """Per signature the literal every match contains (lower-cased), or None."""
        return [lit or None for lit in self._flat()[1]]

    def match_lines(self, lines: Iterable[str], limit_lines_per_entry: int = 5,
                    numbered: Iterable[tuple[int, str]] | None = None) -> list[Match]:
        """Rank entries by evidence (streaming): specific entries before generic ones.

        An entry marked ``generic`` (ACL call failed, EZ9999) is returned only when no
        specific entry matched, so the decisive line wins over a frequent vague one. Within
        a tier entries rank by how many distinct lines they match, ties on how much of one
        line their signatures explain, then the id. A reporter's paste that wrapped a long
        line is matched joined with the line after it; CANN's ``runtime result = N`` is read
        as torch_npu's ``error code is N``. A signature whose required literal is not in
        the line is not tried.
        """
        hits: dict[str, list[tuple[int, str]]] = {}
        groups: dict[str, dict[str, str]] = {}
        counts: dict[str, int] = {}
        span: dict[str, int] = {}  # most text of one line explained: more specific
        flat, literals = self._flat()

        def scan(text: str) -> dict[str, int]:
            """Per entry, the matched length its signatures explain in ``text``."""
            covered: dict[str, int] = {}
            found_groups: dict[str, dict[str, str]] = {}
            low = fold(text)
            for i, lit in enumerate(literals):
                if lit not in low:  # "" (no literal known) is in every line
                    continue
                eid, rx = flat[i]
                m = rx.search(text)
                if not m:
                    continue
                covered[eid] = covered.get(eid, 0) + max(m.end() - m.start(), 1)
                found_groups.setdefault(eid, {}).update(
                    {k: v for k, v in m.groupdict().items() if v})
            for eid, g in found_groups.items():
                groups.setdefault(eid, {}).update(g)
            return covered

        def record(covered: Mapping[str, int], n: int, text: str) -> None:
            for eid, width in covered.items():
                counts[eid] = counts.get(eid, 0) + 1
                lst = hits.setdefault(eid, [])
                if len(lst) < limit_lines_per_entry:
                    lst.append((n, text.rstrip("\n")[:500]))
                span[eid] = max(span.get(eid, 0), width)

        window: list[tuple[int, str, set[str]]] = []  # the last _JOIN_LINES lines
        last = 0
        # ``numbered``: (line number, line) with gaps where a prefilter left lines out; a
        # line after a gap joins nothing before it
        for n, raw in (enumerate(lines, 1) if numbered is None else numbered):
            if n != last + 1:
                window = []
            last = n
            line = _normalized(raw)
            covered = scan(line)
            record(covered, n, raw)
            window = [*window[max(len(window) - _JOIN_LINES + 1, 0):], (n, line, set(covered))]
            if _RECORD_START.match(raw) or sum(len(t) for _, t, _ in window) > _JOIN_MAX:
                window = window[-1:]
            for k in range(2, len(window) + 1):
                part = window[-k:]
                seen = set().union(*(c for _, _, c in part))
                glued = part[0][1].rstrip("\r\n")
                spaced = glued.rstrip()
                for _, t, _ in part[1:]:
                    glued += t.lstrip()
                    spaced += " " + t.strip()
                joined: dict[str, int] = {}
                for text in (glued, spaced):
                    for eid, width in scan(text).items():
                        if eid not in seen:
                            joined[eid] = max(joined.get(eid, 0), width)
                record(joined, part[0][0], spaced)
                part[0][2].update(joined)
        out = []
        for eid, cnt in counts.items():
            e = self.entries[eid]
            specificity = min(span.get(eid, 0) / 200.0, 0.99)
            out.append(Match(e, cnt + specificity, tuple(sorted(hits[eid])), groups.get(eid, {})))
        if any(not m.entry.generic for m in out):
            out = [m for m in out if not m.entry.generic]
        return sorted(out, key=lambda m: (-m.score, m.entry.id))


# an exception as Python prints it, after any log prefix: "(EngineCore pid=1) ValueError: …"
_EXCEPTION_LINE = re.compile(
    r"(?P<exc>\b(?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit)(?:\[\w+\])?: \S.*)")
NO_CAUSE_ABOVE = "no exception line above it in this log: paste the EngineCore / Worker lines before it"

_JOIN_LINES = 3  # a reporter's paste wraps a long message over at most this many lines
# a line that starts a new log record (level, timestamp, bracket, CANN code, traceback
# frame, "XError:") is no continuation of a wrapped paste: not joined, which keeps big logs fast
_RECORD_START = re.compile(
    r"\s*(?:\[|\(|\d{4}-\d\d|\d\d-\d\d |[IWEDF]\d{4} |(?:INFO|WARNING|WARN|ERROR|DEBUG|"
    r"CRITICAL|TRACE)\b|E[A-Z0-9]\d{4}:|Traceback |File \"|[\w.]+(?:Error|Exception|Warning):)")
_JOIN_MAX = 8192  # longer lines are not wrapped pastes; joining them only costs time
# CANN's own wording of a runtime return code, read as torch_npu's wording of it
_RUNTIME_RESULT = re.compile(r"\b(?:runtime result|rtError|ret(?:urn)? code)\s*[=:]\s*(\d{6})\b",
                             re.IGNORECASE)


def _normalized(line: str) -> str:
    """The line, with ``error code is N`` appended for each CANN ``runtime result = N``."""
    extra = [f"error code is {m.group(1)}" for m in _RUNTIME_RESULT.finditer(line)]
    return line.rstrip("\n") + ("  [" + "; ".join(extra) + "]" if extra else "")


def _entry_from(d: Mapping[str, Any], domain: str) -> Entry:
    return Entry(id=d["id"], title=d["title"], cause=d["cause"],
                 steps=tuple(d.get("steps", ())), signatures=tuple(d.get("signatures", ())),
                 aliases=tuple(d.get("aliases", ())), checks=tuple(d.get("checks", ())),
                 fix=d.get("fix"), applies_to=d.get("applies_to", {}),
                 advice=tuple(d.get("advice", ())), sources=tuple(d.get("sources", ())),
                 severity=d.get("severity", "medium"), domain=domain,
                 message=d.get("message", {}), generic=bool(d.get("generic", False)),
                 cause_above=bool(d.get("cause_above", False)),
                 examples=tuple(d.get("examples", ())), causes=tuple(d.get("causes", ())),
                 owner=d.get("owner"), raised_in=tuple(d.get("raised_in", ())),
                 needs_frames=bool(d.get("needs_frames", False)))


def data_files() -> list[tuple[str, bytes]]:
    from ascend_doctor.pkgdata import names, read_bytes

    return [(n, read_bytes(__name__, __file__, n)) for n in names(__name__, __file__, ".toml")]


def _texts(value: Any, what: str) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not value or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{what} must be a table of language = text")
    return value


def _strs(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} must be a list of strings")
    return tuple(value)


def _checked(d: Any, domain: str) -> Entry:
    """An entry whose fields have the types the reports and triage rely on."""
    if not isinstance(d, Mapping):
        raise TypeError("an [[entry]] must be a table")
    if not isinstance(d.get("id"), str):
        raise KeyError("id")
    _texts(d["title"], "title")
    _texts(d["cause"], "cause")
    steps = d.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, Mapping) and all(
            isinstance(v, str) for v in s.values()) for s in steps):
        raise TypeError("steps must be a list of tables of strings")
    for key in ("signatures", "aliases", "checks", "sources", "examples", "causes"):
        _strs(d.get(key, []), key)
    for rx in d.get("signatures", []):
        re.compile(rx)
    if d.get("fix") is not None and not isinstance(d["fix"], str):
        raise TypeError("fix must be a recipe id string")
    if not isinstance(d.get("applies_to", {}), Mapping):
        raise TypeError("applies_to must be a table")
    advice = d.get("advice", [])
    if not isinstance(advice, list) or not all(isinstance(a, Mapping) for a in advice):
        raise TypeError("advice must be a list of tables")
    if not isinstance(d.get("severity", "medium"), str):
        raise TypeError("severity must be a string")
    return _entry_from(d, domain)


def parse_file(name: str, raw: bytes) -> list[Entry]:
    """Entries of one knowledge file; KnowledgeError names the file and what is wrong."""
    domain = name.removesuffix(".toml")
    tomllib = _tomllib()
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise KnowledgeError(name, f"not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(name, f"not valid TOML ({exc})") from None
    entries = doc.get("entry", [])
    if not isinstance(entries, list):
        raise KnowledgeError(name, "`entry` must be an array of tables ([[entry]])")
    out = []
    for i, d in enumerate(entries, 1):
        label = d.get("id") if isinstance(d, Mapping) and isinstance(d.get("id"), str) else f"#{i}"
        try:
            out.append(_checked(d, domain))
        except KeyError as exc:
            raise KnowledgeError(name, f"entry {label} lacks the field {exc.args[0]!r}") from None
        except (TypeError, re.error) as exc:
            raise KnowledgeError(name, f"entry {label}: {exc}") from None
    return out


@functools.lru_cache(maxsize=1)
def load() -> KnowledgeBase:
    """The shipped knowledge base (parsed once per process)."""
    return KnowledgeBase(e for n, raw in data_files() if n not in DATA_FILES_EXCLUDED
                         for e in parse_file(n, raw))


def _data_names() -> list[str]:
    from ascend_doctor.pkgdata import names

    return names(__name__, __file__, ".toml")


@functools.lru_cache(maxsize=1)
def compat() -> dict[str, Any]:
    """The compatibility matrix (knowledge/compat.toml)."""
    if "compat.toml" not in _data_names():
        return {}
    from ascend_doctor.pkgdata import read_bytes

    return _tomllib().loads(read_bytes(__name__, __file__, "compat.toml").decode("utf-8"))
