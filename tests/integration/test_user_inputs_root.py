"""User-named inputs under --root (issue 13): an --elf path is the invoking user's file,
resolved against the current directory even when --root names a sysroot (what it loads is
searched inside the sysroot), and `collect` exits non-zero when a named input cannot be
read. Also: doctor/procnet.py, the socket-table parser, imports nothing of the Host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.libfixtures import gcc

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    libdir = root / "usr/lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    for name in ("libc.so.6", "ld-linux-x86-64.so.2"):  # real files: closures end in them
        (libdir / name).write_bytes(Path(LIBC).with_name(name).read_bytes())
    (root / "etc").mkdir()
    (root / "etc/ld.so.conf").write_text("/usr/lib/x86_64-linux-gnu\n")
    return root


def test_elf_under_root_is_read_relative_to_the_cwd(cli, tmp_path, monkeypatch):
    root = _root(tmp_path)
    work = tmp_path / "work"
    gcc(work / "build" / "libmine.so", src="int f(void){return 1;}\n")
    monkeypatch.chdir(work)  # the CLI child inherits it: --elf is relative to here
    r = cli("check", "--root", str(root), "--elf", "build/libmine.so", "--only",
            "libacl.resolve", "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    (res,) = [c for c in doc["checks"] if c["id"] == "libacl.resolve"]
    assert not [f for f in res["findings"] if f["status"] == "error"], res["findings"]
    assert any(f["status"] == "pass" and "of 1 ELF file(s) resolve" in f["message"]
               for f in res["findings"]), res["findings"]
    # the same relative name that is not there: an error naming it, and exit 1
    r = cli("check", "--root", str(root), "--elf", "build/nothere.so", "--only",
            "libacl.resolve", "--json")
    assert r.returncode == 1
    assert str(work / "build" / "nothere.so") in r.stdout


def test_collect_exits_non_zero_when_a_named_input_is_unreadable(cli, tmp_path, monkeypatch):
    root = _root(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "b.tar.gz"
    r = cli("collect", "--root", str(root), "--log", "logs/missing.log", "--only", "logs",
            "-o", str(out))
    assert r.returncode == 1, r.stderr
    assert out.exists()  # the bundle is still written
    last = r.stderr.strip().splitlines()[-1]
    assert "could not read" in last and "missing.log" in last
    log = tmp_path / "logs" / "server.log"
    log.parent.mkdir()
    log.write_text("INFO 01-02 10:00:00 api_server.py:1] vLLM API server version 0.23.0\n")
    r = cli("collect", "--root", str(root), "--log", "logs/server.log", "--only", "logs",
            "-o", str(out))
    assert r.returncode == 0, r.stderr


def test_procnet_imports_nothing_of_the_host():
    code = ("import sys; import ascend_doctor.procnet; "
            "assert 'ascend_doctor.host' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(Path(__file__).parents[2]))
    from ascend_doctor.host import Connection
    from ascend_doctor.procnet import Connection as C2
    assert Connection is C2
