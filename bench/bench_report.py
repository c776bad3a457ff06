"""Rendering the summary-first text report (issue 14) of the demo's result, in-process.

What is measured is the *absolute* time to render: grouping into problems, ranking, wrapping
and Rich printing of the demo report into a string, median of N runs (the checks ran once,
before timing). The budget is "well under 100 ms". Side by side, the JSON report of the same
Report object (it groups and ranks too) is the peer, so the ratio shows what the text
layout costs over the machine format.
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import row  # noqa: E402

BUDGET_S = 0.100


def demo_report():
    """The demo's Report, as ``ascend-doctor demo`` builds it (run once, not timed)."""
    from ascend_doctor.bundle import BundleHost
    from ascend_doctor.demo import demo_bundle_data
    from ascend_doctor.engine import RunConfig, run
    from ascend_doctor.options import RunOptions

    data = demo_bundle_data()
    inputs = data.manifest.get("options", {}).get("demo_inputs", {})
    options = RunOptions(**{k: v for k, v in inputs.items()
                            if k in ("pcap", "profile_dir", "block_audit")})
    return run(BundleHost(data), options, config=RunConfig(context="demo"))


def _median(fn, n: int) -> float:
    fn()  # warm-up: imports (rich), caches
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(quick: bool = False) -> list[dict]:
    from ascend_doctor.knowledge import load

    from ascend_doctor.report import jsonreport, text

    os.environ.setdefault("NO_COLOR", "1")
    n = 5 if quick else 21
    report, kb = demo_report(), load()

    def render_text(verbose: bool = False) -> str:
        buf = io.StringIO()
        text.render(report, buf, kb, "en", verbose)
        return buf.getvalue()

    def render_json() -> str:
        return jsonreport.render(report, {}, kb)

    lines = render_text().count("\n")
    ours = _median(render_text, n)
    peer = _median(render_json, n)
    verbose = _median(lambda: render_text(True), n)
    verdict = "within" if ours < BUDGET_S else "OVER"
    rows = [row("text report of the demo (default, summary first)", (ours, 0.0),
                "JSON report of the same Report", (peer, 0.0),
                f"absolute: {ours * 1000:.1f} ms median of {n}, {verdict} the 100 ms budget; "
                f"{lines} lines; RSS not measured"),
            row("text report of the demo (-v, every finding)", (verbose, 0.0),
                "JSON report of the same Report", (peer, 0.0),
                f"absolute: {verbose * 1000:.1f} ms median of {n}; RSS not measured")]
    for r in rows:
        r["ours_rss_mb"] = r["peer_rss_mb"] = None
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r)
