"""Secrets planted in a real process (environment and argv), in HTTP headers and bodies and
in a log file never appear in any report format nor inside a collected bundle.

The built-in checks on this branch read little of the service, so a test-only "nosy" check
(registered in its own Registry) copies everything it can reach — the service's environ,
cmdline, process list, HTTP headers and bodies, log lines — into its message and evidence:
the worst a future check could do. The reports and the bundle must still hold no secret.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from ascend_doctor.bundle import BundleData, RecordingHost
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.host import Host, LiveHost
from ascend_doctor.model import Category, Finding
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.procs import ServiceEnv, ServiceProcesses
from ascend_doctor.registry import Registry, check

SECRETS = {
    "HF_TOKEN": "hf_PlantedHuggingFaceToken0042",
    "OPENAI_API_KEY": "sk-planted-openai-key-0000000000000042",
    "api_key_flag": "sk-planted-cli-flag-key-1111111111111",
    "bearer": "planted-bearer-token-2222222222",
    "cookie": "session=planted-cookie-3333333333",
    "pip_password": "planted-pip-pw-4444",
    "log_bare": "sk-planted-bare-log-token-5555555555",
    "doctor_key": "sk-planted-doctor-api-key-6666666666",
}

SERVER = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        body = json.dumps({"path": self.path, "echo_authorization": auth,
                           "data": [{"id": "Qwen2.5-7B"}]}).encode()
        if self.path == "/raw":
            body = b"Authorization: " + auth.encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "%(cookie)s; HttpOnly")
        self.send_header("X-Echo-Authorization", auth)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

srv = HTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
'''


@pytest.fixture(scope="module")
def vllm_like(tmp_path_factory):
    """A real process whose cmdline reads like the vLLM OpenAI server and that serves HTTP."""
    tmp = tmp_path_factory.mktemp("svc")
    script = tmp / "vllm" / "entrypoints" / "openai" / "api_server.py"
    script.parent.mkdir(parents=True)
    script.write_text(SERVER % SECRETS)
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": SECRETS["HF_TOKEN"],
           "OPENAI_API_KEY": SECRETS["OPENAI_API_KEY"],
           "PIP_INDEX_URL": f"https://ci:{SECRETS['pip_password']}@mirror.example/simple",
           "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3"}
    proc = subprocess.Popen([sys.executable, str(script), "--model", "Qwen2.5-7B",
                             "--api-key", SECRETS["api_key_flag"], "--block-size", "128"],
                            env=env, stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    log = tmp / "vllm.log"
    log.write_text(
        "INFO 01-02 10:00:00 api_server.py:1] vLLM API server version 0.23.0\n"
        f"INFO 01-02 10:00:00 api_server.py:2] args: Namespace(api_key='{SECRETS['api_key_flag']}')\n"
        f"DEBUG 01-02 10:00:01 hub.py:3] HF_TOKEN={SECRETS['HF_TOKEN']} login ok\n"
        f"DEBUG 01-02 10:00:02 client.py:4] headers: Authorization: Bearer {SECRETS['bearer']}\n"
        f"WARNING 01-02 10:00:03 client.py:5] retrying with key {SECRETS['log_bare']}\n"
        "ERROR 01-02 10:00:04 worker.py:6] ImportError: libascendcl.so: cannot open shared object file\n")
    yield {"pid": proc.pid, "url": f"http://127.0.0.1:{port}", "log": str(log), "tmp": tmp}
    proc.kill()
    proc.wait()


def _assert_clean(where: str, text: str) -> None:
    leaked = [name for name, value in SECRETS.items() if value in text]
    assert not leaked, f"{where} leaks {leaked}"


# -- the worst-case check -------------------------------------------------------------------
@check("secrets.nosy", title="copies everything it can read into its finding",
       category=Category.SERVICE)
def nosy(host: Host, options: RunOptions, procs: ServiceProcesses, env: ServiceEnv):
    server = procs.primary
    assert server is not None, "the vLLM-like server was not discovered"
    cmdline = host.proc_read(server.pid, "cmdline").split(b"\0")
    headers = {"Authorization": f"Bearer {SECRETS['bearer']}"}
    models = host.http_get(options.service_url + "/v1/models", headers=headers)
    raw = host.http_get(options.service_url + "/raw", headers=headers)
    logs = [host.read_text(p) for p in options.logs]
    yield Finding.warn(
        f"server {server.pid} argv {' '.join(server.proc.cmdline)}; env {env.env}; "
        f"headers {models.headers}; body {models.text}; raw {raw.text}; log {logs[0]}",
        evidence={"cmdline": list(server.proc.cmdline),
                  "cmdline_raw": [c.decode() for c in cmdline],
                  "env": dict(env.env), "environ_text": json.dumps(env.env),
                  "http_headers": dict(models.headers), "http_body": models.text,
                  "raw": raw.text, "log": logs, "api_key": options.api_key})


@check("secrets.reader", title="reads /proc/<pid>/environ as a file", category=Category.SERVICE)
def reader(host: Host, procs: ServiceProcesses):
    data = host.read_bytes(f"/proc/{procs.primary.pid}/environ")
    yield Finding.info(f"{len(data)} bytes", evidence={"n": len(data)})


def _registry() -> Registry:
    reg = Registry.discover(plugins=False)
    reg.add_check(nosy.__ascend_doctor_check__)
    reg.add_check(reader.__ascend_doctor_check__)
    return reg


def _options(svc) -> RunOptions:
    return RunOptions(service_url=svc["url"], service_url_given=True, pid=svc["pid"],
                      api_key=SECRETS["doctor_key"], logs=(svc["log"],))


def test_nosy_check_sees_the_secrets_raw(vllm_like):
    """Guard: the planted secrets really reach the check (else the test proves nothing)."""
    seen = {}

    @check("secrets.probe", title="t", category=Category.SERVICE)
    def probe(host: Host, options: RunOptions, env: ServiceEnv, procs: ServiceProcesses):
        r = host.http_get(options.service_url + "/raw",
                          headers={"Authorization": f"Bearer {SECRETS['bearer']}"})
        seen.update(env=env.env, argv=procs.primary.proc.cmdline, raw=r.text,
                    cookie=r.headers.get("set-cookie", ""))
        yield Finding.passed("ok")

    reg = Registry.discover(plugins=False)
    reg.add_check(probe.__ascend_doctor_check__)
    run(LiveHost("/"), _options(vllm_like), reg, RunConfig(only=("secrets.probe",)))
    assert seen["env"]["HF_TOKEN"] == SECRETS["HF_TOKEN"]
    assert SECRETS["api_key_flag"] in seen["argv"]
    assert SECRETS["bearer"] in seen["raw"] and SECRETS["cookie"] in seen["cookie"]


def test_reports_never_show_secrets(vllm_like, tmp_path):
    from ascend_doctor.knowledge import load
    from ascend_doctor.report import jsonreport, junit, markdown, text

    report = run(LiveHost("/"), _options(vllm_like), _registry(), RunConfig(timeout=20))
    nosy_result = next(r for r in report.results if r.check_id == "secrets.nosy")
    assert nosy_result.status.value == "warn", nosy_result.findings[0].message
    _assert_clean("JSON report", jsonreport.render(report, {}))
    _assert_clean("Markdown report", markdown.render(report, load(), "en"))
    _assert_clean("JUnit report", junit.render(report))
    buf = io.StringIO()
    text.render(report, buf, load(), "en", True)
    _assert_clean("text report", buf.getvalue())


def _bundle_members(raw: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_bundle_never_holds_secrets(vllm_like, tmp_path):
    rec = RecordingHost(LiveHost("/"))
    options = _options(vllm_like)
    report = run(rec, options, _registry(), RunConfig(timeout=20))
    assert next(r for r in report.results if r.check_id == "secrets.nosy").status.value == "warn"
    out = tmp_path / "b.tar.gz"
    rec.finish("live", options.public()).write(str(out))
    raw = out.read_bytes()
    members = _bundle_members(raw)
    assert any(k.startswith("blobs/") for k in members)
    for name, data in members.items():
        _assert_clean(f"bundle member {name}", data.decode("utf-8", "replace"))
    # the replayed bundle must not resurrect them either
    from ascend_doctor.bundle import BundleHost
    replay = run(BundleHost(BundleData.load(raw)), options, _registry(), RunConfig(timeout=20))
    from ascend_doctor.report import jsonreport
    _assert_clean("report from the bundle", jsonreport.render(replay, {}))


def test_cli_outputs_and_collected_bundle_hold_no_secrets(cli, vllm_like, tmp_path):
    args = ["--service", vllm_like["url"], "--pid", str(vllm_like["pid"]),
            "--log", vllm_like["log"], "--timeout", "20"]
    env = {"VLLM_API_KEY": SECRETS["doctor_key"]}
    for fmt in ("--json", "--markdown"):
        r = cli("check", *args, fmt, env=env)
        assert r.returncode in (0, 1), r.stderr
        _assert_clean(f"check {fmt} stdout", r.stdout)
        _assert_clean(f"check {fmt} stderr", r.stderr)
    junit = tmp_path / "j.xml"
    r = cli("check", *args, "--junit", str(junit), env=env)
    _assert_clean("check text", r.stdout + r.stderr)
    _assert_clean("junit file", junit.read_text())
    b = tmp_path / "c.tar.gz"
    r = cli("collect", *args, "-o", str(b), env=env)
    assert r.returncode == 0, r.stderr
    _assert_clean("collect stderr", r.stderr)
    for name, data in _bundle_members(b.read_bytes()).items():
        _assert_clean(f"bundle member {name}", data.decode("utf-8", "replace"))
    r = cli("check", "--bundle", str(b), "--json")
    _assert_clean("check --bundle", r.stdout)


def test_tui_export_holds_no_secrets(vllm_like, tmp_path):
    """The TUI's `e` export (JSON, Markdown issue body, bundle of a live host)."""
    from ascend_doctor.tui import export

    options = _options(vllm_like)
    report = run(LiveHost("/"), options, _registry(), RunConfig(timeout=20))
    assert next(r for r in report.results if r.check_id == "secrets.nosy").status.value == "warn"
    out = tmp_path / "export"
    out.mkdir()
    for path in (export.export_json(report, str(out), "en"),
                 export.export_markdown(report, str(out), "en")):
        _assert_clean(f"TUI export {path}", Path(path).read_text())
    bundle = export.export_bundle(report, str(out), demo=False, bundle=None, root=None,
                                  options=options, registry=_registry())
    members = _bundle_members(Path(bundle).read_bytes())
    assert any(k.startswith("blobs/") for k in members)
    for name, data in members.items():
        _assert_clean(f"TUI bundle member {name}", data.decode("utf-8", "replace"))


