"""Issue 34, HIGH: files under inputs the service account writes never bring root-only
files into reports or bundles. Each test plays the attack as `nobody` against the real CLI:
a link msprof's output directory holds to a 0600 root file, and the stdout log swapped with
such a link by renameat2(RENAME_EXCHANGE) in a loop while `collect --only logs` runs."""

from __future__ import annotations

import ctypes
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.unit.profgen import OP_SUMMARY_HEADER, csv_text, op_summary_rows

NOBODY = 65534
SECRET = b"root:$6$SECRET-ROOT-ONLY-7f3a:20228:0:99999:7:::"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plays the nobody account: needs root")


@pytest.fixture
def arena():
    """(a world-searchable base, a root-only 0600 secret file in a 0700 root dir)."""
    base = Path(tempfile.mkdtemp(prefix="ad-hostile-", dir="/tmp"))
    base.chmod(0o755)
    vault = base / "vault"
    vault.mkdir(mode=0o700)
    secret = vault / "shadow"
    secret.write_bytes(SECRET + b"\n")
    secret.chmod(0o600)
    yield base, secret
    shutil.rmtree(base, ignore_errors=True)


def _own(p: Path) -> Path:
    os.lchown(p, NOBODY, NOBODY)
    return p


def _bundle_bytes(path: Path) -> bytes:
    out = []
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m)
            if f is not None:
                out.append(f.read())
    return b"\n".join(out)


def test_profile_link_to_a_root_only_file_is_never_read(cli, arena):
    base, secret = arena
    prof = base / "prof"
    prof.mkdir()
    _own(prof)
    out_dir = prof / "PROF_000001" / "mindstudio_profiler_output"
    out_dir.mkdir(parents=True)
    for d in (prof / "PROF_000001", out_dir):
        _own(d)
    good = out_dir / "op_summary_0_1.csv"
    good.write_text(csv_text(OP_SUMMARY_HEADER, op_summary_rows(steps=3)))
    _own(good)
    evil = out_dir / "op_summary_1_1.csv"
    evil.symlink_to(secret)
    _own(evil)

    r = cli("check", "--profile", str(prof), "--only", "msprof", "--json")
    assert r.returncode in (0, 1), r.stderr
    assert "SECRET" not in r.stdout and "root:" not in r.stdout
    doc = json.loads(r.stdout)
    text = json.dumps(doc)
    assert "op_summary_1_1.csv" in text and "could not read" in text  # named, not read
    r = cli("check", "--profile", str(prof), "--only", "msprof")
    assert "SECRET" not in r.stdout and "root:" not in r.stdout
    bundle = base / "b.tar.gz"
    r = cli("collect", "--profile", str(prof), "--only", "msprof", "-o", str(bundle))
    assert bundle.exists(), r.stderr
    data = _bundle_bytes(bundle)
    assert b"SECRET" not in data
    assert b"MatMulV2" in data  # the service's own export was collected

    # the only export is the link: an error naming it, the header of what it points at unsaid
    good.unlink()
    r = cli("check", "--profile", str(prof), "--only", "msprof", "--json")
    assert "SECRET" not in r.stdout and "root:" not in r.stdout, r.stdout
    assert "could not read" in r.stdout


def test_unrecognised_csv_header_is_not_quoted(cli, tmp_path):
    out_dir = tmp_path / "PROF_000001" / "mindstudio_profiler_output"
    out_dir.mkdir(parents=True)
    (out_dir / "op_summary_0_1.csv").write_text("root:*:20228:0:99999:7:::\nbin:*:1:2\n")
    r = cli("check", "--profile", str(tmp_path), "--only", "msprof", "--json")
    assert "root:*" not in r.stdout and "20228" not in r.stdout
    assert "column(s) Task Duration(us) missing" in r.stdout


_libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _exchange(a: bytes, b: bytes) -> None:
    _libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)


SERVER = """import sys, time
sys.stdout.write("INFO 12-06 10:00:00 api_server.py:1] vLLM API server version 0.23.0\\n")
sys.stdout.flush()
time.sleep(120)
"""


