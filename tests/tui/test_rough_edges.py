"""Issue 8's rough edges, driven by Pilot: an open detail follows a fix and its undo, the
CLI's --timeout reaches the TUI's runs, the highlighted check's category stays visible, and
the full demo at 80×24 keeps the worst finding and the key hints on screen."""

from __future__ import annotations

import asyncio
import threading
import time

from click.testing import CliRunner

from ascend_doctor.model import Category, Finding, Status
from ascend_doctor.registry import check
from ascend_doctor.tui.app import DoctorApp
from ascend_doctor.tui.screens.dashboard import DashboardScreen
from ascend_doctor.tui.screens.detail import DetailScreen
from ascend_doctor.tui.screens.fix import ConfirmScreen, FixPlanScreen, FixResultScreen
from tests.tui.conftest import SNAPSHOT_CHECKS, subset_registry, wait_for
from tests.tui.test_pilot import plain
from tests.timing import budget

SIZE = (120, 40)
FAIL_TEXT = "no Ascend directory is configured"


async def test_open_detail_follows_the_fix_and_its_undo(fix_state):
    app = DoctorApp(demo=True, registry=subset_registry(*SNAPSHOT_CHECKS), live=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        app.goto_check("ldconf.order")
        await pilot.press("enter")
        detail = app.screen
        assert isinstance(detail, DetailScreen) and detail.finding.status == Status.FAIL
        assert FAIL_TEXT in plain(app)
        await pilot.press("f")  # fix from the open detail
        await wait_for(pilot, lambda: isinstance(app.screen, FixPlanScreen))
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, FixResultScreen), timeout=30)
        assert app.screen.verify_state == "pass", app.screen.verify_text
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is detail)
        await wait_for(pilot, lambda: detail.finding.status == Status.PASS)
        await pilot.pause(0.1)
        text = plain(app)
        assert FAIL_TEXT not in text and "PASS" in text
        assert detail.finding is app.state.rows["ldconf.order"].findings[0]
        # undo (the dashboard's u; here straight from the action): the failure is back
        app.action_undo()
        await wait_for(pilot, lambda: isinstance(app.screen, FixResultScreen) and
                       app.screen.undone, timeout=30)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is detail and
                       detail.finding.status == Status.FAIL)
        await pilot.pause(0.1)
        assert FAIL_TEXT in plain(app)


RELEASE = threading.Event()


@check("test.stuck", title="A check that hangs past the run's timeout",
       category=Category.HOST)
def _stuck():
    RELEASE.wait(30)
    yield Finding.passed("released")


def test_cli_timeout_reaches_the_tui_runs(monkeypatch, sysroot):
    """`ascend-doctor tui --timeout 0.4`: the hanging check is abandoned after 0.4 s, not 10."""
    from ascend_doctor import cli
    from ascend_doctor.registry import Registry

    reg = subset_registry("ldconf.order", extra=[getattr(_stuck, "__ascend_doctor_check__")])
    monkeypatch.setattr(Registry, "discover", classmethod(lambda cls, plugins=True: reg))
    seen: dict = {}

    async def drive(app: DoctorApp) -> None:
        async with app.run_test(size=SIZE) as pilot:
            t0 = time.monotonic()
            await wait_for(pilot, lambda: app.run_complete, timeout=budget(8, cap=25))
            seen["took"] = time.monotonic() - t0
            seen["row"] = app.state.rows["test.stuck"]
            seen["text"] = plain(app)

    monkeypatch.setattr(DoctorApp, "run", lambda self, **kw: asyncio.run(drive(self)))
    RELEASE.clear()
    try:
        res = CliRunner().invoke(cli.main, ["tui", "--root", str(sysroot.root),
                                            "--timeout", "0.4"])
    finally:
        RELEASE.set()
    assert res.exit_code == 0, res.output + repr(res.exception)
    row = seen["row"]
    assert row.state == "error", row.state
    assert "timed out after 0.4 s" in row.findings[0].message
    assert seen["took"] < budget(8, cap=9.5)  # the default timeout (10 s) would end it later


async def test_the_highlighted_checks_category_stays_visible():
    """On the full demo at 80×24 the group headers scroll away; the pane title names it."""
    app = DoctorApp(demo=True, live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.run_complete, timeout=20)
        await pilot.pause(0.1)
        checks = app.screen.query_one("#checks")
        def header_of(cid: str) -> int:
            cat = app.state.rows[cid].category.value
            return next(i for i, o in enumerate(checks.options) if o.id == f"cat:{cat}")

        for _ in range(checks.option_count):  # down until a header has scrolled away
            await pilot.press("down")
            if checks.scroll_offset.y > header_of(checks.highlighted_check):
                break
        else:
            raise AssertionError("no group header ever scrolled out of view")
        cat = app.state.rows[checks.highlighted_check].category.value
        assert checks.border_title == f"Checks · {cat}"
        assert f"Checks · {cat}" in plain(app)
        await pilot.press("w")
        worst = app.state.rows[checks.highlighted_check].category.value
        assert checks.border_title == f"Checks · {worst}"


async def test_full_demo_at_80x24_keeps_the_worst_finding_and_the_key_hints():
    app = DoctorApp(demo=True)  # every check, the live panel on
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.run_complete, timeout=20)
        await wait_for(pilot, lambda: app.series.samples > 0)
        await pilot.pause(0.2)
        assert isinstance(app.screen, DashboardScreen)
        lines = plain(app).splitlines()
        row, finding = app.state.worst()
        worst = next(x for x in lines if "Worst:" in x)
        assert row.id in worst
        assert finding.message[:40] in worst, worst  # the message, not only the key hints
        footer = next(x for x in reversed(lines) if "Quit" in x)
        for hint in ("Details", "Fix", "Filter", "Worst", "Quit", "Help", "Export"):
            assert hint in footer, (hint, footer)
        app.journal.append(("0123abcd", row.id))  # as after a fix: "u Undo" joins the footer
        app.refresh_bindings()
        await pilot.pause(0.2)
        footer = next(x for x in reversed(plain(app).splitlines()) if "Quit" in x)
        for hint in ("Undo", "Details", "Fix", "Quit", "Help"):
            assert hint in footer, (hint, footer)
        assert "palette" not in footer  # ctrl+p still works; help names it
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.3)
        assert "palette" in next(x for x in reversed(plain(app).splitlines()) if "Quit" in x)
