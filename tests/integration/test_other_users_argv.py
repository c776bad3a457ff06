"""Other processes' argv stays out of every report and bundle (issue 20.6), with the attack
itself: real processes on this host whose command lines hold passwords — ``sshpass -p``, a
load tool with a bare positional token no redaction pattern knows, and a token inside
invalid UTF-8 — while the real ``ascend-doctor check``/``collect`` run.

The bare positional one is the bite: redaction cannot know it is a secret, so only keeping
no more of a stranger's argv than the checks need keeps it out (doctor/proctable.py).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

SLEEP = "import time; time.sleep(120)"
PLANTED = (b"hunter2PLANTED0001", b"PLANTEDbarePositional0002", b"PLANTEDbadutf0003")
ATTACKERS = [
    [b"sshpass", b"-c", SLEEP.encode(), b"-p", PLANTED[0], b"ssh", b"node2"],
    # a load client: dns.load-clients copies its cmdline into the report's evidence
    [b"locust", b"-c", SLEEP.encode(), b"--host", b"http://svc", PLANTED[1]],
    [b"backup-agent", b"-c", SLEEP.encode(), b"--db", b"\xff\xfe" + PLANTED[2] + b"\xc3"],
]


@pytest.fixture(scope="module")
def attackers():
    """Processes whose argv[0] is not python (like ``exec -a``): Popen's ``executable=``."""
    procs = [subprocess.Popen(argv, executable=sys.executable, cwd="/",
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
             for argv in ATTACKERS]
    for p in procs:  # the guard: the secret is really in this host's process table
        for _ in range(100):
            raw = Path(f"/proc/{p.pid}/cmdline").read_bytes()
            if b"-c" in raw:
                break
            time.sleep(0.05)
        assert any(s in raw for s in PLANTED), raw
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def _assert_clean(where: str, data: "bytes | str") -> None:
    b = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    leaked = [s.decode() for s in PLANTED if s in b]
    assert not leaked, f"{where} leaks {leaked}"


def test_the_live_process_table_keeps_no_strangers_argv(attackers):
    from ascend_doctor.host import LiveHost

    table = {p.pid: p for p in LiveHost("/").processes()}
    for proc, argv in zip(attackers, ATTACKERS):
        assert table[proc.pid].cmdline == (argv[0].decode(),)
        _assert_clean(f"process {proc.pid}", repr(table[proc.pid]))


@pytest.fixture(scope="module")
def own_service(tmp_path_factory):
    """The run's vLLM, named by --pid and --service: without it the run took whatever vLLM
    another session ran on this machine (its stdout log read until the 20 s timeout)."""
    from tests.integration.test_live_service import fake_vllm

    with fake_vllm(tmp_path_factory.mktemp("svc")) as (proc, port, _log):
        yield ["--service", f"http://127.0.0.1:{port}", "--pid", str(proc.pid)]


def test_no_report_format_nor_the_bundle_holds_a_strangers_argv(cli, attackers, own_service,
                                                                tmp_path):
    args = [*own_service, "--timeout", "20", "--only", "dns,service,config"]
    r = cli("check", *args, "--json")
    assert r.returncode in (0, 1), r.stderr
    # the load client was seen, and named by its pid (asserted on the evidence, by our pid:
    # the message names the first six load clients, and other sessions' benchmarks may sort
    # before ours)
    doc = json.loads(r.stdout)
    seen = {c["pid"]: c for chk in doc["checks"] if chk["id"] == "dns.load-clients"
            for f in chk["findings"] for c in (f.get("evidence") or {}).get("load_clients", [])}
    assert seen[attackers[1].pid]["kind"] == "locust", seen
    _assert_clean("check --json", r.stdout + r.stderr)
    for fmt in ((), ("--markdown",)):
        r = cli("check", *args, *fmt)
        assert r.returncode in (0, 1), r.stderr
        _assert_clean(f"check {fmt}", r.stdout + r.stderr)
    junit = tmp_path / "j.xml"
    cli("check", *args, "--junit", str(junit))
    _assert_clean("junit", junit.read_bytes())
    bundle = tmp_path / "b.tar.gz"
    r = cli("collect", *args, "-o", str(bundle))
    assert r.returncode == 0, r.stderr
    with tarfile.open(fileobj=io.BytesIO(bundle.read_bytes()), mode="r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    assert b'"locust"' in members["index.json"]  # the process table was recorded
    for name, data in members.items():
        _assert_clean(f"bundle member {name}", data)
    r = cli("check", "--bundle", str(bundle), "--json")
    _assert_clean("check --bundle --json", r.stdout + r.stderr)