# -- every secret shape, in a hostile log read through the streamed path ---------------------
SHAPES = {
    "obs_ak": ("export OBS_AK=", "PLANTEDobsAK0001"),
    "obs_sk": ("OBS_SK='", "PLANTEDobsSK0002'"),
    "hw_ak": ("HUAWEICLOUD_SDK_AK=", "PLANTEDhwAK0003"),
    "hw_sk": ("HUAWEICLOUD_SDK_SK=", "PLANTEDhwSK0004"),
    "pwd": ("MYSQL_PWD=", "PLANTEDpwd0005"),
    "pass": ("REDIS_PASS=", "PLANTEDpass0006"),
    "yaml": ("password: ", "PLANTEDyaml0007"),
    "yaml_list": ("  - token: ", "PLANTEDyaml0008"),
    "url_userinfo": ("GET https://svc:", "PLANTEDurlpw0009@mirror.example/x"),
    "url_token": ("GET https://h.example/v1/models?token=", "PLANTEDqtoken0010&a=1"),
    "url_access": ("GET https://h.example/?a=1&access_token=", "PLANTEDqaccess0011"),
    "url_apikey": ("proxy url=https://h.example/?api_key=", "PLANTEDqapikey0012"),
    "sshpass": ("root  4242 sshpass -p ", "PLANTEDsshpass0013 ssh node2"),
    "curl": ("root  4243 curl -s -u admin:", "PLANTEDcurl0014 https://x"),
    "password_flag": ("root  4244 tool --password ", "PLANTEDflag0015"),
    "mysql": ("root  4245 mysql -h db -p ", "PLANTEDmysql0016 app"),
    "pem": ("-----BEGIN RSA PRIVATE KEY-----\n", "MIIPLANTEDpemBODY0017\n-----END RSA PRIVATE KEY-----"),
}
SHAPE_SECRETS = {k: v[1].split("@")[0].split("&")[0].split(" ")[0].rstrip("'").split("\n")[0]
                 for k, v in SHAPES.items()}
