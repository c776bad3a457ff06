"""Timing assertions that hold on a loaded machine and still catch a real slow-down.

A bound in seconds written on an idle machine fails as soon as other processes share the
cores (CI on 2 cores, seven sessions' servers and benchmarks on one box). Three ways instead:

* **Compare with a peer measured in the same test**: ``growth(run, n)`` times the code at n
  and at 4n, interleaved, best of k each: linear work gives ~4, quadratic ~16; load slows
  both sizes alike.
* **Scale a budget by the load measured now**: ``slowdown()`` runs a fixed pure-Python
  workload and divides its wall time by its CPU time (the share of a core this process
  gets: 1 idle, ~3 with load 6 on 2 cores), times its CPU time over the reference core's
  (a slower machine). ``within(budget, fn)`` measures ``fn`` up to ``tries`` times and
  passes when one run fits ``budget`` times the slowdown measured right after it.
* **Cap what scaling may reach**: a bound that must tell "stopped at its timeout" from "waited
  for the hang" never grows past the hang (``cap=``), so the test can still fail.
"""

from __future__ import annotations

import json
import re
import time
from typing import Callable, TypeVar

T = TypeVar("T")

# CPU seconds of one ``_workload()`` on the reference core (the 2-core AMD EPYC CI VM, min of
# 20: 0.0176-0.0182 s idle and at load 14). A faster core counts as this one.
REFERENCE_CPU_S = 0.018


def _workload() -> None:
    d = {str(i): i * i for i in range(20_000)}
    s = json.dumps(d)
    json.loads(s)
    re.findall(r"\d+", s)


def slowdown(rounds: int = 3) -> float:
    """How many times longer than on an idle reference core code takes right now (>= 1)."""
    wall = cpu = 0.0
    for _ in range(rounds):
        w, c = time.perf_counter(), time.process_time()
        _workload()
        wall += time.perf_counter() - w
        cpu += time.process_time() - c
    cpu = max(cpu, 1e-6)
    return max(1.0, wall / cpu) * max(1.0, cpu / (rounds * REFERENCE_CPU_S))


def budget(seconds: float, cap: float | None = None) -> float:
    """``seconds`` scaled by the slowdown measured now, at most ``cap``."""
    b = seconds * slowdown()
    return min(b, cap) if cap is not None else b


def within(seconds: float, fn: Callable[[], T], *, tries: int = 3, cap: float | None = None,
           what: str = "the run") -> T:
    """Run ``fn`` until one run takes at most ``seconds`` x the slowdown measured right after
    it (at most ``cap``); its result. Fails after ``tries`` runs naming every measurement.
    A real regression (a run 3x slower than the budget) fails all tries; a burst of load that
    passes within one run does not."""
    seen = []
    for _ in range(tries):
        t0 = time.monotonic()
        out = fn()
        took = time.monotonic() - t0
        factor = slowdown()
        bound = seconds * factor if cap is None else min(seconds * factor, cap)
        if took <= bound:
            return out
        seen.append(f"{took:.2f} s (bound {bound:.2f} s at slowdown {factor:.1f})")
    raise AssertionError(f"{what} took longer than {seconds:g} s x slowdown in {tries} tries: "
                         + "; ".join(seen))


def best_of(fn: Callable[[], object], k: int = 3) -> float:
    """The fastest of ``k`` runs of ``fn``, in seconds (the one least disturbed by load)."""
    best = float("inf")
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def growth(run: Callable[[int], object], n: int, k: int = 5, scale: int = 4) -> float:
    """time(run(scale·n)) / time(run(n)), each the best of ``k`` interleaved runs: ~scale for
    linear work, ~scale² for quadratic, whatever the machine's load. Pick ``n`` so that
    ``run(n)`` takes 20 ms or more: a shorter run fits in one scheduler slice, and one
    preemption then decides the ratio (a 2 ms run gave 9x for linear work next to two
    busy loops)."""
    small = large = float("inf")
    for _ in range(k):
        t0 = time.perf_counter()
        run(n)
        t1 = time.perf_counter()
        run(scale * n)
        t2 = time.perf_counter()
        small, large = min(small, t1 - t0), min(large, t2 - t1)
    return large / max(small, 1e-9)
