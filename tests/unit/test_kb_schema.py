"""Every knowledge file obeys the schema; the schema rejects what it must reject."""

from __future__ import annotations

import pytest

from ascend_doctor.registry import Registry
from ascend_doctor.fixes import FixRegistry
from ascend_doctor.knowledge import data_files, load
from ascend_doctor.cli_kb import corpus_lines
from ascend_doctor.knowledge.schema import cross_problems, validate_file


@pytest.fixture(scope="module")
def refs():
    recipes = FixRegistry.discover().recipes
    return {"check_ids": set(Registry.discover(plugins=False).checks),
            "fix_ids": set(recipes), "fix_params": {k: r.params for k, r in recipes.items()},
            "corpus": corpus_lines(), "negatives": corpus_lines(kind="quiet")}


def test_every_shipped_file_is_valid(refs):
    files = [(n, r) for n, r in data_files() if n != "compat.toml"]
    assert len(files) >= 4
    problems = [p for n, r in files for p in validate_file(n, r, **refs)]
    assert problems == []
    assert cross_problems(files) == []
    assert len(refs["corpus"]) > 100  # the triage corpus was found and used
    assert len(refs["negatives"]) >= 20


def test_a_signature_matching_a_benign_line_is_rejected(refs):
    # the old ASC-OPS-003 signature: the bare variable name matched every environment dump
    bad = GOOD.replace("signatures = ['(?P<lib>libzz\\w+\\.so): cannot open']",
                       "signatures = ['ASCEND_RT_VISIBLE_DEVICES']").replace(
        'examples = ["ImportError: libzz_test.so: cannot open shared object file"]',
        'examples = ["set ASCEND_RT_VISIBLE_DEVICES:[4] error"]')
    assert any("matches a benign line" in p for p in _problems(bad, refs))


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
signatures = ['(?P<lib>libzz\\w+\\.so): cannot open']
examples = ["ImportError: libzz_test.so: cannot open shared object file"]
checks = ["ldconf.order"]
fix = "ldconf.ascend-conf"
applies_to = { vllm_ascend = ">=0.9.1", cann = ">=8.0.RC1", chip = ["910B"] }
advice = [ { when = { vllm_ascend = ">=0.11" }, en = "a", zh = "甲" } ]
sources = ["https://github.com/vllm-project/vllm-ascend/issues/152"]
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
    ("'(?P<lib>libzz\\w+\\.so): cannot open'", "'(?P<lib>libzz\\w+\\.so: cannot open'",
     "does not compile"),
    ('fix = "ldconf.ascend-conf"', 'fix = "ldconf.no-such-recipe"', "unknown fix recipe"),
    ('checks = ["ldconf.order"]', 'checks = ["ldconf.order", "nope.missing"]',
     "unknown check id 'nope.missing'"),
    ('id = "ASC-TST-001"', 'id = "ASC-tst-1"', "not of the form"),
    ('vllm_ascend = ">=0.9.1"', 'vllm_ascend = "~~0.9"', "not a version specifier"),
    ('sources = ["https://github.com/vllm-project/vllm-ascend/issues/152"]',
     'sources = ["seed:000_93c34712512482cd.txt §5.1"]', "not a public source"),
    ('sources = ["https://github.com/vllm-project/vllm-ascend/issues/152"]',
     'sources = ["doc: CANN Environment Variables reference"]', "needs a public URL"),
    ('sources = ["https://github.com/vllm-project/vllm-ascend/issues/152"]', 'sources = []',
     "needs at least one"),
    # issue 15 lint: every signature matches a real line, commands are paste-safe and valid
    ('examples = ["ImportError: libzz_test.so: cannot open shared object file"]',
     'examples = ["ImportError: libzz_test.so: No such file"]', "signatures[1]: matches no example"),
    ('cmd = "true"', 'cmd = "pip install vllm-ascend==<ver>"', "placeholder '<ver>'"),
    ('cmd = "true"', 'cmd = "vllm serve ... --enforce-eager"', "elision"),
    ('cmd = "true"', 'cmd = "grep \'unclosed /var/log/x"', "does not split"),
    ('cmd = "true"', 'cmd = "$ npu-smi info"', "shell prompt"),
    ('cmd = "true"', 'cmd = "cat /proc/PID/environ"', "upper-case placeholder"),
    ('cmd = "true"', 'cmd = "vllm serve /models/m --max-model-len 32768"', "--max-model-len with a fixed number"),
    # a launch flag is not a command: it belongs in the text, saying where it goes
    ('cmd = "true"', 'cmd = "--enforce-eager"', "starts with the option --enforce-eager"),
    ('examples = ["ImportError: libzz_test.so: cannot open shared object file"]',
     'examples = ["ImportError: libzz_test.so: cannot open shared object file", "unrelated"]',
     "examples[2]: matches none of the entry's signatures"),
    ('cmd = "true"', 'cmd = "ascend-doctor fix no.such-recipe"', "unknown fix recipe"),
    ('cmd = "true"', 'cmd = "ascend-doctor fix dns.hosts-pin --param port=53"',
     "dns.hosts-pin has no parameter 'port'"),
    ('cmd = "true"', 'cmd = "ascend-doctor fix service.launch-flags --param '
     'gpu-memory-utilization=0.9"', "names a fixed value"),
    # issue 15: a fix command the recipe can read: --param KEY=VALUE, never a bare key
    ('cmd = "true"', 'cmd = "ascend-doctor fix tlb.hugepages --param thp"',
     "--param 'thp' is not KEY=VALUE"),
    ('cmd = "true"', 'cmd = "ascend-doctor fix tlb.hugepages --param"', "--param without KEY=VALUE"),
    ('cmd = "true"', 'cmd = "ascend-doctor fix service.launch-flags --param=block-size="',
     "is not KEY=VALUE"),
    ('advice = [ { when = { vllm_ascend = ">=0.11" }, en = "a", zh = "甲" } ]',
     'advice = [ { when = { vllm_ascend = ">=0.11" }, en = "a" } ]', "advice[1]: missing the zh"),
    ('title = { en = "Title", zh = "标题" }', 'title = { en = "Title", zh = "Title" }',
     "no Chinese characters"),
])
def test_schema_rejects(refs, old, new, expect):
    assert old in GOOD
    problems = _problems(GOOD.replace(old, new), refs)
    assert any(expect in p for p in problems), problems