STRADDLE = "HF_TOKEN=hf_PlantedStraddlingToken0099"
CONTROLS = "\x1b[2J\x1b]52;c;cGxhbnRlZA==\x07\x1b[31m"


def _hostile_log(path: Path) -> None:
    """Shapes, an invalid UTF-8 byte, a NUL, terminal escapes, and a token across 64 KiB."""
    head = b"INFO start \xff\xfe invalid utf-8 and a NUL \x00 here\n"
    head += "".join(f"{a}{b}\n" for a, b in SHAPES.values()).encode()
    head += f"ERROR {CONTROLS} ImportError: libascendcl.so: cannot open shared object file: "\
            f"No such file or directory HF_TOKEN=hf_PlantedTriageToken0042\n".encode()
    pad = 65536 - len(head) - 20
    body = head + b"x" * (pad - 1) + b"\n" + STRADDLE.encode() + b"\nINFO tail\n"
    assert body.index(STRADDLE.encode()) < 65536 < body.index(STRADDLE.encode()) + len(STRADDLE)
    path.write_bytes(body)


@check("secrets.logstream", title="copies a streamed log into its finding",
       category=Category.SERVICE)
def logstream(host: Host, options: RunOptions):
    from ascend_doctor.probes.logs import iter_lines
    with host.open_stream(options.logs[0]) as fh:
        text = "".join(iter_lines(fh, None))
    yield Finding.warn(f"log {text}", evidence={"log": text})


