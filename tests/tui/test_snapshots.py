"""Snapshots (pytest-textual-snapshot) of the dashboard, a detail, the fix modals and the
live panel on the demo scenario, at 120×40 and 80×24, dark and light.

Stable by construction: a fixed check subset (ldconf.order and versions.pins, see
conftest.SNAPSHOT_CHECKS) so new demo parts do not change them; the TUI renders no clock,
timestamp or duration; the live panel is off except in its own snapshot, which replays a
bundle built by the test. Update deliberately: `pytest tests/tui --snapshot-update`, then
look at the SVGs.
"""

from __future__ import annotations

import pytest

from ascend_doctor.tui.app import DoctorApp
from tests.tui.conftest import SNAPSHOT_CHECKS, run_before_complete, subset_registry, wait_for

pytestmark = pytest.mark.golden  # regenerated with --snapshot-update (docs/HACKING.md)

SIZES = [pytest.param((120, 40), id="120x40"), pytest.param((80, 24), id="80x24")]


def app(**kw) -> DoctorApp:
    kw.setdefault("live", False)
    return DoctorApp(demo=True, registry=subset_registry(*SNAPSHOT_CHECKS), **kw)


@pytest.mark.parametrize("size", SIZES)
def test_dashboard(snap_compare, size):
    assert snap_compare(app(), terminal_size=size, run_before=run_before_complete())


def test_dashboard_light_theme(snap_compare):
    async def light(pilot):
        pilot.app.theme = "textual-light"
    assert snap_compare(app(), terminal_size=(80, 24), run_before=run_before_complete(light))


@pytest.mark.parametrize("size", SIZES)
def test_detail(snap_compare, size):
    async def open_detail(pilot):
        await pilot.press("down", "enter")
        await pilot.pause(0.3)
    assert snap_compare(app(), terminal_size=size, run_before=run_before_complete(open_detail))


@pytest.mark.parametrize("size", SIZES)
def test_fixes_not_installed_modal(snap_compare, size, no_fixes):
    async def press_f(pilot):
        await pilot.press("f")
        await pilot.pause(0.3)
    assert snap_compare(app(), terminal_size=size, run_before=run_before_complete(press_f))


@pytest.mark.parametrize("size", SIZES)
def test_fix_plan_modal(snap_compare, size, fix_state):
    """The real ldconf.ascend-conf plan on the demo (an overlay: nothing is written)."""
    from ascend_doctor.tui.screens.fix import FixPlanScreen

    async def press_f(pilot):
        # the worst of the subset is versions.pins (three findings of one cause,
        # doctor/ranking.py); the plan shown here is ldconf.order's
        pilot.app.screen.query_one("#checks").select_check("ldconf.order")
        await pilot.pause(0.1)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, FixPlanScreen))
        await pilot.pause(0.3)
    assert snap_compare(app(), terminal_size=size, run_before=run_before_complete(press_f))


def test_live_panel(snap_compare, live_bundle):
    a = DoctorApp(bundle=str(live_bundle), registry=subset_registry(*SNAPSHOT_CHECKS))

    async def samples(pilot):
        await wait_for(pilot, lambda: pilot.app.series.samples == 4)
    assert snap_compare(a, terminal_size=(120, 40), run_before=run_before_complete(samples))


def test_dashboard_zh(snap_compare):
    """The dashboard in Chinese at 80×24: key hints, pane titles, info bar and findings."""
    from ascend_doctor.options import RunOptions

    async def settle(pilot):
        await pilot.pause(0.5)  # the footer recomposes once the translated bindings settle
    assert snap_compare(app(options=RunOptions(lang="zh")), terminal_size=(80, 24),
                        run_before=run_before_complete(settle))
