"""A vLLM-like process of another account, planted on this host for a test.

Its argv reads like ``python3 /tmp/…/vllm serve /models/planted --port N`` (what process
discovery looks for), it runs as ``nobody`` through util-linux ``setpriv`` and, when asked,
answers vLLM's HTTP endpoints on 127.0.0.1:N (/health, /version, /v1/models, /metrics) the
way a CPU-only vLLM would. The tests that use it prove that a stranger's server on the host
never decides a run's context when the user named one (``--python``, ``--pid``,
``--service``), and that a vLLM process alone is no Ascend stack.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

NOBODY = 65534

SERVER = r'''
import http.server, json, sys
PORT = int(sys.argv[sys.argv.index("--port") + 1])
SILENT = "--silent" in sys.argv
METRICS = (b"# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
           b"# TYPE vllm:num_requests_running gauge\n"
           b'vllm:num_requests_running{model_name="planted"} 0.0\n'
           b"# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
           b"# TYPE vllm:num_requests_waiting gauge\n"
           b'vllm:num_requests_waiting{model_name="planted"} 0.0\n')
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        body, kind = {"/health": (b"", "text/plain"),
                      "/version": (json.dumps({"version": "0.32.0"}).encode(), "application/json"),
                      "/v1/models": (json.dumps({"object": "list", "data": [
                          {"id": "planted", "object": "model", "max_model_len": 2048}]}).encode(),
                          "application/json"),
                      "/metrics": (METRICS, "text/plain; version=0.0.4")}.get(path, (None, ""))
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", kind or "text/plain")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")
    def log_message(self, *a):
        pass
# like vLLM's EngineCore and the API process's own side channels (ZMQ/gloo): listening
# sockets on random ports that are no address for a client; the child ends with its parent
import os, socket, subprocess
side = socket.socket()
side.bind(("127.0.0.1", 0))
side.listen(1)
subprocess.Popen([sys.executable, "-c",
                  "import os, socket, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); "
                  "s.listen(1)\np = os.getppid()\nwhile os.getppid() == p: time.sleep(0.2)\n",
                  "EngineCore_DP0"])
srv = http.server.HTTPServer(("127.0.0.1", PORT), H)
if SILENT:  # listens, never answers: a hung server
    import time; time.sleep(600)
srv.serve_forever()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def planted_vllm(*, answer: bool = True, uid: int = NOBODY) -> Iterator[tuple[int, int]]:
    """(pid, port) of a vLLM-like server running as ``uid`` for the duration of the block."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run a process as another account")
    python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
    d = Path(tempfile.mkdtemp(prefix="planted-vllm-"))
    try:
        d.chmod(0o755)  # nobody must read its own script
        script = d / "vllm"
        script.write_text(SERVER)
        script.chmod(0o755)
        port = free_port()
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python,
                str(script), "serve", "/models/planted", "--port", str(port),
                "--max-model-len", "2048"] + ([] if answer else ["--silent"])
        proc = subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={"PATH": "/usr/bin:/bin", "VLLM_PLANTED": "1"})
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:  # listening, as its own user, under its argv
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert proc.poll() is None, "the planted server exited"
                time.sleep(0.05)
            else:
                raise AssertionError("the planted server did not listen")
            st = os.stat(f"/proc/{proc.pid}")
            assert st.st_uid == uid, st
            assert b"serve" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            yield proc.pid, port
        finally:
            proc.kill()
            proc.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def own_pid_namespace() -> list[str]:
    """A prefix that runs a command in a fresh PID namespace with its own /proc, so a test
    that reads the live host sees no process but its own (other vLLM-like processes on this
    machine are then not part of its input); empty when that cannot be done here."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        return []
    probe = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, timeout=30)
    return [unshare, "--pid", "--fork", "--mount-proc"] if probe.returncode == 0 else []
