"""no_new_privs without a preexec_fn (checks spawn from threads; CPython documents
preexec_fn as unsafe there): the child really has NoNewPrivs set, through util-linux setpriv
and through the interpreter fallback, and concurrent runs from many threads all finish."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from ascend_doctor import spawn
from ascend_doctor.host import LiveHost, run_capped

STATUS = ["/bin/grep", "^NoNewPrivs", "/proc/self/status"]


def _nnp(result) -> str:
    return result.stdout.decode().split()[-1]


@pytest.fixture
def fresh_prefix():
    spawn.no_new_privs_prefix.cache_clear()
    yield
    spawn.no_new_privs_prefix.cache_clear()


def test_setpriv_or_the_fallback_sets_no_new_privs(fresh_prefix, monkeypatch):
    prefix = spawn.no_new_privs_prefix()
    r = run_capped(STATUS, STATUS, 10.0, 4096, {"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and _nnp(r) == "1", (prefix, r)
    spawn.no_new_privs_prefix.cache_clear()
    monkeypatch.setattr(spawn, "_SETPRIV", ("/nonexistent/setpriv",))
    assert spawn.no_new_privs_prefix()[1:3] == ("-I", "-S")  # the interpreter fallback
    r = run_capped(STATUS, STATUS, 10.0, 4096, {"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and _nnp(r) == "1", r


def test_popen_gets_no_preexec_fn(monkeypatch):
    seen = {}
    real = subprocess.Popen

    def spy(*a, **kw):
        seen.update(kw)
        return real(*a, **kw)

    monkeypatch.setattr(subprocess, "Popen", spy)
    r = LiveHost("/").run(["true"])
    assert r.returncode == 0
    assert seen.get("preexec_fn") is None and seen["start_new_session"] and seen["cwd"] == "/"


def test_missing_and_non_executable_programs_keep_their_errors(tmp_path):
    from ascend_doctor.errors import SourceError, SourceMissing

    with pytest.raises(SourceMissing, match="command not found"):
        run_capped(["no-such-program-x"], ["no-such-program-x"], 5.0, 1024, {"PATH": "/bin"})
    f = tmp_path / "notexec"
    f.write_text("#!/bin/sh\n")
    os.chmod(f, 0o644)
    with pytest.raises(SourceError, match="not executable"):
        run_capped([str(f)], [str(f)], 5.0, 1024, {"PATH": "/bin"})


def test_many_threads_spawning_at_once_all_finish():
    host, errors, done = LiveHost("/"), [], []

    def worker() -> None:
        try:
            for _ in range(3):
                done.append(host.run(["true"], timeout=20.0).returncode)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and done == [0] * 24