def _assert_no_shape(where: str, text: str) -> None:
    leaked = [k for k, v in SHAPE_SECRETS.items() if v in text]
    leaked += [s for s in ("hf_PlantedStraddlingToken0099", "hf_PlantedTriageToken0042") if s in text]
    assert not leaked, f"{where} leaks {leaked}"


def test_every_shape_in_a_hostile_streamed_log_stays_out(tmp_path):
    import xml.etree.ElementTree as ET
    from ascend_doctor.knowledge import load
    from ascend_doctor.report import jsonreport, junit, markdown, text

    log = tmp_path / "hostile.log"
    _hostile_log(log)
    reg = Registry.discover(plugins=False)
    reg.add_check(logstream.__ascend_doctor_check__)
    options = RunOptions(logs=(str(log),))
    live = run(LiveHost("/"), options, reg, RunConfig(only=("secrets.logstream",)))
    msg = live.results[0].findings[0].message
    assert "PLANTEDobsAK0001" in msg and STRADDLE in msg  # guard: the check saw them raw
    rec = RecordingHost(LiveHost("/"))
    report = run(rec, options, reg, RunConfig(only=("secrets.logstream",)))
    out = tmp_path / "b.tar.gz"
    rec.finish("live", options.public()).write(str(out))
    members = _bundle_members(out.read_bytes())
    blobs = [d for k, d in members.items() if k.startswith("blobs/")]
    assert any(b"\xff\xfe invalid" in d and b"\x00 here" in d for d in blobs)  # kept byte-exact
    for name, data in members.items():
        _assert_no_shape(f"bundle member {name}", data.decode("utf-8", "replace"))
    for r in (live, report):
        _assert_no_shape("JSON report", jsonreport.render(r, {}))
        _assert_no_shape("Markdown report", markdown.render(r, load(), "en"))
        xml = junit.render(r)
        _assert_no_shape("JUnit report", xml)
        ET.fromstring(xml.encode())  # control bytes did not break the file
        buf = io.StringIO()
        text.render(r, buf, load(), "en", True)
        _assert_no_shape("text report", buf.getvalue())
        assert "\x1b" not in buf.getvalue() and "\x07" not in buf.getvalue()


