"""A real stand-in vLLM server on 127.0.0.1 (random port), discovered through psutil, probed
over HTTP, and checked end to end through the real console script."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from ascend_doctor.host import LiveHost
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.procs import gather_service_processes
from ascend_doctor.probes.service import gather_http
from tests.timing import budget

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_vllm_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"fake server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("fake server did not listen in time")


@contextmanager
def fake_vllm(tmp_path: Path, mode: str = "ok", extra: tuple[str, ...] = (), env=None):
    """Run the stand-in as <tmp>/vllm/entrypoints/openai/api_server.py; always killed."""
    script = tmp_path / "vllm" / "entrypoints" / "openai" / "api_server.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURE, script)
    port = free_port()
    log = tmp_path / f"server-{mode}.log"
    argv = [sys.executable, str(script), "--model", "/models/Qwen3-8B", "--served-model-name",
            "qwen3-8b", "--block-size", "16", "--max-num-batched-tokens", "32768",
            "--gpu-memory-utilization", "0.97", "--port", str(port), *extra]
    e = {**os.environ, "FAKE_MODE": mode, "HF_TOKEN": "hf_shouldNeverAppear123456",
         **(env or {})}
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=fh, env=e, cwd=tmp_path)
    try:
        wait_port(port, proc)
        yield proc, port, log
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_discovery_through_psutil_parses_args_and_port(tmp_path):
    with fake_vllm(tmp_path, extra=("--config", "cfg.yaml", "--no-enable-prefix-caching"),
               env={}) as (proc, port, _log):
        (tmp_path / "cfg.yaml").write_text("# vllm serve config\nmax_num_seqs: 64\nblock_size: 32\n")
        host = LiveHost("/")
        found = gather_service_processes(host, RunOptions(pid=proc.pid))
        sp = found.primary
        assert found.pinned and sp.pid == proc.pid
        assert sp.args["block-size"] == "16"  # the command line wins over the file
        assert sp.args["max-num-seqs"] == "64" and sp.config_error is None
        assert sp.args["max-num-batched-tokens"] == "32768"
        assert sp.args["enable-prefix-caching"] is False
        assert port in sp.listen_ports
        assert "python" in sp.interpreter
        # without --pid the server is found by its cmdline too
        unpinned = gather_service_processes(host, RunOptions())
        assert proc.pid in [s.pid for s in unpinned.servers]


def test_http_probe_scrapes_twice_and_reads_vllm_series(tmp_path):
    with fake_vllm(tmp_path) as (_proc, port, _log):
        http = gather_http(LiveHost("/"), f"http://127.0.0.1:{port}", True, None, interval=0.2)
    assert http.health.status == 200 and http.version() == "0.23.0"
    assert len(http.scrapes) == 2 and http.interval_s >= 0.2
    a = http.scrapes[0].value("vllm:num_preemptions_total")
    b = http.scrapes[1].value("vllm:num_preemptions_total")
    assert b > a
    assert http.scrapes[1].named("vllm:cache_config_info")[0].labels["block_size"] == "16"


def test_api_key_is_sent_only_as_bearer(tmp_path):
    with fake_vllm(tmp_path, extra=("--api-key", "sk-test-123456789")) as (_p, port, _l):
        base = f"http://127.0.0.1:{port}"
        without = gather_http(LiveHost("/"), base, True, None, interval=0.05)
        with_key = gather_http(LiveHost("/"), base, True, "sk-test-123456789", interval=0.05)
    assert without.endpoints["/v1/models"].status == 401
    assert with_key.endpoints["/v1/models"].status == 200
    assert "sk-test" not in repr(with_key)


@pytest.mark.parametrize("mode,reason", [("drop", "mid-body"), ("trunc", "Prometheus"),
                                         ("nostats", None)])
def test_bad_metrics_bodies(tmp_path, mode, reason):
    with fake_vllm(tmp_path, mode) as (_p, port, _l):
        http = gather_http(LiveHost("/"), f"http://127.0.0.1:{port}", True, None, interval=0.05)
    if reason:
        assert not http.scrapes and reason in (http.metrics_error or "")
    else:
        assert http.scrapes and not http.vllm_series


def _check(cli, *args: str) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = cli("check", "--json", "--sample-seconds", "1", *args, timeout=90)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout), time.monotonic() - t0


def _findings(doc: dict, check_id: str) -> list[dict]:
    return next(c["findings"] for c in doc["checks"] if c["id"] == check_id)


def test_cli_end_to_end_reports_config_metrics_and_faults(cli, tmp_path):
    lines = ("ERROR 11-20 03:06:09 [core.py:711] RuntimeError: NPU out of memory. Tried to "
             "allocate 3.47 GiB (NPU 0; 60.97 GiB total capacity)\n"
             "[rank0]: Watchdog caught collective operation timeout: WorkHCCL(SeqNum=9, "
             "OpType=ALLREDUCE, Timeout(ms)=3600000)\n")
    with fake_vllm(tmp_path, env={"FAKE_FAULTS": "1", "FAKE_LOG_LINES": lines}) as (proc, port, log):
        time.sleep(0.3)
        doc, _ = _check(cli, "--service", f"http://127.0.0.1:{port}", "--pid", str(proc.pid),
                        "--only", "config,service,tlb,logs")
    text = json.dumps(doc)
    assert "hf_shouldNeverAppear" not in text
    bt = _findings(doc, "config.batched-tokens")[0]
    assert bt["status"] == "warn" and bt["fix"]["id"] == "service.launch-flags"
    assert bt["fix"]["params"]["set"] == [["--max-num-batched-tokens", "8192"]]
    bs = _findings(doc, "config.block-size")
    assert any(f["status"] == "warn" and "ASC-CFG-001" in f["kb"] for f in bs)
    assert _findings(doc, "config.gpu-memory")[0]["status"] == "warn"
    m = _findings(doc, "service.metrics")
    assert any("KV cache 97 %" in f["message"] and f["status"] == "fail" for f in m)
    assert any("140 requests waiting" in f["message"] for f in m)
    assert any(f["message"].startswith("TTFT P99") for f in m)
    tlb = _findings(doc, "tlb.faults")[0]
    assert tlb["evidence"]["minor_per_s"] > 0 and tlb["evidence"]["seconds"] > 0.5
    assert str(proc.pid) in tlb["message"]
    logs = _findings(doc, "logs.signatures")
    kbs = {k for f in logs for k in f["kb"]}
    assert {"ASC-LOG-004", "ASC-LOG-003"} <= kbs, logs
    oom = next(f for f in logs if "ASC-LOG-004" in f["kb"])
    assert oom["evidence"]["path"] == str(log) and oom["evidence"]["lines"][0]["line"] >= 1


@pytest.mark.parametrize("mode,kb", [("down", "ASC-SVC-001"), ("dead", "ASC-SVC-002"),
                                     ("slow", "ASC-SVC-003"), ("garbage", "ASC-SVC-004")])
def test_cli_named_finding_for_each_failure_within_timeout(cli, tmp_path, mode, kb):
    """Each failure named within 15 s x the load (the slow server sleeps 30 s: capped below).
    The run names its process (--pid): unnamed, it took another session's vLLM on this
    machine and sampled and read that one (8 s more, and a failure under load)."""
    def once() -> tuple[dict, float]:
        if mode == "down":  # a process whose port answers nothing
            idle = subprocess.Popen(["sleep", "120"])
            try:
                return _check(cli, "--service", f"http://127.0.0.1:{free_port()}",
                              "--pid", str(idle.pid), "--only", "service")
            finally:
                idle.kill()
                idle.wait()
        with fake_vllm(tmp_path, mode) as (p, port, _l):
            return _check(cli, "--service", f"http://127.0.0.1:{port}", "--pid", str(p.pid),
                          "--only", "service")

    took = []
    for _ in range(3):  # a burst of load passes; a run that waits for the server never does
        doc, t = once()
        h = _findings(doc, "service.health")[0]
        assert h["status"] == "fail" and kb in h["kb"], h
        took.append(round(t, 1))
        if t < budget(15, cap=28):
            break
    else:
        raise AssertionError(f"took {took} s")


@pytest.mark.parametrize("leak,status", [("1", "fail"), ("0", "pass")])
def test_leak_watch_through_exporter_metrics(cli, tmp_path, leak, status):
    """Without npu-smi the trend comes from npu-exporter's own endpoint (--npu-exporter; the
    fake serves its HBM series in MB), the running count from vLLM's /metrics."""
    with fake_vllm(tmp_path, env={"FAKE_LEAK": leak, "FAKE_RUNNING": "0"}) as (p, port, _l):
        doc, took = _check(cli, "--service", f"http://127.0.0.1:{port}", "--pid", str(p.pid),
                           "--only", "leak",
                           "--watch", "2", "--npu-exporter", f"http://127.0.0.1:{port}")
    f = _findings(doc, "leak.npu-memory")[0]
    assert f["status"] == status, f
    assert f["evidence"]["source"] == f"http://127.0.0.1:{port}/metrics (npu-exporter)"
    assert f["evidence"]["samples"] >= 3
    assert took < budget(20)


