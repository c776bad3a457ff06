"""Several vLLM servers on one host: each server's devices, each server's HTTP port."""

from __future__ import annotations

import dataclasses

from ascend_doctor.checks import config
from ascend_doctor.bundle import BundleHost, BundleWriter
from ascend_doctor.model import HostInfo, Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.procs import gather_service_processes
from ascend_doctor.probes.service import gather_servers_http, gather_service_http
from tests.unit.test_service_checks import procs, server


def test_servers_whose_environment_is_unreadable_are_not_every_npu_shared():
    """Two servers of another account (environ refused): which NPUs they use is unknown,
    which is not 'NPU 0..7 shared by 2 servers' (a false fail on a healthy host)."""
    hidden = [dataclasses.replace(server(p, ("--gpu-memory-utilization", "0.9")),
                                  env_error="permission denied") for p in (1, 2)]
    fs = list(config.gpu_memory(procs(*hidden), None, None))
    assert not [f for f in fs if f.status == Status.FAIL], [f.message for f in fs]
    (info,) = [f for f in fs if f.status == Status.INFO]
    assert "pid 1, pid 2" in info.message and "could not be read" in info.message


def _two_servers_bundle(dead_port: int = 8001) -> BundleHost:
    w = BundleWriter(HostInfo("h", "6.6", "aarch64", "EulerOS"))
    for pid, port in ((100, 8000), (200, dead_port)):
        w.process(pid, 1, ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
                           "--model", "/m", "--port", str(port)], environ={})
    w.http("http://127.0.0.1:8000/health", 200, b"")
    w.http("http://127.0.0.1:8000/version", 200, b'{"version": "0.23.0"}')
    w.http("http://127.0.0.1:8000/v1/models", 200, b'{"data": []}')
    w.http(f"http://127.0.0.1:{dead_port}/health", 503, b"")
    w.http(f"http://127.0.0.1:{dead_port}/version", 200, b'{"version": "0.23.0"}')
    w.http(f"http://127.0.0.1:{dead_port}/v1/models", 200, b'{"data": []}')
    return BundleHost(w.finish())


def test_each_server_is_asked_on_its_own_port_once():
    host = _two_servers_bundle()
    opts = RunOptions()
    sp = gather_service_processes(host, opts)
    http = gather_service_http(host, opts, sp)
    got = gather_servers_http(host, opts, sp, http)
    assert [(h.pid, h.base_url, h.health.status) for h in got.per_server] == [
        (100, "http://127.0.0.1:8000", 200), (200, "http://127.0.0.1:8001", 503)]
    same = _two_servers_bundle(dead_port=8000)  # two servers naming one URL: asked once
    sp2 = gather_service_processes(same, opts)
    got2 = gather_servers_http(same, opts, sp2, gather_service_http(same, opts, sp2))
    assert len(got2.per_server) == 1 and got2.not_probed == (200,)
