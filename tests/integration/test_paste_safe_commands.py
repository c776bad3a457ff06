"""Every command the doctor suggests pastes into a shell as meant and runs (issue 14 item
5): shell-quoted values, a real ascend-doctor subcommand with options it has, or a program
that exists; and a `next:` step never re-does what the run just did."""

from __future__ import annotations

import json
import shlex
import shutil

import click
import pytest

from ascend_doctor import cli as cli_mod
from ascend_doctor.suggest import fix_command, next_step, only_reads, repeats_the_run

# programs of an Ascend host that a CI machine does not have
HOST_PROGRAMS = {"npu-smi", "msnpureport", "systemctl", "ldconfig", "sysctl"}


def assert_runs(cmd: str) -> list[str]:
    """``cmd`` splits with shlex and names an ascend-doctor subcommand whose options parse,
    or a program on PATH / of an Ascend host."""
    argv = shlex.split(cmd)
    assert argv, cmd
    if argv[0] == "ascend-doctor":
        assert len(argv) > 1 and argv[1] in cli_mod.main.all_commands(), cmd
        sub = cli_mod.main.all_commands()[argv[1]]
        try:
            sub.make_context(argv[1], argv[2:])
        except click.UsageError as exc:
            raise AssertionError(f"{cmd}: {exc}") from None
    else:
        assert shutil.which(argv[0]) or argv[0] in HOST_PROGRAMS, cmd
    return argv


@pytest.mark.parametrize("value", ["api.example.com", "a b", "x;rm -rf /", "$(reboot)",
                                   "it's", "`id`", "--apply", ""])
def test_fix_commands_quote_every_value(value):
    cmd = fix_command("dns.hosts-pin", {"hostname": value, "address": "10.0.0.7",
                                         "set": [["--block-size", "32"]], "pid": None})
    argv = shlex.split(cmd)
    assert argv == ["ascend-doctor", "fix", "dns.hosts-pin", "--param", f"hostname={value}",
                    "--param", "address=10.0.0.7"]  # structured and None params left out
    assert_runs(cmd)


def test_every_fix_the_demo_suggests_parses_and_names_a_recipe(cli):
    from ascend_doctor.fixes import FixRegistry

    r = cli("demo", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    recipes = FixRegistry.discover().recipes
    cmds = {fix_command(f["fix"]["id"], f["fix"]["params"])
            for c in doc["checks"] for f in c["findings"] if f.get("fix")}
    assert len(cmds) >= 5
    for cmd in cmds:
        assert assert_runs(cmd)[2] in recipes, cmd

    def commands(x, key=""):  # any command field the report carries (problems, next steps)
        if isinstance(x, dict):
            for k, v in x.items():
                yield from commands(v, k)
        elif isinstance(x, list):
            for v in x:
                yield from commands(v, key)
        elif isinstance(x, str) and key in ("command", "cmd", "fix_command", "run"):
            yield x
    for cmd in commands(doc):
        assert_runs(cmd)


def test_the_fix_list_and_the_plans_paste_and_run(cli, tmp_path):
    from ascend_doctor.fixes import FixRegistry

    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "LANG": "C.UTF-8"}
    overlay = tmp_path / "over lay"  # a space: the suggested commands must quote it
    r = cli("fix", "--demo-root", str(overlay), env=env)
    assert r.returncode == 0, r.stderr
    lines = [x.strip() for x in r.stdout.splitlines() if x.strip().startswith("ascend-doctor")]
    assert len(lines) >= 5
    recipes = set()
    for line in sorted(set(lines)):
        argv = assert_runs(line)
        assert f"--demo-root={overlay}" in argv, line
        recipes.add(argv[2])
        # pasted, it runs: the plan (a dry run) of what the list suggested
        r = cli(*argv[1:], "--json", env=env)
        assert r.returncode == 0, (line, r.stderr)
        plan = json.loads(r.stdout)["plan"]
        for c in plan["commands"]:
            assert_runs(shlex.join(c["argv"]))
        if "--from-check=config.block-size" in argv:  # that finding's flags, not another's
            assert "--block-size" in plan["params"]["flags"], plan["params"]
        if "--from-check=config.batched-tokens" in argv:
            assert "--max-num-batched-tokens" in plan["params"]["flags"], plan["params"]
    assert recipes <= set(FixRegistry.discover().recipes) and len(recipes) >= 4


