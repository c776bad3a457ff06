"""The check list's category headers and the pane title name the category in the reader's
language, with the text report's words (issue 14 item 6); `l` switches them back."""

from __future__ import annotations

from ascend_doctor.options import RunOptions
from ascend_doctor.tui.app import DoctorApp
from tests.tui.conftest import SNAPSHOT_CHECKS, subset_registry, wait_for


def _headers(app) -> list[str]:
    """The text of the category header rows of the check list."""
    checks = app.screen.query_one("#checks")
    return [str(o.prompt) for o in checks.options if (o.id or "").startswith("cat:")]


async def test_category_headers_follow_the_language():
    app = DoctorApp(demo=True, options=RunOptions(lang="zh"), live=False,
                    registry=subset_registry(*SNAPSHOT_CHECKS))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        heads = _headers(app)
        assert any("库" in h for h in heads) and any("版本" in h for h in heads), heads
        assert not any("libs" in h or "versions" in h for h in heads), heads
        await pilot.press("k")
        title = str(app.screen.query_one("#checks").border_title)
        assert ("库" in title or "版本" in title) and "libs" not in title, title
        await pilot.press("l")
        await pilot.pause(0.5)
        assert app.lang == "en"
        heads = _headers(app)
        assert any("libs" in h for h in heads) and any("versions" in h for h in heads), heads
        assert "Checks · " in str(app.screen.query_one("#checks").border_title)
