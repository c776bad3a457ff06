"""Issue 14 leftovers: the text report's ``next:`` never repeats the run (suggest.next_step),
and the Markdown and JUnit reports carry the problems in the ranking the JSON uses."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from ascend_doctor.knowledge import load as load_kb
from ascend_doctor.suggest import next_step, only_reads, repeats_the_run
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def demo_json():
    r = run_cli("demo", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_next_is_the_first_kb_step_that_does_not_repeat_the_run(demo_json):
    r = run_cli("demo", "--text", "-v")
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())  # wrapping aside
    kb = load_kb()
    ran = [c["id"] for c in demo_json["checks"]]
    shown = 0
    for p in demo_json["problems"]:
        if not p["kb"]:
            continue
        steps = list(kb.get(p["kb"][0]).steps)
        want = next_step(steps, "en", "demo", ran)
        if want is None:
            continue
        assert "next: " + " ".join(want.split()) in flat, (p["kb"][0], want)
        shown += 1
        for s in steps:  # a step that only re-reads what the demo read is never the next one
            cmd = s.get("cmd")
            if cmd and (only_reads(cmd) or repeats_the_run(cmd, "demo", ran)) and s["en"] != want:
                assert "next: " + " ".join(f"{s['en']} `{cmd}`".split()) not in flat
    assert shown >= 5
    # the demo's ASC-LIB-004 first step is a `stat` (what ldconf.perms read): not suggested
    assert "next: Check the mode of the Ascend conf file" not in flat


def test_markdown_lists_the_problems_in_the_json_ranking(demo_json):
    r = run_cli("demo", "--markdown")
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert md.index("### Problems") < md.index("### Findings")
    rows = re.findall(r"^(\d+)\. \*\*([A-Z]+)\*\* .*? — `([^`]+)`: ", md, re.M)
    got = [(int(n), sev.lower(), cid) for n, sev, cid in rows]
    want = [(p["rank"], p["severity"], p["root"]["check"]) for p in demo_json["problems"]]
    assert got == want
    first = md.split("\n1. ", 1)[1].split("\n2. ", 1)[0]
    assert "explains 8: `torch_npu.import`, `ldconf.order`, `libacl.resolve` ×6" in first
    assert "fix: `ascend-doctor fix ldconf.ascend-conf --demo`" in first  # targets the demo


def test_junit_names_each_problem_and_the_root_that_explains_a_symptom(tmp_path):
    bundle = tmp_path / "demo.tar.gz"
    assert run_cli("demo", "--export", str(bundle)).returncode == 0
    junit = tmp_path / "j.xml"
    r = run_cli("check", "--bundle", str(bundle), "--json", "--junit", str(junit))
    assert r.returncode == 1, r.stderr
    probs = json.loads(r.stdout)["problems"]
    suite = ET.parse(junit).getroot()
    props = [(p.get("name"), p.get("value")) for p in suite.find("properties")]
    assert [n for n, _ in props] == [f"problem.{p['rank']}" for p in probs]
    for (_, value), p in zip(props, probs):
        assert value.startswith(p["severity"] + " ")
        assert f"root cause: {p['root']['check']}" in value
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    order = cases["ldconf.order"].find("failure")
    assert order is not None and "explained by ldconf.perms" in order.text
    perms = cases["ldconf.perms"].find("failure").text
    assert perms.startswith("problem 1 (high): root cause:")
    assert "explains torch_npu.import, ldconf.order, libacl.resolve" in perms
