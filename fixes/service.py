"""The vLLM service: its environment (service.env) and its launch flags (service.launch-flags).

A systemd unit whose ExecStart runs vLLM gets a drop-in (environment) or an edited ExecStart
(flags); without a unit the recipe writes an env file and shows the launch line to use.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Callable

from ascend_doctor.i18n import T

from . import recipe
from .context import FixContext
from .plan import Command, Manual, Plan

UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
ENV_FILE = "/etc/ascend-doctor/ascend-env.sh"
DROPIN_NAME = "ascend-env.conf"
TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
DRIVER = "/usr/local/Ascend/driver"
# why a systemctl command is not run against a sysroot
_NO_SYSTEMD = T("systemd of a sysroot is not running")
SYS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def set_env_vars(toolkit: str = TOOLKIT, arch: str = "x86_64") -> dict[str, str]:
    """The variables set_env.sh (CANN 8.x) leaves behind, as literal values (its prepends
    applied in order, starting from an empty LD_LIBRARY_PATH/PYTHONPATH)."""
    tk = toolkit
    ld = [f"{tk}/tools/aml/lib64", f"{tk}/tools/aml/lib64/plugin",
          f"{tk}/lib64", f"{tk}/lib64/plugin/opskernel", f"{tk}/lib64/plugin/nnengine",
          f"{tk}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/{arch}",
          f"{DRIVER}/lib64", f"{DRIVER}/lib64/common", f"{DRIVER}/lib64/driver"]
    return {
        "ASCEND_TOOLKIT_HOME": tk,
        "LD_LIBRARY_PATH": ":".join(ld),
        "PYTHONPATH": f"{tk}/python/site-packages:{tk}/opp/built-in/op_impl/ai_core/tbe",
        "PATH": f"{tk}/bin:{tk}/compiler/ccec_compiler/bin:{tk}/tools/ccec_compiler/bin:"
                + SYS_PATH,
        "ASCEND_AICPU_PATH": tk,
        "ASCEND_OPP_PATH": f"{tk}/opp",
        "TOOLCHAIN_HOME": f"{tk}/toolkit",
        "ASCEND_HOME_PATH": tk,
    }


def parse_exec_start(unit_text: str) -> tuple[int, int, str] | None:
    """(first line index, last line index, command) of the last ExecStart= with a command,
    continuation lines (trailing backslash) joined."""
    lines = unit_text.splitlines()
    found = None
    i = 0
    while i < len(lines):
        m = re.match(r"\s*ExecStart\s*=\s*(.*)$", lines[i])
        if m:
            start, parts = i, [m.group(1)]
            while parts[-1].endswith("\\") and i + 1 < len(lines):
                parts[-1] = parts[-1][:-1]
                i += 1
                parts.append(lines[i].strip())
            cmd = " ".join(p.strip() for p in parts).strip()
            if cmd:
                found = (start, i, cmd)
        i += 1
    return found


def find_unit(ctx: FixContext, name: str | None = None) -> tuple[str, str] | None:
    """(path, text) of the systemd unit that runs vLLM (or the named one)."""
    for d in UNIT_DIRS:
        for path in ctx.glob(f"{d}/*.service"):
            if name and posixpath.basename(path) not in (name, f"{name}.service"):
                continue
            raw = ctx.read(path)
            if raw is None:
                continue
            text = raw.decode("utf-8", "replace")
            es = parse_exec_start(text)
            if name or (es and re.search(r"\bvllm\b|vllm\.entrypoints", es[2])):
                return path, text
    return None


def _arch(ctx: FixContext, params: dict) -> str:
    if params.get("arch"):
        return str(params["arch"])
    try:
        return ctx.host.info().arch or "x86_64"
    except Exception:
        return "x86_64"


def _service_cmdline(ctx: FixContext, params: dict) -> str | None:
    if params.get("cmdline"):
        return str(params["cmdline"])
    try:
        from ascend_doctor.probes.procs import ServiceProcesses
        primary = ctx.fact(ServiceProcesses).primary
        if primary is not None:
            return shlex.join(primary.proc.cmdline)
    except Exception:
        return None
    return None


def config_corrections(ctx: FixContext) -> dict[str, str | None]:
    """The launch-flag corrections the config.* checks ask for on this host ({flag: value,
    None to drop it}), so a relaunch line never re-adds a flag they flag."""
    from ascend_doctor.engine import run_check
    from ascend_doctor.facts import FactStore
    from ascend_doctor.registry import Registry
    reg = Registry.discover(plugins=False)
    if ctx._store is None:
        ctx._store = FactStore(ctx.host, ctx.options, reg)
    out: dict[str, str | None] = {}
    for cid, spec in sorted(reg.checks.items()):
        if not cid.startswith("config."):
            continue
        for f in run_check(spec, ctx._store):
            if f.fix is None or f.fix.id != "service.launch-flags" or \
                    f.status.value not in ("warn", "fail"):
                continue
            for pair in f.fix.params.get("set") or ():
                if isinstance(pair, (list, tuple)) and len(pair) == 2:
                    out.setdefault(str(pair[0]), str(pair[1]))
            for flag in f.fix.params.get("remove") or ():
                out.setdefault(str(flag), None)
    return out


def _relaunch(ctx: FixContext, params: dict, plan: Plan) -> str:
    """The launch line to restart with: the service's own argv with every flag the config.*
    checks flag corrected (named in a note), or a placeholder when none is known."""
    cmd = _service_cmdline(ctx, params)
    if not cmd:
        return "python -m vllm.entrypoints.openai.api_server …"
    try:
        fixes = config_corrections(ctx)
    except Exception:  # a check that cannot run here must not stop the plan
        fixes = {}
    argv = shlex.split(cmd)
    new = rewrite_flags(argv, fixes) if fixes else argv
    if new != argv:
        plan.notes.append(T("the launch line corrects what the config checks flag: {flags}",
                            flags=", ".join(f"{k} {v}" if v is not None else f"{k} (dropped)"
                                            for k, v in fixes.items())))
    return shlex.join(new)


_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEVICES = re.compile(r"[0-9]+(,[0-9]+)*")


def _one_var(params: dict) -> tuple[str, str] | None:
    """(name, value) of ``--param var=NAME --param value=V``; None when no var is named.
    Refused (UsageError) rather than written half-understood."""
    from ascend_doctor.errors import UsageError
    var, value = params.get("var"), params.get("value")
    if var is None and value is None:
        return None
    if not var:
        raise UsageError(T("service.env: --param value=… needs --param var=NAME"))
    if value is None or (var == "ASCEND_RT_VISIBLE_DEVICES" and str(value) == ""):
        return str(var), None  # type: ignore[return-value]  # the plan asks for the value
    var, value = str(var), str(value)
    if not _VAR.fullmatch(var):
        raise UsageError(T("service.env: {var} is not an environment variable name", var=repr(var)))
    if any(c in value for c in "\n\r\0"):
        raise UsageError(T("service.env: the value of {var} holds a line break", var=var))
    if var == "ASCEND_RT_VISIBLE_DEVICES" and not _DEVICES.fullmatch(value):
        raise UsageError(T("service.env: ASCEND_RT_VISIBLE_DEVICES takes device ids like "
                           "0,1,2,3, not {value}", value=repr(value)))
    return var, value


def _set_line(text: str, pattern: str, line: str) -> str:
    """``text`` with the line matching ``pattern`` replaced by ``line`` (appended if none)."""
    lines = text.splitlines(keepends=True)
    rx = re.compile(pattern)
    hit = [i for i, ln in enumerate(lines) if rx.match(ln)]
    if hit:
        lines[hit[0]] = line
        for i in reversed(hit[1:]):
            del lines[i]
        return "".join(lines)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(lines) + line


def _existing_env(ctx: FixContext, env: dict[str, str], plan: Plan) -> dict[str, str]:
    """set_env.sh's values with the directories that do not exist here left out (named in a
    note): a fix never writes configuration naming paths that do not exist."""
    gone: list[str] = []
    out = {}
    for k, v in env.items():
        if k in ("LD_LIBRARY_PATH", "PYTHONPATH", "PATH"):
            keep = []
            for d in v.split(":"):
                if d in SYS_PATH.split(":") or ctx.exists(d):
                    keep.append(d)
                elif d not in gone:
                    gone.append(d)
            if keep:
                out[k] = ":".join(keep)
        elif v.startswith("/") and not ctx.exists(v):
            gone.append(v)
        else:
            out[k] = v
    if gone:
        plan.notes.append(T("left out (they do not exist on this host): {dirs}",
                            dirs=", ".join(gone)))
    return out


def _unset_plan(ctx: FixContext, params: dict, verify: str, unset) -> Plan:
    """Take variables out of the service's environment (a drop-in's UnsetEnvironment=, or
    ``unset`` lines in the env file the launch line sources)."""
    names = [unset] if isinstance(unset, str) else [str(x) for x in unset]
    for n in names:
        if not _VAR.fullmatch(n):
            from ascend_doctor.errors import UsageError
            raise UsageError(T("service.env: {var} is not an environment variable name",
                               var=repr(n)))
    plan = Plan("service.env", T("Remove {vars} from the vLLM service's environment",
                                 vars=", ".join(names)), {**params, "unset": names},
                verify=verify)
    unit = find_unit(ctx, params.get("unit"))
    if unit:
        name = posixpath.basename(unit[0])
        dropin = f"/etc/systemd/system/{name}.d/{DROPIN_NAME}"
        body = _unset_body(ctx, dropin, SYSTEMD, names)
        plan.edits.append(ctx.edit(dropin, body, 0o644, T("the environment {unit} starts with",
                                                              unit=name)))
        _restart_unit(plan, name, dropin)
        return plan
    body = _unset_body(ctx, ENV_FILE, PLAIN, names)
    plan.edits.append(ctx.edit(ENV_FILE, body, 0o644, T("environment for the launch line")))
    cmd = _relaunch(ctx, params, plan)
    plan.manual.append(Manual(
        "No systemd unit runs vLLM here: start the server with this environment "
        "(stop the running one first):",
        "此处没有运行 vLLM 的 systemd 单元：用此环境启动服务（先停止正在运行的实例）：",
        f"set -a && . {shlex.quote(ENV_FILE)} && set +a && {cmd}"))
    plan.needs_root = [T("writing {path}", path=ENV_FILE)]
    return plan


@dataclass(frozen=True)
class EnvFormat:
    """How one environment file spells its lines: a systemd drop-in or shell assignments."""

    one_header: str  # a file made for one variable
    all_header: str  # a file made for set_env.sh's variables
    section: str
    line: Callable[[str, str], str]
    existing: Callable[[str], str]  # the pattern of a line that already sets the variable
    unset: str  # the line that takes a variable out ({n}: its name)
    unset_existing: str  # the pattern of such a line ({n}: its name, escaped)


_WRITTEN = "# (written by `ascend-doctor fix service.env`)\n"
SYSTEMD = EnvFormat("# environment of the vLLM service\n",
                    "# set_env.sh of the CANN toolkit, as systemd Environment= lines\n",
                    "[Service]\n", lambda k, v: f'Environment="{k}={v}"\n',
                    lambda k: rf'\s*Environment="?{re.escape(k)}=',
                    "UnsetEnvironment={n}\n", r"\s*UnsetEnvironment={n}\s*$")
PLAIN = EnvFormat("# environment of the vLLM service as plain assignments\n",
                  "# set_env.sh of the CANN toolkit as plain assignments\n",
                  "", lambda k, v: f"{k}={shlex.quote(v)}\n",
                  lambda k: rf"\s*(export\s+)?{re.escape(k)}=",
                  "unset {n}\n", r"\s*unset\s+{n}\s*$")


def _env_body(ctx: FixContext, path: str, fmt: EnvFormat, env: dict[str, str],
              one: bool) -> str:
    """The drop-in's or env file's new text. One variable keeps what the file already sets and
    replaces or adds that line; set_env.sh's variables are the whole file."""
    if one:
        ((var, value),) = env.items()
        return _set_line(_current(ctx, path, fmt), fmt.existing(var), fmt.line(var, value))
    return (fmt.all_header + _WRITTEN + fmt.section
            + "".join(fmt.line(k, v) for k, v in env.items()))


