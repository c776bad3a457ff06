"""The vLLM service: its environment (service.env) and its launch flags (service.launch-flags).

A systemd unit whose ExecStart runs vLLM gets a drop-in (environment) or an edited ExecStart
(flags); without a unit the recipe writes an env file and shows the launch line to use.
"""

from __future__ import annotations

import posixpath
import re
import shlex

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


@recipe("service.env", title="Give the vLLM service the environment of set_env.sh",
        check="libacl.resolve", params=("unit", "toolkit", "arch", "cmdline"),
        affects=("libacl", "torch_npu", "config.env-knobs", "host.environment"),
        writes=(f"/etc/systemd/system/*.d/{DROPIN_NAME}", ENV_FILE),
        undo_commands=(Command(("systemctl", "daemon-reload"), T("reload the restored units"),
                               sysroot_skip=_NO_SYSTEMD),))
def service_env(ctx: FixContext, params: dict) -> Plan:
    verify = params.pop("_verify", None) or "libacl.resolve"
    plan = Plan("service.env", T("Give the vLLM service the environment of set_env.sh"), params,
                verify=verify)
    env = set_env_vars(str(params.get("toolkit") or TOOLKIT), _arch(ctx, params))
    unit = find_unit(ctx, params.get("unit"))
    if unit:
        path, _ = unit
        name = posixpath.basename(path)
        dropin = f"/etc/systemd/system/{name}.d/{DROPIN_NAME}"
        body = ("# set_env.sh of the CANN toolkit, as systemd Environment= lines\n"
                "# (written by `ascend-doctor fix service.env`)\n[Service]\n"
                + "".join(f'Environment="{k}={v}"\n' for k, v in env.items()))
        plan.edits.append(ctx.edit(dropin, body, 0o644, T("the environment {unit} starts with",
                                                              unit=name)))
        plan.commands += [Command(("systemctl", "daemon-reload"), T("load the drop-in"),
                                  sysroot_skip=_NO_SYSTEMD),
                          Command(("systemctl", "restart", name), T("restart with the environment"),
                                  sysroot_skip=_NO_SYSTEMD)]
        plan.restarts.append(name)
        plan.needs_root = [T("writing {path}", path=dropin), T("restarting {unit}", unit=name)]
    else:
        body = ("# set_env.sh of the CANN toolkit as plain assignments\n"
                "# (written by `ascend-doctor fix service.env`)\n"
                + "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()))
        plan.edits.append(ctx.edit(ENV_FILE, body, 0o644, T("environment for the launch line")))
        cmd = _service_cmdline(ctx, params) or "python -m vllm.entrypoints.openai.api_server …"
        plan.manual.append(Manual(
            "No systemd unit runs vLLM here: start the server with this environment "
            "(stop the running one first):",
            "此处没有运行 vLLM 的 systemd 单元：用此环境启动服务（先停止正在运行的实例）：",
            # sourced with allexport: the file's values are shell-quoted, so they arrive exact
            f"set -a && . {shlex.quote(ENV_FILE)} && set +a && {cmd}"))
        plan.needs_root = [T("writing {path}", path=ENV_FILE)]
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


@recipe("service.launch-flags", title="Correct the vLLM launch flags",
        check="config.block-size", params=("flags", "set", "remove", "unit", "cmdline"),
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
    for k in list(params):  # --param block-size=128 style: every other key is a flag
        if k not in ("unit", "cmdline", "flags"):
            flags["--" + k.lstrip("-").replace("_", "-")] = params.pop(k)
    plan = Plan("service.launch-flags", T("Correct the vLLM launch flags"),
                {**params, "flags": flags}, verify=verify)
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
        name = posixpath.basename(path)
        plan.commands += [Command(("systemctl", "daemon-reload"), T("reload the unit"),
                                  sysroot_skip=_NO_SYSTEMD),
                          Command(("systemctl", "restart", name), T("restart with the new flags"),
                                  sysroot_skip=_NO_SYSTEMD)]
        plan.restarts.append(name)
        plan.needs_root = [T("writing {path}", path=path), T("restarting {unit}", unit=name)]
    else:
        cmd = _service_cmdline(ctx, params)
        if not cmd:
            plan.manual.append(Manual("No unit and no running vLLM found: pass the launch line "
                                      "with --param cmdline='…'",
                                      "未找到服务单元或运行中的 vLLM：请用 --param cmdline='…' "
                                      "给出启动命令"))
            return plan
        new_cmd = shlex.join(rewrite_flags(shlex.split(cmd), flags))
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