def test_launch_flags_take_any_flag_but_not_a_fixed_utilization(refs):
    ok = GOOD.replace('cmd = "true"', 'cmd = "ascend-doctor fix service.launch-flags --param '
                      'block-size=128"')
    assert _problems(ok, refs) == []


def test_a_check_driven_entry_may_name_the_size_its_check_computed(refs):
    # no signatures: only a check raises it, and the check knows the value in use
    checked = GOOD.replace('cmd = "true"', 'cmd = "vllm serve /models/m --max-num-batched-tokens 8192"').replace(
        "signatures = ['(?P<lib>libzz\\w+\\.so): cannot open']\n", "").replace(
        'examples = ["ImportError: libzz_test.so: cannot open shared object file"]\n', "")
    assert "signatures" not in checked
    assert _problems(checked, refs) == []


def test_identical_signatures_in_two_entries_are_one_cause_twice():
    other = GOOD.replace("ASC-TST-001", "ASC-TST-002")
    assert any("same signatures as ASC-TST-001" in p
               for p in cross_problems([("a.toml", GOOD.encode()), ("b.toml", other.encode())]))
    # issue 15: a distinct cause has its own line too (not one the first entry also explains)
    distinct = other.replace("cannot open']", "undefined symbol']").replace(
        "libzz_test.so: cannot open shared object file", "libzz_test.so: undefined symbol: zzInit")
    assert cross_problems([("a.toml", GOOD.encode()), ("b.toml", distinct.encode())]) == []
    dangling = GOOD.replace('cause = { en = "Cause"', 'cause = { en = "Cause; see ASC-TST-404"')
    assert any("names ASC-TST-404, which is no entry" in p
               for p in cross_problems([("a.toml", dangling.encode())]))


