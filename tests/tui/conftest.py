"""TUI test helpers: fixed check subsets, a bundle with recorded /metrics, waiting helpers."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Callable

import pytest

from ascend_doctor.bundle import BundleWriter
from ascend_doctor.model import HostInfo
from tests.fixtures.npusmi import a2_table

@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run ``async def`` tests here with asyncio.run (no async plugin is needed)."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {a: pyfuncitem.funcargs[a] for a in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


SNAPSHOT_CHECKS = ("ldconf.order", "versions.pins")  # exist since the core; stable content
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
LABELS = 'engine="0",model_name="deepseek-ai/DeepSeek-V3"'


def subset_registry(*ids: str, extra=()):
    """The built-in registry reduced to ``ids`` (plus extra CheckSpecs), plugins off."""
    from ascend_doctor.registry import Registry

    reg = Registry.discover(plugins=False)
    reg.checks = {k: v for k, v in reg.checks.items() if k in ids}
    for spec in extra:
        reg.add_check(spec)
    return reg


def metrics_text(running: int, waiting: int, kv: float, preempt: int,
                 finished: list[tuple[float, int]]) -> str:
    """vLLM V1 /metrics as prometheus_client renders it (names from facts/vllm-internals.md)."""
    counts = []
    for le in E2E_BUCKETS:
        total = sum(n for lat, n in finished if lat <= le)
        counts.append((le, total))
    n_all = sum(n for _, n in finished)
    s_all = sum(lat * n for lat, n in finished)
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{LABELS}}} {running:.1f}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{LABELS}}} {waiting:.1f}",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{LABELS}}} {kv}",
        "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{LABELS}}} {preempt:.1f}",
        "# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.",
        "# TYPE vllm:e2e_request_latency_seconds histogram",
    ]
    for le, c in counts:
        lines.append(f'vllm:e2e_request_latency_seconds_bucket{{engine="0",le="{le}",'
                     f'model_name="deepseek-ai/DeepSeek-V3"}} {c:.1f}')
    lines += [f'vllm:e2e_request_latency_seconds_bucket{{engine="0",le="+Inf",'
              f'model_name="deepseek-ai/DeepSeek-V3"}} {n_all:.1f}',
              f"vllm:e2e_request_latency_seconds_count{{{LABELS}}} {n_all:.1f}",
              f"vllm:e2e_request_latency_seconds_sum{{{LABELS}}} {s_all}"]
    return "\n".join(lines) + "\n"


def npu_smi_text(temps: list[int], hbm_used: list[int]) -> str:
    """`npu-smi info` of an A2 (910B) host with one vLLM worker (the captured layout)."""
    return a2_table(temps, hbm_used, [(124528, "VLLMWorker_TP0", 58200)])


LIVE_SAMPLES = [
    (3, 0, 0.42, 0, [(0.8, 10), (2.0, 5)]),
    (8, 4, 0.71, 0, [(0.8, 20), (2.0, 12), (5.0, 2)]),
    (12, 18, 0.93, 5, [(0.8, 25), (2.0, 20), (5.0, 8), (15.0, 3)]),
    (12, 30, 0.98, 14, [(0.8, 26), (2.0, 24), (5.0, 15), (15.0, 9), (40.0, 2)]),
]


@pytest.fixture
def live_bundle(tmp_path):
    """A bundle whose /metrics and `npu-smi info` were recorded four times."""
    w = BundleWriter(HostInfo("atlas-live-01", "5.15.0-105-generic", "x86_64",
                              "Ubuntu 22.04.4 LTS"), context="bundle")
    for run_, wait, kv, pre, fin in LIVE_SAMPLES:
        w.http("http://127.0.0.1:8000/metrics", 200, metrics_text(run_, wait, kv, pre, fin),
               headers={"content-type": "text/plain; version=0.0.4"})
    temps = [[45, 46, 47, 48, 49, 50, 51, 52], [48, 49, 50, 71, 52, 53, 54, 55]]
    for t in temps:
        w.command(["npu-smi", "info"], npu_smi_text(t, [61000] * 7 + [3373]))
    path = tmp_path / "live.tar.gz"
    w.finish().write(str(path))
    return path


async def wait_for(pilot, cond: Callable[[], bool], timeout: float = 10.0) -> float:
    """Pause until ``cond()`` holds; returns the seconds it took (fails on timeout)."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        await pilot.pause(0.02)
    return time.monotonic() - t0


def run_before_complete(extra=None):
    """A snap_compare run_before: wait for the run (and the live replay) to finish."""
    async def _run(pilot) -> None:
        await wait_for(pilot, lambda: pilot.app.run_complete)
        await pilot.pause(0.2)
        if extra is not None:
            await extra(pilot)
        await pilot.pause(0.2)
    return _run


@pytest.fixture
def no_fixes(monkeypatch):
    """fixes/ absent from the build, as an import of it fails then (None in sys.modules)."""
    import sys

    for name in ("ascend_doctor.fixes", "ascend_doctor.fixes.apply", "ascend_doctor.fixes.context"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture
def fix_state(tmp_path, monkeypatch):
    """The fix journal in a tmp state dir (fixes/journal.py reads XDG_STATE_HOME)."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@pytest.fixture
def demo_root(tmp_path):
    """The demo scenario materialised as a sysroot directory (what `export-root` writes)."""
    from ascend_doctor.demo import demo_bundle_data
    from ascend_doctor.fixes.export import export_root

    root = tmp_path / "demo-root"
    export_root(demo_bundle_data(), str(root))
    return root

