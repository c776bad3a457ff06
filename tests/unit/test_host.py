"""LiveHost on a sysroot: chroot-like symlinks, commands from the root, bounded output."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from ascend_doctor.errors import SourceError, SourceMissing
from ascend_doctor.host import LiveHost, http_get


def test_absolute_symlinks_resolve_inside_the_root(sysroot):
    sysroot.write("/usr/local/Ascend/cann-8.5.0/x86_64-linux/ascend_toolkit_install.info",
                  "version=8.5.0\n")
    sysroot.symlink("/usr/local/Ascend/cann", "/usr/local/Ascend/cann-8.5.0")
    h = sysroot.host()
    assert h.read_text("/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info") == \
        "version=8.5.0\n"
    assert h.realpath("/usr/local/Ascend/cann") == "/usr/local/Ascend/cann-8.5.0"
    assert h.stat("/usr/local/Ascend/cann", follow=False).is_link
    assert h.glob("/usr/local/Ascend/cann*/x86_64-linux/*.info") == [
        "/usr/local/Ascend/cann-8.5.0/x86_64-linux/ascend_toolkit_install.info",
        "/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info"]


def test_missing_and_denied_are_distinct(sysroot, tmp_path):
    h = sysroot.host()
    with pytest.raises(SourceMissing):
        h.read_bytes("/etc/nothing")
    sysroot.write("/etc/secret.conf", "x", mode=0o000)
    import os
    if os.geteuid() != 0:
        with pytest.raises(SourceError, match="permission denied"):
            h.read_bytes("/etc/secret.conf")
    with pytest.raises(SourceError, match="is a directory"):
        h.read_bytes("/etc")


def test_commands_come_from_the_sysroot_and_are_bounded(sysroot):
    sysroot.script("/usr/local/bin/npu-smi", 'echo "npu-smi 24.1.rc3"\n')
    sysroot.script("/usr/local/bin/flood", "yes xxxxxxxxxxxxxxxx | head -c 5000000\n")
    sysroot.script("/usr/local/bin/hang", "sleep 30\n")
    h = sysroot.host()
    r = h.run(["npu-smi", "info"])
    assert r.ok and r.text.strip() == "npu-smi 24.1.rc3" and r.argv == ("npu-smi", "info")
    r = h.run(["flood"], cap=1000)
    assert len(r.stdout) == 1000 and r.truncated
    r = h.run(["hang"], timeout=0.5)
    assert r.timed_out and r.returncode is None and r.duration_s < 5
    assert "did not finish" in r.describe_failure()
    with pytest.raises(SourceMissing):
        h.run(["ldconfig-not-here"])


def test_http_get_names_each_failure():
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/garbage":
                self.wfile.write(b"\x00\x01 not http at all\r\n\r\n")
                return
            body = b"ok"
            self.send_response(503 if self.path == "/dead" else 200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        assert http_get(base + "/health", 2, {}, 1000).ok
        dead = http_get(base + "/dead", 2, {}, 1000)
        assert dead.status == 503 and not dead.ok
        garbage = http_get(base + "/garbage", 2, {}, 1000)
        assert garbage.status is None and "not an HTTP answer" in garbage.error
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        refused = http_get(f"http://127.0.0.1:{port}/", 1, {}, 1000)
        assert refused.status is None and "refused" in refused.error
    finally:
        srv.shutdown()


def test_sysroot_processes_from_proc_tree(sysroot):
    sysroot.write("/proc/4711/cmdline", b"python3\0-m\0vllm.entrypoints.openai.api_server\0")
    sysroot.write("/proc/4711/stat", "4711 (python3) S 1 4711 4711 0 -1 4194560 12400 0 0 0\n")
    sysroot.write("/proc/4711/status", "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\n")
    procs = sysroot.host().processes()
    assert len(procs) == 1 and procs[0].pid == 4711 and procs[0].ppid == 1
    assert procs[0].cmdline[2] == "vllm.entrypoints.openai.api_server" and procs[0].uid == 1000
