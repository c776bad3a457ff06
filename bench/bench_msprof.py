"""A 1,000,000-row op_summary (real msprof header) parsed by the streaming parser vs
pandas.read_csv, each in fresh child processes (median wall time and peak RSS, common.py).

The work differs, and the row's note says so: ours parses, aggregates (per device, task
type, op type and stream, MEMCPY_ASYNC split by name) and freezes the Profile the checks
read; pandas only parses every column into a DataFrame.

pandas is not a dependency of ascend-doctor: when it is absent the peer is skipped with a
note (`pip install pandas` to compare). Run: python bench/bench_msprof.py [--quick]
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
          "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,"
          "HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
          "Output Data Types,Output Formats,Context ID,aicore_time(us),total_cycles")
OPS = [("MatMulV2", "AI_CORE", "\"8,4096;4096,4096\"", 310.5),
       ("Add", "AI_VECTOR_CORE", "\"8,4096;8,4096\"", 12.25),
       ("MEMCPY_ASYNC", "MEMCPY_ASYNC", "\"\"", 95.0),
       ("FlashAttentionScore", "AI_CORE", "\"8,32,128;8,32,128\"", 120.75),
       ("RmsNorm", "AI_VECTOR_CORE", "\"8,4096;4096\"", 8.5)]


def write_op_summary(path: str, rows: int) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER + "\r\n")
        t = 1_700_000_000_000.0
        buf = []
        for i in range(rows):
            name, task, shapes, dur = OPS[i % len(OPS)]
            buf.append(f"{i % 8},4294967295,{i % 65535},{2 + (task == 'MEMCPY_ASYNC')},"
                       f"model/layers.{i % 61}/{name},{name},dynamic,{task},{t:.3f},{dur},0.2,24,0,"
                       f"NO,{shapes},DT_BF16;DT_BF16,ND;ND,\"8,4096\",DT_BF16,ND,N/A,"
                       f"{dur * 0.9:.3f},{int(dur * 1800)}\r\n")
            t += dur + 1
            if len(buf) >= 10000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))


OURS = ("import sys; from doctor.probes.msprof import ProfileAcc, parse_op_rows, text_lines, freeze;"
        "acc = ProfileAcc(); n = parse_op_rows(text_lines(open(sys.argv[1], 'rb')), acc);"
        "p = freeze(acc, '.', 'msprof', [sys.argv[1]]); print(n, len(p.devices), p.devices[0].memcpy_us)")
PANDAS = "import sys, pandas; df = pandas.read_csv(sys.argv[1]); print(len(df))"


def _median(argv: list[str], n: int) -> tuple[float, float]:
    """Median (wall seconds, peak RSS MiB) over n fresh child processes, one warm-up first
    (GNU time's %M, see common.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import measure

    return measure(argv, n)


def run(quick: bool = False) -> list[dict]:
    rows = 100_000 if quick else 1_000_000
    n = 3 if quick else 7
    tmp = tempfile.mkdtemp(prefix="bench-msprof-")
    path = os.path.join(tmp, "op_summary_20260323031901.csv")
    try:
        write_op_summary(path, rows)
        ours_s, ours_rss = _median([sys.executable, "-c", OURS, path], n)
        row = {"name": f"msprof: op_summary {rows:,} rows ({os.path.getsize(path) / 2**20:.0f} MiB)",
               "ours_s": round(ours_s, 2), "peer": "pandas.read_csv", "peer_s": None,
               "ours_rss_mb": round(ours_rss, 1), "peer_rss_mb": None, "note": ""}
        if importlib.util.find_spec("pandas") is not None:
            peer_s, peer_rss = _median([sys.executable, "-c", PANDAS, path], n)
            row.update(peer_s=round(peer_s, 2), peer_rss_mb=round(peer_rss, 1),
                       note=f"ours/pandas time ratio {ours_s / peer_s:.2f}; not the same work: "
                            "ours parses, sums per device/op/stream and freezes the Profile, "
                            "pandas only parses into a DataFrame (no aggregation); median of "
                            f"{n} runs each")
        else:
            row["note"] = "pandas not installed: peer skipped (pip install pandas to compare)"
        return [row]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ["PYTHONPATH"] = REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    for r in run(quick="--quick" in sys.argv):
        print(r)
