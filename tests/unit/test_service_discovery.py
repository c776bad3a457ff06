"""Discovery on a replayed host: several instances, --service pinning by port, --config files
relative to the server's cwd, workers, visible devices; environment values never leak."""

from __future__ import annotations

import json

from ascend_doctor.bundle import BundleHost, BundleWriter
from ascend_doctor.host import Connection
from ascend_doctor.model import HostInfo, Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.procs import gather_service_processes
from ascend_doctor.checks import config


def host_with_two_servers() -> BundleHost:
    w = BundleWriter(HostInfo("h"))
    base = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/Qwen3-8B"]
    w.process(100, 1, base + ["--port", "8000", "--gpu-memory-utilization", "0.5"],
              environ={"ASCEND_RT_VISIBLE_DEVICES": "0", "HF_TOKEN": "hf_secret_value_123"})
    w.process(200, 1, ["/opt/venv/bin/vllm", "serve", "Qwen/Qwen3-8B", "--config", "serve.yaml",
                       "--port", "8001"], environ={"ASCEND_RT_VISIBLE_DEVICES": "0"})
    w.process(201, 200, ["VLLM::EngineCore"])
    w.process(202, 201, ["VLLMWorker_TP0"])
    w.process(300, 1, ["python3", "train.py"])
    w.symlink("/proc/200/cwd", "/srv/qwen")
    w.file("/srv/qwen/serve.yaml", "gpu_memory_utilization: 0.6\nblock_size: 128\n")
    w.connections([Connection("inet", "tcp", ("0.0.0.0", 8000), None, "LISTEN", 100),
                   Connection("inet", "tcp", ("0.0.0.0", 8001), None, "LISTEN", 200)])
    return BundleHost(w.finish())


def test_several_instances_and_pinning_by_service_port():
    h = host_with_two_servers()
    found = gather_service_processes(h, RunOptions())
    assert [s.pid for s in found.servers] == [100, 200]
    b = found.servers[1]
    assert b.config_file == "/srv/qwen/serve.yaml" and b.config_error is None
    assert b.args["gpu-memory-utilization"] == "0.6" and b.model == "Qwen/Qwen3-8B"
    assert [w.pid for w in b.workers] == [201, 202] and b.listen_ports == (8001,)
    pinned = gather_service_processes(host_with_two_servers(),
                                      RunOptions(service_url="http://127.0.0.1:8001",
                                                 service_url_given=True))
    assert pinned.primary.pid == 200


def test_shared_npu_and_launch_report_without_env_values():
    found = gather_service_processes(host_with_two_servers(), RunOptions())
    fs = list(config.gpu_memory(found, None, None))
    shared = [f for f in fs if f.kb == ("ASC-CFG-005",)]
    assert shared and shared[0].status == Status.FAIL and "1.10" in shared[0].message
    launch = list(config.launch(found))
    assert sum(1 for f in launch if f.message.startswith("vLLM server pid")) == 2
    assert "hf_secret_value" not in json.dumps([f.evidence for f in launch], default=str)


def test_missing_config_file_is_an_error_finding():
    w = BundleWriter(HostInfo("h"))
    w.process(7, 1, ["vllm", "serve", "m", "--config", "/etc/vllm/missing.yaml"])
    found = gather_service_processes(BundleHost(w.finish()), RunOptions())
    fs = list(config.launch(found))
    assert fs[0].status == Status.ERROR and "missing.yaml" in fs[0].message


import pytest  # noqa: E402


def test_token_counts_are_not_secrets():
    from ascend_doctor.redact import redact_argv, redact_text
    assert redact_argv(["--max-num-batched-tokens", "32768"])[1] == "32768"
    assert "32768" in redact_text("--max-num-batched-tokens 32768")
    assert redact_argv(["--hf-token", "hf_x"])[1] == "<redacted>"
    assert "hf_x" not in redact_text("HF_TOKEN=hf_x TOKENIZERS_PARALLELISM=false")
    assert "false" in redact_text("HF_TOKEN=hf_x TOKENIZERS_PARALLELISM=false")


def test_api_url_is_the_servers_own_port_not_its_lowest_listener():
    """The engine's ZMQ / gloo sockets listen on lower ports than the API (issue 13.5)."""
    from ascend_doctor.probes.service import gather_service_http
    w = BundleWriter(HostInfo("h"))
    w.process(100, 1, ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
                       "--port", "9001"])
    w.process(101, 100, ["VLLM::EngineCore"])
    w.connections([Connection("inet", "tcp", ("127.0.0.1", 5555), None, "LISTEN", 101),
                   Connection("inet", "tcp", ("127.0.0.1", 29500), None, "LISTEN", 100),
                   Connection("inet", "tcp", ("0.0.0.0", 9001), None, "LISTEN", 100)])
    w.http("http://127.0.0.1:9001/health", 200, b"")
    w.http("http://127.0.0.1:9001/version", 200, b'{"version": "0.11.0"}')
    w.http("http://127.0.0.1:9001/v1/models", 200, b'{"data": []}')
    w.http("http://127.0.0.1:9001/metrics", 200, b"")
    w.http("http://127.0.0.1:9001/metrics", 200, b"")
    h = BundleHost(w.finish())
    found = gather_service_processes(h, RunOptions())
    # the API listens on 9001; the engine's and the API process's side sockets are apart
    assert found.primary.listen_ports == (9001,)
    assert found.primary.side_ports == (5555, 29500)
    (f,) = list(config.launch(found))
    assert " on 9001, " in f.message and "5555" not in f.message
    assert f.evidence["ports"] == [9001] and f.evidence["side_ports"] == [5555, 29500]
    assert found.primary.api_url() == "http://127.0.0.1:9001"
    http = gather_service_http(h, RunOptions(), found)
    assert http.base_url == "http://127.0.0.1:9001" and http.version() == "0.11.0"