def _current(ctx: FixContext, path: str, fmt: EnvFormat) -> str:
    """What the file says now, or the header of a new one."""
    old = ctx.read(path)
    return (old.decode("utf-8", "replace") if old is not None else
            fmt.one_header + _WRITTEN + fmt.section)


def _unset_body(ctx: FixContext, path: str, fmt: EnvFormat, names: list[str]) -> str:
    body = _current(ctx, path, fmt)
    for n in names:
        body = _set_line(body, fmt.existing(n), "")
        body = _set_line(body, fmt.unset_existing.format(n=re.escape(n)), fmt.unset.format(n=n))
    return body


def _restart_unit(plan: Plan, name: str, dropin: str, reload_why: str | None = None,
                  restart_why: str | None = None) -> None:
    """The steps after writing a unit or its drop-in: reload, restart, and who may do that."""
    plan.commands += [Command(("systemctl", "daemon-reload"), reload_why or T("load the drop-in"),
                              sysroot_skip=_NO_SYSTEMD),
                      Command(("systemctl", "restart", name),
                              restart_why or T("restart with the environment"),
                              sysroot_skip=_NO_SYSTEMD)]
    plan.restarts.append(name)
    plan.needs_root = [T("writing {path}", path=dropin), T("restarting {unit}", unit=name)]


