"""doctor/promtext.py against prometheus_client's parser, which our /metrics readers were
written against: the same families (names, HELP, type) and samples (name, labels, value,
timestamp) on real captures, the demo's exposition, generated valid expositions and
mutations of them; and on malformed text, both raise or both give the same result."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from ascend_doctor import promtext
from ascend_doctor.demo.parts.service import metrics_text as demo_metrics_text

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "realvllm"
CAUGHT = (ValueError, TypeError, IndexError, KeyError)  # what our callers turn into findings


def _num(v: object) -> object:
    """A value or timestamp, NaN made comparable."""
    f = float(v)  # type: ignore[arg-type]
    return "NaN" if math.isnan(f) else f


def _flat(families) -> list[tuple]:
    return [(f.name, f.documentation, f.type,
             [(s.name, dict(s.labels), _num(s.value),
               None if s.timestamp is None else _num(s.timestamp)) for s in f.samples])
            for f in families]


def reference(text: str) -> list[tuple] | str:
    try:
        return _flat(text_string_to_metric_families(text))
    except CAUGHT:
        return "error"


def ours(text: str) -> list[tuple] | str:
    try:
        return _flat(promtext.parse(text))
    except ValueError:  # only ValueError: callers catch it
        return "error"


def same(text: str) -> None:
    assert ours(text) == reference(text), text


@pytest.mark.parametrize("path", sorted(CORPUS.glob("metrics-*.txt")), ids=lambda p: p.name)
def test_real_vllm_captures(path):
    text = path.read_text(encoding="utf-8")
    got = ours(text)
    assert got != "error" and len(got) > 10
    same(text)


@pytest.mark.parametrize("step", [0, 1])
def test_the_demo_exposition(step):
    same(demo_metrics_text(step))


def test_prometheus_client_rendering():
    from prometheus_client import (CollectorRegistry, Counter, Enum, Gauge, Histogram, Info,
                                   Summary, generate_latest)

    reg = CollectorRegistry()
    Counter("reqs", "requests\nwith \\ a newline", ["path"], registry=reg).labels('a"b\\c\nd').inc(3)
    Gauge("temp_celsius", "t", registry=reg).set(float("-inf"))
    Gauge("nan_gauge", "n", registry=reg).set(float("nan"))
    h = Histogram("lat_seconds", "l", ["m"], registry=reg, buckets=[0.1, 1.0])
    h.labels("x").observe(0.5)
    Summary("sz_bytes", "s", registry=reg).observe(12)
    Info("build", "b", registry=reg).info({"version": "1.2"})
    Enum("state", "e", states=["a", "b"], registry=reg).state("b")
    same(generate_latest(reg).decode())


MALFORMED = [
    "hello world\n", "OK", "foo", "foo \n", "foo{", 'foo{a="1"', 'foo{a="1" 1', 'foo{a=1} 1',
    'foo{a="1",,b="2"} 1', 'foo{,,a="1"} 1', 'foo{a="1"} 1 2 3', 'foo{a="1"} one',
    "foo 1_000", "foo 0x10", "foo 1e3", "foo +Inf", "foo -Inf", "foo NaN", "foo nan 17",
    "foo 1 17 # trailing", 'foo{a="1"} 1 # {trace="x"} 2', "foo 1 # {trace=\"x\"} 2",
    'foo{__x="1"} 1', 'foo{__name__="foo"} 1', '{__name__="foo"} 1', '{"my.metric",a="1"} 1',
    '{a="1"} 1', 'foo{a="1",a="2"} 1', 'foo{a="\\t\\q"} 1', 'foo{a="x\\"} 1', 'foo{a="x"y"} 1',
    'foo{a="x" b="y"} 1', 'foo{a="}"} 1', 'foo{a="{"} 1', 'foo{a=","} 1', 'foo{a="1",} 1',
    "foo{} 1", "foo{=} 1", 'foo{a=} 1', 'foo{ a = "1" } 1', 'foo{"a.b"="1"} 1',
    'foo{a.b="1"} 1', "1foo 1", "foo bar 1", "foo\t1", "foo\t1\t2", "foo 1\t2 3",
    "foo\x0b 1", "foo 1\r", "foo 1\rbar 2", "# HELP", "# TYPE", "# TYPE foo",
    "# TYPE foo bogus\nfoo 1", "# TYPE foo counter extra", "# TYPE foo counter\nfoo 1",
    "# TYPE foo counter\nfoo_total 1", "# TYPE foo_total counter\nfoo_total 1",
    "# TYPE _total counter", "# TYPE foo untyped\nfoo 1", "# TYPE foo info\nfoo 1",
    "# HELP foo\nfoo 1", "# HELP foo a\\nb \\\\ \\\" c\nfoo 1", "# HELP 1foo x",
    '# HELP "foo.bar" x\n{"foo.bar"} 1', '# HELP "foo x', "# HELP foo x\n# HELP foo y\nfoo 1",
    "# HELP foo x\n# TYPE bar gauge\nbar 1\nfoo 2", "# TYPE foo histogram\nfoo_bucket{le=\"1\"} 1\n"
    "foo_sum 1\nfoo_count 1\nfoo_created 5\nfoo 3", "# TYPE foo summary\nfoo{quantile=\"0.5\"} 1\n"
    "foo_sum 2\nfoo_count 3\nfoo_created 1", "#HELP foo x\nfoo 1", "# comment here\nfoo 1",
    "#\n# \nfoo 1", '# HELP foo "a b" c', '# HELP foo\\ bar x', '# "HELP" foo x',
    "\n\n  foo   1  \n\n", "foo 1\nfoo 2\nbar 3\nfoo 4", "<html>", "{}", "[]", "foo{a=\"1\"}1",
    "foo 12345678901234567890", "foo 1 12345678901234567890123", "foo 1e400", "foo ١٢",
    'foo{a="\ud800"} 1', 'foo{"\ud800"="1"} 1', '{__name__=""} 1', "# HELP\n{__name__=\"\"} 1",
    'foo"{" 1', 'a"{"b{x="1"} 1', 'f""oo{a="b"} 1', "foo{a=\"1\"} 1 2\nfoo{a=\"1\"} 3",
    "\ufefffoo 1", "foo\u3000 1", "# HELP \u3000 x", "foo{\u3000=\"1\"} 1", "foo{a=\"1\", =\"2\"} 1",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_odd_and_malformed_inputs_agree(text):
    same(text)


@pytest.mark.parametrize("text", ["nan", "inf", "Infinity", "foo 1\nNaN\n"])
def test_the_one_known_difference(text):
    """A line of one bare token: prometheus_client reads ``nan``/``inf`` as a sample named
    ``na``/``in`` (its name ends one character early); it is no sample, so we raise."""
    assert reference(text) != "error"
    assert ours(text) == "error"


# --- generated expositions ---------------------------------------------------------------

NAME = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
LABEL = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,8}", fullmatch=True)
LABEL_VALUE = st.text(st.characters(codec="utf-8", exclude_characters="\r\x0b\x0c\x1c\x1d"
                                    "\x1e\x85\u2028\u2029"), max_size=12)
VALUE = st.one_of(st.integers(-10**20, 10**20).map(str),
                  st.floats(allow_nan=True).map(lambda f: repr(f).replace("inf", "Inf")),
                  st.sampled_from(["+Inf", "-Inf", "NaN", "1e-3", "0.0", "-0", "1.5E+10"]))
SPACE = st.sampled_from([" ", "  ", "\t", " \t"])


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def sample_line(draw, name: str) -> str:
    labels = draw(st.dictionaries(LABEL, LABEL_VALUE, max_size=3))
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    if body and draw(st.booleans()):
        body += ","
    text = name + ("{" + body + "}" if labels or draw(st.booleans()) else "")
    text += draw(SPACE) + draw(VALUE)
    if draw(st.booleans()):
        text += " " + str(draw(st.integers(0, 2 * 10**12)))
    return text


SUFFIXES = {"counter": ["", "_total", "_created"], "gauge": [""], "untyped": [""],
            "summary": ["", "_sum", "_count", "_created"],
            "histogram": ["_bucket", "_sum", "_count", "_created"], "info": ["", "_info"]}


@st.composite
def exposition(draw) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        name = draw(NAME)
        typ = draw(st.sampled_from(sorted(SUFFIXES)))
        if typ == "counter" and draw(st.booleans()):
            name += "_total"
        if draw(st.booleans()):
            lines.append(f"# HELP {name} {_escape(draw(LABEL_VALUE)).strip()}")
        if draw(st.booleans()):
            lines.append(f"# TYPE {name} {typ}")
        base = name[:-6] if name.endswith("_total") else name
        for _ in range(draw(st.integers(0, 4))):
            suffix = draw(st.sampled_from(SUFFIXES[typ] + ["_other"]))
            lines.append(draw(sample_line((base if suffix else name) + suffix)))
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "# a comment", "#", "   "])))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=300)
@given(exposition())
def test_generated_expositions(text):
    same(text)


@settings(max_examples=300)
@given(exposition(), st.integers(0, 400), st.text(st.sampled_from('{}",= \t\\#_a1.\n'),
                                                   max_size=6))
def test_mutated_expositions(text, at, noise):
    mutated = text[:at] + noise + text[at:]
    if any(line.strip().lower().lstrip("+-") in ("nan", "inf", "infinity")
           for line in mutated.split("\n")):
        return  # the one known difference (test_the_one_known_difference)
    same(mutated)


PIECE = st.sampled_from(["# HELP ", "# TYPE ", "a", "a_total", "a_bucket", "a_sum", "a_count",
                         "a_created", "{", "}", '"', "\\", '\\"', "\\\\", "=", ",", " ", "\t",
                         "1", "2.5", "le", "counter", "gauge", "histogram", "summary",
                         "untyped", "x", "__name__", '"b.c"', " # ", "\n", "-Inf", "NaN", "_"])


@settings(max_examples=500)
@given(st.lists(PIECE, max_size=30))
def test_text_assembled_from_the_format_s_tokens(pieces):
    text = "".join(pieces)
    if any(line.strip().lower().lstrip("+-") in ("nan", "inf", "infinity")
           for line in text.split("\n")):
        return  # the one known difference
    same(text)


LABEL_PIECES = st.sampled_from(["a", "b", "le", "__x", "__name__", "=", '"', '"1"', '"x y"',
                                ",", " ", "\t", "\\", '\\"', "\x0b", "{", "}", "=="])


@settings(max_examples=500)
@given(st.lists(LABEL_PIECES, max_size=16))
def test_the_plain_label_reader_agrees_with_the_general_one(pieces):
    body = "".join(pieces)

    def read(f):
        try:
            return f(body)
        except ValueError:
            return "error"
    assert read(promtext._labels) == read(promtext._labels_general)
