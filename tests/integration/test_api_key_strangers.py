"""Issue 34, MEDIUM: the operator's API key goes only where the user sent it. A process of
another account (`nobody`) with vLLM-like argv, found by discovery, records every header it
is sent: it must never see the key. The key still reaches a server the user names with
--service, and a discovered server that already holds that very key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration.test_live_service import fake_vllm, free_port, wait_port

NOBODY = 65534
KEY = "sk-operator-9f8e7d6c5b4a"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plants a nobody listener: needs root")

PLANTED = r'''import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
log = sys.argv[sys.argv.index("--log-headers") + 1]
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as fh:
            fh.write(json.dumps({"path": self.path, "headers": dict(self.headers)}) + "\n")
        body = b'{"version": "0.23.0"}' if self.path == "/version" else b"{}"
        self.send_response(401 if self.path.startswith("/v1/") else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


@pytest.fixture
def planted():
    """A `nobody` listener whose argv reads like vLLM's API server; yields (pid, port, log)."""
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3")
                   if os.access(p, os.X_OK)), None)
    if python is None:
        pytest.skip("no system python3 for the nobody listener")
    base = Path(tempfile.mkdtemp(prefix="ad-planted-", dir="/tmp"))
    base.chmod(0o755)
    script = base / "vllm" / "entrypoints" / "openai" / "api_server.py"
    script.parent.mkdir(parents=True)
    script.write_text(PLANTED)
    for p in (base / "vllm", base / "vllm/entrypoints", script.parent):
        p.chmod(0o755)
    script.chmod(0o644)
    log = base / "headers.jsonl"
    log.touch()
    os.chown(log, NOBODY, NOBODY)
    port = free_port()
    proc = subprocess.Popen([python, str(script), "--port", str(port), "--log-headers", str(log)],
                            user=NOBODY, group=NOBODY, extra_groups=[], cwd="/",
                            env={"PATH": "/usr/bin:/bin"}, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        yield proc.pid, port, log
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)


def _requests(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines() if x.strip()]


def test_a_discovered_stranger_never_receives_the_key(cli, planted):
    pid, port, log = planted
    r = cli("check", "--pid", str(pid), "--only", "service", "--json",
            env={"VLLM_API_KEY": KEY}, timeout=90)
    assert r.returncode in (0, 1), r.stderr
    reqs = _requests(log)
    assert any(q["path"] == "/v1/models" for q in reqs), reqs  # it was asked, without the key
    assert not any(KEY in json.dumps(q) for q in reqs), reqs
    assert "the key was not sent" in r.stdout and f"pid {pid}" in r.stdout
    assert KEY not in r.stdout


def test_the_key_goes_to_a_service_the_user_names(cli, planted):
    _pid, port, log = planted
    r = cli("check", "--service", f"http://127.0.0.1:{port}", "--only", "service", "--json",
            env={"VLLM_API_KEY": KEY}, timeout=90)
    assert r.returncode in (0, 1), r.stderr
    models = [q for q in _requests(log) if q["path"] == "/v1/models"]
    # (other doctors on the machine may discover and ask the listener too, without a key)
    assert any(q["headers"].get("Authorization") == f"Bearer {KEY}" for q in models), models


def test_a_discovered_server_holding_the_key_gets_it(cli, tmp_path):
    with fake_vllm(tmp_path, extra=("--api-key", KEY)) as (proc, _port, _log):
        r = cli("check", "--pid", str(proc.pid), "--only", "service", "--json",
                env={"VLLM_API_KEY": KEY}, timeout=90)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    msgs = [f["message"] for c in doc["checks"] for f in c["findings"]]
    assert any(m.startswith("serves ") for m in msgs), msgs
    assert KEY not in r.stdout


# -- redaction gaps: the --service URL's credentials, pre-signed URLs ----------------------
def _members(path: Path) -> dict[str, bytes]:
    import tarfile

    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_service_url_credentials_never_reach_manifest_or_index(cli, tmp_path):
    with fake_vllm(tmp_path) as (_proc, port, _log):
        url = f"http://admin:hunter2pw@127.0.0.1:{port}/?token=tok123secretvalue"
        bundle = tmp_path / "b.tar.gz"
        r = cli("collect", "--service", url, "--only", "service.health", "-o", str(bundle),
                timeout=90)
        assert bundle.exists(), r.stderr
    files = _members(bundle)
    for name, data in files.items():
        assert b"hunter2pw" not in data and b"tok123secretvalue" not in data, name
    index = json.loads(files["index.json"])
    assert index["http"] and all("<redacted>" in k for k in index["http"]), index["http"]
    # the bundle still replays what the service answered at collection (keys redacted the
    # same way on both sides)
    manifest = json.loads(files["manifest.json"])
    r = cli("check", "--bundle", str(bundle), "--only", "service.health", "--json")
    doc = json.loads(r.stdout)
    msgs = [f["message"] for c in doc["checks"] for f in c["findings"]]
    at = [m for c in manifest["checks_at_collection"] for _s, m in c["findings"]]
    assert msgs == at and not any("not recorded" in m for m in msgs), (msgs, at)


OBS_URL = ("https://bucket.obs.cn-north-4.myhuaweicloud.com/ckpt/model.safetensors?"
           "AccessKeyId=HPUAXXXXXXXXXXXX&Expires=1765000000&Signature=Zm9vYmFyc2lnbmF0dXJl%2B%3D")


def test_presigned_url_signature_is_redacted_in_log_blobs_and_triage(cli, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("INFO 12-06 10:00:00 loader.py:12] downloading " + OBS_URL + "\n"
                   "ERROR 12-06 10:00:01 loader.py:40] 403 Forbidden for " + OBS_URL + "\n")
    bundle = tmp_path / "b.tar.gz"
    r = cli("collect", "--log", str(log), "--only", "logs", "-o", str(bundle))
    assert bundle.exists(), r.stderr
    files = _members(bundle)
    assert any(b"Expires=1765000000" in d for d in files.values())  # the log was collected
    assert not any(b"Zm9vYmFyc2lnbmF0dXJl" in d for d in files.values())
    r = cli("triage", str(log), "--json")
    assert "Zm9vYmFyc2lnbmF0dXJl" not in r.stdout and "Zm9vYmFyc2lnbmF0dXJl" not in r.stderr