def test_triage_output_is_redacted_and_neutralised(cli, tmp_path):
    log = tmp_path / "hostile.log"
    _hostile_log(log)
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "LANG": "C.UTF-8"}
    for args in (("triage", str(log)), ("triage", str(log), "--json")):
        r = cli(*args, env=env)
        assert r.returncode == 0, r.stderr
        assert "libascendcl.so" in r.stdout
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout
        _assert_no_shape(" ".join(args), r.stdout)
    assert "\\x1b[2J" in cli("triage", str(log), env=env).stdout


def test_junit_with_control_bytes_parses_through_the_cli(cli, tmp_path):
    import xml.etree.ElementTree as ET
    log = tmp_path / "hostile.log"
    _hostile_log(log)
    junit = tmp_path / "j.xml"
    root = tmp_path / "root"  # an empty host: only the --log, not another session's vLLM
    root.mkdir()
    r = cli("check", "--root", str(root), "--log", str(log), "--junit", str(junit))
    assert junit.exists(), r.stderr
    ET.parse(junit)
    assert "libascendcl.so" in junit.read_text()  # the log's line is in it, made safe
    _assert_no_shape("JUnit file", junit.read_text())


def test_text_report_redacts_service_url_credentials(cli, tmp_path):
    """The --service URL is a finding's subject: text output redacts it like JSON does."""
    url = "http://admin:PLANTEDsvc0042@127.0.0.1:9"
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    root = tmp_path / "root"  # an empty host: the run is about the URL, not this machine's vLLMs
    root.mkdir()
    for fmt in ((), ("--json",)):  # --markdown crashes here today (issue 20 item 8)
        r = cli("check", "--root", str(root), "--service", url, *fmt, env=env)
        assert "127.0.0.1:9" in r.stdout, r.stderr
        assert "PLANTEDsvc0042" not in r.stdout + r.stderr, fmt


def test_log_read_in_ranges_or_growing_is_redacted_in_the_bundle(tmp_path):
    """A tail read (a range not at offset 0) and a log that grows while it is read."""
    log = tmp_path / "hostile.log"
    _hostile_log(log)
    rec = RecordingHost(LiveHost("/"))
    with rec.open_stream(str(log)) as fh:  # a tail read, as iter_lines does on big logs
        fh.seek(20)
        fh.readline()
        fh.read()
    grow = tmp_path / "growing.log"
    grow.write_bytes(b"INFO start\n")
    with rec.open_stream(str(grow)) as fh:
        with open(grow, "ab") as w:
            w.write(b"export OBS_SK=PLANTEDobsSK0002\n")
        fh.read()
    out = tmp_path / "b.tar.gz"
    rec.finish("live", {}).write(str(out))
    members = _bundle_members(out.read_bytes())
    assert any(b"PLANTED" not in d and b"<redacted>" in d for d in members.values())
    for name, data in members.items():
        _assert_no_shape(f"bundle member {name}", data.decode("utf-8", "replace"))