def test_api_url_defaults_and_bound_host():
    from ascend_doctor.host import ProcInfo
    from ascend_doctor.probes.procs import ServiceProcess, parse_vllm_args

    def sp(*argv):
        return ServiceProcess(ProcInfo(1, 0, "vllm", argv), args=parse_vllm_args(argv)[0])
    assert sp("vllm", "serve", "m").api_url() == "http://127.0.0.1:8000"
    assert sp("vllm", "serve", "m", "--host", "0.0.0.0").api_url() == "http://127.0.0.1:8000"
    assert sp("vllm", "serve", "m", "--host", "10.0.0.5", "--port=8100").api_url() \
        == "http://10.0.0.5:8100"
    assert sp("vllm", "serve", "m", "--host", "::1").api_url() == "http://[::1]:8000"


def test_packages_come_from_the_servers_venv_not_python3_on_path():
    """/proc/PID/exe of a venv python is the base interpreter; argv[0] names the venv (13.3)."""
    from ascend_doctor.probes.packages import gather_packages
    from ascend_doctor.probes.torchimport import pick_interpreter
    w = BundleWriter(HostInfo("h"))
    w.process(100, 1, ["/opt/venv/bin/python3", "/opt/venv/bin/vllm", "serve", "m"],
              exe="/usr/bin/python3.11")
    w.file("/opt/venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n"
                                   "version = 3.11.2\n")
    site = "/opt/venv/lib/python3.11/site-packages"
    w.file(f"{site}/torch_npu-2.14.0.dist-info/METADATA",
           "Metadata-Version: 2.1\nName: torch_npu\nVersion: 2.14.0\nRequires-Dist: torch==2.14.*\n")
    w.file(f"{site}/vllm_ascend-0.23.0.dist-info/METADATA",
           "Metadata-Version: 2.1\nName: vllm_ascend\nVersion: 0.23.0\n")
    # the doctor's own python3 on PATH has other packages: never asked
    w.command(["python3", "-c", "x"], '{"python": "3.9.0", "packages": {}}')
    h = BundleHost(w.finish())
    procs = gather_service_processes(h, RunOptions())
    assert procs.primary.interpreter == "/opt/venv/bin/python3"
    pkgs = gather_packages(h, RunOptions(), procs)
    assert pkgs.python == "3.11.2" and pkgs.executable == "/opt/venv/bin/python3"
    assert {k: p.version for k, p in pkgs.packages.items()} == {"torch-npu": "2.14.0",
                                                                 "vllm-ascend": "0.23.0"}
    assert "/opt/venv/bin/python3 (pid 100)" in pkgs.source
    assert pick_interpreter(procs, RunOptions())[0] == "/opt/venv/bin/python3"


def test_root_only_config_file_named_by_the_service_is_not_read():
    """`--config /root/secret.yaml` of a uid-1001 server: never quoted (issue 20.1)."""
    w = BundleWriter(HostInfo("h"))
    w.process(7, 1, ["vllm", "serve", "m", "--config", "/root/secret.yaml"], user="vllm",
              uid=1001)
    w.dir("/root", mode=0o700)
    w.file("/root/secret.yaml", "api_key: sk-live-0123456789abcdef\n", mode=0o600)
    w.process(8, 1, ["vllm", "serve", "m", "--config", "/srv/ok.yaml", "--port", "8001"],
              user="vllm", uid=1001)
    w.file("/srv/ok.yaml", "block_size: 128\n", mode=0o644)
    found = gather_service_processes(BundleHost(w.finish()), RunOptions())
    a, b = found.servers
    assert "uid 1001 cannot enter /root" in a.config_error and "sk-live" not in a.config_error
    assert "api_key" not in a.args
    assert b.config_error is None and b.args["block-size"] == "128"


def test_stdout_pointing_at_a_file_the_service_cannot_read_is_refused():
    """/proc/PID/fd/1 of a uid-1001 server resolving to a root-only file (issue 20.1)."""
    from ascend_doctor.probes.logs import gather_log_sources
    w = BundleWriter(HostInfo("h"))
    w.process(7, 1, ["vllm", "serve", "m"], user="vllm", uid=1001)
    w.symlink("/proc/7/fd/1", "/var/log/root-only.log")
    w.symlink("/proc/7/fd/2", "/var/log/vllm/server.log")
    w.file("/var/log/root-only.log", "password=hunter2\n", mode=0o600)
    w.file("/var/log/vllm/server.log", "INFO started\n", uid=1001, mode=0o640)
    h = BundleHost(w.finish())
    logs = gather_log_sources(h, RunOptions(), gather_service_processes(h, RunOptions()))
    by = {f.path: f for f in logs.files}
    assert "uid 1001 cannot read /var/log/root-only.log" in by["/var/log/root-only.log"].error
    assert by["/var/log/vllm/server.log"].error is None
