"""ld.so.conf as ldconfig reads it: the Ascend directories configured (driver/lib64 first)
and reached, conf files world-readable in safe directories, every configured directory
present, and an /etc/ld.so.cache newer than the conf and listing their libraries."""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.cachegaps import CacheGaps
from ascend_doctor.probes.ldcache import LDCACHE, LdCache
from ascend_doctor.probes.ldconf import LDSO_CONF, ConfFile, LdConfState, LdSoConf
from ascend_doctor.probes.stack import AscendStack
from ascend_doctor.registry import check


def _is_ascend(path: str) -> bool:
    return "/Ascend/" in path or path.rstrip("/").endswith("/Ascend")


def _is_driver_lib64(path: str) -> bool:
    return "/Ascend/driver/lib64" in path


@check("ldconf.order", title="Ascend driver libraries come first in ld.so.conf",
       category=Category.LIBS, tags=("libs", "ldconf"))
def driver_first(conf: LdSoConf, state: LdConfState | None = None,
                 stack: AscendStack | None = None) -> Iterator[Finding]:
    if stack is not None:
        stack.require()  # no Ascend stack: no Ascend directory is expected in ld.so.conf
    ascend = [d for d in conf.search_dirs if _is_ascend(d.path)]
    order = [f"{d.path} ({d.origin})" for d in ascend]
    if not ascend:
        conf_files = [f.path for f in conf.files]
        # an Ascend conf file ldconfig does not read explains the absence (ldconf.reached)
        unread = [unread_key(u.path) for u in (state.unreached if state else ()) if u.ascend_dirs]
        yield Finding.fail(
            "no Ascend directory is configured in /etc/ld.so.conf or the files it includes "
            f"(read: {', '.join(conf_files)}); libascendcl.so / libascend_hal.so are then found "
            "only through LD_LIBRARY_PATH",
            subject="/etc/ld.so.conf", evidence={"conf_files": conf_files, "dirs": conf.dirs},
            kb="ASC-LIB-002", fix="ldconf.ascend-conf", explained_by=unread)
        return
    first = ascend[0]
    if not _is_driver_lib64(first.path):
        drivers = [d for d in ascend if _is_driver_lib64(d.path)]
        where = (f"driver/lib64 comes at position {ascend.index(drivers[0]) + 1} "
                 f"({drivers[0].origin})" if drivers else "driver/lib64 is not configured at all")
        yield Finding.fail(
            f"{first.path} is searched before the driver's lib64 ({first.origin}); {where}",
            subject=first.origin.rsplit(":", 1)[0], evidence={"order": order},
            kb="ASC-LIB-003", fix="ldconf.ascend-conf")
        return
    yield Finding.passed(f"{first.path} is the first of {len(ascend)} Ascend directories "
                         f"({first.origin})", evidence={"order": order})


# -- reached, permissions, directories, cache, parse problems -------------------------------
MAX_STALE_SHOWN = 8
STALE_CACHE = "ldconf.stale-cache"  # cause key: /etc/ld.so.cache older than, or lacking, the conf


def unread_key(path: str) -> str:
    """The cause key of "ldconfig does not read this conf file" (not included, or mode 600);
    findings explained by it (libraries not found, no Ascend dir configured) name it."""
    return f"ldconf.unread:{path}"


@check("ldconf.reached", title="Ascend ld.so.conf files are read by ldconfig",
       category=Category.LIBS, tags=("libs", "ldconf"))
def reached(conf: LdSoConf, state: LdConfState, stack: AscendStack | None = None
            ) -> Iterator[Finding]:
    if stack is not None:
        stack.require()
    for u in state.unreached:
        dirs = ", ".join(u.ascend_dirs) or "no directories"
        yield Finding.fail(
            f"{u.path} names {dirs} but is not reached from {LDSO_CONF} (read: "
            f"{', '.join(f.path for f in conf.files)}): ldconfig ignores it, so these libraries "
            "are not in /etc/ld.so.cache",
            subject=u.path, evidence={"file": u.path, "ascend_dirs": list(u.ascend_dirs),
                                      "reached": [f.path for f in conf.files]},
            kb="ASC-LIB-002", fix="ldconf.ascend-conf", fix_params={"unreached": u.path},
            cause=unread_key(u.path))
    if not state.unreached:
        yield Finding.passed(f"every Ascend conf file under /etc/ld.so.conf.d is reached from "
                             f"{LDSO_CONF} ({len(conf.files)} file(s) read)")


@check("ldconf.perms", title="ld.so.conf files are world-readable and their directories safe",
       category=Category.LIBS, tags=("libs", "ldconf", "security"))
