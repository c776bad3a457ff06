"""The fix flow in the TUI: plan → confirm → apply → verify → undo, driven by Pilot.

The TUI reaches fixes/ only through doctor/tui/fixflow.py, which calls the same API as
the CLI's `fix` (fixes.plan_for, fixes.apply.apply_plan, fixes.apply.undo). These tests run
the real ldconf.ascend-conf recipe on the demo: over an overlay directory (the demo bundle
is read-only) and on the demo materialised as a sysroot (real files, real modes), and check
the bytes on disk, the journal and the dashboard.
"""

from __future__ import annotations

import os
import sys

from ascend_doctor.tui import fixflow
from ascend_doctor.tui.app import DoctorApp
from ascend_doctor.tui.screens.fix import (ConfirmScreen, FixPlanScreen, FixResultScreen,
                                    FixUnavailableScreen)
from tests.tui.conftest import SNAPSHOT_CHECKS, subset_registry, wait_for
from tests.tui.test_pilot import plain

SIZE = (120, 40)
LD_CONF = "/etc/ld.so.conf"
ASCEND_CONF = "/etc/ld.so.conf.d/ascend.conf"
INCLUDE = "include /etc/ld.so.conf.d/*.conf"


def _read(root: str, path: str) -> bytes | None:
    p = os.path.join(root, path.lstrip("/"))
    if not os.path.exists(p):
        return None
    with open(p, "rb") as fh:
        return fh.read()


async def test_fixes_not_installed_shows_the_reason_and_manual_steps(no_fixes):
    app = DoctorApp(demo=True, registry=subset_registry(*SNAPSHOT_CHECKS))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        app.goto_check("ldconf.order")  # the worst is versions.pins; its recipe is another
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FixUnavailableScreen))
        assert "fixes are not installed" in app.screen.reason
        assert "cannot import ascend_doctor.fixes" in app.screen.reason
        assert "ASC-LIB-002" in app.screen.steps_markdown and "1. " in app.screen.steps_markdown
        await pilot.press("escape")
        assert not isinstance(app.screen, FixUnavailableScreen)


def test_a_missing_part_of_fixes_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "ascend_doctor.fixes.apply", None)
    ok, reason = fixflow.availability()
    assert not ok and "cannot import ascend_doctor.fixes.apply" in reason


async def _open_plan(app, pilot, check_id: str) -> None:
    """Select ``check_id`` and open its fix plan."""
    app.goto_check(check_id)
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(app.screen, FixPlanScreen), timeout=20)


async def _apply_answering(app, pilot, answer: str) -> None:
    """Ask to apply the open plan and answer the confirmation with ``answer`` (y / n)."""
    await pilot.press("a")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    await pilot.press(answer)


async def _plan_apply_verify_undo(app, pilot, write_root) -> None:
    """The whole flow on ldconf.order; ``write_root()`` is where the fix writes."""
    await wait_for(pilot, lambda: app.run_complete, timeout=20)
    assert app.state.rows["ldconf.order"].state == "fail"
    root = write_root()
    before = {p: _read(root, p) for p in (LD_CONF, ASCEND_CONF)}
    await _open_plan(app, pilot, "ldconf.order")
    plan = app.screen.plan
    assert plan.recipe_id == "ldconf.ascend-conf"
    assert {d.path for d in plan.diffs} >= {ASCEND_CONF}
    diff = "".join(d.diff for d in plan.diffs)
    assert f"+{INCLUDE}\n" in diff and "mode 0600 -> mode 0644" in diff
    assert any(c[0] == "ldconfig" for c in plan.commands)
    assert "$ ldconfig" in plain(app)
    await _apply_answering(app, pilot, "y")
    await wait_for(pilot, lambda: isinstance(app.screen, FixResultScreen), timeout=30)
    res = app.screen
    assert not res.undone and res.applied.journal_id
    assert res.verify_state == "pass", res.verify_text
    assert app.state.rows["ldconf.order"].state == "pass"  # dashboard updated
    conf = _read(root, ASCEND_CONF)
    assert conf is not None and conf.decode().splitlines()[1] == "/usr/local/Ascend/driver/lib64"
    assert os.stat(os.path.join(root, ASCEND_CONF.lstrip("/"))).st_mode & 0o777 == 0o644
    main = (_read(root, LD_CONF) or b"").decode()
    assert INCLUDE in main
    await pilot.press("escape")  # close the result; undo from the dashboard's journal key
    await pilot.pause(0.2)
    assert "u Undo" in plain(app)
    await pilot.press("u")
    await wait_for(pilot, lambda: isinstance(app.screen, FixResultScreen) and app.screen.undone,
                   timeout=30)
    assert app.screen.verify_state == "fail"
    assert app.state.rows["ldconf.order"].state == "fail"
    after_undo = {p: _read(root, p) for p in (LD_CONF, ASCEND_CONF)}
    if app.context == "sysroot":  # the real files are back byte for byte
        assert after_undo == before
    else:  # the overlay is empty again: the demo bundle shows through
        assert after_undo == {LD_CONF: None, ASCEND_CONF: None}
        # the undo names the overlay, not this machine's /etc (issue 31 item 8)
        msg = app.screen.applied.message
        assert f"in the overlay {root}" in msg and "never touched" in msg, msg
    await pilot.press("escape")
    await pilot.pause(0.2)
    assert app.journal == [] and "u Undo" not in plain(app)


