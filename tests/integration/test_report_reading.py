"""Issue 31, "reading the report", through the real console script: nothing cut in a pipe,
one severity per problem, line 1's warning count is the summary's, the NPU firmware
headline, the copy API msprof shows, Ctrl-C, a closed pipe, --service usage, --elf."""

from __future__ import annotations

import http.server
import io
import json
import os
import signal
import subprocess
import threading
import time

from tests.conftest import doctor_exe
from tests.fixtures.ascend import DRIVER, FIRMWARE
from tests.timing import budget


def _env() -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "CI": "true"}


def test_a_pipe_gets_every_word_a_terminal_the_short_view(cli, monkeypatch):
    r = cli("demo", "--text")
    lines = r.stdout.splitlines()
    assert not [ln for ln in lines if ln.rstrip().endswith("…")], r.stdout
    flat = " ".join(r.stdout.split())
    assert "— context: demo" in flat  # line 3 used to end in "context: de…"
    assert max(len(ln) for ln in lines) <= 100
    # the same report on a terminal keeps the short view (cut, one screen)
    from ascend_doctor.knowledge import load
    from ascend_doctor.cli import demo_host, run_report
    from ascend_doctor.options import RunOptions
    from ascend_doctor.report import text

    class Tty(io.StringIO):
        encoding = "utf-8"

        def isatty(self) -> bool:
            return True

    tty = Tty()
    report = run_report(demo_host(), RunOptions(), [], [], None, context="demo")
    monkeypatch.setenv("NO_COLOR", "1")  # for this test only: later TUI snapshots need colour
    text.render(report, tty, load(), "en")
    shown = tty.getvalue().splitlines()
    assert any(ln.rstrip().endswith("…") for ln in shown) and len(shown) < len(lines)


def test_one_severity_per_problem_and_line_one_counts_what_the_summary_counts(cli):
    doc = json.loads(cli("demo", "--json").stdout)
    text = cli("demo", "--text").stdout
    from ascend_doctor.knowledge import load
    kb = load()
    for p in doc["problems"]:
        if p["status"] == "fail" and p["kb"]:
            # the entry `why: ascend-doctor explain ID` names has the problem's severity
            assert kb.get(p["kb"][0]).severity == p["severity"], p
    first = doc["problems"][0]
    assert f"{first['severity'].upper()} {first['title']}" in " ".join(text.split())
    explain = cli("explain", first["kb"][0]).stdout
    assert f"[{first['severity']}]" in explain.splitlines()[0]
    warn = doc["summary"]["warn"]
    assert f"(and {warn} checks warned)" in " ".join(text.splitlines()[:2])
    assert f"{warn} warn," in text.splitlines()[-1]


def test_firmware_outside_the_drivers_range_says_so(cli, sysroot):
    sysroot.write("/usr/local/Ascend/driver/version.info", DRIVER)  # accepts [7.0.0,7.2.99]
    sysroot.write("/usr/local/Ascend/firmware/version.info",
                  FIRMWARE.replace("Version=7.1.0.11.220", "Version=7.5.0.1.220"))
    r = cli("check", "--root", str(sysroot), "--only", "versions.driver-firmware")
    assert r.returncode == 1, r.stderr
    assert " ".join(r.stdout.split()).startswith(
        "✖ 1 problem explains 1 failed check; the worst: The NPU firmware is outside the range "
        "the driver accepts")
    assert "does not accept the installed CANN" not in r.stdout
    assert "explain ASC-VER-012" in r.stdout


OP_HEADER = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
             "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,"
             "HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
             "Output Data Types,Output Formats,Context ID,aiv_time(us),aicore_time(us)")
API_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance"


def _profile(tmp_path, api_rows: list[str]):
    """An msprof export: 10 steps of one 2 ms H2D copy and 1 ms of MatMul, and the ACL API
    statistics the case gives."""
    out = tmp_path / "PROF_1" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    rows, t = [OP_HEADER], 1_763_608_400_000_000.0
    for step in range(10):
        rows.append(f"0,4294967295,{2 * step + 1},3,MEMCPY_ASYNC,MEMCPY_ASYNC,N/A,MEMCPY_ASYNC,"
                    f"{t:.3f},2000.0,0.5,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A")
        rows.append(f'0,4294967295,{2 * step + 2},2,layer.MatMulV2,MatMulV2,dynamic,AI_CORE,'
                    f'{t + 2001:.3f},1000.0,0.2,24,0,NO,"1,7168",DT_BF16,ND,"1,7168",DT_BF16,'
                    'ND,N/A,930.0,1850')
        t += 3500
    (out / "op_summary_20261120031901.csv").write_text("\r\n".join(rows) + "\r\n")
    (out / "api_statistic_20261120031901.csv").write_text(
        "\r\n".join([API_HEADER, *api_rows]) + "\r\n")
    return tmp_path / "PROF_1"