def perms(conf: LdSoConf, state: LdConfState) -> Iterator[Finding]:
    bad = 0
    files = list(conf.files) + [ConfFile(u.path, u.mode, u.uid, None, True) for u in state.unreached]
    for f in files:
        if f.mode is not None and not f.mode & 0o004:
            bad += 1
            yield Finding.fail(
                f"{f.path} has mode {f.mode:04o}: not readable by everyone — ldconfig run by "
                "a tool without that user's rights skips it silently (a mode 600 ascend.conf "
                "keeps libacl.so out of the cache); chmod 644 it and run ldconfig",
                subject=f.path, evidence={"file": f.path, "mode": f"{f.mode:04o}", "uid": f.uid},
                kb="ASC-LIB-004", fix="ldconf.ascend-conf", fix_params={"chmod": f.path},
                cause=unread_key(f.path))
        elif not f.readable:
            bad += 1
            yield Finding.fail(f"{f.path} cannot be read by the doctor: {f.error}",
                               subject=f.path, evidence={"file": f.path, "reason": f.error},
                               kb="ASC-LIB-004")
    for d in state.conf_dirs:
        if d.mode is not None and d.mode & 0o022:
            bad += 1
            who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002))
                               if d.mode & bit)
            yield Finding.fail(
                f"{d.path} has mode {d.mode:04o}: writable by {who} — anyone who can write "
                "there can add a library directory to every process's search path "
                f"({d.origin})", subject=d.path,
                evidence={"dir": d.path, "mode": f"{d.mode:04o}", "uid": d.uid},
                kb="ASC-LIB-009")
    if not bad:
        yield Finding.passed(f"{len(files)} conf file(s) are world-readable; "
                             f"{len(state.conf_dirs)} conf director(ies) are not group/other-writable")


@check("ldconf.dirs", title="Every directory in ld.so.conf exists",
       category=Category.LIBS, tags=("libs", "ldconf"))
def dirs_exist(state: LdConfState) -> Iterator[Finding]:
    missing = [d for d in state.search_dirs if not d.exists]
    for d in missing:
        sev = "ASC-LIB-010"
        yield (Finding.fail if "/Ascend/" in d.path + "/" else Finding.warn)(
            f"{d.path} is configured ({d.origin}) but does not exist"
            + (": the Ascend package that owns it is not installed or was moved"
               if "/Ascend/" in d.path else ""),
            subject=d.path, evidence={"dir": d.path, "origin": d.origin}, kb=sev)
    if not missing:
        yield Finding.passed(f"all {len(state.search_dirs)} configured directories exist")


@check("ldconf.cache", title="/etc/ld.so.cache exists and is up to date",
       category=Category.LIBS, tags=("libs", "ldconf", "ldcache"))
def cache_fresh(conf: LdSoConf, cache: LdCache | None, gaps: CacheGaps | None,
                stack: AscendStack | None = None) -> Iterator[Finding]:
    if stack is not None:
        stack.require()  # the cache is checked for the Ascend libraries' sake (ldconf recipe)
    if cache is None:
        yield Finding.fail(f"{LDCACHE} is missing: ld.so only searches LD_LIBRARY_PATH, "
                           "RPATH/RUNPATH and the default directories; run ldconfig",
                           subject=LDCACHE, kb="ASC-LIB-005", fix="ldconf.ascend-conf",
                           fix_params={"ldconfig": True})
        return
    stale = False
    newer = [f for f in conf.files if f.mtime is not None and cache.mtime is not None
             and f.mtime > cache.mtime]
    if newer:
        stale = True
        f = max(newer, key=lambda f: f.mtime or 0)
        yield Finding.fail(
            f"{LDCACHE} is older than {f.path} by {(f.mtime or 0) - (cache.mtime or 0):.0f} s "
            f"({len(newer)} conf file(s) changed after the last ldconfig): run ldconfig",
            subject=LDCACHE, evidence={"cache_mtime": cache.mtime,
                                       "newer": {x.path: x.mtime for x in newer}},
            kb="ASC-LIB-005", fix="ldconf.ascend-conf", fix_params={"ldconfig": True},
            cause=STALE_CACHE)
    lacking = gaps.lacking if gaps is not None else ()
    if lacking:
        stale = True
        shown = ", ".join(p for p, _ in lacking[:MAX_STALE_SHOWN])
        # a conf file that is not world-readable explains the libraries of its directories
        unreadable = {f.path for f in conf.files if f.mode is not None and not f.mode & 0o004}
        origins = {o.rsplit(":", 1)[0] for _, o in lacking}
        yield Finding.fail(
            f"{LDCACHE} ({len(cache.entries)} entries, {cache.format} format) lacks "
            f"{len(lacking)} librar{'y' if len(lacking) == 1 else 'ies'} present in configured "
            f"directories: {shown}" + (" …" if len(lacking) > MAX_STALE_SHOWN else "")
            + f" (first configured at {lacking[0][1]}): the cache is stale, run ldconfig",
            subject=LDCACHE, evidence={"lacking": [p for p, _ in lacking]},
            kb="ASC-LIB-005", fix="ldconf.ascend-conf", fix_params={"ldconfig": True},
            cause=STALE_CACHE, explained_by=[unread_key(p) for p in sorted(origins & unreadable)])
    if not stale:
        listed = ("lists every library of the configured directories" if gaps is not None
                  else "(the configured directories could not be listed to compare)")
        yield Finding.passed(f"{LDCACHE} ({cache.format} format, {len(cache.entries)} entries) "
                             f"is newer than the {len(conf.files)} conf files and {listed}")


@check("ldconf.parse", title="ld.so.conf and its includes parse cleanly",
       category=Category.LIBS, tags=("libs", "ldconf"))
def parse_problems(conf: LdSoConf) -> Iterator[Finding]:
    for p in conf.problems:
        kind = ("include loop" if "include loop" in p else "not UTF-8" if "UTF-8" in p
                else "problem")
        yield Finding.warn(f"{kind}: {p}", subject=p.split(":", 1)[0],
                           evidence={"problem": p}, kb="ASC-LIB-011")
    if not conf.problems:
        yield Finding.passed(f"{len(conf.files)} conf file(s) read without loops or encoding "
                             "errors")
