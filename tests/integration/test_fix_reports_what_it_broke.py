"""`fix` verifies every check its change affects and names the new fails it caused
(issue 14 item 5): on the demo materialised as a sysroot, ldconf.ascend-conf makes
ascend.conf reached, so ldconf.dirs starts counting its two missing directories."""

from __future__ import annotations

import json

import pytest

from ascend_doctor.demo import demo_bundle_data
from ascend_doctor.host import LiveHost
from ascend_doctor.options import RunOptions
from ascend_doctor.fixes import FixRegistry, plan_for
from ascend_doctor.fixes.apply import apply_plan, regressions
from ascend_doctor.fixes.context import FixContext
from ascend_doctor.fixes.export import export_root

MISSING = "/usr/local/Ascend/driver/lib64/common is configured"


@pytest.fixture
def demo_root(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "root"
    export_root(demo_bundle_data(), str(root))
    return root


def test_every_recipe_declares_what_it_affects():
    for spec in FixRegistry.discover().recipes.values():
        assert spec.affects, f"{spec.id} declares no affected checks"


def test_apply_names_the_fail_it_caused(demo_root):
    ctx = FixContext.for_root(str(demo_root), RunOptions())
    plan = plan_for(ctx, "ldconf.ascend-conf", None, "ldconf.order")
    assert "ldconf" in plan.affects and "libacl" in plan.affects
    res = apply_plan(plan, ctx, lambda: LiveHost(str(demo_root)))
    v = res.verification
    assert (v.check, v.before, v.after) == ("ldconf.order", "fail", "pass")
    states = {a["check"]: (a["before"], a["after"]) for a in v.affected}
    assert states["ldconf.perms"] == ("fail", "pass")  # what the fix was for
    assert states["ldconf.dirs"] == ("pass", "fail")  # what it uncovered
    (reg,) = [r for r in v.regressions if r["check"] == "ldconf.dirs"]
    assert reg["before"] == "pass" and reg["after"] == "fail"
    assert any(MISSING in m for m in reg["messages"])
    assert "ldconf.perms" not in {r["check"] for r in v.regressions}


def test_new_failing_findings_in_a_failing_check_count_too():
    before = {"a.b": ("fail", ["fail: x missing"]), "c.d": ("pass", [])}
    after = {"a.b": ("fail", ["fail: x missing", "fail: y missing"]), "c.d": ("pass", []),
             "e.f": ("fail", ["fail: z"])}
    out = regressions(before, after)
    assert out == [{"check": "a.b", "before": "fail", "after": "fail",
                    "messages": ["fail: y missing"]},
                   # a check that had no answer before and fails now is reported too
                   {"check": "e.f", "before": None, "after": "fail", "messages": ["fail: z"]}]
    assert regressions(after, before) == []  # fewer fails is no regression


def test_the_cli_prints_the_new_fail(cli, demo_root, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "LANG": "C.UTF-8"}
    r = cli("fix", "ldconf.ascend-conf", "--root", str(demo_root), "--apply", "--yes", env=env)
    # applied and verified (ldconf.order passes) but ldconf.dirs fails now: exit 5, not 0
    assert r.returncode == 5, (r.returncode, r.stderr)
    assert "new fail caused by this fix: ldconf.dirs (pass -> fail)" in r.stdout
    assert MISSING in r.stdout
    assert "{root}" not in r.stdout and f"$ ldconfig -r {demo_root}" in r.stdout
    r = cli("fix", "--undo", env=env)
    assert r.returncode == 0, r.stderr
    r = cli("fix", "ldconf.ascend-conf", "--root", str(demo_root), "--apply", "--yes",
            "--json", env=env)
    res = json.loads(r.stdout)["result"]["verification"]
    assert [x["check"] for x in res["regressions"]] == ["ldconf.dirs"]