def test_copy_bound_names_the_copy_api_and_its_fix(cli, tmp_path):
    sync = _profile(tmp_path / "a", ["host,acl,aclrtMemcpy,18000.0,10,1800.0,1700.0,1900.0,9.1",
                                     "host,acl,aclrtMemcpyAsync,900.0,10,90.0,80.0,99.0,1.1",
                                     "host,acl,aclmdlExecute,10000.0,10,1000.0,990.0,1010.0,2.0"])
    asyn = _profile(tmp_path / "b", ["host,acl,aclrtMemcpyAsync,18000.0,10,1800.0,1700.0,1900.0,9.1",
                                     "host,acl,aclmdlExecute,10000.0,10,1000.0,990.0,1010.0,2.0"])
    got = {}
    for name, prof in (("sync", sync), ("async", asyn)):
        r = cli("check", "--json", "--only", "msprof.copy-bound", "--profile", str(prof))
        (f,) = next(c["findings"] for c in json.loads(r.stdout)["checks"]
                    if c["id"] == "msprof.copy-bound")
        assert f["status"] == "fail", f
        got[name] = f
    assert got["sync"]["evidence"]["dominant_copy_api"] == "aclrtMemcpy"
    assert "aclrtMemcpy dominates the copies (95% of aclrtMemcpy* time, 10 calls" in \
        got["sync"]["message"]
    assert "issue the copies with aclrtMemcpyAsync on a stream" in got["sync"]["message"]
    assert got["async"]["evidence"]["dominant_copy_api"] == "aclrtMemcpyAsync"
    assert "aclrtMemcpyAsync dominates the copies (100%" in got["async"]["message"]
    assert "keep the data resident on the device" in got["async"]["message"]
    assert "issue the copies with aclrtMemcpyAsync" not in got["async"]["message"]


def test_ctrl_c_exits_130(tmp_path):
    """A run that waits (a 30 s --watch of a service that is not there), interrupted."""
    p = subprocess.Popen([doctor_exe(), "check", "--only", "leak.npu-memory", "--watch", "30",
                          "--service", "http://127.0.0.1:9"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_env())
    _until_idle(p.pid)  # started and waiting: a fixed 2.5 s sleep hit the imports under load
    assert p.poll() is None
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, (out, err)
    assert time.monotonic() - t0 < budget(10, cap=25)  # the watch would run 30 s


def _until_idle(pid: int, quiet: float = 0.6, limit: float = 60.0) -> None:
    """Wait until the process has used CPU and then none for ``quiet`` seconds: the
    interpreter has started, imported, installed its handlers and sleeps in the run."""
    def cpu() -> int:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])  # utime + stime, in ticks

    deadline = time.monotonic() + limit
    last, since = cpu(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = cpu()
        if now != last:
            last, since = now, time.monotonic()
        elif now > 0 and time.monotonic() - since >= quiet:
            return
    raise AssertionError(f"pid {pid} kept using CPU for {limit} s")
    assert err.strip().splitlines()[-1] == "ascend-doctor: interrupted" and "Traceback" not in err


def test_a_closed_pipe_ends_quietly_like_other_tools():
    """``… | head``: the reader is gone before the report is written (a pipe whose read end
    is closed, so the case does not depend on who wins the race with head)."""
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    try:
        p = subprocess.run([doctor_exe(), "demo", "--json"], stdout=w_fd,
                           stderr=subprocess.PIPE, text=True, env=_env(), timeout=60)
    finally:
        os.close(w_fd)
    # killed by SIGPIPE as cat or grep are (the shell shows 141), and not a word about it;
    # it was "ascend-doctor: cannot use: Broken pipe" and exit 2
    assert p.returncode == -signal.SIGPIPE, (p.returncode, p.stderr)
    assert p.stderr == ""


def test_service_without_a_scheme_is_a_usage_error(cli):
    r = cli("check", "--service", "127.0.0.1:8000", "--only", "service.health")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "ascend-doctor: --service 127.0.0.1:8000 is not an http(s) URL with a host: write "
        "--service http://127.0.0.1:8000"]


def test_a_query_in_the_service_url_stays_after_the_endpoint_path(cli):
    hits: list[str] = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            body = b'{"object": "list", "data": []}' if "models" in self.path else b""
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = cli("check", "--json", "--only", "service.health",
                "--service", f"http://127.0.0.1:{srv.server_port}/?token=X")
    finally:
        srv.shutdown()
    assert "/health?token=X" in hits and "/v1/models?token=X" in hits, hits
    assert not [h for h in hits if "?token=X/" in h]
    f = json.loads(r.stdout)["checks"][0]["findings"][0]
    assert f["evidence"]["context"] == "named"
    assert f["subject"].endswith("(named: --service)")


def test_elf_under_root_says_paths_are_the_callers(cli, sysroot, tmp_path):
    sysroot.write("/opt/app/libapp.so", b"\x7fELF")  # inside the root, not the caller's path
    r = cli("check", "--root", str(sysroot), "--elf", "/opt/app/libapp.so",
            "--only", "libacl.resolve")
    assert r.returncode == 1, r.stderr
    flat = " ".join(r.stdout.split())
    assert ("cannot read --elf /opt/app/libapp.so as an ELF file: not found (--elf names the "
            "caller's file: relative to the current directory and read on this machine, also "
            "with --root, never a path inside the inspected root)") in flat
    assert "all 0 DT_NEEDED entries" not in flat
