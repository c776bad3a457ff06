"""`--help` of each command documents every option and shows examples that parse (issue
14 item 5): the examples use subcommands and options that exist."""

from __future__ import annotations

import re
import shlex
from typing import Iterator

import click
import pytest

from ascend_doctor.cli import main


def commands(cmd: click.Command = main, path: tuple[str, ...] = ("ascend-doctor",)
             ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        subs = cmd.all_commands() if cmd is main else cmd.commands
        for name, sub in sorted(subs.items()):
            yield from commands(sub, path + (name,))


ALL = list(commands())


def _help(path, cmd) -> str:
    return cmd.get_help(click.Context(cmd, info_name=" ".join(path)))


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p[1:]) or "main" for p, _ in ALL])
def test_help_documents_every_option_and_shows_an_example(path, cmd):
    text = _help(path, cmd)
    undocumented = [p.opts[0] for p in cmd.params
                    if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip()]
    assert undocumented == [], f"{' '.join(path)}: options without help: {undocumented}"
    assert re.search(r"^\s*Examples?:", text, re.M), f"{' '.join(path)} --help has no Example"
    examples = [ln.strip() for ln in text.split("Example", 1)[1].splitlines()[1:]
                if ln.strip().startswith(("ascend-doctor", "sudo ascend-doctor"))]
    assert examples, f"{' '.join(path)}: no example runs ascend-doctor"
    for ex in examples:
        _parses(ex)


def _parses(example: str) -> None:
    """Each ``ascend-doctor …`` part of a shell line parses with that command's options."""
    words = shlex.split(example, comments=True)
    parts, cur = [], []
    for w in words:
        if w in ("|", "&&", ";", ">", "<"):
            parts.append(cur)
            cur = []
        else:
            cur.append(w)
    parts.append(cur)
    for argv in parts:
        if argv[:1] == ["sudo"]:
            argv = argv[1:]
        if argv[:1] != ["ascend-doctor"]:
            continue
        cmd, args, i = main, argv[1:], 1
        while isinstance(cmd, click.Group) and args and cmd.get_command(None, args[0]):
            cmd, args = cmd.get_command(None, args[0]), args[1:]
        if isinstance(cmd, click.Group) and args and not args[0].startswith("-"):
            if args[0] != "COMMAND":
                raise AssertionError(f"{example}: no subcommand {args[0]!r}")
            continue
        try:
            cmd.make_context(argv[0], list(args), resilient_parsing=False)
        except click.BadParameter:
            pass  # a path of the example that does not exist here: the option does
        except click.UsageError as exc:
            raise AssertionError(f"{example}: {exc}") from None


def test_check_text_is_an_explicit_flag(cli):
    r = cli("check", "--text", "--only", "ldconf.parse", "--root", "/nonexistent-root")
    assert "No such option" not in r.stderr
    r = cli("demo", "--text", "--only", "ldconf.order")
    assert r.returncode == 0 and "ldconf.order" in r.stdout
    r = cli("check", "--text", "--json", "--only", "ldconf.parse")
    assert r.returncode == 2 and "choose one of --json, --text, --markdown" in r.stderr


def test_check_text_prints_the_text_report(cli, sysroot):
    sysroot.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    sysroot.mkdir("/etc/ld.so.conf.d")
    r = cli("check", "--text", "--root", str(sysroot.root), "--only", "ldconf.parse")
    assert r.returncode == 0, r.stderr
    assert "ldconf.parse" in r.stdout and "summary" in r.stdout and not r.stdout.startswith("{")