async def test_fix_flow_on_the_demo_overlay(fix_state):
    app = DoctorApp(demo=True, registry=subset_registry(*SNAPSHOT_CHECKS), live=False)
    async with app.run_test(size=SIZE) as pilot:
        await _plan_apply_verify_undo(app, pilot, app.fix_root)
        overlay = app.overlay
        # journalled inside the overlay, never in the user's own journal (issue 31 item 8)
        assert os.listdir(os.path.join(overlay, ".ascend-doctor", "journal"))
    assert overlay and not os.path.exists(overlay), "the demo overlay is removed on exit"
    real = fix_state / "ascend-doctor" / "journal"
    assert not real.exists() or os.listdir(real) == [], "a demo fix reached the real journal"


async def test_fix_flow_on_the_demo_materialised_as_a_sysroot(fix_state, demo_root):
    app = DoctorApp(root=str(demo_root), registry=subset_registry(*SNAPSHOT_CHECKS),
                    live=False)
    async with app.run_test(size=SIZE) as pilot:
        await _plan_apply_verify_undo(app, pilot, lambda: str(demo_root))
    assert app.context == "sysroot"


async def test_fix_plan_cancel_changes_nothing(fix_state, demo_root):
    snapshot = {p: _read(str(demo_root), p) for p in (LD_CONF, ASCEND_CONF)}
    app = DoctorApp(root=str(demo_root), registry=subset_registry(*SNAPSHOT_CHECKS),
                    live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.run_complete, timeout=20)
        await _open_plan(app, pilot, "ldconf.order")
        await _apply_answering(app, pilot, "n")
        await pilot.pause(0.2)
        assert app.journal == []
    assert {p: _read(str(demo_root), p) for p in (LD_CONF, ASCEND_CONF)} == snapshot
    assert not (fix_state / "ascend-doctor" / "journal").exists() or not os.listdir(
        fix_state / "ascend-doctor" / "journal")


async def test_the_demo_result_names_no_false_new_fails(fix_state):
    """In the demo overlay ldconfig is not run: ldconf.cache cannot be judged there, so the
    result says "not verifiable here" rather than calling it a new fail; the demo's missing
    driver/lib64/common is left out, so ldconf.dirs stays green (issue 31 items 5, 7)."""
    app = DoctorApp(demo=True, live=False,
                    registry=subset_registry("ldconf.order", "ldconf.dirs", "ldconf.perms",
                                             "ldconf.cache"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.run_complete, timeout=20)
        assert app.state.rows["ldconf.dirs"].state == "pass"
        assert app.state.rows["ldconf.perms"].state == "fail"
        await _open_plan(app, pilot, "ldconf.order")
        await _apply_answering(app, pilot, "y")
        await wait_for(pilot, lambda: isinstance(app.screen, FixResultScreen), timeout=30)
        text = app.screen.verify_text
        assert "new fails" not in text, text
        assert "not verifiable here: ldconf.cache" in text, text
        assert app.state.rows["ldconf.dirs"].state in ("pass", "info")  # no Ascend dir missing
        assert app.state.rows["ldconf.perms"].state == "pass"  # re-run too, not left stale
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, FixResultScreen) and
                       app.screen.undone, timeout=30)
        assert app.state.rows["ldconf.perms"].state == "fail"
