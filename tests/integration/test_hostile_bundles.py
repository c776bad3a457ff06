"""Bundles are hostile input (issue 20, items 2 reading side, 3 and 8), tested through the
real console script with real crafted tar.gz files: every hostile bundle is refused with
one line on stderr and exit 2, never a traceback, at bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest

from ascend_doctor.demo import demo_bundle_data
from tests.conftest import doctor_exe

RSS_LIMIT_KIB = 256 * 1024
MIB = 1024 * 1024


def _run_measured(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess,
                                                                 int]:
    """Run the CLI under a fresh wrapper whose RUSAGE_CHILDREN is only that CLI's: the
    wrapper prints the child's peak RSS (KiB) as its last stdout line."""
    wrapper = ("import resource, subprocess, sys\n"
               "r = subprocess.run(sys.argv[1:], capture_output=True)\n"
               "sys.stderr.buffer.write(r.stderr); sys.stdout.buffer.write(r.stdout)\n"
               "print('\\nRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "sys.exit(r.returncode)\n")
    e = {**os.environ, "NO_COLOR": "1", "CI": "true", **(env or {})}
    r = subprocess.run([sys.executable, "-c", wrapper, doctor_exe(), *args],
                       capture_output=True, text=True, env=e, timeout=180)
    body, _, rss = r.stdout.rpartition("\nRSS ")
    return subprocess.CompletedProcess(r.args, r.returncode, body, r.stderr), int(rss)


def _gz_tar(path: Path, members: list[tuple[tarfile.TarInfo, "bytes | int"]]) -> Path:
    """Write a tar.gz whose members are (header, data); an int data is that many zero
    bytes, compressed in chunks so the test itself never holds the inflated bomb."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(MIB)
    with open(path, "wb") as out:
        for info, data in members:
            if isinstance(data, int):
                info.size = data
                out.write(z.compress(info.tobuf(tarfile.PAX_FORMAT)))
                left = data
                while left:
                    n = min(left, MIB)
                    out.write(z.compress(chunk[:n]))
                    left -= n
                out.write(z.compress(bytes(-data % 512)))
            else:
                info.size = len(data)
                out.write(z.compress(info.tobuf(tarfile.PAX_FORMAT)))
                out.write(z.compress(data + bytes(-len(data) % 512)))
        out.write(z.compress(bytes(1024)))
        out.write(z.flush())
    return path


def _file(name: str, **kw) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(info, k, v)
    return info


MANIFEST = json.dumps({"format": "ascend-doctor-bundle", "format_version": 1}).encode()


def _hostile(tmp_path: Path) -> dict[str, Path]:
    """Each attack as a real file, with a valid manifest so only the attack is wrong."""
    ok = [(_file("manifest.json"), MANIFEST)]
    b = {}
    b["bomb_one_member"] = _gz_tar(tmp_path / "bomb1.tar.gz",
                                   ok + [(_file("blobs/" + "0" * 64), 512 * MIB)])
    b["bomb_many_members"] = _gz_tar(tmp_path / "bomb2.tar.gz",
                                     ok + [(_file(f"blobs/{i:064x}"), 60 * MIB)
                                           for i in range(6)])
    b["deep_index"] = _gz_tar(tmp_path / "deep.tar.gz",
                              ok + [(_file("index.json"), b"[" * 100_000 + b"]" * 100_000)])
    b["symlink"] = _gz_tar(tmp_path / "sym.tar.gz", ok + [
        (_file("blobs/x", type=tarfile.SYMTYPE, linkname="/etc/shadow"), b"")])
    b["hardlink"] = _gz_tar(tmp_path / "hard.tar.gz", ok + [
        (_file("blobs/x", type=tarfile.LNKTYPE, linkname="/etc/shadow"), b"")])
    b["dotdot"] = _gz_tar(tmp_path / "dotdot.tar.gz", ok + [(_file("../x"), b"pwned")])
    b["absolute"] = _gz_tar(tmp_path / "abs.tar.gz", ok + [(_file("/tmp/x"), b"pwned")])
    b["fifo"] = _gz_tar(tmp_path / "fifo.tar.gz", ok + [
        (_file("blobs/fifo", type=tarfile.FIFOTYPE), b"")])
    b["device"] = _gz_tar(tmp_path / "dev.tar.gz", ok + [
        (_file("blobs/dev", type=tarfile.CHRTYPE, devmajor=1, devminor=1), b"")])
    # a pax extended header / GNU long name of 100 MiB: tarfile reads those into memory
    b["pax_header_bomb"] = _gz_tar(tmp_path / "pax.tar.gz", ok + [
        (_file("././@PaxHeader", type=tarfile.XHDTYPE), 100 * MIB)])
    b["gnu_longname_bomb"] = _gz_tar(tmp_path / "gnu.tar.gz", ok + [
        (_file("././@LongLink", type=tarfile.GNUTYPE_LONGNAME), 100 * MIB)])
    return b


REASONS = {"bomb_one_member": "limit", "bomb_many_members": "inflates",
           "deep_index": "nested deeper", "symlink": "is a link", "hardlink": "is a link",
           "dotdot": "'..'", "absolute": "absolute", "fifo": "device or FIFO",
           "device": "device or FIFO", "pax_header_bomb": "inflates",
           "gnu_longname_bomb": "inflates"}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    return _hostile(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize("attack", sorted(REASONS))
def test_check_refuses_hostile_bundle_in_one_line_at_bounded_rss(hostile, attack):
    r, rss = _run_measured("check", "--bundle", str(hostile[attack]), "--json")
    assert r.returncode == 2, (r.stdout[-500:], r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and REASONS[attack] in lines[0], lines[0]
    assert str(hostile[attack]) in lines[0]
    assert rss <= RSS_LIMIT_KIB, f"{attack}: peak RSS {rss // 1024} MiB"


@pytest.mark.parametrize("attack", ["dotdot", "symlink", "absolute", "bomb_one_member"])
def test_export_root_refuses_hostile_bundle_and_writes_nothing(hostile, attack, tmp_path):
    target = tmp_path / "out"
    r, rss = _run_measured("export-root", str(target), "--bundle", str(hostile[attack]))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert REASONS[attack] in r.stderr and "Traceback" not in r.stderr
    assert not target.exists() or not any(target.iterdir())
    assert not (tmp_path / "x").exists()
    assert rss <= RSS_LIMIT_KIB


@pytest.mark.parametrize("attack", ["dotdot", "fifo", "bomb_many_members"])
def test_fix_bundle_refuses_hostile_bundle(hostile, attack, tmp_path, cli):
    r = cli("fix", "ldconf.order", "--bundle", str(hostile[attack]),
            "--demo-root", str(tmp_path / "demo"))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert REASONS[attack] in r.stderr


@pytest.mark.parametrize("content", [b"", b"not a tar at all\n" * 40, b"\x1f\x8b\x08garbage",
                                     b"\x1f\x8b" + bytes(600)])
def test_corrupt_bundle_is_one_line(content, tmp_path, cli):
    p = tmp_path / "bad.tar.gz"
    p.write_bytes(content)
    for args in (("check", "--bundle", str(p)), ("export-root", str(tmp_path / "o"),
                                                 "--bundle", str(p))):
        r = cli(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and str(p) in r.stderr, r.stderr


def _demo_with_version_body(body: bytes) -> bytes:
    data = demo_bundle_data()
    digest = data.blob(body)
    entries = data.index["http"]["http://127.0.0.1:8000/version"]
    entries[:] = [{**entries[0], "body": digest}]
    return data.to_bytes()


def test_deep_version_body_errors_only_that_fact(tmp_path, cli):
    """A recorded /version nested 200 000 deep: the service.version check says the body is
    not usable JSON; the other service checks and the rest of the run still report."""
    p = tmp_path / "deep-version.tar.gz"
    p.write_bytes(_demo_with_version_body(b"[" * 200_000 + b"]" * 200_000))
    r = cli("check", "--bundle", str(p), "--json")
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stdout
    checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
    ver = checks["service.version"]
    msgs = " ".join(f["message"] for f in ver["findings"])
    assert "not usable JSON" in msgs and "nested deeper" in msgs, msgs
    health = [c for i, c in checks.items() if i.startswith("service.") and i != "service.version"]
    assert health and all(c["status"] != "error" for c in health), \
        [(c["id"], c["status"]) for c in health]
    assert checks["ldconf.order"]["status"] == "fail"


def test_demo_bundle_still_loads_and_checks(tmp_path, cli):
    """The bounds do not refuse a real bundle (the demo export round-trips)."""
    p = tmp_path / "demo.tar.gz"
    assert cli("demo", "--export", str(p)).returncode == 0
    r = cli("check", "--bundle", str(p), "--json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["context"] == "bundle"


def test_markdown_without_a_server_does_not_crash(cli):
    """`check --markdown` on this host (no vLLM server; torch_import publishes "env" as the
    name of an environment) used to crash in markdown.py with 'str' has no .items()."""
    r = cli("check", "--markdown", "--only", "torch_npu,service")
    assert r.returncode in (0, 1, 2), r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout.startswith("## ascend-doctor report")


def test_no_traceback_for_bad_inputs(tmp_path, cli):
    missing = str(tmp_path / "nope.tar.gz")
    for args in (("check", "--bundle", missing), ("export-root", str(tmp_path / "o"),
                                                  "--bundle", missing),
                 ("triage", str(tmp_path / "nolog.txt")),
                 ("collect", "-o", str(tmp_path / "nodir" / "b.tar.gz"), "--only", "ldconf")):
        r = cli(*args)
        assert "Traceback" not in r.stderr, (args, r.stderr)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert len(r.stderr.strip().splitlines()) >= 1


def test_debug_env_lets_the_exception_through(hostile, cli):
    r = cli("check", "--bundle", str(hostile["dotdot"]), env={"ASCEND_DOCTOR_DEBUG": "1"})
    assert r.returncode != 0 and "Traceback" in r.stderr and "BundleError" in r.stderr
