"""Run every bench/bench_*.py side by side with its peer and print one table.

Usage: python bench/run.py [--quick] [name-substring ...]
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLS = ("name", "ours_s", "peer", "peer_s", "ratio", "ours_rss_mb", "peer_rss_mb", "note")


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    words = [a for a in argv if not a.startswith("--")]
    rows = []
    for path in sorted(HERE.glob("bench_*.py")):
        if words and not any(w in path.stem for w in words):
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for row in mod.run(quick=quick):
            peer = row.get("peer_s") or 0
            row["ratio"] = f"{row['ours_s'] / peer:.2f}" if peer else "-"
            rows.append(row)
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) if rows else len(c)
              for c in COLS}
    print("  ".join(c.ljust(widths[c]) for c in COLS))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in COLS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
