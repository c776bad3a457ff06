"""boundedjson: hostile JSON raises ValueError in linear time; real JSON parses unchanged."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ascend_doctor import boundedjson
from ascend_doctor.demo import demo_bundle_data
from tests.timing import growth


def test_real_index_parses_identically():
    index = demo_bundle_data().index
    text = json.dumps(index)
    assert boundedjson.loads(text) == index == boundedjson.loads(text.encode())


def test_brackets_inside_strings_do_not_count():
    doc = {"k": "[" * 10_000 + "\\\"{" * 1000, "[": ["]]]"]}
    assert boundedjson.loads(json.dumps(doc)) == doc


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 300 + "1" + "}" * 300,
                                  "[" * 1_000_000])
def test_deep_nesting_is_a_value_error(text):
    with pytest.raises(ValueError, match="nested deeper"):
        boundedjson.loads(text)


def test_too_many_containers():
    with pytest.raises(ValueError, match="arrays/objects"):
        boundedjson.loads("[" + ",".join(["{}"] * 2000) + "]", max_containers=1000)


@pytest.mark.parametrize("make", [lambda n: '"' + '\\"' * n, lambda n: '["' + "\\" * (2 * n + 1),
                                  lambda n: '"\\' * n], ids=["escaped-quotes", "backslashes",
                                                              "quote-backslash"])
def test_unterminated_strings_scan_in_linear_time(make):
    """4x the input takes ~4x the time (measured 3.4-4.3 from 200 000 to 800 000), a
    quadratic scan ~16x; compared with itself in the same run, so load does not matter
    (a bound of 0.5 s at one size failed on a loaded CI machine)."""
    texts = {n: make(n) for n in (200_000, 800_000)}

    def scan(n: int) -> None:
        with pytest.raises(ValueError):
            boundedjson.loads(texts[n])

    ratio = growth(scan, 200_000, k=3)
    assert ratio < 8, f"4x the input took {ratio:.1f}x the time: not linear"


_TOKEN = re.compile(r'"[^"\\]*(?:\\.?[^"\\]*)*(?:"|\Z)|[\[\]{}]', re.S)


def _per_token(text: str, max_depth: int, max_containers: int) -> str | None:
    """The scan as a loop over tokens (how check_bounds once ran): the bound it names."""
    depth = containers = 0
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth, containers = depth + 1, containers + 1
            if depth > max_depth:
                return "nested deeper"
            if containers > max_containers:
                return "arrays/objects"
        elif c in "]}":
            depth -= 1
    return None


PIECES = st.sampled_from(["[", "]", "{", "}", ",", " ", "1", '"a\\"b"', '"x\\\\"', '"{["',
                          '"\\n"', '"]}"', ":"])


@given(st.lists(PIECES, max_size=40), st.booleans(), st.integers(0, 6), st.integers(0, 8))
def test_the_c_scan_names_the_bound_the_token_loop_named(pieces, unterminated, depth, many):
    text = "".join(pieces) + ('"[\\' if unterminated else "")
    try:
        boundedjson.check_bounds(text, depth, many)
        got = None
    except ValueError as exc:
        got = "nested deeper" if "nested deeper" in str(exc) else "arrays/objects"
    assert got == _per_token(text, depth, many)


def test_chunks_carry_depth_and_counts():
    for text in ["[" * 70_000, "[]" * 40_000 + "[" * 201]:
        with pytest.raises(ValueError, match="nested deeper"):
            boundedjson.check_bounds(text)
    with pytest.raises(ValueError, match="arrays/objects"):
        boundedjson.check_bounds("[]" * 70_000, max_containers=66_000)
    boundedjson.check_bounds("[]" * 70_000)
    boundedjson.check_bounds("]" * 70_000 + "[" * 201)  # closers first: depth stays below 0
