"""libacl.maps on a real process: a python that dlopen()ed a gcc-built libascendcl.so from an
Ascend-like directory, compared with the static answer in that process's environment."""

from __future__ import annotations

import subprocess
import sys
import time

from ascend_doctor.engine import RunConfig, run
from ascend_doctor.host import LiveHost
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from tests.libfixtures import gcc

LOADER = ("import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); print('ready', flush=True); "
          "time.sleep(60)")


def _serve(lib: str, env: dict) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", LOADER, lib], stdout=subprocess.PIPE, env=env,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def _run(pid: int, elf: str):
    opts = RunOptions(pid=pid, elf_paths=(elf,))
    r = run(LiveHost("/"), options=opts, config=RunConfig(only=("libacl.maps", "libacl.resolve")))
    return {x.check_id: x for x in r.results}


def test_maps_agree_and_disagree_with_static_answer(tmp_path):
    d = tmp_path / "Ascend/ascend-toolkit/8.0.0/lib64"
    acl = gcc(d / "libascendcl.so", "-Wl,-soname,libascendcl.so")
    user = gcc(tmp_path / "app/libuser.so", f"-L{d}", "-lascendcl")
    base = {"PATH": "/usr/bin:/bin"}
    p = _serve("libascendcl.so", {**base, "LD_LIBRARY_PATH": str(d)})
    try:
        by = _run(p.pid, str(user))
    finally:
        p.kill()
        p.wait()
    assert by["libacl.resolve"].status == Status.PASS, by["libacl.resolve"].findings
    (ok,) = by["libacl.maps"].findings
    assert ok.status == Status.PASS and "maps 1 Ascend library" in ok.message
    # loaded by full path, with no LD_LIBRARY_PATH: the static answer cannot find it
    p = _serve(str(acl), base)
    try:
        time.sleep(0.05)
        by = _run(p.pid, str(user))
    finally:
        p.kill()
        p.wait()
    assert by["libacl.resolve"].status == Status.FAIL
    (w,) = by["libacl.maps"].findings
    assert w.status == Status.WARN and f"pid {p.pid} has {acl}" in w.message
