"""A reader of the Prometheus text exposition format (version 0.0.4), written from its
specification (https://prometheus.io/docs/instrumenting/exposition_formats/).

Why our own: importing ``prometheus_client.parser`` pulls in the whole client (its HTTP
server, registry, process collector), ~35 ms of a ~250 ms ``demo --json``. Our two readers
(doctor/probes/service.py and doctor/tui/livefeed.py) were written against that parser, so
this one groups and names samples the way it does, and is as lenient and as strict:

* lines split on ``\\n`` only and are stripped; blank lines are skipped;
* ``# HELP name doc`` and ``# TYPE name type`` open a family (or update the open one of
  that name); any other ``#`` line is a comment. A name may be quoted (UTF-8 names);
* a sample joins the open family only under a name its type allows (``name`` for gauges,
  counters and untyped; ``_sum``/``_count`` and ``name`` for summaries; ``_sum``/``_count``/
  ``_bucket`` for histograms); any other sample (``_created``, an undeclared series) is a
  family of its own, untyped;
* a counter family is named without ``_total``; a counter declared without that suffix
  gets it on its samples;
* after the name/labels, the first token is the value and the last (if more) the
  timestamp in ms; Go/Python float syntax (``+Inf``, ``-Inf``, ``NaN``), no ``_``;
* label values are double-quoted with the escapes ``\\\\``, ``\\"`` and ``\\n`` (others kept
  as written); HELP text knows ``\\\\`` and ``\\n``; a trailing comma is allowed; a label
  name starting with ``__`` (except ``__name__``) or given twice is an error.

Anything it cannot read raises ValueError (callers turn that into a finding). One known
difference: a line that is one bare token is an error here; prometheus_client reads
``nan`` or ``inf`` alone as a sample named ``na``/``in`` (tests/unit/test_promtext.py).
"""

from __future__ import annotations

import re

# One unit of text outside quotes: any character but a quote/backslash (and the stop
# characters, filled in below), a backslash with the backslash or quote it escapes, or a
# whole quoted string (an unterminated one stops the scan). Each position has one reading (a
# backslash takes the character it escapes, a lone one only when none follows), so the
# greedy repeats never backtrack more than once: the same answers and linear time as
# possessive repeats, which Python 3.10's re does not have.
_BACKSLASH = r'\\(?:[\\"]|(?![\\"]))'
_IN_QUOTES = r'(?:[^"\\]|' + _BACKSLASH + r')*'
_SCAN = r'(?:[^"\\{stop}]|' + _BACKSLASH + r'|"' + _IN_QUOTES + r'")*'
_QUOTED = re.compile(_IN_QUOTES)  # from after an opening quote to its closing one
_TO_BRACE = re.compile(_SCAN.format(stop="{"))
_TO_CLOSE = re.compile(_SCAN.format(stop="}"))
_TO_EQ_COMMA = re.compile(_SCAN.format(stop="=,}"))
_TO_COMMA = re.compile(_SCAN.format(stop=",}"))
# a comment line's words: split on ASCII whitespace outside quotes; an unterminated quote
# runs to the end of the line
_WS = " \t\r\x0b\x0c"
_WORD = re.compile(r'(?:[^"\\' + _WS + r']|' + _BACKSLASH + r'|"' + _IN_QUOTES + r'(?:"|$))*')
_SPACES = re.compile("[" + _WS + "]*")
_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_ESCAPE = re.compile(r'\\[\\n"]')
_HELP_ESCAPE = re.compile(r"\\[\\n]")
_UNESCAPED = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
TYPES = frozenset({"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown",
                   "info", "stateset"})
_SUFFIXES = {"summary": ("", "_sum", "_count"), "histogram": ("_bucket", "_sum", "_count")}


class Sample:
    """One exposition line: name as written (``..._total``, ``..._bucket``), labels, value,
    timestamp in seconds (None when absent)."""

    __slots__ = ("name", "labels", "value", "timestamp")

    def __init__(self, name: str, labels: dict[str, str], value: float,
                 timestamp: float | None = None) -> None:
        self.name, self.labels, self.value, self.timestamp = name, labels, value, timestamp

    def __repr__(self) -> str:
        return f"Sample({self.name!r}, {self.labels!r}, {self.value!r}, {self.timestamp!r})"


