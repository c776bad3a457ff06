"""Shared fixtures: sysroots in tmp dirs, the real CLI entry point, a loopback HTTP server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The test extra installs hyperscan so its engine is compared with the pure-Python scan
# (tests/unit/test_logs_scan.py, test_triage_chunks.py, tests/integration/test_scan_engines.py);
# everything else runs the pure-Python path that a plain `pip install ascend-doctor` has.
os.environ.setdefault("ASCEND_DOCTOR_SCAN_ENGINE", "python")


class Sysroot:
    """A directory tree standing in for a host's /."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")

    def write(self, p: str, content: "str | bytes", mode: int = 0o644) -> Path:
        dst = self.path(p)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        dst.write_bytes(content)
        os.chmod(dst, mode)
        return dst

    def mkdir(self, p: str, mode: int = 0o755) -> Path:
        dst = self.path(p)
        dst.mkdir(parents=True, exist_ok=True)
        os.chmod(dst, mode)
        return dst

    def symlink(self, p: str, target: str) -> Path:
        dst = self.path(p)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.symlink_to(target)
        return dst

    def script(self, p: str, body: str) -> Path:
        return self.write(p, "#!/bin/sh\n" + body, mode=0o755)

    def host(self):
        """A LiveHost over the tree that runs its stub scripts (the test-only opt-in: the CLI's
        ``--root`` never executes a sysroot's binaries)."""
        from ascend_doctor.host import LiveHost
        return LiveHost(str(self.root), env={"PATH": "/usr/bin:/bin"}, _test_exec_sysroot=True)

    def __str__(self) -> str:
        return str(self.root)


@pytest.fixture
def sysroot(tmp_path: Path) -> Sysroot:
    root = tmp_path / "root"
    root.mkdir()
    return Sysroot(root)


def doctor_exe() -> str:
    """The installed console script (the real entry point), next to this interpreter."""
    cand = Path(sys.executable).with_name("ascend-doctor")
    if cand.exists():
        return str(cand)
    found = shutil.which("ascend-doctor")
    if not found:
        pytest.fail("the ascend-doctor console script is not installed (pip install -e .)")
    return found


def run_cli(*args: str, env: dict | None = None, timeout: float = 120, input: str | None = None
            ) -> subprocess.CompletedProcess:
    e = {**os.environ, "NO_COLOR": "1", "CI": "true", **(env or {})}
    return subprocess.run([doctor_exe(), *args], capture_output=True, text=True, env=e,
                          timeout=timeout, input=input)


@pytest.fixture
def cli():
    return run_cli


# Property-based tests: a small count by default, a long mode for bench/ or a CI step.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("default", max_examples=int(os.environ.get("ASCEND_DOCTOR_FUZZ_EXAMPLES", "150")),
                          deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=100_000, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.load_profile("long" if os.environ.get("ASCEND_DOCTOR_FUZZ") == "long" else "default")


@pytest.fixture
def cli_exec_sysroot(monkeypatch):
    """The CLI in-process with the test-only opt-in that lets ``--root`` run the tree's stub
    scripts (hangs, floods, recorded npu-smi). The console script has no way to set it: a
    sysroot's binaries are data, never executed (issue 20)."""
    from click.testing import CliRunner

    import ascend_doctor.host as host_mod
    from ascend_doctor.cli import main

    class ExecSysrootHost(host_mod.LiveHost):
        def __init__(self, root: str = "/", env=None, **kw) -> None:
            super().__init__(root, env, _test_exec_sysroot=True)

    monkeypatch.setattr(host_mod, "LiveHost", ExecSysrootHost)
    monkeypatch.setenv("NO_COLOR", "1")

    def invoke(*args: str) -> subprocess.CompletedProcess:
        r = CliRunner().invoke(main, list(args), catch_exceptions=False)
        return subprocess.CompletedProcess(list(args), r.exit_code, r.stdout, "")

    return invoke
