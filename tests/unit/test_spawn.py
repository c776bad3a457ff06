"""The spawn chokepoint, tested with the attacks themselves (issue 20 items 1 and 7): a service
interpreter owned by another uid runs as that uid with no groups and no_new_privs; a malicious
``json.py`` / ``torch_npu.py`` where the operator stands is not imported; a sysroot's
``npu-smi`` is never executed; the doctor's environment does not reach a child."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import ascend_doctor.probes.torchimport as ti
import ascend_doctor.spawn as spawn
from ascend_doctor.checks.torch_import import torch_npu_import
from ascend_doctor.errors import SourceMissing
from ascend_doctor.host import LiveHost, ProcInfo
from ascend_doctor.model import Status
from ascend_doctor.probes.kbfact import gather_knowledge
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.procs import ServiceEnv, ServiceProcess, ServiceProcesses

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"  # not under /root, so uid 65534 can execute it

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the drop is tested as root")
needs_python = pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK),
                                  reason=f"{SYSTEM_PYTHON} is not installed")

KNOW = gather_knowledge()  # the KB fact, as the engine provides it


@pytest.fixture
def world():
    """A world-traversable tree (pytest's tmp_path is 0700 root): bin/ (0755) and out/ (nobody's)."""
    base = Path(tempfile.mkdtemp(prefix="ascend-doctor-spawn-"))
    os.chmod(base, 0o755)
    (base / "bin").mkdir(mode=0o755)
    (base / "out").mkdir()
    os.chown(base / "out", NOBODY, NOBODY)
    yield base
    shutil.rmtree(base)


def _service_python(world: Path) -> str:
    """A stand-in for the service's venv python, owned by the service user (uid 65534): it
    records who it runs as, where, and with which environment, then fails like torch_npu."""
    py = world / "bin" / "python3"
    out = world / "out" / "whoami.json"
    py.write_text(f"#!{SYSTEM_PYTHON} -I\n"
                  "import json, os, sys\n"
                  "nnp = [l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')]\n"
                  f"json.dump({{'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(),\n"
                  "           'groups': os.getgroups(), 'nnp': nnp, 'cwd': os.getcwd(),\n"
                  "           'env': dict(os.environ), 'argv': sys.argv[1:]},\n"
                  f"          open({str(out)!r}, 'w'))\n"
                  "sys.exit(\"ModuleNotFoundError: No module named 'torch_npu'\")\n")
    py.chmod(0o755)
    os.chown(py, NOBODY, NOBODY)
    return str(py)


@needs_root
@needs_python
def test_service_interpreter_runs_as_the_service_uid_without_privileges(world, monkeypatch):
    py = _service_python(world)
    monkeypatch.chdir(world)
    server_proc = subprocess.Popen(["sleep", "30"], user=NOBODY, group=NOBODY, extra_groups=[])
    try:
        server = ServiceProcess(ProcInfo(server_proc.pid, 1, "python3", (py, "-m", "vllm"),
                                         user="nobody", uid=NOBODY, exe=py))
        env = ServiceEnv({"PATH": "/usr/bin:/bin", "LD_PRELOAD": ""}, "/proc/x/environ",
                         server_proc.pid)
        host = LiveHost("/", env={**os.environ, "DOCTOR_SECRET": "root-only"})
        res = ti.gather_torch_import(host, RunOptions(), ServiceProcesses((server,)), env)
    finally:
        server_proc.kill()
        server_proc.wait()
    seen = json.loads((world / "out" / "whoami.json").read_text())
    assert (seen["uid"], seen["euid"], seen["gid"]) == (NOBODY, NOBODY, NOBODY)
    assert seen["groups"] in ([], [NOBODY])  # setgroups([]): root's groups are gone
    assert seen["nnp"] == ["1"] and seen["cwd"] == "/"
    assert "DOCTOR_SECRET" not in seen["env"] and seen["env"]["PATH"] == "/usr/bin:/bin"
    assert res.ran == f"ran {py} -I -c import torch_npu as uid 65534 (nobody)"
    (f,) = torch_npu_import(res, KNOW)
    assert f.status == Status.SKIP and "No module named 'torch_npu'" in f.message
    assert f.evidence["ran"] == res.ran


@needs_root
@needs_python
def test_a_service_binary_another_user_can_write_is_not_run(world):
    py = _service_python(world)
    os.chmod(py, 0o777)
    with spawn.as_service(spawn.RunAs(NOBODY, NOBODY, "nobody")), \
            pytest.raises(SourceMissing, match="writable by group or others"):
        LiveHost("/").run([py, "-c", "import torch_npu"])
    os.chmod(py, 0o755)
    os.chown(py, 4242, 4242)  # neither root nor the service user
    with spawn.as_service(spawn.RunAs(NOBODY, NOBODY, "nobody")), \
            pytest.raises(SourceMissing, match="owned by uid 4242"):
        LiveHost("/").run([py, "-c", "import torch_npu"])
    assert not (world / "out" / "whoami.json").exists()


def test_a_doctor_that_is_not_root_skips_instead_of_running_as_itself(monkeypatch, tmp_path):
    marker = tmp_path / "ran"
    prog = tmp_path / "python3"
    prog.write_text(f"#!/bin/sh\ntouch {marker}\n")
    prog.chmod(0o755)
    monkeypatch.setattr(spawn.os, "geteuid", lambda: 1000)
    with spawn.as_service(spawn.RunAs(NOBODY, NOBODY, "nobody")), \
            pytest.raises(SourceMissing, match=r"service's uid 65534 \(nobody\).*not root"):
        LiveHost("/").run([str(prog), "-c", "import torch_npu"])
    assert not marker.exists()


@needs_python
def test_a_malicious_module_where_the_operator_stands_is_not_imported(world, monkeypatch):
    marker = world / "out" / "pwned"
    for mod in ("json", "torch_npu"):
        (world / f"{mod}.py").write_text(f"open({str(marker)!r}, 'a').write({mod!r})\n")
    monkeypatch.chdir(world)
    host = LiveHost("/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(world)})
    r = host.run([SYSTEM_PYTHON, "-c", "import json, sys; print(json.dumps(sys.path))"])
    assert r.ok, r.stderr
    assert str(world) not in json.loads(r.text) and "" not in json.loads(r.text)
    res = ti.gather_torch_import(host, RunOptions(python=SYSTEM_PYTHON), None, None)
    assert "No module named 'torch_npu'" in res.output
    assert res.ran.startswith(f"ran {SYSTEM_PYTHON} -I -c import torch_npu as ")
    assert not marker.exists()


def test_the_doctors_environment_does_not_reach_a_child():
    host = LiveHost("/", env={"PATH": "/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
                              "LD_PRELOAD": "/tmp/evil.so", "ASCEND_HOME_PATH": "/opt/cann"})
    r = host.run(["env"])
    assert "s3cr3t" not in r.text and "LD_PRELOAD" not in r.text
    assert "ASCEND_HOME_PATH=/opt/cann" in r.text and "PATH=/usr/bin:/bin" in r.text


def test_sysroot_binaries_are_never_executed(tmp_path):
    root = tmp_path / "root"
    marker = tmp_path / "marker"
    for name in ("usr/bin/npu-smi", "usr/bin/python3", "usr/bin/lscpu", "usr/bin/perf"):
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"#!/bin/sh\ntouch {marker}\n")
        p.chmod(0o755)
    host = LiveHost(str(root), env={"PATH": "/usr/bin:/bin"})
    for argv in (["npu-smi", "info"], ["python3", "-c", "1"], ["lscpu"], ["perf", "stat"]):
        with pytest.raises(SourceMissing, match="sysroot binaries are not executed"):
            host.run(argv)
    assert not marker.exists()


def test_cli_check_root_does_not_run_the_sysroots_npu_smi(cli, tmp_path):
    """The attack: a received tree (export-root) carries an npu-smi that touches a file."""
    root = tmp_path / "root"
    marker = tmp_path / "marker"
    smi = root / "usr/local/bin/npu-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text(f"#!/bin/sh\ntouch {marker}\n")
    smi.chmod(0o755)
    r = cli("check", "--root", str(root), "--only", "npu", "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    npu = [c for c in doc["checks"] if c["id"].startswith("npu.")]
    assert npu and all(c["status"] == "skip" for c in npu)
    assert any("sysroot binaries are not executed" in f["message"]
               for c in npu for f in c["findings"])
    assert not marker.exists()


def test_the_fallback_environment_is_cut_to_the_allowlist(tmp_path):
    """No readable service environment: the import gets PATH/locale/CANN paths, not root's
    secrets (the child may run as the service user)."""
    py = tmp_path / "python3-standin"
    py.write_text("#!/bin/sh\nenv >&2\nexit 0\n")
    py.chmod(0o755)
    doctor_env = {"PATH": "/usr/bin:/bin", "ASCEND_HOME_PATH": "/opt/cann", "VAULT_TOKEN": "hvs.x"}
    host = LiveHost("/", env=doctor_env)
    env = ServiceEnv(host.environ(), "the doctor's own environment (no vLLM server running)")
    res = ti.gather_torch_import(host, RunOptions(python=str(py)), None, env)
    assert "ASCEND_HOME_PATH=/opt/cann" in res.output and "hvs.x" not in res.output
    assert res.ran.endswith("as the doctor's own user")


@needs_root
def test_collect_passes_the_drop_through_the_recording_host():
    """``collect`` wraps LiveHost in RecordingHost: the credentials still reach the spawn."""
    from ascend_doctor.bundle import RecordingHost
    rec = RecordingHost(LiveHost("/", env={"PATH": "/usr/bin:/bin"}))
    with spawn.as_service(spawn.RunAs(NOBODY, NOBODY, "nobody")):
        r = rec.run(["id", "-u"])
    assert r.text.strip() == str(NOBODY)
    assert LiveHost("/", env={"PATH": "/usr/bin:/bin"}).run(["id", "-u"]).text.strip() == "0"


def test_a_relative_program_is_a_host_path_not_one_in_the_callers_directory(tmp_path,
                                                                             monkeypatch):
    """``./bin/tool`` names the host's /bin/tool (what which() checked): a same-named file
    where the operator stands is never the one executed."""
    marker = tmp_path / "ran"
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "true"
    tool.write_text(f"#!/bin/sh\ntouch {marker}\n")
    tool.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    r = LiveHost("/", env={"PATH": "/usr/bin:/bin"}).run(["./bin/true"])
    assert r.ok and r.argv == ("./bin/true",)
    assert not marker.exists()
