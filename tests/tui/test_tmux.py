"""The real `ascend-doctor demo` on a real terminal (tmux): paint, navigate, detail, zh, quit."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time

import pytest

from tests.conftest import doctor_exe

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (.ci/run installs it)")


class Tmux:
    def __init__(self, sock: str, session: str) -> None:
        self.base = ["tmux", "-L", sock]
        self.session = session

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(self.base + list(args), capture_output=True, text=True,
                              timeout=20, check=check)

    def capture(self) -> str:
        return self("capture-pane", "-p", "-t", self.session).stdout

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        t0 = time.monotonic()
        while True:
            screen = self.capture()
            if text in screen:
                return screen
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"{text!r} not on screen after {timeout} s:\n{screen}")
            time.sleep(0.2)

    def alive(self) -> bool:
        return self("has-session", "-t", self.session, check=False).returncode == 0


def test_real_demo_in_tmux(tmp_path):
    exe = doctor_exe()
    t = Tmux(f"adoc-test-{os.getpid()}", "demo")
    cmd = (f"cd {shlex.quote(str(tmp_path))} && env ASCEND_DOCTOR_LANG=en TERM=xterm-256color "
           f"{shlex.quote(exe)} demo")
    t("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-s", "demo", cmd)
    try:
        t("set-option", "-s", "escape-time", "0", check=False)
        t0 = time.monotonic()
        screen = t.wait_for("Worst:")
        painted = time.monotonic() - t0
        assert "atlas800t-a2-07" in screen and "demo" in screen and "fail" in screen
        deadline = time.monotonic() + 30
        while not re.search(r"skip\s+done", screen):  # results stream in until "done"
            assert time.monotonic() < deadline, screen
            time.sleep(0.2)
            screen = t.capture()
        time.sleep(0.3)
        screen = t.capture()
        worst = re.search(r"Worst: \S+ (\S+)", screen).group(1)
        assert screen.count(worst) >= 2, f"{worst} is highlighted in the list too:\n{screen}"
        t("send-keys", "-t", "demo", "w")  # the worst finding
        t("send-keys", "-t", "demo", "Enter")
        screen = t.wait_for("Knowledge base")
        assert worst in screen and "FAIL" in screen
        t("send-keys", "-t", "demo", "l")
        t.wait_for("原因")
        t("send-keys", "-t", "demo", "Escape")
        t.wait_for("最严重")  # `l` switched the whole app, the dashboard too
        t("send-keys", "-t", "demo", "l")
        t.wait_for("Worst:")
        t("send-keys", "-t", "demo", "q")
        deadline = time.monotonic() + 10
        while t.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not t.alive(), "q quits the real TUI"
        assert painted < 30
    finally:
        t("kill-server", check=False)
