"""ldconf.ascend-conf: one /etc/ld.so.conf.d/ascend.conf, driver/lib64 first, mode 0644,
reached from /etc/ld.so.conf, then ldconfig (``ldconfig -r ROOT`` in a sysroot)."""

from __future__ import annotations

import fnmatch
import posixpath

from ascend_doctor.i18n import T
from ascend_doctor.probes.ldconf import LDSO_CONF, parse_ldconf_text

from . import recipe
from .context import FixContext
from .plan import Command, Plan

ASCEND_CONF = "/etc/ld.so.conf.d/ascend.conf"
LDSO_CACHE = "/etc/ld.so.cache"
INCLUDE = "include /etc/ld.so.conf.d/*.conf"
DRIVER = ("/usr/local/Ascend/driver/lib64", "/usr/local/Ascend/driver/lib64/common",
          "/usr/local/Ascend/driver/lib64/driver")
TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
HEADER = "# Ascend libraries, driver first (written by `ascend-doctor fix ldconf.ascend-conf`)\n"


def _is_ascend(d: str) -> bool:
    return "/Ascend/" in d


def _includes(conf_text: str, conf_path: str, target: str) -> bool:
    for d in parse_ldconf_text(conf_text):
        if d.kind == "include":
            pat = d.value if d.value.startswith("/") else posixpath.join(
                posixpath.dirname(conf_path), d.value)
            if fnmatch.fnmatchcase(target, pat):
                return True
    return False


def order_dirs(dirs: list[str]) -> list[str]:
    """Driver directories first (lib64, common, driver, in that order), the rest as found."""
    drivers = [d for d in DRIVER if d in dirs]
    drivers += [d for d in dirs if "/Ascend/driver/" in d and d not in drivers]
    return drivers + [d for d in dirs if d not in drivers]


# the checks that read /etc/ld.so.cache (directly, or resolving libraries through it)
CACHE_READERS = ("ldconf.cache", "libacl.resolve", "libacl.cann_version", "torch_npu")


@recipe("ldconf.ascend-conf", title="Ascend libraries in ascend.conf, driver/lib64 first",
        check="ldconf.order", writes=(LDSO_CONF, "/etc/ld.so.conf.d/*.conf"),
        snapshots=(LDSO_CACHE,),
        affects=("ldconf", "libacl", "torch_npu"),
        undo_commands=(Command(("ldconfig",), T("rebuild /etc/ld.so.cache from the restored files"),
                               sysroot_argv=("ldconfig", "-r", "{root}")),))
def ascend_conf(ctx: FixContext, params: dict) -> Plan:
    verify = params.pop("_verify", None) or "ldconf.order"
    plan = Plan("ldconf.ascend-conf", "Ascend libraries in ascend.conf, driver/lib64 first",
                params, verify=verify)
    # every Ascend directory configured anywhere, in the order ldconfig would see them
    files = [LDSO_CONF] + sorted(ctx.glob("/etc/ld.so.conf.d/*.conf"))
    found: list[str] = []
    texts: dict[str, str] = {}
    for f in files:
        raw = ctx.read(f)
        if raw is None:
            continue
        texts[f] = raw.decode("utf-8", "replace")
        for d in parse_ldconf_text(texts[f]):
            if d.kind == "dir" and _is_ascend(d.value) and d.value not in found:
                found.append(d.value)
    if not any(d.startswith(TOOLKIT) for d in found) and ctx.exists(f"{TOOLKIT}/lib64"):
        found.append(f"{TOOLKIT}/lib64")
    if DRIVER[0] not in found and ctx.exists(DRIVER[0]):
        found.insert(0, DRIVER[0])
    # a configured directory that does not exist is left out, never written again
    gone = [d for d in found if not ctx.exists(d)]
    dirs = order_dirs([d for d in found if d not in gone])
    if gone:
        plan.notes.append(T("left out of ascend.conf (they do not exist on this host): {dirs}",
                            dirs=", ".join(gone)))
    if not any("/Ascend/driver/" in d for d in dirs):
        plan.blocked.append(T("no Ascend driver library directory exists on this host ({dir} "
                              "is missing): there is nothing for ld.so to find; install the "
                              "NPU driver first", dir=DRIVER[0]))
        return plan
    wanted = HEADER + "".join(d + "\n" for d in dirs)
    plan.edits.append(ctx.edit(ASCEND_CONF, wanted, 0o644,
                               T("driver/lib64 first; 0644 so ldconfig reads it"),
                               names=tuple(dirs)))
    # Ascend lines elsewhere would still come first: move them into ascend.conf
    for f, text in texts.items():
        if f == ASCEND_CONF:
            continue
        lines = text.splitlines(keepends=True)
        new = ["# moved to ascend.conf by ascend-doctor: " + ln
               if ln.split("#", 1)[0].strip() and all(
                   _is_ascend(d.value) for d in parse_ldconf_text(ln) if d.kind == "dir")
               and any(d.kind == "dir" for d in parse_ldconf_text(ln)) else ln for ln in lines]
        if new != lines:
            plan.edits.append(ctx.edit(f, "".join(new), why=T("its Ascend directories now live "
                                                              "in ascend.conf")))
    conf_text = texts.get(LDSO_CONF)
    if conf_text is None:
        plan.edits.append(ctx.edit(LDSO_CONF, INCLUDE + "\n", 0o644, T("create it with the include")))
    elif not _includes(conf_text, LDSO_CONF, ASCEND_CONF):
        edited = next((e for e in plan.edits if e.path == LDSO_CONF), None)
        base = edited.after.decode() if edited else conf_text
        plan.edits = [e for e in plan.edits if e.path != LDSO_CONF]
        plan.edits.append(ctx.edit(LDSO_CONF, INCLUDE + "\n" + base,
                                   why=T("ldconfig reads ld.so.conf.d only through this include")))
    plan.commands.append(Command(("ldconfig",), T("rebuild /etc/ld.so.cache"),
                                 sysroot_argv=("ldconfig", "-r", "{root}"), models=CACHE_READERS))
    plan.needs_root = [T("writing {path}", path=e.path) for e in plan.changes] + [
        T("running ldconfig")]
    return plan