def test_collected_bundle_replays_the_same_service_findings(cli, tmp_path):
    out = tmp_path / "svc.tar.gz"
    with fake_vllm(tmp_path, env={"FAKE_FAULTS": "1"}) as (proc, port, _l):
        r = cli("collect", "-o", str(out), "--service", f"http://127.0.0.1:{port}", "--pid",
                str(proc.pid), "--sample-seconds", "1", "--only", "tlb.faults,service.metrics,"
                "config.block-size", timeout=90)
        assert r.returncode == 0, r.stderr
    doc, took = _check(cli, "--bundle", str(out), "--only", "tlb.faults,service.metrics,"
                       "config.block-size")
    assert took < budget(10)
    tlb = _findings(doc, "tlb.faults")[0]
    # the recorded clock replays: the 1 s sample, longer when the collecting run was slowed
    assert tlb["evidence"]["minor_per_s"] > 0 and 0.9 < tlb["evidence"]["seconds"] < 1 + budget(0.5)
    assert any("KV cache 97 %" in f["message"] for f in _findings(doc, "service.metrics"))
    assert _findings(doc, "config.block-size")[0]["evidence"]["effective"] == 16


def test_bundle_collected_with_service_and_pid_replays_with_them(cli, tmp_path):
    """Issue 13.4: `check --bundle` asks the recorded answers the collection's questions."""
    with fake_vllm(tmp_path) as (proc, port, _log):
        b = tmp_path / "svc.tar.gz"
        r = cli("collect", "-o", str(b), "--service", f"http://127.0.0.1:{port}",
                "--pid", str(proc.pid), "--sample-seconds", "0.2",
                "--only", "service,config", timeout=300)
        assert r.returncode == 0, r.stderr
    with tarfile.open(b) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest["options"]["pid"] == proc.pid
    replay = cli("check", "--bundle", str(b), "--json", "--only", "service,config", timeout=300)
    assert replay.returncode in (0, 1), replay.stderr
    assert "replaying the bundle's collection options" in replay.stderr
    got = [{"id": c["id"], "status": c["status"],
            "findings": [[f["status"], f["message"]] for f in c["findings"]]}
           for c in json.loads(replay.stdout)["checks"]]
    assert got == manifest["checks_at_collection"]
    assert any(c["id"] == "service.health" and c["status"] == "pass" for c in got)
    # an explicit flag still wins: another pid is "no such process" in the bundle
    other = cli("check", "--bundle", str(b), "--json", "--only", "config", "--pid", "1",
                timeout=300)
    doc = json.loads(other.stdout)
    assert any("pid 1" in f["message"] for c in doc["checks"] for f in c["findings"])
