"""Files named on the command line are the user's files: relative paths resolve against the
current directory (also with --root a sysroot), and one that cannot be read is an error that
makes the run exit non-zero — through the real console script, from a tmp cwd."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import doctor_exe
from tests.fixtures.sysroots import write_log
from tests.unit import capgen
from tests.unit.profgen import write_msprof

ONLY = "dns.capture,msprof.export,block_tables.invariants,logs.signatures"


def run(cwd, *args):
    env = {**os.environ, "NO_COLOR": "1", "CI": "true"}
    r = subprocess.run([doctor_exe(), "check", "--json", "--only", ONLY, *args], cwd=cwd,
                       capture_output=True, text=True, env=env, timeout=120)
    return r, {c["id"]: c for c in json.loads(r.stdout)["checks"]}


def user_inputs(d):
    """The README's example inputs, in the user's working directory."""
    capgen.write(d / "jmeter.pcapng", capgen.ndots_expansion(), ng=True)
    prof = write_msprof(d)
    write_log(d / "audit.jsonl", num_blocks=300)
    (d / "logs").mkdir()
    (d / "logs/server.log").write_text(
        "INFO 03-23 03:17:49 engine started\n"
        "RuntimeError: ACL stream synchronize failed, error code is 507035\n")
    return ["--pcap", "jmeter.pcapng", "--profile", f"./{prof.name}",
            "--block-audit", "audit.jsonl", "--log", "logs/server.log"]


def _analysed(checks):
    for cid in ("dns.capture", "msprof.export", "block_tables.invariants", "logs.signatures"):
        st = {f["status"] for f in checks[cid]["findings"]}
        assert not st & {"skip", "error"}, (cid, checks[cid]["findings"])


def test_relative_inputs_from_the_cwd(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    r, checks = run(cwd, *user_inputs(cwd))
    assert r.returncode == 0 or "Traceback" not in r.stderr
    _analysed(checks)


def test_relative_inputs_with_a_sysroot_are_read_from_the_cwd(tmp_path):
    """--root diagnoses a sysroot; the inputs are still the user's files in the cwd (a decoy
    at the same path inside the sysroot is not what is read)."""
    cwd, root = tmp_path / "work", tmp_path / "sysroot"
    cwd.mkdir()
    decoy = root / str(cwd).lstrip("/")
    decoy.mkdir(parents=True)
    (decoy / "jmeter.pcapng").write_bytes(b"not a capture")
    r, checks = run(cwd, "--root", str(root), *user_inputs(cwd))
    _analysed(checks)


def test_a_named_input_that_cannot_be_read_is_an_error_and_exit_1(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    # an empty sysroot: no live vLLM on the machine running the tests adds its own log
    empty = tmp_path / "root"
    empty.mkdir()
    for args, flag, name, cid in (
            (["--pcap", "missing.pcapng"], "--pcap", "missing.pcapng", "dns.capture"),
            (["--profile", "./PROF_000001"], "--profile", "PROF_000001", "msprof.export"),
            (["--block-audit", "gone.jsonl"], "--block-audit", "gone.jsonl",
             "block_tables.invariants"),
            (["--log", "logs/server.log"], None, "logs/server.log", "logs.signatures")):
        r, checks = run(cwd, "--root", str(empty), *args)
        assert r.returncode == 1, (args, r.stdout[-500:], r.stderr[-500:])
        fs = checks[cid]["findings"]
        assert [f["status"] for f in fs] == ["error"], (args, fs)
        assert str(cwd / name) in fs[0]["message"], fs[0]["message"]
        if flag:
            assert fs[0]["message"].startswith(f"cannot read {flag} {cwd / name}")
        assert "not found" in fs[0]["message"] or "No such file" in fs[0]["message"]
