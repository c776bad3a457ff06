"""tlb.hugepages: transparent hugepages mode and a hugepage pool, made persistent through
tmpfiles.d / sysctl.d; the kernel command line is shown as a manual alternative."""

from __future__ import annotations

from ascend_doctor.errors import UsageError
from ascend_doctor.i18n import T

from . import recipe
from .context import FixContext
from .plan import Command, Manual, Plan

THP = "/sys/kernel/mm/transparent_hugepage/enabled"
TMPFILES = "/etc/tmpfiles.d/ascend-doctor-thp.conf"
SYSCTL = "/etc/sysctl.d/90-ascend-doctor-hugepages.conf"
MODES = ("always", "madvise", "never")


def current_mode(text: str) -> str | None:
    """'always [madvise] never' -> 'madvise'."""
    for w in text.split():
        if w.startswith("[") and w.endswith("]"):
            return w[1:-1]
    return None


@recipe("tlb.hugepages", title="Transparent hugepages / hugepage pool, persistent",
        check="tlb.hugepages", params=("thp", "nr_hugepages"), writes=(TMPFILES, SYSCTL),
        affects=("tlb",),
        undo_commands=(Command(("sysctl", "--system"), T("reload the restored settings"),
                               sysroot_skip=T("a sysroot's kernel settings are not live")),))
def hugepages(ctx: FixContext, params: dict) -> Plan:
    verify = params.pop("_verify", None) or "tlb.hugepages"
    mode = str(params.get("thp") or "always")
    if mode not in MODES:
        raise UsageError(T("tlb.hugepages: thp={value} is not one of {modes}", value=repr(mode),
                            modes=", ".join(MODES)))
    plan = Plan("tlb.hugepages", T("Transparent hugepages / hugepage pool, persistent"),
                {"thp": mode, **({"nr_hugepages": params["nr_hugepages"]}
                                 if params.get("nr_hugepages") else {})}, verify=verify)
    raw = ctx.read(THP)
    now = current_mode(raw.decode()) if raw else None
    plan.notes.append(T("transparent hugepages now: {now}; wanted: {mode}",
                          now=now or T("unknown"), mode=mode))
    plan.edits.append(ctx.edit(TMPFILES, f"# transparent hugepages at boot (ascend-doctor)\n"
                                         f"w {THP} - - - - {mode}\n", 0o644,
                               T("systemd-tmpfiles writes it at every boot")))
    plan.commands.append(Command(("systemd-tmpfiles", "--create", TMPFILES), T("apply it now"),
                                 sysroot_skip=T("a sysroot's /sys is not live")))
    if params.get("nr_hugepages"):
        n = int(params["nr_hugepages"])
        plan.edits.append(ctx.edit(SYSCTL, f"# hugepage pool (ascend-doctor)\nvm.nr_hugepages = "
                                           f"{n}\n", 0o644, T("reserve the pool at boot")))
        plan.commands.append(Command(("sysctl", "--system"), T("reserve the pool now"),
                                     sysroot_skip=T("a sysroot's kernel settings are not live")))
    plan.manual.append(Manual(
        "Alternative that also holds before userspace starts: add it to the kernel command "
        "line (GRUB_CMDLINE_LINUX in /etc/default/grub), then update-grub and reboot:",
        "另一种在用户态启动前即生效的方式：加入内核命令行（/etc/default/grub 的 "
        "GRUB_CMDLINE_LINUX），然后 update-grub 并重启：",
        f"transparent_hugepage={mode}" + (f" hugepages={params['nr_hugepages']}"
                                          if params.get("nr_hugepages") else "")))
    plan.needs_root = [T("writing {path}", path=e.path) for e in plan.edits] + [
        T("writing {path}", path="/sys")]
    return plan