# the shape of ASC-OPS-001 / ASC-NPU-004 before issue 15 merged them: different regexes,
# the same real line (vllm-ascend #2698) explained by both
DCMI_A = GOOD.replace("signatures = ['(?P<lib>libzz\\w+\\.so): cannot open']",
                      "signatures = ['dcmi module initiali[sz]ed? failed.*ret is (?P<code>-\\d+)']"
                      ).replace("libzz_test.so: cannot open shared object file",
                                "dcmi module initialize failed. ret is -8005")
DCMI_B = DCMI_A.replace("ASC-TST-001", "ASC-TST-002").replace(
    "initiali[sz]ed? failed.*ret is (?P<code>-\\d+)", "initialize failed\\. ret is (?P<ret>-80\\d\\d)")


def test_two_entries_explaining_each_others_real_line_are_one_cause():
    assert DCMI_A != DCMI_B and "ASC-TST-002" in DCMI_B
    problems = cross_problems([("a.toml", DCMI_A.encode()), ("b.toml", DCMI_B.encode())])
    assert any("ASC-TST-002 and ASC-TST-001 share one cause: examples that match each other"
               in p for p in problems), problems
    # a generic entry may overlap a specific one: ranking puts the specific one first
    generic = DCMI_B.replace('fix = "ldconf.ascend-conf"', 'fix = "ldconf.ascend-conf"\ngeneric = true')
    assert cross_problems([("a.toml", DCMI_A.encode()), ("b.toml", generic.encode())]) == []


def test_one_shared_signature_is_one_cause_even_with_others_apart():
    # ASC-UPS-020 and ASC-LOG-003 before the merge: one regex in common, the rest different
    a = GOOD.replace("signatures = ['(?P<lib>libzz\\w+\\.so): cannot open']",
                     "signatures = ['(?P<lib>libzz\\w+\\.so): cannot open', 'zzWatchdog timeout']")
    b = GOOD.replace("ASC-TST-001", "ASC-TST-002").replace(
        "signatures = ['(?P<lib>libzz\\w+\\.so): cannot open']",
        "signatures = ['(?P<lib>libzz\\w+\\.so): cannot open shared', 'zzWatchdog timeout']")
    problems = cross_problems([("a.toml", a.encode()), ("b.toml", b.encode())])
    assert any("share one cause: the signature 'zzWatchdog timeout'" in p for p in problems)


def test_every_signature_needs_a_negative_from_a_real_log(refs):
    # a signature whose words no real line shares (so nothing shows it is narrower than them)
    lone = GOOD.replace("'(?P<lib>libzz\\w+\\.so): cannot open'", "'ZZQUUX_NOT_FOUND'").replace(
        "libzz_test.so: cannot open shared object file", "ZZQUUX_NOT_FOUND")
    assert any("signatures[1]: no negative example" in p for p in _problems(lone, refs))
    # a real near miss (vllm-ascend #2349: an ACL failure that is not this code) fixes it
    near = lone.replace('fix = "ldconf.ascend-conf"', 'fix = "ldconf.ascend-conf"\nnear_misses = '
                        '["ERROR 08-28 02:33:28 [core.py:634] RuntimeError: ACL stream synchronize '
                        'failed, error code:507035"]')
    assert _problems(near, refs) == []
    # a near miss the entry's own signature matches is no near miss
    wrong = lone.replace('fix = "ldconf.ascend-conf"', 'fix = "ldconf.ascend-conf"\n'
                         'near_misses = ["set ZZQUUX_NOT_FOUND=1"]')
    assert any("near_misses[1]: matches the entry's signature" in p for p in _problems(wrong, refs))
    # the automatic negative: a corpus line that shares a word ("cannot open") without matching
    assert _problems(GOOD, refs) == []
    assert not any("no negative" in p for p in _problems(GOOD, {**refs, "negatives": []}))


def test_lint_command_runs_the_rules_over_the_shipped_kb(cli):
    r = cli("kb", "lint")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ", 0 problems" in r.stderr and "corpus lines" in r.stderr


def test_duplicate_ids_and_bad_toml(refs):
    assert any("duplicate id" in p for p in _problems(GOOD + GOOD, refs))
    assert any("not valid TOML" in p for p in _problems(GOOD + "\n[[entry]\n", refs))
