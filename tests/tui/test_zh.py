"""The TUI in Chinese (issue 14 item 6): with --lang zh (or LANG=zh_CN) the findings pane and
the detail screen show check titles and finding messages from the catalog; key hints (footer,
help, palette), pane titles, the info bar, notifications and dialogs are Chinese too, and `l`
switches every one of them to the other language and back."""

from __future__ import annotations

import re

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
        assert "严重程度 高" in detail and "知识库" in detail and "证据" in detail, detail[-1500:]
        assert "Knowledge base" not in detail and "severity" not in detail


async def test_english_is_unchanged():
    app = DoctorApp(demo=True, options=RunOptions(lang="en"),
                    registry=subset_registry(*SNAPSHOT_CHECKS))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        await pilot.press("k")
        assert "Ascend driver libraries come first in ld.so.conf" in " ".join(plain(app).split())


def _footer_and_panes(app) -> str:
    return " ".join(plain(app).split())


async def test_key_hints_panes_and_info_bar_are_chinese_and_l_switches_back():
    app = DoctorApp(demo=True, options=RunOptions(lang="zh"), live=False,
                    registry=subset_registry(*SNAPSHOT_CHECKS))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        await pilot.pause(0.5)  # the footer recomposes after the bindings settle
        text = _footer_and_panes(app)
        for word in ("退出", "重跑", "导出", "帮助", "详情", "修复", "过滤", "最严重", "检查 · "):
            assert word in text, (word, text[-1500:])
        assert "最严重：" in text and "（w 跳转 · enter 原因 · f 修复）" in text
        assert re.search(r"\d+ 失败", text) and "完成" in text
        assert "Quit" not in text and "Findings" not in text and "Worst:" not in text
        await pilot.press("l")
        await pilot.pause(0.5)
        assert app.lang == "en"
        en = _footer_and_panes(app)
        assert "Quit" in en and "Re-run" in en and "Worst:" in en and "Checks · " in en
        # the findings re-render: the check's message is English again
        assert "requires" in en, en[-1500:]
        await pilot.press("l")
        await pilot.pause(0.5)
        assert "退出" in _footer_and_panes(app) and "要求" in _footer_and_panes(app)


async def test_help_palette_and_fix_dialog_in_chinese():
    app = DoctorApp(demo=True, options=RunOptions(lang="zh"), live=False,
                    registry=subset_registry(*SNAPSHOT_CHECKS))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.run_complete)
        palette = {a: (d, t) for a, d, t in app.palette_actions()}
        assert palette["quit"] == ("退出", "退出 ascend-doctor")
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        help_text = " ".join(plain(app).split())
        assert "从这里开始" in help_text and "| 按键 | 操作 | id |" not in help_text
        assert "按键" in help_text and "跳到最严重的发现" in help_text
