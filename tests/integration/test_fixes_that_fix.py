"""Issue 31: fixes that fix, no harm on the wrong host, and the demo stays a demo.

Every test drives the real console script (``cli`` fixture) on a sysroot, the demo, or a
host without Ascend directories; XDG_STATE_HOME points at a tmp dir so the real journal of
whoever runs the tests is never read or written.
"""

from __future__ import annotations

import json
import os

import pytest

from ascend_doctor.memfix import fix_for, fragmented, relieved

OOM_CAPACITY = ("RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 2; 29.50 GiB "
                "total capacity; 27.91 GiB already allocated; 27.91 GiB current active; 1.02 GiB "
                "free; 28.02 GiB reserved in total by PyTorch)")
OOM_FRAGMENTED = ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 29.50 GiB "
                  "total capacity; 20.10 GiB already allocated; 20.10 GiB current active; 0.40 "
                  "GiB free; 28.90 GiB reserved in total by PyTorch)")
UNIT = """[Unit]
Description=vLLM on Ascend

[Service]
ExecStart=/opt/venv/bin/python -m vllm.entrypoints.openai.api_server --model /models/m \\
    --gpu-memory-utilization 0.97 --max-model-len 32768 --block-size 128

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture
def env(tmp_path):
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "LANG": "C.UTF-8", "COLUMNS": "400"}


# -- item 1: service.env honours var/value, refuses what it does not take ---------------
def test_service_env_sets_the_named_variable_in_the_unit(cli, env, tmp_path):
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/vllm.service").write_text(UNIT)
    dropin = root / "etc/systemd/system/vllm.service.d/ascend-env.conf"
    for var, value in (("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True"),
                       ("ASCEND_RT_VISIBLE_DEVICES", "0,1,2,3")):
        r = cli("fix", "service.env", "--root", str(root), "--param", f"var={var}",
                "--param", f"value={value}", "--apply", "--yes", env=env)
        assert r.returncode in (0, 1), (r.returncode, r.stdout, r.stderr)
        assert f"Set {var} in the vLLM service's environment" in r.stdout
    lines = dropin.read_text().splitlines()
    # both variables, each once; nothing of set_env.sh that was not asked for
    assert 'Environment="PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"' in lines
    assert 'Environment="ASCEND_RT_VISIBLE_DEVICES=0,1,2,3"' in lines
    assert not any("LD_LIBRARY_PATH" in ln for ln in lines)
    r = cli("fix", "service.env", "--root", str(root), "--param", "var=ASCEND_RT_VISIBLE_DEVICES",
            "--param", "value=4,5", "--apply", "--yes", env=env)
    lines = dropin.read_text().splitlines()
    assert [ln for ln in lines if "ASCEND_RT_VISIBLE_DEVICES" in ln] == [
        'Environment="ASCEND_RT_VISIBLE_DEVICES=4,5"']  # replaced, not appended twice


def test_service_env_refuses_what_it_would_ignore(cli, env, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    r = cli("fix", "service.env", "--root", str(root), "--param", "colour=blue", env=env)
    assert r.returncode == 2 and "does not take --param colour" in r.stderr
    r = cli("fix", "service.env", "--root", str(root), "--param", "var=ASCEND_RT_VISIBLE_DEVICES",
            "--param", "value=all", env=env)
    assert r.returncode == 2 and "takes device ids" in r.stderr
    r = cli("fix", "service.env", "--root", str(root), "--param", "var=1BAD", "--param",
            "value=x", env=env)
    assert r.returncode == 2 and "is not an environment variable name" in r.stderr
    r = cli("fix", "sysctl.tcp-ports", "--root", str(root), "--param", "no_such_key=1", env=env)
    assert r.returncode == 2 and "does not set no_such_key" in r.stderr


def test_the_oom_problem_offers_the_fix_of_its_cause(cli, env, tmp_path):
    assert fragmented(OOM_CAPACITY) is False and fragmented(OOM_FRAGMENTED) is True
    assert fix_for("ASC-LOG-004", "service.env", OOM_CAPACITY) == (
        "service.launch-flags", {"relieve": "gpu-memory-utilization"})
    root = tmp_path / "root"
    root.mkdir()
    for line, want in ((OOM_FRAGMENTED, "ascend-doctor fix service.env --param "
                        "var=PYTORCH_NPU_ALLOC_CONF --param value=expandable_segments:True"),
                       (OOM_CAPACITY, "ascend-doctor fix service.launch-flags --param "
                        "relieve=gpu-memory-utilization")):
        log = tmp_path / "server.log"
        log.write_text("INFO starting\n" + line + "\n")
        r = cli("check", "--root", str(root), "--log", str(log), "--only", "logs.signatures",
                env=env)
        assert want in " ".join(r.stdout.split()), r.stdout
    # the demo's OOM is capacity (reserved ≈ allocated): not the set_env.sh recipe
    r = cli("demo", "--json", env=env)
    (p,) = [p for p in json.loads(r.stdout)["problems"] if "ASC-LOG-004" in p["kb"]]
    assert p["fix"] == "service.launch-flags"


# -- item 2: launch-flags builds a real plan from what the entry knows ------------------
def test_explain_207018_and_its_fix_plan_is_not_empty(cli, env):
    r = cli("explain", "207018", env=env)
    line = next(ln for ln in r.stdout.splitlines() if "automatic fix" in ln)
    cmd = line.split(": ", 1)[1]
    assert cmd == "ascend-doctor fix service.launch-flags --param relieve=gpu-memory-utilization"
    r = cli(*cmd.split()[1:], "--demo", env=env)
    assert r.returncode == 0, r.stderr
    assert "params: flags=--gpu-memory-utilization 0.92" in r.stdout  # 0.97 in use - 0.05
    assert "--gpu-memory-utilization 0.92" in r.stdout.split("manual steps:")[1]
    assert "flags=\n" not in r.stdout and "Name the flags to set" not in r.stdout


def test_launch_flags_relieve_edits_the_unit(cli, env, tmp_path):
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/vllm.service").write_text(UNIT)
    r = cli("fix", "service.launch-flags", "--root", str(root), "--param",
            "relieve=max-model-len", env=env)
    assert "+ExecStart=" in r.stdout and "--max-model-len 16384" in r.stdout, r.stdout
    assert relieved("gpu-memory-utilization", None) == ("0.85", "0.9 - 0.05")
    assert relieved("gpu-memory-utilization", "0.5")[0] is None


# -- item 3: the relaunch line never re-adds the flags config.* flag ---------------------
def test_service_env_relaunch_line_corrects_the_flagged_flags(cli, env):
    r = cli("fix", "service.env", "--demo", env=env)
    assert r.returncode == 0, r.stderr
    manual = r.stdout.split("manual steps:")[1].split("risk:")[0]
    assert "vllm.entrypoints.openai.api_server" in manual
    for bad in ("--block-size 16", "--max-num-batched-tokens 32768",
                "--gpu-memory-utilization 0.97"):
        assert bad not in manual, (bad, manual)
    assert "the launch line corrects what the config checks flag" in r.stdout


# -- item 4: a fix verified by logs.signatures can pass ----------------------------------
def test_log_verified_fix_counts_only_lines_written_after_it(cli, env, tmp_path):
    overlay = tmp_path / "overlay"
    r = cli("fix", "service.env", "--demo-root", str(overlay), "--from-check", "logs.signatures",
            "--param", "var=PYTORCH_NPU_ALLOC_CONF", "--param", "value=expandable_segments:True",
            "--apply", "--yes", "--json", env=env)
    assert r.returncode == 0, (r.stdout, r.stderr)
    v = json.loads(r.stdout)["result"]["verification"]
    assert v["check"] == "logs.signatures" and v["before"] == "fail" and v["after"] == "pass"
    assert "written before the fix" in v["note"]


def test_a_new_matching_line_after_the_fix_still_fails(tmp_path, monkeypatch):
    from ascend_doctor.fixes import plan_for
    from ascend_doctor.fixes.apply import apply_plan
    from ascend_doctor.fixes.context import FixContext
    from ascend_doctor.host import LiveHost
    from ascend_doctor.options import RunOptions
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    log = tmp_path / "server.log"
    log.write_text(OOM_FRAGMENTED + "\n")
    ctx = FixContext.for_root(str(root), RunOptions(logs=(str(log),)))
    plan = plan_for(ctx, "service.env", {"var": "PYTORCH_NPU_ALLOC_CONF",
                                         "value": "expandable_segments:True",
                                         "cmdline": "vllm serve m"}, "logs.signatures")
    calls = []

    def factory():
        calls.append(1)
        if len(calls) == 3:  # the service logged the failure again after the fix
            with open(log, "a") as fh:
                fh.write("later\n" + OOM_FRAGMENTED.replace("2.00 GiB", "2.50 GiB") + "\n")
        return LiveHost(str(root))
    v = apply_plan(plan, ctx, factory).verification
    assert (v.before, v.after) == ("fail", "fail") and v.ok is False
    assert any("2 line(s) match" in str(m) for m in v.messages), v.messages


# -- item 7: no fix names paths that do not exist ----------------------------------------
def test_no_ascend_directories_nothing_planned_and_nothing_written(cli, env, tmp_path):
    root = tmp_path / "root"
    (root / "etc/ld.so.conf.d").mkdir(parents=True)
    (root / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    before = sorted(str(p) for p in root.rglob("*"))
    r = cli("fix", "ldconf.ascend-conf", "--root", str(root), env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "nothing to plan here" in r.stdout and "/usr/local/Ascend/driver/lib64" in r.stdout
    assert "+/usr/local/Ascend" not in r.stdout and "ldconfig" not in r.stdout
    r = cli("fix", "ldconf.ascend-conf", "--root", str(root), "--apply", "--yes", env=env)
    assert r.returncode == 2
    r = cli("fix", "service.env", "--root", str(root), "--apply", "--yes", env=env)
    assert r.returncode == 2 and "ascend-toolkit/latest does not exist" in r.stdout
    assert sorted(str(p) for p in root.rglob("*")) == before  # nothing written
    assert not (tmp_path / "state/ascend-doctor/journal").exists() or not os.listdir(
        tmp_path / "state/ascend-doctor/journal")


def test_a_plan_naming_a_missing_path_is_blocked():
    """The generic net under every recipe: an edit whose content names a missing path."""
    from ascend_doctor.fixes import _refuse_missing_names
    from ascend_doctor.fixes.plan import FileEdit, Plan

    class Ctx:
        def exists(self, p):
            return p == "/there"
    plan = Plan("x.y", "t", edits=[FileEdit("/etc/a.conf", None, b"/there\n/gone\n", None,
                                            names=("/there", "/gone"))])
    _refuse_missing_names(Ctx(), plan)
    assert plan.blocked and "/gone" in str(plan.blocked[0]) and "/there" not in str(
        plan.blocked[0])
    assert not plan.manual_only and not plan.already_applied


# -- item 8: the demo stays a demo -------------------------------------------------------
def test_demo_fix_lines_target_the_demo_and_journal_there(cli, env, tmp_path):
    r = cli("demo", "--text", env=env)
    lines = [ln.split("fix: ", 1)[1].split(" · ")[0] for ln in r.stdout.splitlines()
             if "fix: ascend-doctor fix" in ln]
    assert lines and all(" --demo" in ln for ln in lines), lines
    ldconf = next(ln for ln in lines if "ldconf.ascend-conf" in ln)
    r = cli(*ldconf.split()[1:], "--apply", "--yes", env=env)  # pasted, as a user would
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "new fail" not in r.stdout and "not verifiable here" in r.stdout
    real = json.loads(cli("fix", "--journal", "--json", env=env).stdout)
    assert real["journal"] == []  # never the user's own journal
    demo = json.loads(cli("fix", "--demo", "--journal", "--json", env=env).stdout)
    assert [j["recipe"] for j in demo["journal"]] == ["ldconf.ascend-conf"]
    assert demo["dir"].endswith("demo-overlay/.ascend-doctor/journal")
    r = cli("fix", "--undo", env=env)
    assert r.returncode == 2 and "no fix to undo" in r.stderr
    r = cli("fix", "--demo", "--undo", env=env)
    assert r.returncode == 0, r.stderr
    assert "inside the overlay" in r.stdout and "this machine was not touched" in r.stdout


def test_demo_export_replays_to_the_same_verdicts(cli, env, tmp_path):
    bundle = tmp_path / "d.tar.gz"
    assert cli("demo", "--export", str(bundle), env=env).returncode == 0
    demo = json.loads(cli("demo", "--json", env=env).stdout)
    r = cli("check", "--bundle", str(bundle), "--json", env=env)
    check = json.loads(r.stdout)
    assert {c["id"]: c["status"] for c in check["checks"]} == {
        c["id"]: c["status"] for c in demo["checks"]}
    assert check["summary"] == demo["summary"]
    assert "pcap" in r.stderr and "block_audit" in r.stderr  # said what it replayed


def test_the_fix_list_offers_no_fix_that_cannot_be_planned(cli, env, tmp_path):
    """A stale ascend.conf (mode 600) naming a driver that is not installed: ldconf.perms
    fails, but the list says why there is no fix instead of offering one (item 7)."""
    root = tmp_path / "root"
    (root / "etc/ld.so.conf.d").mkdir(parents=True)
    (root / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    conf = root / "etc/ld.so.conf.d/ascend.conf"
    conf.write_text("/usr/local/Ascend/driver/lib64\n")
    conf.chmod(0o600)
    r = cli("fix", "--root", str(root), env=env)
    assert "ldconf.perms" in r.stdout, r.stdout
    assert "no fix here (ldconf.ascend-conf)" in r.stdout and "install the NPU driver" in r.stdout
    assert "ascend-doctor fix ldconf.ascend-conf" not in r.stdout
