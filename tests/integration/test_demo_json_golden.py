"""Speed work on `demo --json` (issue 16: deferred imports, caches, faster parsers) must keep
the report what it was, minus the clock.

The golden is the demo JSON of the tree before that work, with ``started_at`` and every
``duration_s`` of the report and of its checks dropped (a finding's evidence keeps its own).
A change that means to alter the demo's findings regenerates it:
``ASCEND_DOCTOR_REGOLD=1 python -m pytest -m golden --snapshot-update`` (docs/HACKING.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli

GOLDEN = Path(__file__).with_name("golden") / "demo.json"


def newer_than_the_golden() -> list[str]:
    """``--skip`` arguments for the checks registered since the goldens were written: a new
    check is pinned by its own test, and the demo goldens keep pinning the others (what they
    report, the summary, the problems) until the next regeneration, which takes them in."""
    if os.environ.get("ASCEND_DOCTOR_REGOLD") == "1":
        return []
    from ascend_doctor.registry import Registry

    known = {c["id"] for c in json.loads(GOLDEN.read_text(encoding="utf-8"))["checks"]}
    new = sorted(set(Registry.discover(plugins=False).checks) - known)
    return [a for cid in new for a in ("--skip", cid)]


def normalized(report: dict) -> dict:
    """The report without its timing: the top level's and each check's."""
    out = {k: v for k, v in report.items() if k not in ("started_at", "duration_s")}
    out["checks"] = [{k: v for k, v in c.items() if k != "duration_s"}
                     for c in report.get("checks", [])]
    return out


@pytest.mark.golden
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_demo_json_equals_the_golden(lang):
    r = run_cli("demo", "--json", "--lang", lang, *newer_than_the_golden())
    assert r.returncode in (0, 1, 2), r.stderr
    got = normalized(json.loads(r.stdout))
    path = GOLDEN.with_name(f"demo-{lang}.json") if lang != "en" else GOLDEN
    if os.environ.get("ASCEND_DOCTOR_REGOLD") == "1":
        path.write_text(json.dumps(got, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                        encoding="utf-8")
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got == want
