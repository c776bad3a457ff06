"""`fix` verifies every check its change affects and names the new fails it caused
(issue 14 item 5, issue 31): a new fail is a check that passed before and fails after.
On the demo materialised as a sysroot, ldconf.ascend-conf adds the include that makes
/etc/ld.so.conf.d reached; a stale cuda.conf there, naming a directory that does not
exist, then makes ldconf.dirs fail. The fix itself never writes the demo's missing
driver/lib64/common again (issue 31 item 7)."""

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

CUDA = "/usr/local/cuda-12.4/lib64"


@pytest.fixture
def demo_root(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "root"
    export_root(demo_bundle_data(), str(root))
    (root / "etc/ld.so.conf.d/cuda.conf").write_text(CUDA + "\n")
    return root


def test_every_recipe_declares_what_it_affects():
    for spec in FixRegistry.discover().recipes.values():
        assert spec.affects, f"{spec.id} declares no affected checks"


def test_apply_leaves_out_missing_dirs_and_breaks_nothing(demo_root):
    ctx = FixContext.for_root(str(demo_root), RunOptions())
    plan = plan_for(ctx, "ldconf.ascend-conf", None, "ldconf.order")
    assert "ldconf" in plan.affects and "libacl" in plan.affects
    # the demo configures driver/lib64/common, which does not exist: left out, said so
    added = [ln for ln in plan.diff().splitlines() if ln.startswith("+")]
    assert not any("driver/lib64/common" in ln for ln in added)
    assert any("driver/lib64/common" in str(n) for n in plan.notes)
    res = apply_plan(plan, ctx, lambda: LiveHost(str(demo_root)))
    v = res.verification
    assert (v.check, v.before, v.after) == ("ldconf.order", "fail", "pass")
    states = {a["check"]: (a["before"], a["after"]) for a in v.affected}
    assert states["ldconf.perms"] == ("fail", "pass")  # what the fix was for
    assert states["ldconf.dirs"] == ("pass", "info")  # cuda.conf's dir: ld.so skips it
    assert states["libacl.resolve"] == ("fail", "pass")
    assert v.regressions == []
    assert v.unverifiable == []  # ldconfig -r ran in the sysroot: everything is modelled


def test_only_checks_that_passed_before_and_fail_after_are_new_fails():
    before = {"a.b": ("fail", ["fail: x missing"]), "c.d": ("pass", []), "g.h": ("skip", []),
              "i.j": ("warn", [])}
    after = {"a.b": ("fail", ["fail: x missing", "fail: y missing"]), "c.d": ("fail", ["fail: q"]),
             "g.h": ("error", ["error: boom"]), "i.j": ("fail", ["fail: w"]),
             "e.f": ("fail", ["fail: z"])}
    out = regressions(before, after)
    # a.b failed before (more messages are not a new fail); i.j warned before; e.f had no
    # answer before: none of them passed before
    assert [r["check"] for r in out] == ["c.d", "g.h"]
    assert out[0] == {"check": "c.d", "before": "pass", "after": "fail", "messages": ["fail: q"]}
    assert regressions(after, before) == []  # fewer fails is no regression
    assert regressions(before, after, unverifiable=("c.d",))[0]["check"] == "g.h"


def test_the_cli_fix_and_undo_restore_the_cache_byte_for_byte(cli, demo_root, tmp_path):
    """Item 6: undo restores the ld.so.cache the fix's ldconfig rebuilt."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "LANG": "C.UTF-8"}
    cache = demo_root / "etc/ld.so.cache"
    old = cache.read_bytes() if cache.exists() else None
    r = cli("fix", "ldconf.ascend-conf", "--root", str(demo_root), "--apply", "--yes", env=env)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "new fail" not in r.stdout
    assert "left out of ascend.conf" in r.stdout and "driver/lib64/common" in r.stdout
    assert "{root}" not in r.stdout and f"$ ldconfig -r {demo_root}" in r.stdout
    rebuilt = cache.read_bytes()
    assert rebuilt != old and b"libascendcl.so" in rebuilt
    r = cli("fix", "--undo", env=env)
    assert r.returncode == 0, r.stderr
    assert "/etc/ld.so.cache" in r.stdout
    assert (cache.read_bytes() if cache.exists() else None) == old
    r = cli("fix", "ldconf.ascend-conf", "--root", str(demo_root), "--apply", "--yes",
            "--json", env=env)
    res = json.loads(r.stdout)["result"]["verification"]
    assert res["regressions"] == [] and res["unverifiable"] == []
