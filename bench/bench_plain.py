"""The plain code against the speed code it replaced (issue 35, rule 1: code that exists only
for speed stays only for >= 1 s or >= 3x at a size users have), in alternating runs.

The speed code is measured where it still exists: a checkout of the commit before its removal
(``ASCEND_DOCTOR_BENCH_BASE``: an interpreter with that tree installed, e.g.
``git archive f4af40f | tar -x -C /tmp/base && python3 -m venv /tmp/base/.venv &&
/tmp/base/.venv/bin/pip install -e /tmp/base``). Without it the rows say so and are skipped.

Rows: ``demo --json`` and ``check --bundle … --only ldconf`` (everything the start-up work
touched: shape-compiled records, the regex cache, the Requires-Dist reader, the redaction
memo, the registry's source index), with .pyc warm and without; and the block-table replay
of a 1 452-step audit log (11.7 MB) from the mini scheduler, in process (best of 3).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import measure_pair, pyc_envs  # noqa: E402

HERE = Path(__file__).resolve().parent
REPLAY = """
import io, sys, time
from ascend_doctor.checks.block_tables import replay
from ascend_doctor.probes.block_audit import iter_records
data = open(sys.argv[1], "rb").read()
best = 1e9
for _ in range(3):
    t0 = time.perf_counter()
    r = replay(iter_records(io.BytesIO(data)))
    best = min(best, time.perf_counter() - t0)
assert not r.counts, r.counts
print(best)
"""


def _row(name: str, ours, base, ratio: float, note: str) -> dict:
    return {"name": name, "ours_s": round(ours[0], 4), "peer": "the speed code (before)",
            "peer_s": round(base[0], 4), "ratio": ratio, "ours_rss_mb": round(ours[1], 1),
            "peer_rss_mb": round(base[1], 1), "note": note}


def run(quick: bool = False) -> list[dict]:
    base_py = os.environ.get("ASCEND_DOCTOR_BENCH_BASE")
    if not base_py or not os.access(base_py, os.X_OK):
        return [{"name": "plain code vs the removed speed code", "ours_s": None, "peer": None,
                 "peer_s": None, "ours_rss_mb": None, "peer_rss_mb": None,
                 "note": "skipped: set ASCEND_DOCTOR_BENCH_BASE to the old tree's python"}]
    n = 3 if quick else 9
    rows = []
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "cache"), 0o700)
        env0 = {**os.environ, "CI": "true", "NO_COLOR": "1",
                "XDG_CACHE_HOME": os.path.join(d, "cache")}
        env0.pop("ASCEND_DOCTOR_CACHE", None)
        bundle = os.path.join(d, "demo.tar.gz")
        subprocess.run([sys.executable, "-m", "ascend_doctor.cli", "demo", "--export", bundle],
                       check=True, capture_output=True, env=env0)
        cases = [("demo --json", ["demo", "--json"], (0,)),
                 ("check --bundle <demo> --only ldconf --json",
                  ["check", "--bundle", bundle, "--only", "ldconf", "--json"], (0, 1))]
        for mode, label in (("warm", ".pyc warm"), ("cold", "no .pyc")):
            envs = pyc_envs(env0)
            ours_env, base_env = envs[mode], {**envs[mode]}
            if mode == "warm":  # separate bytecode caches for the two trees
                base_env["PYTHONPYCACHEPREFIX"] = ours_env["PYTHONPYCACHEPREFIX"] + "-base"
            for name, args, ok in cases:
                ours_argv = [sys.executable, "-m", "ascend_doctor.cli", *args]
                base_argv = [base_py, "-m", "ascend_doctor.cli", *args]
                ours, base, ratio = measure_pair(ours_argv, base_argv, n, env=ours_env,
                                                 peer_env=base_env, ok_codes=ok, stdout_dir=d)
                rows.append(_row(f"{name}, {label}", ours, base, ratio,
                                 f"before/after time {ratio:.2f} (median of {n} alternating "
                                 f"pairs); before - after {1000 * (base[0] - ours[0]):+.0f} ms"))
        rows.append(_replay_row(base_py, env0, quick))
    return rows


def _replay_row(base_py: str, env: dict, quick: bool) -> dict:
    sys.path.insert(0, str(HERE))
    import bench_block_audit as bba

    one = bba.live(300 if quick else 1500, 1)
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as fh:
        fh.write(one["data"])
        fh.flush()
        ours, base = [], []
        for _ in range(3 if quick else 5):  # alternating processes, each its best of 3
            for py, out in ((sys.executable, ours), (base_py, base)):
                r = subprocess.run([py, "-c", REPLAY, fh.name], capture_output=True, text=True,
                                   check=True, env=env)
                out.append(float(r.stdout))
    o, b = sorted(ours)[len(ours) // 2], sorted(base)[len(base) // 2]
    return _row(f"block_tables replay of {one['steps']} steps "
                f"({len(one['data']) / 1e6:.1f} MB), in process", (o, 0.0), (b, 0.0), b / o,
                f"one path again vs the inlined second path; before/after {b / o:.2f}; "
                "RSS not measured") | {"ours_rss_mb": None, "peer_rss_mb": None}
