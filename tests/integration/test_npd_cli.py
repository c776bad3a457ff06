"""`check --npd` through the console script as node-problem-detector runs it (exit 0 OK /
1 NonOK / 2 Unknown, one line of at most 80 characters), and deploy/npd's monitor config
against NPD's custom plugin config fields (pkg/custompluginmonitor/types)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ascend_doctor.model import CheckResult, Category, Finding, HostInfo, Report, Severity
from ascend_doctor.npd import MAX_MESSAGE, npd_result
from tests.conftest import run_cli

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "npd" / "ascend-doctor-monitor.json"


def test_demo_bundle_is_a_problem_in_one_line(tmp_path):
    bundle = tmp_path / "demo.tar.gz"
    assert run_cli("demo", "--export", str(bundle)).returncode == 0
    r = run_cli("check", "--npd", "--bundle", str(bundle))
    assert r.returncode == 1, r.stderr
    (line,) = r.stdout.splitlines()
    assert len(line) <= MAX_MESSAGE
    j = json.loads(run_cli("check", "--json", "--bundle", str(bundle)).stdout)
    failing = {c["id"] for c in j["checks"] if c["status"] == "fail"}
    m = re.match(r"(\d+) failing: ([a-z0-9_.-]+) (ASC-[A-Z]+-\d{3})", line)
    assert m and int(m.group(1)) == len(failing) and m.group(2) in failing, line
    listed = re.findall(r"(?:^|, )(?:\d+ failing: )?([a-z0-9_]+\.[a-z0-9_.-]+)", line)
    more = re.search(r"\+(\d+) more$", line)
    assert len(listed) + (int(more.group(1)) if more else 0) == len(failing), line


def test_healthy_sysroot_is_ok(sysroot):
    sysroot.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    sysroot.write("/etc/ld.so.conf.d/ascend.conf", "/usr/local/Ascend/driver/lib64\n")
    sysroot.mkdir("/usr/local/Ascend/driver/lib64")
    r = run_cli("check", "--npd", "--root", str(sysroot), "--only", "ldconf.order")
    assert (r.returncode, r.stdout) == (0, "ok: 1 checks, none failing\n"), r.stderr


def test_no_report_is_unknown_with_nothing_on_stdout(tmp_path):
    junk = tmp_path / "x.tar.gz"
    junk.write_bytes(b"\x1f\x8b not gzip")
    r = run_cli("check", "--npd", "--bundle", str(junk))
    assert r.returncode == 2 and r.stdout == ""
    assert str(junk) in r.stderr


def _report(n: int) -> Report:
    res = tuple(CheckResult(f"area.rule-{i:02d}", "t", Category.HOST, (),
                            (Finding.fail(f"bad {i}\x1b[2J", kb="ASC-LIB-002",
                                          severity=Severity.CRITICAL if i == 7
                                          else Severity.HIGH),))
                for i in range(n))
    return Report("0", HostInfo(), "live", "", 0.0, res)


def test_message_fits_and_counts_what_it_leaves_out():
    for n in (1, 2, 3, 5, 30):
        code, line = npd_result(_report(n))
        assert code == 1 and len(line) <= MAX_MESSAGE and "\x1b" not in line
        assert line.startswith(f"{n} failing: ")
        listed = re.findall(r"area\.rule-\d\d", line)
        more = re.search(r"\+(\d+) more$", line)
        assert len(listed) + (int(more.group(1)) if more else 0) == n, line
        if n > 7:
            assert listed[0] == "area.rule-07"  # the critical one first


def test_monitor_config_matches_npd_and_the_cli():
    from ascend_doctor.cli import main

    cfg = json.loads(CONFIG.read_text())
    assert cfg["plugin"] == "custom"
    assert set(cfg["pluginConfig"]) <= {"invoke_interval", "timeout", "max_output_length",
                                        "concurrency",
                                        "enable_message_change_based_condition_update",
                                        "skip_initial_status"}
    assert cfg["pluginConfig"]["max_output_length"] == MAX_MESSAGE
    conditions = {c["type"] for c in cfg["conditions"]}
    for rule in cfg["rules"]:
        assert set(rule) <= {"type", "condition", "reason", "path", "args", "timeout",
                             "invoke_interval"}
        assert rule["type"] in ("temporary", "permanent")
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions
        assert rule["path"].endswith("/ascend-doctor")
        args = rule["args"]
        ctx = main.get_command(None, args[0]).make_context(args[0], list(args[1:]))
        assert ctx.params["npd"] is True
        # every check's budget fits in NPD's timeout for the whole plugin run
        assert ctx.params["timeout"] < int(rule["timeout"].rstrip("m")) * 60
