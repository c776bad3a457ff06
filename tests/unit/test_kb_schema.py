"""Every knowledge file obeys the schema; the schema rejects what it must reject."""

from __future__ import annotations

import pytest

from doctor.registry import Registry
from fixes import FixRegistry
from knowledge import data_files, load
from knowledge.schema import validate_file

# the seed files entries may cite (CI has no /work/shared, so the names live here)
SEEDS = {"000_93c34712512482cd.txt", "002_30e6568bb9464c94.txt", "003_d72edf74e71c5e11.txt"}


@pytest.fixture(scope="module")
def refs():
    return {"check_ids": set(Registry.discover(plugins=False).checks),
            "fix_ids": set(FixRegistry.discover().recipes), "seed_names": SEEDS}


def test_every_shipped_file_is_valid(refs):
    files = [(n, r) for n, r in data_files() if n != "compat.toml"]
    assert len(files) >= 4
    problems = [p for n, r in files for p in validate_file(n, r, **refs)]
    assert problems == []


def test_ids_unique_across_files_and_well_formed():
    kb = load()  # raises on a duplicate id across files
    assert len(kb.entries) >= 40
    assert all(e.id.startswith("ASC-") for e in kb.entries.values())


def test_upstream_coverage():
    kb = load()
    ups = [e for e in kb.entries.values() if e.id.startswith("ASC-UPS-")]
    assert len(ups) >= 15
    assert all(any(s.startswith(("https://", "facts:")) for s in e.sources) for e in ups)
    assert all(e.signatures for e in ups)


GOOD = '''
[[entry]]
id = "ASC-TST-001"
title = { en = "Title", zh = "标题" }
cause = { en = "Cause", zh = "原因" }
steps = [ { en = "Do it", zh = "执行", cmd = "true" } ]
signatures = ['(?P<lib>lib\\w+\\.so): cannot open']
checks = ["ldconf.order"]
fix = "ldconf.ascend-conf"
applies_to = { vllm_ascend = ">=0.9.1", cann = ">=8.0.RC1", chip = ["910B"] }
advice = [ { when = { vllm_ascend = ">=0.11" }, en = "a", zh = "甲" } ]
sources = ["seed:000_93c34712512482cd.txt §5.1"]
'''


def _problems(text: str, refs) -> list[str]:
    return validate_file("synthetic.toml", text.encode(), **refs)


def test_synthetic_good_entry_passes(refs):
    assert _problems(GOOD, refs) == []


@pytest.mark.parametrize("old,new,expect", [
    ('cause = { en = "Cause", zh = "原因" }', 'cause = { en = "Cause" }', "missing the zh text"),
    ('title = { en = "Title", zh = "标题" }', 'title = { zh = "标题" }', "missing the en text"),
    ('{ en = "Do it", zh = "执行", cmd = "true" }', '{ en = "Do it", cmd = "true" }',
     "steps[1]: missing the zh text"),
    ("'(?P<lib>lib\\w+\\.so): cannot open'", "'(?P<lib>lib\\w+\\.so: cannot open'",
     "does not compile"),
    ('fix = "ldconf.ascend-conf"', 'fix = "ldconf.no-such-recipe"', "unknown fix recipe"),
    ('checks = ["ldconf.order"]', 'checks = ["ldconf.order", "nope.missing"]',
     "unknown check id 'nope.missing'"),
    ('id = "ASC-TST-001"', 'id = "ASC-tst-1"', "not of the form"),
    ('vllm_ascend = ">=0.9.1"', 'vllm_ascend = "~~0.9"', "not a version specifier"),
    ('sources = ["seed:000_93c34712512482cd.txt §5.1"]', 'sources = ["seed:999_nope.txt"]',
     "no seed file named"),
    ('sources = ["seed:000_93c34712512482cd.txt §5.1"]', 'sources = []', "needs at least one"),
    ('advice = [ { when = { vllm_ascend = ">=0.11" }, en = "a", zh = "甲" } ]',
     'advice = [ { when = { vllm_ascend = ">=0.11" }, en = "a" } ]', "advice[1]: missing the zh"),
    ('title = { en = "Title", zh = "标题" }', 'title = { en = "Title", zh = "Title" }',
     "no Chinese characters"),
])
def test_schema_rejects(refs, old, new, expect):
    assert old in GOOD
    problems = _problems(GOOD.replace(old, new), refs)
    assert any(expect in p for p in problems), problems


def test_duplicate_ids_and_bad_toml(refs):
    assert any("duplicate id" in p for p in _problems(GOOD + GOOD, refs))
    assert any("not valid TOML" in p for p in _problems(GOOD + "\n[[entry]\n", refs))