class Family:
    """A metric family: its name (a counter's without ``_total``), HELP text, type
    (``untyped`` reads as ``unknown``) and samples."""

    __slots__ = ("name", "documentation", "type", "samples")

    def __init__(self, name: str, documentation: str, typ: str, samples: list[Sample]) -> None:
        self.name, self.documentation, self.type, self.samples = name, documentation, typ, samples

    def __repr__(self) -> str:
        return f"Family({self.name!r}, {self.type!r}, {len(self.samples)} samples)"


def _unescape(text: str, pattern: re.Pattern[str] = _ESCAPE) -> str:
    if "\\" not in text:
        return text
    return pattern.sub(lambda m: _UNESCAPED[m.group(0)], text)


def _stop(pattern: re.Pattern[str], text: str, start: int = 0) -> int:
    """Index of the first stop character outside quotes at or after ``start``, else -1."""
    end = pattern.match(text, start).end()
    return end if end < len(text) and text[end] != '"' else -1


def _name_token(word: str) -> tuple[str, bool]:
    """A name as written on a HELP/TYPE line or left of ``=``: (name, was it quoted)."""
    word = word.strip()
    if not word:
        raise ValueError("empty name")
    quoted = word[0] == '"'
    if quoted:
        if len(word) < 2 or word[-1] != '"':
            raise ValueError(f"unterminated quote in {word!r}")
        word = word[1:-1]
    return _unescape(word), quoted


def _number(token: str) -> float:
    if "_" in token:
        raise ValueError(f"invalid number {token!r}")
    try:
        return int(token)
    except ValueError:
        return float(token)


def _value_and_timestamp(rest: str) -> tuple[float, float | None]:
    """The tokens after the name/labels: separated by spaces, or by tabs when there is no
    space; the first is the value, the last (if more) the timestamp in milliseconds."""
    rest = rest.lstrip()
    tokens = [t for t in (p.strip() for p in rest.split(" " if " " in rest else "\t")) if t]
    if not tokens:
        raise ValueError("sample without a value")
    value = _number(tokens[0])
    return value, (_number(tokens[-1]) / 1000 if len(tokens) > 1 else None)


# The common case, read in one go: legacy label names, values without escapes, blanks
# around; anything else (escapes, quoted names, empty terms, ``__`` names, a name given
# twice) takes the general reader below, which decides.
_PAIR = r'[ \t]*([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]*=[ \t]*"([^"\\]*)"[ \t]*'
_PLAIN_BODY = re.compile(rf"(?:{_PAIR},)*{_PAIR},?[ \t]*")
_PLAIN_PAIR = re.compile(_PAIR)


def _labels(body: str) -> dict[str, str]:
    """``a="x",b="y"`` (the text between the braces) → dict; a bare quoted string is the
    metric name (``{"my.metric",a="x"}``); empty terms and one trailing comma are allowed."""
    if _PLAIN_BODY.fullmatch(body):
        pairs = _PLAIN_PAIR.findall(body)
        plain = dict(pairs)
        if len(plain) == len(pairs) and not any(k.startswith("__") for k in plain):
            return plain
    return _labels_general(body)


def _labels_general(body: str) -> dict[str, str]:
    """``_labels`` for any body, term by term."""
    labels: dict[str, str] = {}
    rest = body.strip()
    while rest:
        if rest[0] == ",":
            rest = rest[1:]
            if rest[:1] == ",":
                raise ValueError(f"two commas in labels {body!r}")
            if not rest:
                break
        cut = _stop(_TO_EQ_COMMA, rest)
        if cut >= 0 and rest[cut] == "=":
            name_word, rest = rest[:cut], rest[cut + 1:]
            cut = _stop(_TO_COMMA, rest)
        else:
            name_word = "__name__"
        if cut < 0:
            cut = len(rest)
        term, rest = rest[:cut].strip(), rest[cut:].strip()
        if not term:
            if rest[:1] == "}":  # never from parse() (the body ends at the first one): no loop
                raise ValueError(f"unexpected '}}' in labels {body!r}")
            continue
        name, quoted = _name_token(name_word)
        if not quoted and not _LEGACY_NAME.match(name):
            raise ValueError(f"invalid label name {name!r}")
        if len(term) < 2 or term[0] != '"' or _QUOTED.match(term, 1).end() != len(term) - 1:
            raise ValueError(f"label value is not one quoted string: {term!r}")
        if name != "__name__":
            name.encode("utf-8")  # a lone surrogate is no name (UnicodeEncodeError)
            if name.startswith("__"):
                raise ValueError(f"reserved label name {name!r}")
        if name in labels:
            raise ValueError(f"label {name!r} given twice")
        labels[name] = _unescape(term[1:-1])
    return labels


