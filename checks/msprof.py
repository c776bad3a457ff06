"""Memory-copy hotspots in msprof / torch_npu profiler exports.

Seed 000_93c34712512482cd.txt §4.2: 72 % of the time in aclrtMemcpyAsync, the weights
copied before every inference; "Memory Copy Time > 50 % of Kernel Time = the bottleneck is
data movement, not compute".
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.i18n import N_, Msg, T
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
    return (T(" ({sizes} in the timeline)",
              sizes=", ".join(f"{short.get(k, k)} {v / 2**20:,.1f} MiB" for k, v in
                              sorted(d.items(), key=lambda x: -x[1])))
            if d else "")


def _top(d: DeviceProfile, n: int = 3) -> str:
    return ", ".join(f"{t} {_ms(u)}" for t, u in d.top_ops[:n]) or T("none exported")


# What to do depends on which copy API the profile shows (a blocking copy is fixed by not
# blocking; an asynchronous one by moving less). CANN's runtime API reference documents
# aclrtMemcpy as synchronous (the host waits for the copy) and aclrtMemcpyAsync as queued on a
# stream; the 2-D variants copy strided (pitched) regions.
_API_FIX = {
    "aclrtMemcpy": N_("the synchronous aclrtMemcpy blocks the host thread until each copy "
                      "ends: issue the copies with aclrtMemcpyAsync on a stream (in PyTorch: "
                      "tensor.to('npu', non_blocking=True) from pinned host memory) so they "
                      "overlap compute"),
    "aclrtMemcpyAsync": N_("aclrtMemcpyAsync already overlaps compute, so the volume is the "
                           "cost: keep the data resident on the device (upload weights and "
                           "constant buffers once, not per step) and batch small copies"),
    "aclrtMemcpy2d": N_("the synchronous 2-D (strided) aclrtMemcpy2d blocks the host and copies "
                        "row by row: make the tensor contiguous and copy it in one "
                        "aclrtMemcpyAsync"),
    "aclrtMemcpy2dAsync": N_("the strided aclrtMemcpy2dAsync copies row by row: make the source "
                             "contiguous so one linear copy moves it"),
}
_API_FIX_OTHER = N_("copy less per step: keep the data resident on the device")


def dominant_copy_api(d: DeviceProfile) -> tuple[str, float, int, float] | None:
    """(API, us, calls, share of all aclrtMemcpy* time) of the copy API with the most time,
    or None when the export has no API statistics."""
    if not d.api_memcpy_by or d.api_memcpy_us <= 0:
        return None
    name, us, calls = d.api_memcpy_by[0]
    return name, us, calls, us / d.api_memcpy_us


def _api_text(d: DeviceProfile) -> "Msg":
    top = dominant_copy_api(d)
    if top is None:
        return T("; no API statistics exported, so the copy API (aclrtMemcpy or "
                 "aclrtMemcpyAsync) cannot be told")
    name, us, calls, share = top
    others = ", ".join(f"{n} {_ms(u)}" for n, u, _c in d.api_memcpy_by[1:3])
    return T("; {api} dominates the copies ({share} of aclrtMemcpy* time, {calls} calls, "
             "{time}{others}): {fix}", api=name, share=f"{share:.0%}", calls=calls,
             time=_ms(us), others=T("; then {list}", list=others) if others else "",
             fix=T(_API_FIX.get(name, _API_FIX_OTHER)))


# cause key: the same large buffer is copied host-to-device again and again (the copy-bound
# finding of the same export is explained by it when both are present)
WEIGHTS_RECOPIED = "msprof.weights-recopied"


@check("msprof.export", title="The profiler export is complete and readable",
       category=Category.PROFILING, tags=("msprof", "prof"))
def export(p: Profile) -> Iterator[Finding]:
    ev = {"root": p.root, "layout": p.layout, "files": list(p.files), "rows": p.rows,
          "devices": [d.device for d in p.devices], "problems": list(p.problems)}
    if not p.devices:
        yield Finding.warn(T("{root}: the {layout} export has no data rows ({files})",
                             root=p.root, layout=p.layout,
                             files=", ".join(p.files) or T("no files")),
                           subject=p.root, evidence=ev)
        return
    if p.problems:
        yield Finding.warn(f"{p.root}: " + "; ".join(p.problems[:3]), subject=p.root, evidence=ev)
        return
    yield Finding.passed(T("{root}: {layout} export, {rows} rows in {n} files, devices "
                           "{devices}", root=p.root, layout=p.layout, rows=sum(p.rows.values()),
                           n=len(p.rows), devices=", ".join(d.device for d in p.devices)),
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
              "top_ops": [list(x) for x in d.top_ops], "bytes_by_direction": _directions(p),
              "copy_apis": [list(x) for x in d.api_memcpy_by],
              "dominant_copy_api": (dominant_copy_api(d) or (None,))[0]}
        api_share = d.api_memcpy_us / d.api_total_us if d.api_total_us else None
        share_txt = (T("; aclrtMemcpy* is {share} of ACL API time ({calls} calls)",
                       share=f"{api_share:.0%}", calls=d.api_memcpy_calls)
                     if api_share is not None and d.api_memcpy_us else "")
        hccl_txt = (T(" (another {time} in {n} HCCL copies not counted)",
                      time=_ms(d.hccl_memcpy_us), n=d.hccl_memcpy_tasks)
                    if d.hccl_memcpy_tasks else "")
        if d.kernel_us:
            ratio = copy / d.kernel_us
            ev["copy_to_kernel"] = round(ratio, 4)
            msg = T("device {device}: {source} {copy}{directions} = {ratio} of kernel time "
                    "{kernel}{hccl}{share}; top operators: {top}", device=d.device,
                    source=d.copy_source, copy=_ms(copy), directions=_dir_text(p),
                    ratio=f"{ratio:.0%}", kernel=_ms(d.kernel_us), hccl=hccl_txt,
                    share=share_txt, top=_top(d))
        else:
            ratio = api_share or 0.0
            msg = T("device {device}: no kernel rows exported; aclrtMemcpy* {time} = {ratio} of "
                    "ACL API time", device=d.device, time=_ms(d.api_memcpy_us),
                    ratio=f"{ratio:.0%}")
        if ratio > COPY_FAIL:
            yield Finding.fail(T("{text}: data movement, not compute, bounds this run{api}",
                                 text=msg, api=_api_text(d)),
                               subject=f"device {d.device}", evidence=ev, kb="ASC-PROF-001",
                               explained_by=WEIGHTS_RECOPIED)
        elif ratio > COPY_WARN:
            yield Finding.warn(T("{text}{api}", text=msg, api=_api_text(d)),
                               subject=f"device {d.device}", evidence=ev, kb="ASC-PROF-001")
        else:
            yield Finding.passed(msg, subject=f"device {d.device}", evidence=ev)
    if not seen:
        yield Finding.info(T("{root}: no kernel or API time exported (files: {files})",
                             root=p.root, files=", ".join(p.files)),
                           evidence={"files": list(p.files)})


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
        msg = T("device {device}: {n} MEMCPY_ASYNC tasks on HCCL streams, {time} = {ratio} of "
                "kernel time (communication ops {ops})", device=d.device,
                n=d.hccl_memcpy_tasks, time=_ms(d.hccl_memcpy_us), ratio=f"{r:.0%}",
                ops=_ms(d.hccl_us))
        if r > COPY_FAIL:
            yield Finding.warn(T("{text}: communication-bound, not a weight copy: look at TP "
                                 "size, HCCL settings and link bandwidth", text=msg),
                               subject=f"device {d.device}",
                               evidence=ev, kb="ASC-PROF-002")
        else:
            yield Finding.passed(msg, subject=f"device {d.device}", evidence=ev)


@check("msprof.weights-recopied", title="Weights are not copied host-to-device per inference",
       category=Category.PROFILING, tags=("msprof", "prof", "perf"))
def weights_recopied(p: Profile) -> Iterator[Finding]:
    h2d = [(size, n) for op, size, n in p.copies if op.startswith("host to device")]
    if not p.copies:
        yield Finding.skip(T("missing source: MEMCPY_ASYNC sizes (no msprof_*.json / "
                             "trace_view.json timeline with size(B)/operation in the export)"),
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
            per_step = (T(", {rate} per step over {steps} steps", rate=f"{n / steps:.1f}",
                          steps=steps) if steps else "")
            yield Finding.fail(
                T("{n} host-to-device copies of the same {size} MiB{per_step} ({share} of "
                  "{total} GiB copied H2D): the same buffer is uploaded again and again, as "
                  "weights copied per inference would be", n=n, size=f"{size / 2**20:.1f}",
                  per_step=per_step, share=f"{share:.0%}", total=f"{total / 2**30:.2f}"),
                evidence={**ev, "size": size, "count": n, "share": round(share, 3)},
                kb="ASC-PROF-001", cause=WEIGHTS_RECOPIED)
            return
    yield Finding.passed(T("no repeated large host-to-device copy ({n} H2D sizes, {total} MiB "
                           "in all)", n=len(h2d), total=f"{total / 2**20:.1f}"), evidence=ev)
