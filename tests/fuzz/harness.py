"""The fuzz harness every parser plugs into: a totality assertion and mutation strategies.

A parser is *total* when every input yields a value or one of its named parse errors — never
another exception (an IndexError from a short line, a struct.error from a bad length, an
AttributeError from JSON of the wrong shape). Random inputs explore the edges; mutated real
samples (bit flips, truncation, splicing, duplicated or dropped lines) stay close enough to
the real format to reach the deep branches a random string never gets to.

Use::

    from tests.fuzz.harness import assert_total, corpus, mutated, text_inputs

    @given(text_inputs(corpus("ldconf")))
    def test_ldconf_total(text):
        assert_total(parse_ldconf_text, text)

Each parser adds its real samples under ``tests/fuzz/corpus/<name>/`` (any file name).
``ASCEND_DOCTOR_FUZZ=long`` (tests/conftest.py) raises every test to 100 000 examples.
"""

from __future__ import annotations

import random
import re
import traceback
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hypothesis import settings, strategies as st

from ascend_doctor.errors import ParseError

CORPUS = Path(__file__).resolve().parent / "corpus"

# An allowed outcome: an exception type, or (type, regex the message must match) when the
# type is too broad to allow on its own (ValueError).
Allowed = "type[BaseException] | tuple[type[BaseException], str]"


class NotTotal(AssertionError):
    """The parser raised an exception it does not name as a parse error."""


def _allowed(exc: BaseException, allowed: Iterable[Any]) -> bool:
    for a in allowed:
        if isinstance(a, tuple):
            typ, pattern = a
            if isinstance(exc, typ) and re.search(pattern, str(exc)):
                return True
        elif isinstance(exc, a):
            return True
    return False


