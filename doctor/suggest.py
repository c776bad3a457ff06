"""Commands the doctor suggests to a user, written so they paste into a shell as meant.

One place builds them (the `fix` list, reports, the TUI), so every value is shell-quoted
(``shlex.quote``) and a suggestion never repeats what the run already did.
"""

from __future__ import annotations

import functools
import shlex
from typing import Any, Iterable, Mapping

PROG = "ascend-doctor"


def fix_command(recipe_id: str, params: Mapping[str, Any] | None = None,
                target: Iterable[str] = ()) -> str:
    """``ascend-doctor fix ID [TARGET...] [--param K=V ...]``, every word quoted.

    Only scalar parameters are spelled out; structured ones (lists of flags) are what the
    check found, and `fix` re-reads them from the run, so leaving them out loses nothing.
    """
    argv = [PROG, "fix", recipe_id, *target]
    accepted = _accepted(recipe_id)
    for k, v in (params or {}).items():
        if isinstance(v, bool) or v is None or not isinstance(v, (str, int, float)):
            continue
        if accepted is not None and k not in accepted:
            continue  # what the finding knows but the recipe takes no --param for
        argv += ["--param", f"{k}={v}"]
    return shlex.join(argv)


@functools.lru_cache(maxsize=None)
def _accepted(recipe_id: str) -> frozenset[str] | None:
    """The --param names the recipe takes (`fix` refuses any other), None when unknown."""
    try:
        from ascend_doctor.fixes import FixRegistry
        spec = FixRegistry.discover().recipes.get(recipe_id)
    except Exception:
        return None
    return None if spec is None else frozenset(spec.params)


def report_fix_command(fix: Any, context: str | None) -> str:
    """The `fix` line of a report for a finding's ``FixRef``: its scalar parameters spelled
    out (the memory fix's ``relieve=…``, the variable of service.env), and in a report of
    the demo ``--demo``, so the pasted line plans, applies and journals on the demo's
    overlay, never on this machine."""
    return fix_command(fix.id, dict(getattr(fix, "params", None) or {}),
                       ["--demo"] if context == "demo" else [])


def _words(cmd: str) -> list[str] | None:
    try:
        return shlex.split(cmd)
    except ValueError:
        return None


def repeats_the_run(cmd: str, ran: str, ran_checks: Iterable[str] = ()) -> bool:
    """Whether ``cmd`` (a KB step's command) would only do again what this run did.

    ``ran`` is the subcommand that produced the report (check, demo, collect, ...). A
    suggested ``ascend-doctor check`` repeats a check/demo run unless it adds an input the
    run did not have (``--sniff``, ``--pcap``, ``--profile``, ``--log``, ...); its ``--only``
    words repeat it when the run already covered them.
    """
    w = _words(cmd)
    if not w:
        return False
    while w and "=" in w[0] and not w[0].startswith("-"):  # VAR=value prefixes
        w = w[1:]
    if len(w) < 2 or w[0] != PROG or w[1] != "check" or ran not in ("check", "demo"):
        return False
    ran_checks = list(ran_checks)
    args, i = w[2:], 0
    while i < len(args):
        a = args[i]
        if a == "--only" and i + 1 < len(args):
            words = [x for x in args[i + 1].split(",") if x]
            if not all(any(c == x or c.startswith(x + ".") for c in ran_checks)
                       for x in words):
                return False  # it asks for checks this run left out
            i += 2
        elif a == "--skip" and i + 1 < len(args):
            i += 2
        elif a in ("-v", "--verbose", "--json", "--text", "--markdown"):
            i += 1
        else:
            return False  # another option brings an input or target the run did not have
    return True


# programs that only show what the doctor itself reads (files, npu-smi, pip, /metrics)
_READERS = {"cat", "stat", "ls", "grep", "egrep", "head", "tail", "tr", "wc", "env", "echo",
            "printenv", "sort", "uniq", "cut", "awk", "file", "readlink", "getent", "id",
            "uname", "ss", "ps", "pgrep", "sysctl", "findmnt", "mount", "column"}
_OPS = {"|", "||", "&&", ";", "<", ">", "(", ")", "$(", "2>&1", "&"}


def only_reads(cmd: str) -> bool:
    """Whether every program of ``cmd`` (a pipeline, ``&&`` chains) only inspects what a
    check run already read: ``cat /etc/ld.so.conf``, ``stat …``, ``npu-smi info``,
    ``pip list``, ``curl -s …/metrics``. Anything it does not understand counts as new."""
    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        tokens = list(lex)
    except ValueError:
        return False
    for t, nxt in zip(tokens, tokens[1:] + [""]):
        if ">" in t and t not in ("2>&1", ">&2") and nxt != "/dev/null":
            return False  # it writes a file
    segments: list[list[str]] = [[]]
    for t in tokens:
        if t in _OPS or set(t) <= set("|&;<>()$"):
            # after ")" or a redirection the words are arguments or a file, not a program
            segments.append(["<args>"] if (")" in t or "<" in t or ">" in t) else [])
        else:
            segments[-1].append(t)
    progs = 0
    for seg in segments:
        while seg and "=" in seg[0] and not seg[0].startswith("-"):
            seg = seg[1:]
        if not seg or seg[0] == "<args>" or seg[0].isdigit():
            continue
        prog, rest = seg[0].rsplit("/", 1)[-1], seg[1:]
        progs += 1
        if prog in _READERS and not (prog == "sysctl" and "-w" in rest):
            continue
        if prog == "npu-smi" and rest[:1] == ["info"]:
            continue
        if prog in ("pip", "pip3") and rest[:1] in (["list"], ["show"]):
            continue
        if prog.startswith("python") and rest[:3] in (["-m", "pip", "list"], ["-m", "pip", "show"]):
            continue
        if prog == "curl" and not {"-X", "-d", "--data", "--request"} & set(rest):
            continue
        if prog == "ldconfig" and "-p" in rest:
            continue
        return False
    return progs > 0


def next_step(steps: list[dict[str, Any]], lang: str, ran: str,
              ran_checks: Iterable[str] = ()) -> str | None:
    """The first KB step (an entry's ``steps``: ``{"en", "zh", "cmd"}``) that does not
    repeat the run, as "text `cmd`" with the command as written; None when every step only
    re-does what the run did (re-running it, or reading what its checks read)."""
    ran_checks = list(ran_checks)
    for s in steps:
        cmd = s.get("cmd")
        if cmd and (repeats_the_run(cmd, ran, ran_checks)
                    or (ran in ("check", "demo") and only_reads(cmd))):
            continue
        text = str(s.get(lang) or s.get("en") or s.get("text") or "")
        return f"{text} `{cmd}`" if cmd else text
    return None