@recipe("service.env", title="Give the vLLM service the environment of set_env.sh",
        check="libacl.resolve",
        params=("unit", "toolkit", "arch", "cmdline", "var", "value", "unset"),
        affects=("libacl", "torch_npu", "config.env-knobs", "host.environment"),
        writes=(f"/etc/systemd/system/*.d/{DROPIN_NAME}", ENV_FILE),
        undo_commands=(Command(("systemctl", "daemon-reload"), T("reload the restored units"),
                               sysroot_skip=_NO_SYSTEMD),))
def service_env(ctx: FixContext, params: dict) -> Plan:
    """set_env.sh's variables, or with ``var``/``value`` that one variable (e.g.
    PYTORCH_NPU_ALLOC_CONF=expandable_segments:True), for the service's next start."""
    verify = params.pop("_verify", None) or "libacl.resolve"
    unset = params.pop("unset", None)
    if unset and not params.get("var"):
        return _unset_plan(ctx, params, verify, unset)
    one = _one_var(params)
    if one and one[1] is None:
        plan = Plan("service.env", T("Set {var} in the vLLM service's environment", var=one[0]),
                    params, verify=verify)
        plan.manual.append(Manual(
            f"Choose the value of {one[0]} and plan again:",
            f"确定 {one[0]} 的取值后重新生成计划：",
            shlex.join(["ascend-doctor", "fix", "service.env", "--param", f"var={one[0]}",
                        "--param", "value=…"])))
        return plan
    if one:
        var, value = one
        # verified by its finding's check (logs.signatures counts only lines written since);
        # the libraries check says nothing about another variable: the environment check does
        plan = Plan("service.env", T("Set {var} in the vLLM service's environment", var=var),
                    {k: v for k, v in params.items() if k in ("var", "value", "unit", "cmdline")},
                    verify="config.env-knobs" if verify == "libacl.resolve" and
                    var != "LD_LIBRARY_PATH" else verify)
        env = {var: value}
    else:
        plan = Plan("service.env", T("Give the vLLM service the environment of set_env.sh"),
                    params, verify=verify)
        toolkit = str(params.get("toolkit") or TOOLKIT)
        if not ctx.exists(toolkit):
            plan.blocked.append(T("the CANN toolkit {dir} does not exist on this host: there is "
                                  "no set_env.sh environment to give the service", dir=toolkit))
            return plan
        env = _existing_env(ctx, set_env_vars(toolkit, _arch(ctx, params)), plan)
    unit = find_unit(ctx, params.get("unit"))
    if unit:
        path, _ = unit
        name = posixpath.basename(path)
        dropin = f"/etc/systemd/system/{name}.d/{DROPIN_NAME}"
        body = _env_body(ctx, dropin, SYSTEMD, env, one is not None)
        plan.edits.append(ctx.edit(dropin, body, 0o644, T("the environment {unit} starts with",
                                                              unit=name)))
        _restart_unit(plan, name, dropin)
    else:
        body = _env_body(ctx, ENV_FILE, PLAIN, env, one is not None)
        plan.edits.append(ctx.edit(ENV_FILE, body, 0o644, T("environment for the launch line")))
        cmd = _relaunch(ctx, params, plan)
        plan.manual.append(Manual(
            "No systemd unit runs vLLM here: start the server with this environment "
            "(stop the running one first):",
            "此处没有运行 vLLM 的 systemd 单元：用此环境启动服务（先停止正在运行的实例）：",
            # sourced with allexport: the file's values are shell-quoted, so they arrive exact
            f"set -a && . {shlex.quote(ENV_FILE)} && set +a && {cmd}"))
        plan.needs_root = [T("writing {path}", path=ENV_FILE)]
    if not one:
        plan.notes.append(T("NNAL/ATB users also need /usr/local/Ascend/nnal/atb/set_env.sh's "
                            "variables (libatb.so)"))
    return plan


