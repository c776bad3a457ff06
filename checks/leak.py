"""NPU memory that keeps rising while no request runs (seed 003_d72edf74e71c5e11.txt).

At idle the device memory of a healthy server is flat (the KV cache is preallocated); a
steady rise with zero running requests points at leaked contexts, KV pool entries or
cached temporaries. Busy samples are left out: a rising curve under load proves nothing.
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.leak import NpuMemoryTrend
from ascend_doctor.registry import check

RISE_MB = 64.0  # below this, allocator noise
UP_FRACTION = 0.8


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares MB/s."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / den if den else 0.0


@check("leak.npu-memory", title="NPU memory stays flat while the service is idle",
       category=Category.PERFORMANCE, tags=("memory", "service", "npu"), timeout=900.0)
def npu_memory(trend: NpuMemoryTrend) -> Iterator[Finding]:
    idle = [p for p in trend.points if not p.running]
    busy = len(trend.points) - len(idle)
    unknown = all(p.running is None for p in trend.points)
    if len(idle) < 3:
        yield Finding.skip(T("the service was busy in {busy} of {n} samples; a leak trend "
                             "needs an idle window", busy=busy, n=len(trend.points)),
                           evidence={"busy_samples": busy})
        return
    devices = sorted({d for p in idle for d in p.used_mb})
    for dev in devices:
        series = [(p.t, p.used_mb[dev]) for p in idle if dev in p.used_mb]
        if len(series) < 3:
            continue
        rise = series[-1][1] - series[0][1]
        steps = [b[1] - a[1] for a, b in zip(series, series[1:])]
        up = sum(1 for s in steps if s > 0) / len(steps)
        mbps = slope(series)
        ev = {"device": dev, "source": trend.source, "samples": len(series),
              "first_mb": series[0][1], "last_mb": series[-1][1], "rise_mb": round(rise, 1),
              "slope_mb_per_s": round(mbps, 3), "rising_steps": round(up, 2),
              "idle_known": not unknown, "window_s": round(series[-1][0] - series[0][0], 1)}
        if rise >= RISE_MB and up >= UP_FRACTION and mbps > 0:
            args = dict(dev=dev, rise=f"{rise:.0f}", window=f"{ev['window_s']:.0f}",
                        rate=f"{mbps:.1f}", up=f"{up * 100:.0f}")
            yield Finding.fail(T("NPU {dev}: memory rose {rise} MB in {window} s ({rate} MB/s, "
                                 "{up} % of steps up) with no request running: a leak", **args)
                               if not unknown else
                               T("NPU {dev}: memory rose {rise} MB in {window} s ({rate} MB/s, "
                                 "{up} % of steps up) with no request running: a leak "
                                 "(idleness not confirmed: no vllm: metrics)", **args),
                               subject=f"NPU {dev}", evidence=ev, kb="ASC-PERF-003")
        else:
            yield Finding.passed(T("NPU {dev}: {first} → {last} MB over {window} s idle", dev=dev,
                                   first=f"{series[0][1]:.0f}", last=f"{series[-1][1]:.0f}",
                                   window=f"{ev['window_s']:.0f}"),
                                 subject=f"NPU {dev}", evidence=ev)
    if trend.clamped:
        yield Finding.info(T("--watch capped at {seconds} s", seconds=f"{trend.watch_s:.0f}"))
    if not devices:
        yield Finding.skip(T("no device memory in the samples"))