def _system_python() -> str:
    """An interpreter `nobody` may run (the test venv may sit under a 0700 home)."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(p, os.X_OK):
            return p
    pytest.skip("no system python3 for the nobody service")


def test_stdout_log_swapped_with_a_link_never_brings_the_root_file(cli, arena):
    """The service's log and a link to a root-only file change names in a tight loop while
    bundles are collected: what is read is /proc/PID/fd/1 itself, so none carries it."""
    if not hasattr(_libc, "renameat2"):
        pytest.skip("no renameat2 in this libc")
    base, secret = arena
    d = base / "svc"
    d.mkdir()
    _own(d)
    script = d / "vllm" / "entrypoints" / "openai" / "api_server.py"
    script.parent.mkdir(parents=True)
    script.write_text(SERVER)
    for p in (d / "vllm", d / "vllm/entrypoints", d / "vllm/entrypoints/openai", script):
        os.chmod(p, 0o755)
    log = d / "server.log"
    log.touch()
    _own(log)
    log.chmod(0o640)
    link = d / "alt"
    link.symlink_to(secret)
    _own(link)
    with open(log, "ab") as out:
        proc = subprocess.Popen([_system_python(), str(script), "--port", "18731"], stdout=out,
                                stderr=subprocess.DEVNULL, user=NOBODY, group=NOBODY,
                                extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"})
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:
        a, b = bytes(log), bytes(link)
        while not stop.is_set():
            _exchange(a, b)
            swaps[0] += 1

    t = threading.Thread(target=swapper, daemon=True)
    try:
        deadline = time.monotonic() + 10
        while log.stat().st_size == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        t.start()
        carried, collected = 0, 0
        for i in range(8):
            bundle = base / f"b{i}.tar.gz"
            r = cli("collect", "--pid", str(proc.pid), "--only", "logs", "-o", str(bundle),
                    timeout=120)
            assert bundle.exists(), r.stderr
            collected += 1
            carried += SECRET in _bundle_bytes(bundle)
    finally:
        stop.set()
        t.join(5)
        proc.kill()
        proc.wait()
    assert swaps[0] > 1000  # the race really ran
    assert collected == 8 and carried == 0, f"{carried} of {collected} bundles carry the secret"


def test_diff_and_check_bundle_refuse_a_fifo_at_once(cli, tmp_path):
    fifo = tmp_path / "b.tar.gz"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    r = cli("check", "--bundle", str(fifo), "--json", timeout=30)
    assert r.returncode == 2 and "not a regular file" in (r.stderr + r.stdout)
    r = cli("diff", str(fifo), str(fifo), timeout=30)
    assert r.returncode == 2 and "not a regular file" in (r.stderr + r.stdout), r.stderr
    assert time.monotonic() - t0 < 30


def test_a_log_growing_3mb_per_second_still_lands_in_the_bundle(cli, tmp_path):
    """The logs check used to chase the end of a growing log until its 60 s timeout, and the
    bundle then had no log at all: now it reads to the size at open, well inside the budget."""
    log = tmp_path / "server.log"
    line = b"INFO 12-06 10:00:00 engine.py:1] Avg prompt throughput: 1.0 tokens/s, x\n"
    log.write_bytes(line * 200_000)  # ~15 MB to start with
    stop = threading.Event()

    def writer() -> None:
        with open(log, "ab") as fh:
            chunk = line * (300_000 // len(line))  # ~300 KB every 0.1 s: ~3 MB/s
            while not stop.is_set():
                fh.write(chunk)
                fh.flush()
                time.sleep(0.1)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        bundle = tmp_path / "b.tar.gz"
        t0 = time.monotonic()
        r = cli("collect", "--log", str(log), "--only", "logs", "-o", str(bundle), timeout=120)
        took = time.monotonic() - t0
    finally:
        stop.set()
        t.join(5)
    assert bundle.exists(), r.stderr
    assert took < 55, took
    data = _bundle_bytes(bundle)
    assert data.count(b"Avg prompt throughput") >= 200_000  # what was there when opened
    assert "timed out" not in r.stdout + r.stderr