def _sample(line: str) -> Sample:
    brace = _stop(_TO_BRACE, line)
    if brace < 0 or " # " in line[:brace]:
        cut = min((i for i in (line.find(" "), line.find("\t")) if i >= 0), default=-1)
        if cut < 0:
            raise ValueError(f"no value in {line[:80]!r}")
        name = line[:cut].strip()
        if not _LEGACY_NAME.match(name):
            raise ValueError(f"invalid metric name {name[:80]!r}")
        value, ts = _value_and_timestamp(line[cut + 1:])
        return Sample(name, {}, value, ts)
    close = _stop(_TO_CLOSE, line, brace)
    if close < 0:
        raise ValueError(f"no closing brace in {line[:80]!r}")
    try:
        labels = _labels(line[brace + 1:close])
    except ValueError as exc:
        raise ValueError(f"invalid labels in {line[:80]!r}: {exc}") from None
    name = line[:brace].strip()
    if not name:
        if "__name__" not in labels:
            raise ValueError(f"no metric name in {line[:80]!r}")
        name = labels.pop("__name__")
    elif "__name__" in labels:
        raise ValueError(f"metric name given twice in {line[:80]!r}")
    value, ts = _value_and_timestamp(line[close + 1:])
    return Sample(name, labels, value, ts)


def _words(line: str) -> list[str]:
    """A comment line's first three words and the rest of the line (at most four)."""
    out: list[str] = []
    pos = 0
    while pos < len(line) and len(out) < 3:
        end = _WORD.match(line, pos).end()
        out.append(line[pos:end])
        pos = _SPACES.match(line, end).end()
    if pos < len(line):
        out.append(line[pos:])
    return out


def _family(name: str, doc: str, typ: str, samples: list[Sample]) -> Family:
    typ = "unknown" if typ == "untyped" else typ
    if typ not in TYPES:
        raise ValueError(f"invalid metric type {typ!r}")
    if typ == "counter":
        if name.endswith("_total"):
            name = name[:-6]
        else:
            samples = [Sample(s.name + "_total", s.labels, s.value, s.timestamp) for s in samples]
    if not name:
        raise ValueError("empty metric name")
    name.encode("utf-8")
    return Family(name, doc, typ, samples)


def parse(text: str) -> list[Family]:
    """Every family of an exposition, in order; ValueError on what is not one."""
    out: list[Family] = []
    name, doc, typ = "", "", "untyped"
    samples: list[Sample] = []
    allowed: tuple[str, ...] = ()
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if line[0] == "#":
            words = _words(line)
            if len(words) < 2 or words[1] not in ("HELP", "TYPE"):
                continue
            new = ""
            if len(words) > 2:
                new, quoted = _name_token(words[2])
                if not quoted and not _LEGACY_NAME.match(new):
                    raise ValueError(f"invalid metric name {new[:80]!r}")
            if words[1] == "TYPE" and len(words) < 4:
                raise ValueError(f"TYPE without a type: {line[:80]!r}")
            if new != name:
                if name:
                    out.append(_family(name, doc, typ, samples))
                name, samples = new, []
                if words[1] == "HELP":
                    typ, allowed = "untyped", (new,)
                else:
                    doc = ""
            if words[1] == "HELP":
                doc = _unescape(words[3], _HELP_ESCAPE) if len(words) == 4 else ""
            else:
                typ = words[3]
                allowed = tuple(name + s for s in _SUFFIXES.get(typ, ("",)))
            continue
        sample = _sample(line)
        if sample.name in allowed:
            samples.append(sample)
            continue
        if name:
            out.append(_family(name, doc, typ, samples))
        name, doc, typ, samples, allowed = "", "", "untyped", [], ()
        out.append(_family(sample.name, "", "untyped", [sample]))
    if name:
        out.append(_family(name, doc, typ, samples))
    return out
