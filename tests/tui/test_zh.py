"""The TUI in Chinese (issue 14 item 6, a first slice): with --lang zh (or LANG=zh_CN) the
findings pane and the detail screen show check titles and finding messages from the catalog.
Bindings, headers and notifications are not translated yet."""

from __future__ import annotations

from ascend_doctor.options import RunOptions
from ascend_doctor.tui.app import DoctorApp
from tests.tui.conftest import SNAPSHOT_CHECKS, subset_registry, wait_for
from tests.tui.test_pilot import plain


async def test_findings_and_detail_speak_the_run_language():
    app = DoctorApp(demo=True, options=RunOptions(lang="zh"),
                    registry=subset_registry(*SNAPSHOT_CHECKS))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        await pilot.press("k")
        assert app.screen.query_one("#checks").highlighted_check == "ldconf.order"
        text = " ".join(plain(app).split())
        assert "ld.so.conf 中昇腾驱动库排在最前" in text  # the check's title, from the catalog
        assert "没有配置任何昇腾目录" in text or "先于驱动的 lib64 被搜索" in text, text[-2000:]
        await pilot.press("tab", "enter")
        await wait_for(pilot, lambda: app.screen.id != "dashboard" and
                       bool(app.screen.query("#d-message")))
        detail = " ".join(plain(app).split())
        assert "ld.so.conf 中昇腾驱动库排在最前" in detail


async def test_english_is_unchanged():
    app = DoctorApp(demo=True, options=RunOptions(lang="en"),
                    registry=subset_registry(*SNAPSHOT_CHECKS))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        await pilot.press("k")
        assert "Ascend driver libraries come first in ld.so.conf" in " ".join(plain(app).split())
