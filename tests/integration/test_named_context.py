"""Issue 31: what the user names wins over what the doctor discovers.

A vLLM-like server of another account (``nobody``, tests/planted.py) runs on this host while
the real ``ascend-doctor`` runs with ``--python``: the import probe runs as the caller, in the
caller's environment (LD_LIBRARY_PATH included), never as the stranger's uid with the
stranger's environment; every finding that depends on that context says which one it used.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.planted import planted_vllm


def _findings(doc: dict, check: str) -> list[dict]:
    return next(c["findings"] for c in doc["checks"] if c["id"] == check)


def _stand_in(tmp_path: Path) -> Path:
    """An interpreter that reports whose rights and which LD_LIBRARY_PATH it ran with, the
    way a failing import does (its last stderr line). In a 0700 root directory: run as
    nobody, it could not even be executed (the issue's "setpriv … Permission denied")."""
    py = tmp_path / "bin" / "python3"
    py.parent.mkdir()
    py.write_text('#!/bin/sh\necho "ImportError: ran as uid $(id -u) with '
                  'LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >&2\nexit 1\n')
    py.chmod(0o755)
    return py


def test_python_runs_as_the_caller_in_the_callers_environment(cli, tmp_path):
    py = _stand_in(tmp_path)
    with planted_vllm() as (pid, port):
        r = cli("check", "--json", "--python", str(py), "--only", "torch_npu.import",
                env={"LD_LIBRARY_PATH": "/opt/caller/cann/lib64"})
    assert r.returncode == 1, r.stderr
    (f,) = _findings(json.loads(r.stdout), "torch_npu.import")
    assert f["status"] == "fail"
    assert "ran as uid 0 with LD_LIBRARY_PATH=/opt/caller/cann/lib64" in f["message"]
    assert "Permission denied" not in f["message"] and f"pid {pid}" not in f["message"]
    assert "as the doctor's own user" in f["evidence"]["ran"]
    # the finding says which context it used: both named by the caller
    assert f["evidence"]["context"] == {"interpreter": "named", "env": "named"}
    assert "named: --python" in f["message"]
    assert "the caller's environment (named: --python)" in f["message"]


def test_without_python_the_discovered_servers_context_is_used_and_said(cli, tmp_path):
    """The counter-case: nothing named, --pid the planted server: its interpreter runs as its
    own uid (nobody), with its own environment, and the finding says so."""
    with planted_vllm() as (pid, port):
        r = cli("check", "--json", "--pid", str(pid), "--only", "torch_npu.import",
                env={"LD_LIBRARY_PATH": "/opt/caller/cann/lib64"})
    (f,) = _findings(json.loads(r.stdout), "torch_npu.import")
    assert f["evidence"]["context"] == {"interpreter": "named", "env": "named"}
    assert f"as uid 65534" in f["evidence"]["ran"], f
    assert f"/proc/{pid}/environ (named: --pid {pid})" in f["message"]


@pytest.mark.slow
def test_real_wheels_with_a_strangers_server_and_cann_on_the_callers_path(cli, tmp_path):
    """The real torch_npu / vllm_ascend wheels (no CANN here), a stranger's server on the
    host: the verdicts are those of a clean host, and the CANN libraries the caller's
    LD_LIBRARY_PATH holds (stand-ins compiled here under their sonames) are all found."""
    from tests.libfixtures import gcc
    from tests.torchenv import build

    python, kind = build()
    args = ("check", "--json", "--python", str(python), "--only", "libacl.resolve",
            "--only", "torch_npu")
    with planted_vllm():
        before = json.loads(cli(*args, timeout=300).stdout)
        missing = sorted({f["subject"] for f in _findings(before, "libacl.resolve")
                          if f["status"] == "fail"})
        assert "libhccl.so" in missing and len(missing) > 10, missing
        libdir = tmp_path / "cann" / "lib64"
        for name in missing:
            gcc(libdir / name, f"-Wl,-soname,{name}")
        after = json.loads(cli(*args, timeout=300,
                               env={"LD_LIBRARY_PATH": str(libdir)}).stdout)
    still = [f["subject"] for f in _findings(after, "libacl.resolve") if f["status"] == "fail"]
    assert still == [], still
    info = " ".join(f["message"] for f in _findings(after, "libacl.resolve"))
    assert f"LD_LIBRARY_PATH from the caller's environment (named: --python): {libdir}" in info
    (imp,) = _findings(before, "torch_npu.import")
    assert imp["status"] == "fail" and "Permission denied" not in imp["message"]
    if kind == "torch+torch_npu":
        assert "libhccl.so: cannot open shared object file" in imp["message"]
    assert imp["evidence"]["context"] == {"interpreter": "named", "env": "named"}
    assert os.geteuid() != 0 or "as the doctor's own user" in imp["evidence"]["ran"]


def test_config_launch_lists_the_api_port_only(cli):
    """Issue 31: the server's EngineCore child and its own side channel listen too (random
    ports); config.launch names the port the API server listens on, the others apart."""
    with planted_vllm() as (pid, port):
        import time
        time.sleep(0.5)  # the EngineCore-like child is listening by now
        r = cli("check", "--json", "--pid", str(pid), "--only", "config.launch")
    (f,) = _findings(json.loads(r.stdout), "config.launch")
    assert f["evidence"]["ports"] == [port], f
    assert len(f["evidence"]["side_ports"]) == 2 and port not in f["evidence"]["side_ports"]
    assert f" on {port}, " in f["message"]
    assert not any(str(p) in f["message"] for p in f["evidence"]["side_ports"])