def test_kb_suggestions_of_the_doctor_itself_parse():
    """The KB's own `ascend-doctor …` commands use subcommands and options that exist."""
    from ascend_doctor import knowledge
    seen = 0
    for e in knowledge.load().entries.values():
        for s in e.steps:
            if "ascend-doctor " not in (s.get("cmd") or ""):
                continue  # other KB commands are the KB's (reviewed with its sources)
            argv = shlex.split(s["cmd"])
            while argv and "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]  # VAR=value prefixes
            if argv[:1] == ["ascend-doctor"]:
                assert_runs(shlex.join(argv))
                seen += 1
    assert seen >= 10


def test_next_never_repeats_the_run():
    ran = ["ldconf.order", "ldconf.perms", "libacl.resolve", "dns.resolver", "msprof.export"]
    assert repeats_the_run("ascend-doctor check --only ldconf", "check", ran)
    assert repeats_the_run("ascend-doctor check --only libacl -v", "demo", ran)
    assert not repeats_the_run("ascend-doctor check --only dns --sniff 30", "check", ran)
    assert not repeats_the_run("ascend-doctor check --only msprof --profile ./p", "check", ran)
    assert not repeats_the_run("ascend-doctor check --only block_tables", "check", ran)
    assert not repeats_the_run("ascend-doctor check --only ldconf", "triage", ran)
    assert only_reads("cat /etc/ld.so.conf") and only_reads("npu-smi info -t health -i 0")
    assert only_reads("stat -c '%a %U %n' /etc/ld.so.conf.d/*.conf")
    assert not only_reads("chmod 644 /etc/ld.so.conf.d/ascend.conf && ldconfig")
    assert not only_reads("echo 1 > /proc/sys/vm/drop_caches")
    steps = [{"en": "Check the include", "cmd": "cat /etc/ld.so.conf"},
             {"en": "Re-run", "cmd": "ascend-doctor check --only ldconf"},
             {"en": "Add the include and run ldconfig", "cmd": "ascend-doctor fix ldconf.ascend-conf"}]
    assert next_step(steps, "en", "check", ran) == ("Add the include and run ldconfig "
                                                    "`ascend-doctor fix ldconf.ascend-conf`")
    assert next_step(steps[:2], "en", "check", ran) is None  # nothing new to suggest
    assert next_step(steps, "en", "triage", ran).startswith("Check the include")


def test_next_on_the_demo_is_something_new():
    """On the demo's own KB entries: the first step the report would show is never a
    re-run of check nor a read of what the checks read."""
    from ascend_doctor import knowledge
    from ascend_doctor.engine import RunConfig, run
    from ascend_doctor.opening import demo_host
    from ascend_doctor.options import RunOptions

    report = run(demo_host(), RunOptions(), config=RunConfig(context="demo"))
    ran = [r.check_id for r in report.results]
    kb = knowledge.load()
    shown = 0
    for kid in sorted({k for _, f in report.findings() for k in f.kb}):
        nxt = next_step(list(kb.get(kid).steps), "en", "demo", ran)
        if nxt is None:
            continue
        shown += 1
        cmd = nxt.rsplit("`", 2)[1] if nxt.endswith("`") else ""
        assert not (cmd and (only_reads(cmd) or repeats_the_run(cmd, "demo", ran))), (kid, nxt)
    assert shown >= 20
    lib002 = next_step(list(kb.get("ASC-LIB-002").steps), "en", "demo", ran)
    assert lib002 is not None and "cat /etc/ld.so.conf" not in lib002


# shell words and programs of an Ascend host (or its tool chain) a KB step may start with
SHELL_WORDS = {"export", "source", "for", "cd", "unset", "echo", "sudo", "env", "watch"}
ASCEND_PROGRAMS = HOST_PROGRAMS | {"hccn_tool", "msprof-analyze", "py-spy", "pidstat",
                                   "strace", "useradd", "pip", "python", "tshark", "file",
                                   "dmesg", "ss", "ip", "ps", "free", "watch", "getent", "curl",
                                   "vllm", "ray", "lspci"}


def test_every_kb_command_starts_with_a_program():
    """A KB step's `cmd` is pasted at a shell prompt: it must start with a program or a shell
    word, never with a launch flag (`$ --enforce-eager`) or a PromQL expression."""
    from ascend_doctor import knowledge
    bad = []
    for e in knowledge.load().entries.values():
        for i, s in enumerate(e.steps, 1):
            if not s.get("cmd"):
                continue
            argv = shlex.split(s["cmd"])
            while argv and "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]  # VAR=value prefixes
            first = argv[0] if argv else ""
            if not (first in SHELL_WORDS or first in ASCEND_PROGRAMS or first == "ascend-doctor"
                    or first.startswith("./") or shutil.which(first)):
                bad.append(f"{e.id}.steps[{i}]: {s['cmd'][:60]}")
    assert not bad, bad
