#!/usr/bin/env python3
"""Run every fuzz test in long mode (ASCEND_DOCTOR_FUZZ=long: 100 000 examples each) and
time each one, so the CI step's cost is known per parser.

    python bench/fuzz_long.py                 # the real long mode
    python bench/fuzz_long.py --examples 2000 # a sample run, extrapolated to 100 000
    python bench/fuzz_long.py -k bundle       # only some tests

Writes bench/out/fuzz_long.md. Exits 1 when any fuzz test fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LONG = 100_000


def node_ids(select: str | None) -> list[str]:
    args = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
            "tests/fuzz"] + (["-k", select] if select else [])
    out = subprocess.run(args, cwd=REPO, capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if "::" in line]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=None,
                    help="examples per test instead of the long mode's 100 000 (extrapolated)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="tests run side by side")
    ap.add_argument("-k", dest="select", default=None, help="pytest -k expression")
    ns = ap.parse_args()
    env = dict(os.environ)
    if ns.examples:
        env["ASCEND_DOCTOR_FUZZ_EXAMPLES"] = str(ns.examples)
        env.pop("ASCEND_DOCTOR_FUZZ", None)
    else:
        env["ASCEND_DOCTOR_FUZZ"] = "long"
    n = ns.examples or LONG
    rows, failed, total = [], [], 0.0
    t0 = time.monotonic()  # pytest's own start-up, paid once per test, not per example
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "--collect-only", "tests/fuzz/test_knowledge.py"], cwd=REPO, env=env,
                   capture_output=True)
    startup = time.monotonic() - t0
    def one(node: str):
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-x", node], cwd=REPO, env=env, capture_output=True, text=True)
        return node, r, time.monotonic() - t0

    from concurrent.futures import ThreadPoolExecutor

    wall0 = time.monotonic()
    with ThreadPoolExecutor(max(1, ns.jobs)) as pool:
        for node, r, dt in pool.map(one, node_ids(ns.select)):
            total += dt
            ok = r.returncode == 0
            if not ok:
                failed.append(node)
                sys.stderr.write(r.stdout[-3000:])
            est = startup + max(dt - startup, 0.0) * LONG / n
            rows.append((node.split("::", 1)[1], node.split("::")[0].rsplit("/", 1)[-1], dt,
                         est, "ok" if ok else "FAIL"))
            print(f"{'ok  ' if ok else 'FAIL'} {dt:8.1f} s  (≈{est:7.0f} s at 100k)  {node}",
                  flush=True)
    wall = time.monotonic() - wall0
    lines = [f"# fuzz long mode ({n} examples per test{'' if not ns.examples else ', extrapolated'})",
             "", "| test | file | seconds | ≈ s at 100 000 | result |", "|---|---|---:|---:|---|"]
    lines += [f"| {t} | {f} | {d:.1f} | {e:.0f} | {s} |" for t, f, d, e, s in rows]
    est_total = sum(r[3] for r in rows)
    lines += ["", f"pytest start-up {startup:.1f} s per test (not extrapolated)",
              f"wall clock with {ns.jobs} jobs: {wall:.1f} s; "
              f"total: {total:.1f} s measured, ≈ {est_total:.0f} s "
                  f"({est_total / 60:.1f} min) at 100 000 examples per test"]
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "fuzz_long.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-1:]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