# -- launch flags -----------------------------------------------------------------------
def rewrite_flags(argv: list[str], flags: dict[str, str | None]) -> list[str]:
    """argv with each ``--flag`` set to its value (``--flag=v`` or ``--flag v`` forms),
    appended when absent; a None value removes the flag (and its value)."""
    out = list(argv)
    for flag, value in flags.items():
        flag = flag if flag.startswith("--") else "--" + flag.replace("_", "-")
        alt = flag.replace("-", "_")
        new: list[str] = []
        i, seen = 0, False
        while i < len(out):
            a = out[i]
            name, eq, _ = a.partition("=")
            if name in (flag, "--" + alt[2:]):
                has_val = not eq and i + 1 < len(out) and not out[i + 1].startswith("--")
                if value is not None and not seen:
                    new += [flag, str(value)]
                seen = True
                i += 2 if has_val else 1
                continue
            new.append(a)
            i += 1
        if not seen and value is not None:
            new += [flag, str(value)]
        out = new
    return out


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of ``--flag`` on a launch line (``--flag v`` or ``--flag=v``), else None."""
    flag = flag if flag.startswith("--") else "--" + flag
    alt = "--" + flag[2:].replace("-", "_")
    for i, a in enumerate(argv):
        name, eq, val = a.partition("=")
        if name in (flag, alt):
            if eq:
                return val
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                return argv[i + 1]
    return None


def _launch_argv(ctx: FixContext, params: dict) -> list[str] | None:
    """The launch line in use: the unit's ExecStart, else the running service's argv."""
    unit = find_unit(ctx, params.get("unit"))
    if unit:
        es = parse_exec_start(unit[1])
        if es:
            return shlex.split(es[2])
    cmd = _service_cmdline(ctx, params)
    return shlex.split(cmd) if cmd else None


def _relieve(ctx: FixContext, params: dict, flag: str, flags: dict, plan: Plan) -> None:
    """Lower ``--flag`` from the value in use (what a memory KB entry's steps say)."""
    from ascend_doctor.memfix import relieved
    flag = flag.lstrip("-")
    argv = _launch_argv(ctx, params)
    current = flag_value(argv, flag) if argv else None
    if argv is None and flag != "gpu-memory-utilization":
        plan.notes.append(T("no launch line found to read --{flag} from", flag=flag))
        return
    new, how = relieved(flag, current)
    if new is None:
        plan.notes.append(T("cannot lower --{flag}: {why}", flag=flag, why=how))
        return
    flags["--" + flag] = new
    plan.notes.append(T("--{flag} {old} -> {new} ({how}), to relieve NPU memory",
                        flag=flag, old=current or "(vLLM default)", new=new, how=how))


@recipe("service.launch-flags", title="Correct the vLLM launch flags",
        check="config.block-size",
        params=("flags", "set", "remove", "relieve", "unit", "cmdline"), open_params=True,
        affects=("config",),
        writes=tuple(f"{d}/*.service" for d in UNIT_DIRS),
        undo_commands=(Command(("systemctl", "daemon-reload"), T("reload the restored units"),
                               sysroot_skip=_NO_SYSTEMD),))
def launch_flags(ctx: FixContext, params: dict) -> Plan:
    verify = params.pop("_verify", None) or "config.block-size"
    flags = dict(params.get("flags") or {})
    # what the config.* checks pass: {"pid": 4711, "set": [["--flag", "value"]], "remove": [...]}
    for flag, value in params.pop("set", None) or ():
        flags[flag] = value
    for flag in params.pop("remove", None) or ():
        flags[flag] = None
    for key in ("pid", "pids", "unset"):
        params.pop(key, None)
    relieve = params.pop("relieve", None)
    for k in list(params):  # --param block-size=128 style: every other key is a flag
        if k not in ("unit", "cmdline", "flags"):
            flags["--" + k.lstrip("-").replace("_", "-")] = params.pop(k)
    plan = Plan("service.launch-flags", T("Correct the vLLM launch flags"),
                {**params, "flags": flags}, verify=verify)
    if relieve:
        _relieve(ctx, params, str(relieve), flags, plan)
        if str(relieve).lstrip("-") == "gpu-memory-utilization" and verify == "config.block-size":
            plan.verify = "config.gpu-memory"  # the share, not the block size
        plan.params["relieve"] = relieve
    if not flags:
        plan.manual.append(Manual("Name the flags to set, e.g. --param block-size=128",
                                  "请指定要设置的参数，例如 --param block-size=128"))
        return plan
    unit = find_unit(ctx, params.get("unit"))
    if unit:
        path, text = unit
        es = parse_exec_start(text)
        if es is None:
            plan.notes.append(T("{path} has no ExecStart=", path=path))
            return plan
        start, end, cmd = es
        new_cmd = shlex.join(rewrite_flags(shlex.split(cmd), flags))
        lines = text.splitlines(keepends=True)
        lines[start:end + 1] = [f"ExecStart={new_cmd}\n"]
        plan.edits.append(ctx.edit(path, "".join(lines), why=T("ExecStart with corrected flags")))
        _restart_unit(plan, posixpath.basename(path), path, T("reload the unit"),
                      T("restart with the new flags"))
    else:
        cmd = _service_cmdline(ctx, params)
        if not cmd:
            plan.manual.append(Manual("No unit and no running vLLM found: pass the launch line "
                                      "with --param cmdline='…'",
                                      "未找到服务单元或运行中的 vLLM：请用 --param cmdline='…' "
                                      "给出启动命令"))
            return plan
        # a restart line must not bring back what the config checks flag either
        try:
            extra = {k: v for k, v in config_corrections(ctx).items() if k not in flags}
        except Exception:  # a check that cannot run here must not stop the plan
            extra = {}
        if extra:
            plan.notes.append(T("the launch line corrects what the config checks flag: {flags}",
                                flags=", ".join(f"{k} {v}" if v is not None else
                                                f"{k} (dropped)" for k, v in extra.items())))
        new_cmd = shlex.join(rewrite_flags(shlex.split(cmd), {**extra, **flags}))
        plan.notes.append(T("current launch line: {cmd}", cmd=cmd))
        plan.manual.append(Manual("Restart vLLM with the corrected launch line:",
                                  "用修正后的启动命令重启 vLLM：", new_cmd))
    bs = str(flags.get("--block-size") or "")
    if bs and bs != "128":
        try:
            from ascend_doctor.probes.packages import Packages
            va = ctx.fact(Packages).version("vllm-ascend")
        except Exception:
            va = None
        plan.notes.append(T(
            "vllm-ascend {version} forces block size 128 when prefix caching or "
            "chunked prefill is on; --block-size {bs} only holds with both disabled",
            version=va or "≥ 0.9.1", bs=bs))
    return plan
