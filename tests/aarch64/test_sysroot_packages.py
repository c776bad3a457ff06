"""Packages of a sysroot (``check --root``): its interpreters are data, never run, so their
site-packages are read statically; RPM distributions' lib64 platlib is searched. Before,
a root holding any python3 lost every package fact (the run raised "not executed") and
libacl.resolve was a skip on a real userland. Runs everywhere: the trees are built here."""

from __future__ import annotations

import os

from ascend_doctor.host import LiveHost
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.packages import gather_packages


def _dist(site, name: str, version: str) -> None:
    d = site / f"{name}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (d / "RECORD").write_text(f"{name}/__init__.py,,\n{name}/lib/lib{name}.so,,\n")


def _exe(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 100)
    os.chmod(path, 0o755)


def test_python_named_in_a_sysroot_is_read_not_run(tmp_path):
    _exe(tmp_path / "usr/bin/python3.11")
    (tmp_path / "usr/bin/python3").symlink_to("python3.11")
    venv = tmp_path / "opt/vllm"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").symlink_to("/usr/bin/python3.11")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n"
                                     "version = 3.11.2\n")
    site = venv / "lib/python3.11/site-packages"
    _dist(site, "torch_npu", "2.14.0")
    _dist(site, "vllm_ascend", "0.23.0")
    pkgs = gather_packages(LiveHost(str(tmp_path), env={}), RunOptions(python="/opt/vllm/bin/python"))
    assert {k: p.version for k, p in pkgs.packages.items()} == {"torch-npu": "2.14.0",
                                                                 "vllm-ascend": "0.23.0"}
    assert pkgs.python == "3.11.2" and pkgs.executable == "/opt/vllm/bin/python"
    assert pkgs.packages["torch-npu"].location == "/opt/vllm/lib/python3.11/site-packages"


def test_python3_without_own_site_falls_back_to_the_system_sites(tmp_path):
    """Debian's /usr/bin/python3 has dist-packages, not lib/python3.X/site-packages."""
    _exe(tmp_path / "usr/bin/python3")
    _dist(tmp_path / "usr/lib/python3/dist-packages", "torch_npu", "2.14.0")
    pkgs = gather_packages(LiveHost(str(tmp_path), env={}), RunOptions())
    assert pkgs.version("torch-npu") == "2.14.0"


def test_rpm_lib64_platlib_is_searched(tmp_path):
    """openEuler's pip installs compiled wheels into /usr/local/lib64/python3.X/site-packages."""
    _dist(tmp_path / "usr/local/lib64/python3.9/site-packages", "torch_npu", "2.14.0")
    _dist(tmp_path / "usr/local/lib/python3.9/site-packages", "vllm_ascend", "0.23.0")
    pkgs = gather_packages(LiveHost(str(tmp_path), env={}), RunOptions())
    assert pkgs.version("torch-npu") == "2.14.0" and pkgs.version("vllm-ascend") == "0.23.0"
    assert pkgs.packages["torch-npu"].location == "/usr/local/lib64/python3.9/site-packages"
    assert pkgs.python == "3.9"
