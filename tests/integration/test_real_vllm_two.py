"""Two real vLLM servers on one host at once (issue 18): discovery, every check per server,
latency percentiles from the real histograms under bounded load, stats disabled, the TUI's
live panel.

Server A serves the tiny model on a small KV cache (``--num-gpu-blocks-override 48``, so a
bounded load preempts); server B serves the same model with ``--disable-log-stats`` (on 0.32
that exports no vllm: family at all, not even HELP/TYPE lines: measured). Both are
module-scoped (two starts for every test here) and stopped at the end of the module.
With ``REALVLLM_SAVE_CORPUS=1`` the tests also write what the real servers answered into
tests/corpus/realvllm/ (how the saved fixtures there were captured).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from ascend_doctor.probes.service import histogram_quantile, parse_metrics
from tests import realvllm
from tests.artifacts import ArtifactError
from tests.integration.test_real_vllm import _doc, _findings, _get, _load

pytestmark = pytest.mark.realvllm
REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus" / "realvllm"
SAVE = os.environ.get("REALVLLM_SAVE_CORPUS") == "1"


def _save(name: str, data: bytes | str) -> None:
    """Keep a real answer as a corpus fixture (only when asked: tests never write the repo)."""
    if SAVE:
        (CORPUS / name).write_bytes(data.encode() if isinstance(data, str) else data)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """(A, B): started together (the start-up cost overlaps), both ready, both stopped."""
    try:
        python = realvllm.build_venv()
        model = realvllm.tiny_model(python)
    except (realvllm.RealVllmError, ArtifactError) as exc:
        pytest.fail(str(exc))
    d = tmp_path_factory.mktemp("two")
    pa, pb = realvllm.free_port(), realvllm.free_port()
    a = realvllm.launch(realvllm.server_argv(python, model, pa, "--num-gpu-blocks-override", "48"),
                        d / "a.log", realvllm.server_env(), pa)
    b = realvllm.launch(realvllm.server_argv(python, model, pb, "--disable-log-stats"),
                        d / "b.log", realvllm.server_env(), pb)
    try:
        for srv in (a, b):
            try:
                realvllm.wait_ready(srv)
            except realvllm.RealVllmError as exc:
                pytest.fail(str(exc))
        yield a, b
    finally:
        a.stop()
        b.stop()


def _by_subject(fs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in fs:
        out.setdefault(f.get("subject") or "", []).append(f)
    return out


def test_both_servers_are_found_and_each_check_names_each(cli, two):
    a, b = two
    doc = _doc(cli, a, "--only", "service.health,service.version,service.metrics,config.launch",
               pin=False)
    launch = {f["subject"] for f in _findings(doc, "config.launch")}
    assert {f"pid {a.pid}", f"pid {b.pid}"} <= launch, launch
    subj = {srv.port: f"pid {srv.pid} at {srv.url}" for srv in (a, b)}
    health = _by_subject(_findings(doc, "service.health"))
    for srv in (a, b):
        got = health.get(subj[srv.port])
        assert got and got[0]["status"] == "pass" and "answered 200" in got[0]["message"], health
    version = _by_subject(_findings(doc, "service.version"))
    for srv in (a, b):  # every discovered server is asked, not only the primary
        got = version.get(subj[srv.port])
        assert got and "vLLM 0.32.0" in got[0]["message"], version
        assert got[0]["evidence"]["url"] == srv.url and got[0]["evidence"]["pid"] == srv.pid
    metrics = _by_subject(_findings(doc, "service.metrics"))
    ma, mb = metrics.get(subj[a.port]), metrics.get(subj[b.port])
    assert ma and any(f["message"].startswith("KV cache ") for f in ma), metrics
    assert ma[-1]["evidence"]["kv_metric"] == "vllm:kv_cache_usage_perc"
    # B (--disable-log-stats) on vLLM 0.32 registers no vllm: family at all (measured: no
    # HELP/TYPE line either), only the HTTP and process series: the stats-off warning
    assert mb and mb[0]["status"] == "warn" and mb[0]["kb"] == ["ASC-SVC-005"], mb
    assert "--disable-log-stats" in mb[0]["message"] and mb[0]["fix"]["id"] == \
        "service.launch-flags", mb
    assert mb[0]["evidence"]["series"] and not [
        n for n in mb[0]["evidence"]["series"] if n.startswith("vllm:")], mb


def test_stats_disabled_metrics_and_version_bodies_are_real_formats(two):
    a, b = two
    text = _get(b.url + "/metrics").decode()
    assert "vllm:" not in text  # 0.32: neither samples nor HELP/TYPE of vLLM's own series
    snap = parse_metrics(text)  # still Prometheus text: the HTTP and process series
    assert any(s.name.startswith("http_request") for s in snap.samples)
    version = _get(a.url + "/version")
    assert json.loads(version) == {"version": "0.32.0"}
    _save("metrics-disable-log-stats.txt", text)
    _save("version.json", version)
    tree = [f"{a.pid} {' '.join(a.argv[1:3])}"] + [f"{pid} {t}" for pid, t in a.children()]
    assert any(t.endswith("VLLM::EngineCore") for t in tree), tree
    _save("process-tree.txt", "\n".join(tree) + "\n")


def _p99_bucket_bounds(buckets: dict[float, float]) -> tuple[float, float]:
    """The (lower, upper] bucket the 99th percentile observation falls in."""
    bs = sorted(buckets.items())
    rank = 0.99 * bs[-1][1]
    lower = 0.0
    for le, c in bs:
        if c >= rank:
            return lower, le
        lower = le
    return lower, math.inf


def _rounds(srv, statuses: list[int], seen: threading.Event, rounds: int, n: int
            ) -> threading.Thread:
    """A thread (not started) that loads ``srv`` in bounded rounds of ``n`` requests, 8 at a
    time, until ``seen`` is set; every status goes to ``statuses``."""
    def run() -> None:
        for _ in range(rounds):
            statuses.extend(_load(srv, n=n, threads=8, max_tokens=128))
            if seen.is_set():
                return
    return threading.Thread(target=run)


def test_load_p99_from_the_real_histograms_kv_usage_and_preemptions(cli, two):
    a, _ = two
    statuses: list[int] = []
    seen = threading.Event()  # the check saw the server busy: no further rounds

    # rounds of 32 requests until the check has seen the load (at most 4: on a loaded
    # machine one round can finish between two of the check's scrapes)
    t = _rounds(a, statuses, seen, rounds=4, n=32)
    t.start()
    try:
        busy = []
        for _ in range(40):  # while the load runs: KV usage above 0, requests running
            m = _findings(_doc(cli, a, "--only", "service.metrics"), "service.metrics")
            ev = next(f["evidence"] for f in m if "kv_cache_usage" in f["evidence"])
            busy.append(ev)
            if ev["kv_cache_usage"] and ev["kv_cache_usage"] > 0 and ev["running"]:
                seen.set()
                break
            if not t.is_alive():
                break
    finally:
        seen.set()
        t.join(900)
    assert statuses and len(statuses) % 32 == 0 and statuses.count(200) == len(statuses), statuses
    assert any(e["kv_cache_usage"] and e["kv_cache_usage"] > 0 and e["running"] for e in busy), busy
    # idle now: the check's P99 is over the server's lifetime, from the same histograms
    before = _get(a.url + "/metrics").decode()
    fs = _findings(_doc(cli, a, "--only", "service.metrics"), "service.metrics")
    after = _get(a.url + "/metrics").decode()
    _save("metrics-after-load.txt", after)
    for base, label in (("vllm:time_to_first_token_seconds", "TTFT"),
                        ("vllm:e2e_request_latency_seconds", "e2e latency")):
        snap_b, snap_a = parse_metrics(before), parse_metrics(after)
        assert snap_b.buckets(base) == snap_a.buckets(base)  # nothing finished in between
        buckets = snap_a.buckets(base)
        f = next(f for f in fs if f["message"].startswith(label + " P99"))
        q = f["evidence"]["p99_s"]
        assert math.isfinite(q) and q > 0, f
        lo, hi = _p99_bucket_bounds(buckets)
        assert lo <= q <= hi, (q, lo, hi, f)
        assert q == round(histogram_quantile(0.99, buckets), 4), f
        assert f["evidence"]["observations"] == max(buckets.values()) >= 32, f
        assert "since the server started" in f["evidence"]["window"], f
    preempted = parse_metrics(after).value("vllm:num_preemptions_total")
    ev = next(f["evidence"] for f in fs if "preemptions" in f["evidence"])
    assert ev["preemptions"][-1] == preempted, (ev, preempted)  # counted, whatever the count


def test_tui_live_panel_shows_the_real_servers_load(two):
    """The live panel (doctor/tui/livefeed.py through the app's poll) on server A under load:
    it draws the real running requests and KV usage."""
    import ascend_doctor.tui.app as appmod
    from ascend_doctor.options import RunOptions
    from ascend_doctor.tui.app import DoctorApp
    from tests.tui.conftest import subset_registry, wait_for

    a, _ = two
    statuses: list[int] = []
    polls: list[tuple[float, float | None, float | None, list[str]]] = []  # t, running, kv, errors
    seen = threading.Event()
    real_poll = appmod.poll_live

    def recording_poll(*args, **kwargs):
        """What each poll read, errors included (the app keeps only the last one's)."""
        p = real_poll(*args, **kwargs)
        m = p.metrics[0] if p.metrics else None
        polls.append((round(time.monotonic() - t0, 2), m and m.running, m and m.kv_usage,
                      p.errors))
        if m is not None and (m.running or 0) > 0 and (m.kv_usage or 0) > 0:
            seen.set()
        return p

    # rounds of 16 until a poll has seen the server busy (at most 40): on a loaded 2-core box
    # the API process can answer /metrics only after a whole round has finished (CI once ran
    # 3 rounds inside one 3 s gap between two polls), so a fixed few rounds can be missed
    load = _rounds(a, statuses, seen, rounds=40, n=16)
    t0 = time.monotonic()

    async def run(root: Path) -> tuple[list[float], list[float]]:
        app = DoctorApp(root=str(root), options=RunOptions(service_url=a.url),
                        registry=subset_registry("ldconf.order"))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.series.samples >= 1, timeout=30)
            first = len(polls)  # the polls from the load's start, for the message below
            load.start()
            try:
                await wait_for(pilot, lambda: any(r > 0 for r in app.series.running)
                               and any(k > 0 for k in app.series.kv), timeout=240)
            except AssertionError as exc:  # say what the panel saw, not only that it timed out
                seen.set()  # stop the load after its current round
                raise AssertionError(
                    f"{exc}: {app.series.samples} samples, running {list(app.series.running)}, "
                    f"kv {list(app.series.kv)}, polls from the load's start (t, running, kv, errors) "
                    f"{polls[first:first + 60]}, "
                    f"load {'running' if load.is_alive() else 'done'}, statuses {statuses}"
                ) from None
            await pilot.pause(0.5)  # one more refresh draws what the series holds
            from textual.widgets import Sparkline

            drawn = list(app.screen.query_one("#live-kv").query_one(Sparkline).data)
            assert drawn and max(drawn) > 0, drawn  # the panel draws it, not only the series
            return list(app.series.running), list(app.series.kv)

    old = appmod.LIVE_INTERVAL
    appmod.LIVE_INTERVAL = 0.3
    appmod.poll_live = recording_poll
    try:
        with tempfile.TemporaryDirectory() as tmp:  # an empty sysroot: only the panel matters
            running, kv = asyncio.run(run(Path(tmp)))
    finally:
        appmod.LIVE_INTERVAL = old
        appmod.poll_live = real_poll
        if load.ident is not None:
            load.join(900)
    assert max(running) > 0 and max(kv) > 0, (running, kv)
    assert all(0 <= k <= 100 for k in kv), kv  # percent, from vllm:kv_cache_usage_perc
    assert statuses and statuses.count(200) == len(statuses), statuses
