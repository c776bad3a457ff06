"""Huawei's npu-exporter read as it really is: its own endpoint (default port 8082), its
series and labels (``npu_chip_info_*`` by ``id``), its units (HBM in MB, utilization in %,
health 1/0), on the exporter's own output (tests/fixtures/npu_exporter/README.md), and the
doctor's NPU gauges meeting its series on ``id``."""

from __future__ import annotations

import http.server
import json
import re
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ascend_doctor.errors import ParseError
from ascend_doctor.host import LiveHost
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.npu_exporter import (NpuExporterMetrics, gather_npu_exporter,
                                               parse_npu_exporter)
from ascend_doctor.checks import service
from tests.conftest import run_cli

CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "npu_exporter"
           / "mind-cluster-testdata.prom").read_text()


def variant(values: dict[tuple[str, str], float], text: str = CAPTURE) -> str:
    """The capture with some values replaced: {(series suffix, id): value}; every other
    line, label and timestamp as the exporter wrote it."""
    out = []
    for line in text.splitlines():
        m = re.match(r'npu_chip_info_(\w+)\{.*\bid="(\d+)".*\} (\S+)( \d+)?$', line)
        if m and (m[1], m[2]) in values:
            line = line[:m.start(3)] + f"{values[(m[1], m[2])]:g}" + (m[4] or "")
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_capture_is_the_exporters_format():
    m = parse_npu_exporter(CAPTURE)
    assert [c.id for c in m.chips] == [str(i) for i in range(8)]
    assert m.npu_count == 8 and m.version == ""
    c = m.chips[0]
    assert c.model_name == "910Awn-Ascend-V1"
    assert (c.health, c.hbm_used_mb, c.hbm_total_mb, c.utilization_pct, c.temperature_c) == (
        1, 0, 0, 0, 0)
    # the same document through prometheus_client's parser: same names, same labels
    fams = {f.name: f for f in text_string_to_metric_families(CAPTURE)}
    assert {s.labels["id"] for s in fams["npu_chip_info_hbm_used_memory"].samples} == {
        c.id for c in m.chips}
    fs = list(service.npu_exporter(m))
    assert [f.status for f in fs] == [Status.PASS]


def test_hbm_is_read_in_megabytes():
    text = variant({("hbm_used_memory", "0"): 3416, ("hbm_total_memory", "0"): 65536,
                    ("hbm_used_memory", "2"): 62000, ("hbm_total_memory", "2"): 65536,
                    ("utilization", "0"): 98})
    m = parse_npu_exporter(text)
    assert m.chips[0].used_total_mb == (3416, 65536) and m.chips[0].utilization_pct == 98
    (f,) = list(service.npu_exporter(m))
    assert f.status is Status.WARN and f.subject == "NPU id 2"
    assert str(f.message) == ("NPU id 2: HBM 62000 MB used of 65536 MB (94.6 %, above the "
                              "alert line of 87.5 %)")
    assert f.evidence["used_mb"] == 62000


def test_hbm_without_a_total_uses_the_32_gb_line_in_mb():
    """31000 MB with no total series is above 28 GB (28672 MB): no longer read as bytes."""
    for used, status in ((31000, Status.WARN), (20000, Status.PASS)):
        text = "\n".join(ln for ln in variant({("hbm_used_memory", "1"): used}).splitlines()
                         if not ln.startswith("npu_chip_info_hbm_total_memory")) + "\n"
        fs = list(service.npu_exporter(parse_npu_exporter(text)))
        assert [f.status for f in fs] == [status], fs
        if status is Status.WARN:
            assert str(fs[0].message) == ("NPU id 1: HBM 31000 MB used and no total series: "
                                          "above the alert line of a 32 GB card (28672 MB)")


def test_health_and_temperature():
    m = parse_npu_exporter(variant({("health_status", "5"): 0, ("error_code", "5"): 80818,
                                    ("temperature", "3"): 86}))
    fs = list(service.npu_exporter(m))
    got = {(f.status, f.subject) for f in fs}
    assert got == {(Status.FAIL, "NPU id 5"), (Status.FAIL, "NPU 3")}
    unhealthy = next(f for f in fs if f.subject == "NPU id 5")
    assert "health 0" in str(unhealthy.message) and "80818" in str(unhealthy.message)
    hot = next(f for f in fs if f.subject == "NPU 3")
    assert hot.cause == "npu.hot:3"