def assert_total(parse: Callable[..., Any], data: Any, *args: Any,
                 allowed: Sequence[Any] = (ParseError,), **kwargs: Any) -> Any:
    """Call ``parse(data, *args, **kwargs)``; return its value or the allowed exception.

    Any other exception fails the test with the input (shortened) and the traceback. An
    allowed exception must also say something: an empty message names nothing.
    """
    try:
        return parse(data, *args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the point is to classify everything
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        if _allowed(exc, allowed):
            if not str(exc).strip():
                raise NotTotal(f"{getattr(parse, '__name__', parse)} raised "
                               f"{type(exc).__name__} with an empty message") from exc
            return exc
        shown = repr(data)
        if len(shown) > 600:
            shown = shown[:300] + " … " + shown[-300:]
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
        names = ", ".join(a[0].__name__ if isinstance(a, tuple) else a.__name__
                          for a in allowed)
        raise NotTotal(f"{getattr(parse, '__name__', parse)} raised {type(exc).__name__} "
                       f"(allowed: {names}) on input {shown}\n{tb}") from None


def heavy(divisor: int = 10) -> settings:
    """Settings for properties that build a sysroot or run the whole engine per example: a
    tenth of the profile's count in the long mode (10 000), the full default count else."""
    n = settings.default.max_examples
    return settings(max_examples=max(n // divisor, min(n, 150)))


# -- the corpus of real samples ------------------------------------------------------------
@lru_cache(maxsize=None)
def corpus(name: str) -> tuple[bytes, ...]:
    """Every file under tests/fuzz/corpus/<name>/, sorted by name (deterministic)."""
    d = CORPUS / name
    files = sorted(p for p in d.rglob("*") if p.is_file()) if d.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no fuzz corpus samples under {d}")
    return tuple(p.read_bytes() for p in files)


# -- mutations -----------------------------------------------------------------------------
# Values that break naive parsers: empty, negative, huge, non-ASCII digits (str.isdigit is
# true for "²" and "①" but int() refuses them), separators, NUL, unbalanced brackets.
INTERESTING = (b"", b"-1", b"0", b"4294967296", b"9" * 40, b"\x00", b"\xff\xfe", "²".encode(),
               "①".encode(), "١٢".encode(), b":", b"=", b",", b"[", b"]", b"{", b"}", b'"',
               b"'", b"\\", b"#", b"(", b")", b"\n", b"\r\n", b"\t", b" ", b"0x1f", b"1_0",
               b"nan", b"inf", b"null", b"true", b"[]", b"{}", "é".encode(), "中".encode(),
               b"../../..", b"/", b"*", b"**", b"?", b"%s", b"\xe2\x80\xae")


# Mutators take a random.Random: one hypothesis draw (st.randoms) per example keeps the
# per-example cost near the parser's own, so the long mode's 100 000 inputs fit a CI step.
# The failing input is printed in full by assert_total, so shrinking is not needed to read it.
def _bitflip(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    if data:
        data[r.randrange(len(data))] ^= 1 << r.randrange(8)
    return data


def _byte(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    if data:
        data[r.randrange(len(data))] = r.randrange(256)
    return data


def _truncate(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    return data[:r.randint(0, len(data))]


def _cut_middle(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    if len(data) < 2:
        return data
    a = r.randrange(len(data))
    b = r.randint(a, min(len(data), a + 256))
    return data[:a] + data[b:]


def _splice(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    other = r.choice(corpus_)
    return data[:r.randint(0, len(data))] + bytearray(other[r.randint(0, len(other)):])


def _insert(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    at = r.randint(0, len(data))
    piece = r.choice(INTERESTING) if r.random() < 0.7 else r.randbytes(r.randint(1, 16))
    return data[:at] + bytearray(piece) + data[at:]


_TOKEN = re.compile(rb"[^\s:=,\x00\[\]{}\"()]+")


def _replace_token(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    """Replace one whitespace/separator-delimited token by an interesting value."""
    spans = [m.span() for _, m in zip(range(4000), _TOKEN.finditer(bytes(data)))]
    if not spans:
        return data
    a, b = r.choice(spans)
    return data[:a] + bytearray(r.choice(INTERESTING)) + data[b:]


def _lines(data: bytearray) -> list[bytes]:
    return bytes(data).split(b"\n")


def _dup_line(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    lines = _lines(data)
    i = r.randrange(len(lines))
    lines.insert(i, lines[i])
    return bytearray(b"\n".join(lines))


def _drop_line(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    lines = _lines(data)
    if len(lines) > 1:
        del lines[r.randrange(len(lines))]
    return bytearray(b"\n".join(lines))


def _swap_lines(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    lines = _lines(data)
    if len(lines) > 1:
        i, j = r.randrange(len(lines)), r.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return bytearray(b"\n".join(lines))


def _nul_to_newline(r: random.Random, data: bytearray, corpus_: Sequence[bytes]) -> bytearray:
    return bytearray(data.replace(b"\0", b"\n") if b"\0" in data else data.replace(b"\n", b"\0"))


MUTATORS = (_bitflip, _byte, _truncate, _cut_middle, _splice, _insert, _replace_token,
            _replace_token, _dup_line, _drop_line, _swap_lines, _nul_to_newline)


def mutate(r: random.Random, sample: bytes, corpus_: Sequence[bytes], max_ops: int = 4) -> bytes:
    """1..max_ops mutations of ``sample`` (``r`` from ``st.randoms()`` or random.Random)."""
    data = bytearray(sample)
    for _ in range(r.randint(1, max_ops)):
        data = r.choice(MUTATORS)(r, data, corpus_)
    return bytes(data)


_RANDOMS = st.randoms(use_true_random=True, note_method_calls=False)


def mutated(corpus_: Sequence[bytes], max_ops: int = 4) -> st.SearchStrategy[bytes]:
    """Real samples with 1..max_ops mutations each (one in 16 left unmutated)."""
    samples = tuple(corpus_)

    def build(r: random.Random) -> bytes:
        sample = r.choice(samples)
        return sample if r.randrange(16) == 0 else mutate(r, sample, samples, max_ops)

    return _RANDOMS.map(build)


def byte_inputs(corpus_: Sequence[bytes], max_ops: int = 4) -> st.SearchStrategy[bytes]:
    """Mutated real samples most of the time, random bytes otherwise."""
    return st.one_of(mutated(corpus_, max_ops), st.binary(max_size=512))


def text_inputs(corpus_: Sequence[bytes], max_ops: int = 4) -> st.SearchStrategy[str]:
    """Text as a Host hands it over (UTF-8 with replacement), mutated or random."""
    return st.one_of(mutated(corpus_, max_ops).map(lambda b: b.decode("utf-8", "replace")),
                     mutated(corpus_, max_ops).map(lambda b: b.decode("latin-1")),
                     st.text(max_size=512))


# -- structural JSON mutations ---------------------------------------------------------------
def _json_atom(r: random.Random) -> Any:
    return r.choice((lambda: None, lambda: r.random() < 0.5, lambda: r.randint(-2**70, 2**70),
                     lambda: r.choice(("", "x", "2.13.0", "0", "-1", "\u00b2", "blobs/x")),
                     lambda: r.choice((float("nan"), float("inf"), 1.5)), list, dict,
                     lambda: [1, "a"], lambda: {"a": None}))()


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in list(node.items())[:50]:
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node[:50]):
            out.extend(_paths(v, prefix + (i,)))
    return out


def json_mutate(r: random.Random, doc: Any, max_ops: int = 3) -> Any:
    """Replace a node by a value of another type, or delete a key/item, 1..max_ops times."""
    import copy

    doc = copy.deepcopy(doc)
    for _ in range(r.randint(1, max_ops)):
        path = r.choice(_paths(doc))
        if not path:
            doc = _json_atom(r)
            continue
        parent = doc
        try:
            for p in path[:-1]:
                parent = parent[p]
            if r.random() < 0.5 and isinstance(parent, (dict, list)):
                del parent[path[-1]]
            else:
                parent[path[-1]] = _json_atom(r)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def json_mutated(docs: Sequence[Any], max_ops: int = 3) -> st.SearchStrategy[Any]:
    """Real JSON documents (parsed) with wrong types and missing keys."""
    samples = tuple(docs)
    return _RANDOMS.map(lambda r: json_mutate(r, r.choice(samples), max_ops))
