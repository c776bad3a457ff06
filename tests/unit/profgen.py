"""Write msprof / torch_npu profiler exports with the real headers (facts/ascend-stack.md §4)."""

from __future__ import annotations

import json
from pathlib import Path

OP_SUMMARY_HEADER = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type",
                     "OP State", "Task Type", "Task Start Time(us)", "Task Duration(us)",
                     "Task Wait Time(us)", "Block Num", "Mix Block Num", "HF32 Eligible",
                     "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                     "Output Data Types", "Output Formats", "Context ID", "aicore_time(us)",
                     "total_cycles"]
KERNEL_HEADER = ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)",
                 "Duration(us)", "Wait Time(us)", "Block Num", "Input Shapes",
                 "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                 "Output Formats"]
API_HEADER = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)",
              "Max(us)", "Variance"]
OPSTAT_HEADER = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)",
                 "Min Time(us)", "Max Time(us)", "Ratio(%)"]


def q(v) -> str:
    s = str(v)
    return '"' + s.replace('"', '""') + '"' if ("," in s or '"' in s) else s


def csv_text(header, rows, bom: bool = False) -> str:
    lines = [",".join(q(h) for h in header)] + [",".join(q(v) for v in r) for r in rows]
    return ("\ufeff" if bom else "") + "\r\n".join(lines) + "\r\n"


def op_row(dev, stream, name, optype, task, start, dur):
    return [dev, 4294967295, 1, stream, name, optype, "dynamic", task, start, dur, 0.2, 24, 0,
            "NO", '1,4096;4096,4096', "DT_BF16;DT_BF16", "ND;ND", '1,4096', "DT_BF16", "ND",
            "N/A", dur * 0.9, int(dur * 1800)]


def op_summary_rows(steps=20, dev=0, matmul_us=300.0, memcpy_us=0.0, hccl_memcpy_us=0.0):
    rows = []
    t = 1_700_000_000_000.0
    for s in range(steps):
        for k in range(4):
            rows.append(op_row(dev, 2, f"model/layers.{k}/MatMul", "MatMulV2", "AI_CORE", t, matmul_us))
            t += matmul_us + 1
            rows.append(op_row(dev, 2, f"model/layers.{k}/Add", "Add", "AI_VECTOR_CORE", t, 20.0))
            t += 21
        if memcpy_us:
            rows.append(op_row(dev, 3, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "MEMCPY_ASYNC", t, memcpy_us))
            t += memcpy_us
        if hccl_memcpy_us:
            rows.append(op_row(dev, 7, "hcom_allReduce__123_0", "HcomAllReduce", "AI_CPU", t, 50.0))
            rows.append(op_row(dev, 7, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "MEMCPY_ASYNC", t, hccl_memcpy_us))
            t += hccl_memcpy_us
    return rows


def timeline(copies) -> str:
    """msprof_*.json: Chrome trace events; copies = [(operation, size, count)]."""
    ev = []
    ts = 1000.0
    for op, size, n in copies:
        for _ in range(n):
            ev.append({"name": "MEMCPY_ASYNC", "pid": 2, "tid": 3, "ts": f"{ts:.3f}", "dur": 95.5,
                       "ph": "X", "args": {"Task Type": "MEMCPY_ASYNC", "Physic Stream Id": 3,
                                           "Task Id": 12, "size(B)": size,
                                           "bandwidth(GB/s)": 21.9, "operation": op}})
            ts += 200
    ev.append({"name": "MatMulV2", "pid": 2, "tid": 2, "ts": "5.0", "dur": 300, "ph": "X",
               "args": {"Task Type": "AI_CORE"}})
    return json.dumps(ev, indent=1)


def write_msprof(root: Path, *, memcpy_us=0.0, hccl_memcpy_us=0.0, api_memcpy_us=100.0,
                 copies=(), bom=False, legacy=False, block_dim=False, steps=20) -> Path:
    prof = root / "PROF_000001_20260323031749197_00815596RKPKAHRB"
    out = prof / ("device_0/summary" if legacy else "mindstudio_profiler_output")
    out.mkdir(parents=True)
    header = list(OP_SUMMARY_HEADER)
    if block_dim:
        header[header.index("Block Num")] = "Block Dim"
        header[header.index("Mix Block Num")] = "Mix Block Dim"
    suffix = "_0_1_1" if legacy else "_20260323031901"
    (out / f"op_summary{suffix}.csv").write_text(csv_text(header, op_summary_rows(
        steps, memcpy_us=memcpy_us, hccl_memcpy_us=hccl_memcpy_us), bom), encoding="utf-8")
    api = [["host", "acl", "aclrtMemcpyAsync", api_memcpy_us, steps, api_memcpy_us / steps,
            1.0, 90.0, 3.1],
           ["host", "acl", "aclmdlExecute", 4000.0, steps, 200.0, 180.0, 250.0, 1.0],
           ["host", "runtime", "rtKernelLaunch", 300.0, 160, 1.9, 1.0, 4.0, 0.2]]
    (out / f"api_statistic{suffix}.csv").write_text(csv_text(API_HEADER, api, bom), encoding="utf-8")
    if copies:
        (out / "msprof_20260323031901.json").write_text(timeline(copies))
    return prof


def write_torch_npu(root: Path, *, memcpy_us=0.0, steps=10) -> Path:
    pt = root / "atlas800t-a2-07_4711_20260323031749197_ascend_pt"
    out = pt / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rows = []
    for s in range(steps):
        rows.append([s, 0, "aten::mm", "MatMulV2", "AI_CORE", 1000.0 + s, 400.0, 0.1, 24,
                     '8,4096;4096,4096', "DT_BF16;DT_BF16", "ND;ND", '8,4096', "DT_BF16", "ND"])
        if memcpy_us:
            rows.append([s, 0, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "MEMCPY_ASYNC", 1500.0 + s,
                         memcpy_us, 0.1, 0, "", "", "", "", "", ""])
    (out / "kernel_details.csv").write_text(csv_text(KERNEL_HEADER, rows), encoding="utf-8")
    (out / "op_statistic.csv").write_text(csv_text(OPSTAT_HEADER, [
        [0, "MatMulV2", "AI_CORE", steps, 400.0 * steps, 400.0, 399.0, 401.0, 100.0]]))
    (out / "api_statistic.csv").write_text(csv_text(API_HEADER, [
        [0, "acl", "aclrtMemcpyAsync", 10.0 * steps, steps, 10.0, 9.0, 11.0, 0.1]]))
    return pt