def test_another_exporter_is_a_parse_error():
    vllm = ("# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{model_name="m"} 3\n')
    with pytest.raises(ParseError, match="not Huawei's npu-exporter"):
        parse_npu_exporter(vllm)
    with pytest.raises(ParseError):
        parse_npu_exporter("<html>nope</html>")


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802
        code = 200 if self.path == "/metrics" else 404
        self.send_response(code)
        self.send_header("content-type", "text/plain; version=0.0.4")
        self.send_header("content-length", str(len(self.body) if code == 200 else 0))
        self.end_headers()
        if code == 200:
            self.wfile.write(self.body)

    def log_message(self, *a):
        pass


@pytest.fixture
def exporter_url():
    handler = type("H", (_Handler,), {"body": variant({("temperature", "6"): 90}).encode()})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_gathered_from_its_own_endpoint(exporter_url):
    m = gather_npu_exporter(LiveHost("/"), RunOptions(npu_exporter_url=exporter_url))
    assert isinstance(m, NpuExporterMetrics) and m.url == exporter_url + "/metrics"
    assert m.url_given and [c.temperature_c for c in m.chips if c.id == "6"] == [90]


def test_check_through_the_cli_with_npu_exporter(exporter_url):
    r = run_cli("check", "--only", "service.npu-exporter", "--npu-exporter", exporter_url,
                "--json")
    assert r.returncode == 1, r.stderr
    (res,) = [c for c in json.loads(r.stdout)["checks"] if c["id"] == "service.npu-exporter"]
    assert [(f["status"], f["subject"]) for f in res["findings"]] == [("fail", "NPU 6")]


def test_a_named_exporter_that_does_not_answer_is_an_error():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    r = run_cli("check", "--only", "service.npu-exporter", "--npu-exporter",
                f"http://127.0.0.1:{port}", "--json")
    (res,) = [c for c in json.loads(r.stdout)["checks"] if c["id"] == "service.npu-exporter"]
    assert res["status"] == "error" and f"127.0.0.1:{port}/metrics" in res["findings"][0][
        "message"]


def test_demo_gauges_and_npu_exporter_meet_on_id():
    """The demo's npu-exporter capture and the doctor's own gauges (from npu-smi) agree per
    `id`: the label a dashboard joins on."""
    from ascend_doctor.cli import build_options, demo_host
    from ascend_doctor.cli_exporter import FAULT_SAMPLING_CHECKS, run_once
    from ascend_doctor.demo.parts.service import npu_exporter_text
    from ascend_doctor.exporter import exposition

    snap = run_once(demo_host, build_options({"service_url": None}), FAULT_SAMPLING_CHECKS,
                    None, "demo", 0.0)
    fams = {f.name: f for f in text_string_to_metric_families(exposition(snap).decode())}
    ours = {s.labels["id"]: s.value for s in fams["ascend_doctor_npu_temperature_celsius"].samples}
    used = {s.labels["id"]: s.value for s in fams["ascend_doctor_npu_hbm_used_bytes"].samples}
    theirs = parse_npu_exporter(npu_exporter_text()).chips
    assert ours == {c.id: c.temperature_c for c in theirs}
    assert used == {c.id: c.hbm_used_mb * 2**20 for c in theirs}  # MB -> bytes, as recorded


def test_a3_gauges_take_the_phy_id():
    """On a two-chip-per-NPU A3 board `id` is npu-smi's Phy-ID (0..15), not the NPU index."""
    from ascend_doctor.exporter import Snapshot
    from ascend_doctor.probes.npusmi import parse_npu_smi_info

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "npusmi"
            / "info-a3-ascend910.txt").read_text()
    info = parse_npu_smi_info(text)
    snap = Snapshot(None, type("S", (), {"info": info})(), 0.0, None)
    from ascend_doctor.exporter import exposition
    fams = {f.name: f for f in text_string_to_metric_families(exposition(snap).decode())}
    rows = {(s.labels["npu"], s.labels["chip"], s.labels["id"])
            for s in fams["ascend_doctor_npu_healthy"].samples}
    assert rows == {(str(c.npu), str(c.chip), str(c.phy_id)) for c in info.chips}
    assert all(c.phy_id is not None for c in info.chips)
    assert len({r[2] for r in rows}) == len(rows) == len(info.chips)  # one id per die
