"""`ascend-doctor exporter --demo` through the real entry point, scraped by a real Prometheus."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import doctor_exe

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "ascend-doctor-rules.yml"


def _get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def exporter() -> Iterator[str]:
    """The exporter on the demo, port 0; yields its base URL once the first run is served."""
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen([doctor_exe(), "exporter", "--demo", "--listen", "127.0.0.1",
                             "--port", "0", "--interval", "600"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")),
                              daemon=True)
    reader.start()
    try:
        base = None
        deadline = time.monotonic() + 30
        while base is None and time.monotonic() < deadline and proc.poll() is None:
            for ln in list(lines):
                if m := re.search(r"listening on (http://127\.0\.0\.1:\d+)/metrics", ln):
                    base = m.group(1)
            time.sleep(0.1)
        assert base, f"exporter did not start: rc={proc.poll()} stderr={''.join(lines)[-2000:]}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            code, body = _get(base + "/metrics")
            if code == 200 and "ascend_doctor_check_status{" in body:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the exporter served no check status within 120 s")
        yield base
    finally:
        _stop(proc)


def test_cli_serves_metrics_and_degraded_healthz(exporter: str) -> None:
    code, body = _get(exporter + "/metrics")
    assert code == 200
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    assert fams["ascend_doctor_up"].samples[0].value == 1.0
    temps = {s.labels["npu"]: s.value
             for s in fams["ascend_doctor_npu_temperature_celsius"].samples}
    assert temps["3"] == 86.0
    info = fams["ascend_doctor_info"].samples[0].labels
    assert info["context"] == "demo"
    code, text = _get(exporter + "/healthz")
    assert code == 503
    assert text.startswith("degraded: ") and "npu 3 chip 0: temperature 86 C > 85 C" in text
    assert _get(exporter + "/nope")[0] == 404


def test_cli_rejects_a_missing_bundle_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run([doctor_exe(), "exporter", "--bundle", str(tmp_path / "no.tar.gz"),
                          "--port", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "no.tar.gz does not exist" in out.stderr
    assert "Traceback" not in out.stderr


prometheus = shutil.which("prometheus")


@pytest.mark.skipif(prometheus is None, reason="prometheus not installed (apt-get install prometheus)")
def test_real_prometheus_scrapes_the_exporter_and_fires_an_alert(exporter: str,
                                                                 tmp_path: Path) -> None:
    # the shipped rules with every `for:` at 0 s, so that a firing alert shows in seconds
    rules = tmp_path / "rules.yml"
    rules.write_text(re.sub(r"for: \d+m", "for: 0s", RULES.read_text()))
    target = exporter.removeprefix("http://")
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: ascend-doctor
    static_configs:
      - targets: ['{target}']
""")
    port = _free_port()
    api = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([prometheus, f"--config.file={cfg}",
                             f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def query(q: str) -> list:
            code, body = _get(f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
            return json.loads(body)["data"]["result"] if code == 200 else []

        status: list = []
        firing: list = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = status or query('ascend_doctor_check_status{job="ascend-doctor"}')
                firing = firing or query(
                    'ALERTS{alertname="AscendNpuTemperatureHigh",alertstate="firing"}')
            except (urllib.error.URLError, ConnectionError, OSError):
                pass  # not listening yet
            if status and firing:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read()[-2000:] if proc.stderr else ""
        assert status, "no ascend_doctor_check_status scraped within 90 s"
        assert {s["metric"]["status"] for s in status} >= {"pass", "fail"}
        assert firing, "AscendNpuTemperatureHigh did not fire within 90 s"
        assert [a["metric"]["npu"] for a in firing] == ["3"]
    finally:
        _stop(proc)


def test_cli_names_the_address_when_the_port_is_taken() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run([doctor_exe(), "exporter", "--demo", "--port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert f"--listen 127.0.0.1 --port {port}: cannot listen: Address already in use" \
        in out.stderr
