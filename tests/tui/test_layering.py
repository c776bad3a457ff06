"""The TUI is a front end over the core, not over the CLI: importing it, and opening each
kind of host through it, never imports doctor.cli (the circle issue 14 item 7 removed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = r"""
import sys
from ascend_doctor.tui.app import DoctorApp
assert "ascend_doctor.cli" not in sys.modules, "importing doctor.tui.app imported doctor.cli"
kind, arg = sys.argv[1], sys.argv[2]
app = {"demo": lambda: DoctorApp(demo=True),
       "root": lambda: DoctorApp(root=arg),
       "bundle": lambda: DoctorApp(bundle=arg)}[kind]()
host = app.make_host()
print(host.kind, host.info().hostname)
leaked = sorted(m for m in sys.modules if m == "ascend_doctor.cli" or m.startswith("ascend_doctor.cli_"))
assert not leaked, f"opening a {kind} host imported {leaked}"
"""


def _probe(kind: str, arg: str = "") -> str:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    res = subprocess.run([sys.executable, "-c", PROBE, kind, arg], capture_output=True,
                         text=True, timeout=120, env=env, cwd=os.getcwd())
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("kind", ["demo", "root", "bundle"])
def test_the_tui_opens_hosts_without_importing_the_cli(kind, tmp_path):
    arg = ""
    if kind == "root":
        (tmp_path / "etc").mkdir()
        (tmp_path / "etc" / "hostname").write_text("sysroot-01\n")
        arg = str(tmp_path)
    elif kind == "bundle":
        from ascend_doctor.demo import demo_bundle_bytes
        arg = str(tmp_path / "demo.tar.gz")
        with open(arg, "wb") as fh:
            fh.write(demo_bundle_bytes())
    out = _probe(kind, arg)
    assert out.strip(), "the host answered nothing"


def test_a_missing_bundle_is_named_by_the_core():
    from ascend_doctor.errors import BundleError
    from ascend_doctor.opening import open_host

    with pytest.raises(BundleError, match="nope.tar.gz does not exist"):
        open_host(None, "/nonexistent/nope.tar.gz")
