#!/usr/bin/env python3
"""Run every bench/bench_*.py side by side with its peer and print a table of ratios.

    .venv/bin/python bench/run.py            # full (7 runs per command, median)
    .venv/bin/python bench/run.py --quick    # 3 runs
    .venv/bin/python bench/run.py -k demo    # only modules whose name contains "demo"

Each module exposes ``run(quick) -> list[dict]`` (docs/HACKING.md). The table also goes to
bench/out/latest.md for the README.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _fmt_s(v) -> str:
    if v is None:
        return "—"
    return f"{v * 1000:.0f} ms" if v < 10 else f"{v:.1f} s"


def _fmt_mb(v) -> str:
    return "—" if v is None else f"{v:.0f} MiB"


def ratio(r: dict) -> str:
    if not r.get("peer_s") or not r.get("ours_s"):
        return "—"
    # the median of per-pair ratios when ours and the peer ran alternately (common.py)
    x = r.get("ratio") or r["peer_s"] / r["ours_s"]
    return f"{x:.1f}× faster" if x >= 1 else f"{1 / x:.1f}× slower"


def table(rows: list[dict]) -> list[str]:
    out = ["| benchmark | ours | peer | peer time | ratio | RSS ours | RSS peer | note |",
           "|---|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['name']} | {_fmt_s(r.get('ours_s'))} | {r.get('peer') or '—'} | "
                   f"{_fmt_s(r.get('peer_s'))} | {ratio(r)} | {_fmt_mb(r.get('ours_rss_mb'))} | "
                   f"{_fmt_mb(r.get('peer_rss_mb'))} | {r.get('note', '')} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-k", dest="select", default="")
    ns = ap.parse_args()
    rows: list[dict] = []
    failed = False
    for path in sorted(HERE.glob("bench_*.py")):
        if ns.select not in path.stem:
            continue
        t0 = time.monotonic()
        print(f"running {path.name} …", file=sys.stderr, flush=True)
        try:
            spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            rows.extend(mod.run(quick=ns.quick))
        except Exception as exc:  # one benchmark failing never hides the others
            failed = True
            traceback.print_exc()
            rows.append({"name": path.stem, "ours_s": None, "peer": None, "peer_s": None,
                         "ours_rss_mb": None, "peer_rss_mb": None,
                         "note": f"failed: {type(exc).__name__}: {exc}"})
        print(f"  {path.name}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    lines = table(rows)
    print("\n".join(lines))
    head = (f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
            f"{platform.machine()}, Python {platform.python_version()}, "
            f"{'quick' if ns.quick else 'full'} mode (median of fresh runs, ours and the peer "
            "alternately; ratio = median of the pairs); rows say whether the project's own "
            "modules were byte-compiled (`.pyc` warm) or compiled on each run (cold, this "
            "environment's PYTHONDONTWRITEBYTECODE); reproduce with `.venv/bin/python bench/run.py`.")
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "latest.md").write_text(head + "\n\n" + "\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
