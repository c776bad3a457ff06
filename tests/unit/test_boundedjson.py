"""boundedjson: hostile JSON raises ValueError in linear time; real JSON parses unchanged."""

from __future__ import annotations

import json
import time

import pytest

from ascend_doctor import boundedjson
from ascend_doctor.demo import demo_bundle_data


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


@pytest.mark.parametrize("text", ['"' + '\\"' * 200_000, '["' + "\\" * 400_001,
                                  '"\\' * 200_000])
def test_unterminated_strings_scan_in_linear_time(text):
    t = time.perf_counter()
    with pytest.raises(ValueError):
        boundedjson.loads(text)
    assert time.perf_counter() - t < 0.5
