"""``import torch_npu`` in the service's interpreter: for real on a venv holding CPU torch
2.13.0 and the real torch_npu 2.14.0 wheel (no CANN here), and with stand-in interpreters
for the timeout and environment paths."""

from __future__ import annotations

import os

import pytest

import ascend_doctor.probes.torchimport as ti
from ascend_doctor.checks.torch_import import torch_npu_import
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.host import LiveHost, ProcInfo
from ascend_doctor.model import Status
from ascend_doctor.probes.kbfact import gather_knowledge
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.procs import ServiceEnv, ServiceProcess, ServiceProcesses

KNOW = gather_knowledge()  # the KB fact, as the engine provides it


@pytest.fixture(scope="session")
def torch_npu_venv():
    from tests.torchenv import build
    return build()


@pytest.mark.slow
def test_real_torch_npu_wheel_without_cann_names_libhccl(torch_npu_venv):
    python, kind = torch_npu_venv
    r = run(LiveHost("/"), RunOptions(python=str(python)),
            config=RunConfig(only=("torch_npu.import",))).results[0]
    (f,) = r.findings
    assert f.status == Status.FAIL
    if kind == "torch+torch_npu":
        assert f.message.endswith(
            "ImportError: libhccl.so: cannot open shared object file: No such file or directory")
        assert f.kb[0] == "ASC-VER-009" and f.evidence["kb_groups"]["ASC-VER-009"]["lib"] == "libhccl.so"
    else:  # documented fallback: torch_npu alone, torch absent
        assert "No module named 'torch'" in f.message
    assert str(python) in f.message and "--python" in f.message


def _stand_in(tmp_path, body: str) -> str:
    p = tmp_path / "python3-standin"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def test_service_interpreter_and_environment_are_used(tmp_path):
    py = _stand_in(tmp_path, 'echo "ASCEND_HOME_PATH=$ASCEND_HOME_PATH" >&2\n'
                             '[ "$1 $2" = "-c import torch_npu" ] || exit 9\n'
                             'echo "ImportError: libascendcl.so: cannot open shared object file: '
                             'No such file or directory" >&2\nexit 1\n')
    server = ServiceProcess(ProcInfo(4711, 1, "python3", (py, "-m", "vllm.entrypoints.openai.api_server"),
                                     user="root", uid=0, exe=py))
    env = ServiceEnv({"ASCEND_HOME_PATH": "/opt/cann", "PATH": "/usr/bin:/bin"},
                     "/proc/4711/environ", 4711)
    res = ti.gather_torch_import(LiveHost("/"), RunOptions(), ServiceProcesses((server,)), env)
    assert res.interpreter == py and "pid 4711" in res.interpreter_source
    assert "ASCEND_HOME_PATH=/opt/cann" in res.output
    (f,) = torch_npu_import(res, KNOW)
    assert f.status == Status.FAIL and "libascendcl.so" in f.message
    assert "ASC-VER-009" in f.kb and "/proc/4711/environ" in f.message
    # an explicit --python wins over the server's interpreter
    assert ti.pick_interpreter(ServiceProcesses((server,)), RunOptions(python="/x/python"))[0] == "/x/python"


def test_hanging_import_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(ti, "IMPORT_TIMEOUT_S", 1.0)
    py = _stand_in(tmp_path, "exec sleep 1000\n")
    res = ti.gather_torch_import(LiveHost("/"), RunOptions(python=py), None, None)
    (f,) = torch_npu_import(res, KNOW)
    assert f.status == Status.ERROR and "did not finish" in f.message and res.timed_out


def test_working_import_passes_and_absent_module_skips(tmp_path):
    ok = _stand_in(tmp_path, "exit 0\n")
    (f,) = torch_npu_import(ti.gather_torch_import(LiveHost("/"), RunOptions(python=ok), None, None), KNOW)
    assert f.status == Status.PASS
    absent = _stand_in(tmp_path, "echo \"ModuleNotFoundError: No module named 'torch_npu'\" >&2; exit 1\n")
    (f,) = torch_npu_import(ti.gather_torch_import(LiveHost("/"), RunOptions(python=absent), None, None), KNOW)
    assert f.status == Status.SKIP


def test_missing_interpreter_skips_naming_it():
    r = run(LiveHost("/"), RunOptions(python="/no/such/python3"),
            config=RunConfig(only=("torch_npu.import",))).results[0]
    assert r.status == Status.SKIP and "/no/such/python3" in r.findings[0].message


def test_service_pythonpath_is_passed_when_it_belongs_to_the_service(tmp_path):
    """Issue 34: ``python -I`` ignores PYTHONPATH, so a service that finds torch_npu through
    it was told "torch_npu is not installed". Its own entries are now put on sys.path (and
    the finding says so); an entry other accounts can write is named and not used."""
    import os
    import sys

    good = tmp_path / "svc-site"
    (good / "torch_npu").mkdir(parents=True)
    (good / "torch_npu" / "__init__.py").write_text("")
    bad = tmp_path / "shared"
    (bad / "torch_npu").mkdir(parents=True)
    (bad / "torch_npu" / "__init__.py").write_text("raise SystemExit('planted torch_npu ran')\n")
    os.chmod(bad, 0o777)
    for d in (tmp_path, good, good / "torch_npu"):
        os.chmod(d, 0o755)
    py = sys.executable
    uid = os.geteuid()
    server = ServiceProcess(ProcInfo(4711, 1, "python3", (py, "-m", "vllm.entrypoints.openai.api_server"),
                                     user="root" if uid == 0 else str(uid), uid=uid, exe=py))
    env = ServiceEnv({"PYTHONPATH": f"{bad}:relative/dir:{good}", "PATH": "/usr/bin:/bin"},
                     "/proc/4711/environ", 4711)
    res = ti.gather_torch_import(LiveHost("/"), RunOptions(), ServiceProcesses((server,)), env)
    assert res.ok, res.output
    (f,) = torch_npu_import(res, KNOW)
    assert f.status == Status.PASS
    assert f"with the service's PYTHONPATH {good}" in f.message
    assert f"{bad} (writable by other accounts (mode 0777))" in f.message
    assert "relative/dir (not an absolute path)" in f.message
