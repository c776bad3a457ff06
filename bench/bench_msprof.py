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


OURS = ("import sys; from ascend_doctor.probes.msprof import ProfileAcc, parse_op_bytes, freeze;"
        "acc = ProfileAcc(); n = parse_op_bytes(open(sys.argv[1], 'rb'), acc);"
        "p = freeze(acc, '.', 'msprof', [sys.argv[1]]); print(n, len(p.devices), p.devices[0].memcpy_us)")
# parse_op_bytes is what gather_profile calls: the C scanner (doctor/_opscan.c) when it was
# built, else csv.reader; ASCEND_DOCTOR_CSV_ENGINE=python measures the pure-Python path
ENGINES = (("C scanner", {}), ("python csv", {"ASCEND_DOCTOR_CSV_ENGINE": "python"}))
PANDAS = "import sys, pandas; df = pandas.read_csv(sys.argv[1]); print(len(df))"


def run(quick: bool = False) -> list[dict]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import measure, measure_pair

    # BENCH_PEER_PATH: a `pip install --target DIR pandas` for the peer alone (not ours)
    extra = os.environ.get("BENCH_PEER_PATH", "")
    peer_env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (extra, os.environ.get("PYTHONPATH", "")) if p)}
    has_pandas = importlib.util.find_spec("pandas") is not None or (
        bool(extra) and os.path.isdir(os.path.join(extra, "pandas")))
    out = []
    tmp = tempfile.mkdtemp(prefix="bench-msprof-")
    try:
        for rows in ((10_000, 100_000) if quick else (10_000, 100_000, 1_000_000)):
            n = 3 if quick or rows >= 1_000_000 else 5
            path = os.path.join(tmp, f"op_summary_{rows}.csv")
            write_op_summary(path, rows)
            name = f"msprof: op_summary {rows:,} rows ({os.path.getsize(path) / 2**20:.1f} MiB)"
            ours_argv = [sys.executable, "-c", OURS, path]
            for engine, env in ENGINES:
                label = f"{name}, {engine}"
                ours_env = {**os.environ, **env}
                if not has_pandas:
                    ours = measure(ours_argv, n, env=ours_env)
                    out.append({"name": label, "ours_s": round(ours[0], 3), "peer": "pandas.read_csv",
                                "peer_s": None, "ours_rss_mb": round(ours[1], 1), "peer_rss_mb": None,
                                "note": "pandas not installed: peer skipped (pip install pandas)"})
                    continue
                ours, peer, ratio = measure_pair(ours_argv, [sys.executable, "-c", PANDAS, path], n,
                                                 env=ours_env, peer_env=peer_env, stdout_dir=tmp)
                out.append({"name": label, "ours_s": round(ours[0], 3), "peer": "pandas.read_csv",
                            "peer_s": round(peer[0], 3), "ratio": ratio,
                            "ours_rss_mb": round(ours[1], 1), "peer_rss_mb": round(peer[1], 1),
                            "note": f"ours/pandas time {1 / ratio:.2f}; ours parses, sums per "
                                    "device/op/stream and freezes the Profile, pandas only parses"})
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ["PYTHONPATH"] = REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    for r in run(quick="--quick" in sys.argv):
        print(r)
