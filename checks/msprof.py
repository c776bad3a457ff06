"""Memory-copy hotspots in msprof / torch_npu profiler exports.

Seed 000_93c34712512482cd.txt §4.2: 72 % of the time in aclrtMemcpyAsync, the weights
copied before every inference; "Memory Copy Time > 50 % of Kernel Time = the bottleneck is
data movement, not compute".
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.msprof import DeviceProfile, Profile
from ascend_doctor.registry import check

COPY_FAIL, COPY_WARN = 0.5, 0.2
MIN_REPEATS = 10
MIN_WEIGHT_BYTES = 1 << 20


def _ms(us: float) -> str:
    return f"{us / 1000:,.1f} ms".replace(",", " ")


def _directions(p: Profile) -> dict[str, int]:
    """Bytes copied per MEMCPY_ASYNC operation (host to device, device to host, …)."""
    out: dict[str, int] = {}
    for op, size, n in p.copies:
        out[op] = out.get(op, 0) + size * n
    return out


def _dir_text(p: Profile) -> str:
    d = _directions(p)
    short = {"host to device": "H2D", "device to host": "D2H", "host to host": "H2H",
             "device to device": "D2D"}
    return (" (" + ", ".join(f"{short.get(k, k)} {v / 2**20:,.1f} MiB" for k, v in
                             sorted(d.items(), key=lambda x: -x[1])) + " in the timeline)"
            if d else "")


def _top(d: DeviceProfile, n: int = 3) -> str:
    return ", ".join(f"{t} {_ms(u)}" for t, u in d.top_ops[:n]) or "none exported"


# cause key: the same large buffer is copied host-to-device again and again (the copy-bound
# finding of the same export is explained by it when both are present)
WEIGHTS_RECOPIED = "msprof.weights-recopied"


@check("msprof.export", title="The profiler export is complete and readable",
       category=Category.PROFILING, tags=("msprof", "prof"))
def export(p: Profile) -> Iterator[Finding]:
    ev = {"root": p.root, "layout": p.layout, "files": list(p.files), "rows": p.rows,
          "devices": [d.device for d in p.devices], "problems": list(p.problems)}
    if not p.devices:
        yield Finding.warn(f"{p.root}: the {p.layout} export has no data rows "
                           f"({', '.join(p.files) or 'no files'})", subject=p.root, evidence=ev)
        return
    if p.problems:
        yield Finding.warn(f"{p.root}: " + "; ".join(p.problems[:3]), subject=p.root, evidence=ev)
        return
    yield Finding.passed(f"{p.root}: {p.layout} export, {sum(p.rows.values())} rows in "
                         f"{len(p.rows)} files, devices {', '.join(d.device for d in p.devices)}",
                         subject=p.root, evidence=ev)


@check("msprof.copy-bound", title="Copy time stays well below kernel time",
       category=Category.PROFILING, tags=("msprof", "prof", "perf"))
def copy_bound(p: Profile) -> Iterator[Finding]:
    seen = False
    for d in p.devices:
        copy = d.copy_us
        if not d.kernel_us and not d.api_total_us:
            continue
        seen = True
        ev = {"device": d.device, "kernel_us": d.kernel_us, "kernel_tasks": d.kernel_tasks,
              "memcpy_us": d.memcpy_us, "memcpy_tasks": d.memcpy_tasks,
              "hccl_memcpy_us": d.hccl_memcpy_us, "hccl_memcpy_tasks": d.hccl_memcpy_tasks,
              "api_memcpy_us": d.api_memcpy_us, "api_memcpy_calls": d.api_memcpy_calls,
              "api_total_us": d.api_total_us, "copy_source": d.copy_source,
              "top_ops": [list(x) for x in d.top_ops], "bytes_by_direction": _directions(p)}
        api_share = d.api_memcpy_us / d.api_total_us if d.api_total_us else None
        share_txt = (f"; aclrtMemcpy* is {api_share:.0%} of ACL API time "
                     f"({d.api_memcpy_calls} calls)" if api_share is not None and d.api_memcpy_us
                     else "")
        hccl_txt = (f" (another {_ms(d.hccl_memcpy_us)} in {d.hccl_memcpy_tasks} HCCL copies "
                    "not counted)" if d.hccl_memcpy_tasks else "")
        if d.kernel_us:
            ratio = copy / d.kernel_us
            ev["copy_to_kernel"] = round(ratio, 4)
            msg = (f"device {d.device}: {d.copy_source} {_ms(copy)}{_dir_text(p)} = {ratio:.0%} "
                   f"of kernel time {_ms(d.kernel_us)}{hccl_txt}{share_txt}; top operators: "
                   f"{_top(d)}")
        else:
            ratio = api_share or 0.0
            msg = (f"device {d.device}: no kernel rows exported; aclrtMemcpy* "
                   f"{_ms(d.api_memcpy_us)} = {ratio:.0%} of ACL API time")
        if ratio > COPY_FAIL:
            yield Finding.fail(msg + ": data movement, not compute, bounds this run",
                               subject=f"device {d.device}", evidence=ev, kb="ASC-PROF-001",
                               explained_by=WEIGHTS_RECOPIED)
        elif ratio > COPY_WARN:
            yield Finding.warn(msg, subject=f"device {d.device}", evidence=ev, kb="ASC-PROF-001")
        else:
            yield Finding.passed(msg, subject=f"device {d.device}", evidence=ev)
    if not seen:
        yield Finding.info(f"{p.root}: no kernel or API time exported (files: "
                           f"{', '.join(p.files)})", evidence={"files": list(p.files)})


@check("msprof.hccl-copies", title="Copies inside HCCL communication are not dominant",
       category=Category.PROFILING, tags=("msprof", "prof", "hccl"))
def hccl_copies(p: Profile) -> Iterator[Finding]:
    for d in p.devices:
        if not d.kernel_us:
            continue
        r = d.hccl_memcpy_us / d.kernel_us
        ev = {"device": d.device, "hccl_memcpy_us": d.hccl_memcpy_us,
              "hccl_memcpy_tasks": d.hccl_memcpy_tasks, "hccl_ops_us": d.hccl_us,
              "kernel_us": d.kernel_us, "ratio": round(r, 4)}
        msg = (f"device {d.device}: {d.hccl_memcpy_tasks} MEMCPY_ASYNC tasks on HCCL streams, "
               f"{_ms(d.hccl_memcpy_us)} = {r:.0%} of kernel time (communication ops "
               f"{_ms(d.hccl_us)})")
        if r > COPY_FAIL:
            yield Finding.warn(msg + ": communication-bound, not a weight copy: look at TP "
                               "size, HCCL settings and link bandwidth", subject=f"device {d.device}",
                               evidence=ev, kb="ASC-PROF-002")
        else:
            yield Finding.passed(msg, subject=f"device {d.device}", evidence=ev)


@check("msprof.weights-recopied", title="Weights are not copied host-to-device per inference",
       category=Category.PROFILING, tags=("msprof", "prof", "perf"))
def weights_recopied(p: Profile) -> Iterator[Finding]:
    h2d = [(size, n) for op, size, n in p.copies if op.startswith("host to device")]
    if not p.copies:
        yield Finding.skip("missing source: MEMCPY_ASYNC sizes (no msprof_*.json / "
                           "trace_view.json timeline with size(B)/operation in the export)",
                           evidence={"files": list(p.files)})
        return
    total = sum(size * n for size, n in h2d)
    steps = max((d.steps for d in p.devices), default=0)
    ev = {"copies": [list(c) for c in p.copies[:10]], "h2d_bytes": total, "steps": steps}
    for size, n in sorted(h2d, key=lambda x: -x[0] * x[1]):
        if size < MIN_WEIGHT_BYTES or n < max(MIN_REPEATS, steps):
            continue
        share = size * n / total if total else 0
        if share >= 0.5:
            per_step = f", {n / steps:.1f} per step over {steps} steps" if steps else ""
            yield Finding.fail(
                f"{n} host-to-device copies of the same {size / 2**20:.1f} MiB{per_step} "
                f"({share:.0%} of {total / 2**30:.2f} GiB copied H2D): the same buffer is "
                "uploaded again and again, as weights copied per inference would be",
                evidence={**ev, "size": size, "count": n, "share": round(share, 3)},
                kb="ASC-PROF-001", cause=WEIGHTS_RECOPIED)
            return
    yield Finding.passed(f"no repeated large host-to-device copy ({len(h2d)} H2D sizes, "
                         f"{total / 2**20:.1f} MiB in all)", evidence=ev)
