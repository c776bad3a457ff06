"""/proc entries that vanish or are denied, and a full disk during `collect` and an atomic
write: each is a named error or skip, and no half-written file is left behind."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ascend_doctor.errors import SourceError, SourceMissing
from ascend_doctor.host import LiveHost
from ascend_doctor.probes.procs import find_servers, gather_service_env

REPO = Path(__file__).resolve().parents[2]


def _fake_vllm(tmp_path: Path, seconds: float) -> subprocess.Popen:
    script = tmp_path / "vllm" / "entrypoints" / "openai" / "api_server.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"import time\ntime.sleep({seconds})\n")
    return subprocess.Popen([sys.executable, str(script), "--port", "8000"],
                            env={"PATH": "/usr/bin:/bin", "ASCEND_RT_VISIBLE_DEVICES": "0,1"})


def test_process_exits_mid_check(tmp_path):
    """Found in the process table, gone when its environ is read: the env falls back and
    the finding says why."""
    proc = _fake_vllm(tmp_path, 30)
    try:
        host = LiveHost("/")
        deadline = time.monotonic() + 5
        while True:
            servers = find_servers(host.processes(), None)
            if any(s.pid == proc.pid for s in servers.servers) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        servers = find_servers([p for p in host.processes() if p.pid == proc.pid], None)
        assert servers.primary is not None and servers.primary.pid == proc.pid
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(SourceMissing, match="no such process"):
        host.proc_read(proc.pid, "stat")
    from ascend_doctor.options import RunOptions
    env = gather_service_env(host, RunOptions(), servers)
    assert env.source == (f"the doctor's own environment (default: /proc/{proc.pid}/environ: "
                          "no such process (it may have exited))") and env.pid == proc.pid
    assert env.origin == "default"
    assert env.unreadable_reason == f"/proc/{proc.pid}/environ: no such process (it may have exited)"


def _as_nobody(code: str) -> subprocess.CompletedProcess:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run a reader as another user")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    if subprocess.run(nobody + ["-c", "pass"], capture_output=True, timeout=60).returncode:
        # e.g. a pyenv interpreter under /root (0700): its libpython is out of nobody's reach
        pytest.skip(f"{sys.executable} cannot be run by uid 65534")
    return subprocess.run(nobody + ["-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                     "PYTHONPATH": str(REPO)})


def test_permission_denied_on_environ_of_another_user(tmp_path):
    proc = _fake_vllm(tmp_path, 30)  # runs as root; read by nobody
    try:
        code = f"""
from ascend_doctor.host import LiveHost
from ascend_doctor.errors import SourceError
from ascend_doctor.probes.procs import find_servers, gather_service_env
host = LiveHost("/")
try:
    host.proc_read({proc.pid}, "environ")
    print("READ")
except SourceError as exc:
    print("ERR", exc)
servers = find_servers([p for p in host.processes() if p.pid == {proc.pid}], None)
from ascend_doctor.options import RunOptions
env = gather_service_env(host, RunOptions(), servers)
print("ENV", env.source, "|", env.unreadable_reason)
"""
        r = _as_nobody(code)
    finally:
        proc.kill()
        proc.wait()
    assert r.returncode == 0, r.stderr
    assert f"ERR /proc/{proc.pid}/environ: permission denied" in r.stdout
    assert (f"ENV the doctor's own environment (default: /proc/{proc.pid}/environ: permission "
            f"denied) | /proc/{proc.pid}/environ: permission denied" in r.stdout)


def test_permission_denied_in_a_sysroot(sysroot):
    sysroot.write("/proc/4711/environ", b"HF_TOKEN=x\0", mode=0o000)
    r = _as_nobody(f"""
from ascend_doctor.host import LiveHost
try:
    LiveHost({str(sysroot)!r}).proc_read(4711, "environ")
except Exception as exc:
    print(type(exc).__name__, exc)
""")
    assert r.stdout.strip() == "SourceError /proc/4711/environ: permission denied", r.stderr


# -- a full disk ----------------------------------------------------------------------------
@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs (root), else skip: the RLIMIT_FSIZE tests below cover non-root."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (see the RLIMIT_FSIZE variants)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path, leave: int = 0) -> None:
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    if leave:
        os.truncate(mnt / "filler", max(os.path.getsize(mnt / "filler") - leave, 0))


def test_atomic_write_on_a_full_disk_keeps_the_original(tiny_fs):
    from ascend_doctor.atomic import atomic_write

    target = tiny_fs / "ascend.conf"
    target.write_text("/usr/local/Ascend/driver/lib64\n")
    _fill(tiny_fs)
    with pytest.raises(OSError) as info:
        atomic_write(str(target), b"/usr/local/Ascend/driver/lib64\n" * 4000)
    assert info.value.errno == errno.ENOSPC
    assert target.read_text() == "/usr/local/Ascend/driver/lib64\n"
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["ascend.conf", "filler"]


def test_collect_on_a_full_disk_is_named_and_leaves_nothing(cli, sysroot, tiny_fs):
    from tests.fixtures.sysroots import broken_ldconf

    broken_ldconf(sysroot)
    old = tiny_fs / "bundle.tar.gz"
    old.write_bytes(b"previous bundle")
    _fill(tiny_fs, leave=512)
    r = cli("collect", "--root", str(sysroot), "-o", str(old))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"cannot write bundle {old}: No space left on device" in r.stderr
    assert old.read_bytes() == b"previous bundle"
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["bundle.tar.gz", "filler"]


_FSIZE = """
LIMIT = 4096
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit then fail with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
"""


def test_atomic_write_past_rlimit_fsize_keeps_the_original(tmp_path):
    target = tmp_path / "ascend.conf"
    target.write_text("original\n")
    code = _FSIZE + f"""
from ascend_doctor.atomic import atomic_write
try:
    atomic_write({str(target)!r}, b"x" * 100000)
except OSError as exc:
    print("OSError", exc.errno)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert r.stdout.strip() == f"OSError {errno.EFBIG}", r.stderr
    assert target.read_text() == "original\n"
    assert [p.name for p in tmp_path.iterdir()] == ["ascend.conf"]


def test_collect_past_rlimit_fsize_is_named(sysroot, tmp_path):
    from tests.conftest import doctor_exe
    from tests.fixtures.sysroots import broken_ldconf

    broken_ldconf(sysroot)
    out = tmp_path / "out"
    out.mkdir()
    code = _FSIZE.replace("LIMIT = 4096", "LIMIT = 256") + f"""
sys.argv = ["ascend-doctor", "collect", "--root", {str(sysroot)!r}, "-o", {str(out / "b.tar.gz")!r}]
from ascend_doctor.cli import main
main()
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "CI": "true"})
    assert r.returncode == 2, r.stderr
    assert "cannot write bundle" in r.stderr and "File too large" in r.stderr
    assert list(out.iterdir()) == []
