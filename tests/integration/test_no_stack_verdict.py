"""Issue 31, "harm on the wrong host": a host without an Ascend stack gets one fact in its
first line — no stack, or a vLLM service running without one — never a list of problems
that all follow from it, and never a claim about an ascend.conf that does not exist.

Sysroots make the host exact (no driver, no CANN, no device node, no npu-smi, no torch_npu),
with a vLLM server of uid 65534 in its proc/ tree; the last test plants a real one on this
host (tests/planted.py)."""

from __future__ import annotations

import json
import os

import pytest

from tests.planted import planted_vllm

ARGV = b"/usr/bin/python3\0/usr/local/bin/vllm\0serve\0/models/qwen\0--port\0018000\0"


def _plant_proc(sysroot, pid: int = 4711, uid: int = 65534) -> None:
    sysroot.write(f"/proc/{pid}/cmdline", ARGV)
    sysroot.write(f"/proc/{pid}/stat", f"{pid} (python3) S 1 {pid} {pid} 0 -1 4194560 "
                  "100 0 0 0 10 5 0 0 20 0 3 0 100 1000000 100\n")
    sysroot.write(f"/proc/{pid}/status", f"Name:\tpython3\nPid:\t{pid}\nPPid:\t1\n"
                  f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    sysroot.write(f"/proc/{pid}/environ", b"PATH=/usr/bin:/bin\0")


def _base(sysroot) -> None:
    sysroot.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    sysroot.write("/etc/ld.so.conf.d/x86_64-linux-gnu.conf",
                  "/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n")
    sysroot.mkdir("/proc")


def _check(cli, sysroot, *extra: str):
    """The sysroot's checks; the HTTP ones are left out (they would ask this machine's
    loopback, where other people's servers may listen)."""
    skip = () if "--only" in extra else ("--skip", "service")
    r = cli("check", "--root", str(sysroot), *skip, *extra)
    assert r.returncode in (0, 1), r.stderr
    return r


def test_no_stack_and_no_service_is_one_line(cli, sysroot):
    _base(sysroot)
    r = _check(cli, sysroot)
    first = r.stdout.splitlines()[0]
    assert first.startswith("○ No Ascend stack on this host: no driver, no CANN toolkit, "
                            "no device node, no npu-smi"), r.stdout
    assert "ascend.conf" not in r.stdout


def test_a_vllm_service_without_a_stack_is_named_once_with_no_ascend_conf_claim(cli, sysroot):
    _base(sysroot)
    _plant_proc(sysroot)
    r = _check(cli, sysroot, "--json")
    doc = json.loads(r.stdout)
    text = _check(cli, sysroot).stdout
    lines = text.replace("\n  ", " ").splitlines()  # line 1 wraps; joined again
    assert lines[0].startswith("A vLLM service runs without an Ascend stack: pid 4711 "
                               "(user 65534); this host has no driver", 2), lines[0]
    # the checks that need a stack skip on that one fact: no device-node, driver-mount or
    # ld.so.conf failure follows from it, and no ascend.conf is named, fixed or explained
    for cid in ("container.devices", "ldconf.order", "ldconf.reached", "ldconf.cache"):
        c = next(c for c in doc["checks"] if c["id"] == cid)
        assert c["status"] == "skip", c
        assert c["findings"][0]["evidence"]["source"] == "Ascend stack of the vLLM service"
    assert "ascend.conf is not reached" not in text
    assert "ldconf.ascend-conf" not in text and "ldconf.ascend-conf" not in r.stdout
    assert not [p for p in doc["problems"] if p["kb"] and p["kb"][0].startswith("ASC-LIB")]


def test_torch_npu_without_any_ascend_directory_claims_no_ascend_conf(cli, sysroot, tmp_path):
    """torch_npu in the inspected interpreter makes a stack, but with no /usr/local/Ascend
    there is nothing ld.so.conf could name: ldconf.order skips saying so."""
    _base(sysroot)
    site = "/opt/venv/lib/python3.11/site-packages"
    sysroot.write(f"{site}/torch_npu/__init__.py", "")
    sysroot.write(f"{site}/torch_npu-2.10.0.post4.dist-info/METADATA",
                  "Metadata-Version: 2.1\nName: torch_npu\nVersion: 2.10.0.post4\n")
    sysroot.write("/opt/venv/pyvenv.cfg", "home = /usr/bin\nversion = 3.11.9\n")
    sysroot.script("/opt/venv/bin/python", "exit 1\n")
    r = _check(cli, sysroot, "--python", "/opt/venv/bin/python", "--json")
    order = next(c for c in json.loads(r.stdout)["checks"] if c["id"] == "ldconf.order")
    assert order["status"] == "skip"
    assert order["findings"][0]["message"].startswith(
        "no Ascend directory exists on this host (/usr/local/Ascend is absent)")
    assert "ascend.conf is not reached" not in _check(cli, sysroot, "--python",
                                                      "/opt/venv/bin/python").stdout


def test_a_driver_nobody_configured_is_not_an_unreached_ascend_conf(cli, sysroot):
    """The driver exists, no conf file names it, no ascend.conf exists: the problem is
    "no Ascend directory is configured" (ASC-LIB-014), not "ascend.conf is not reached"."""
    _base(sysroot)
    sysroot.write("/usr/local/Ascend/driver/version.info", "Version=24.1.rc3\n")
    sysroot.mkdir("/usr/local/Ascend/driver/lib64")
    r = _check(cli, sysroot, "--json")
    order = next(c for c in json.loads(r.stdout)["checks"] if c["id"] == "ldconf.order")
    (f,) = order["findings"]
    assert f["status"] == "fail" and f["kb"] == ["ASC-LIB-014"]
    text = _check(cli, sysroot, "--only", "ldconf,libs").stdout
    assert "No Ascend directory is configured in ld.so.conf" in text
    assert "ascend.conf is not reached" not in text


def test_a_planted_server_of_another_account_on_this_host(cli):
    """Live: a vLLM-like server of nobody, answering like a CPU vLLM, on a host without an
    Ascend stack. Line 1 names that one fact; nothing about ascend.conf; exit 0."""
    if os.path.exists("/usr/local/Ascend") or any(n.startswith("davinci")
                                                   for n in os.listdir("/dev")):
        pytest.skip("this host has an Ascend stack: the case needs one without")
    with planted_vllm() as (pid, port):
        r = cli("check", "--pid", str(pid), "--skip", "network,performance", timeout=180)
    first = " ".join(r.stdout.split("\n\n")[0].split("\n")[:3])
    assert f"A vLLM service runs without an Ascend stack: pid {pid} (user nobody)" in first, \
        r.stdout
    assert "ascend.conf" not in r.stdout and "fix ldconf" not in r.stdout
    assert r.returncode == 0, r.stdout
