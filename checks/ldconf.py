"""ld.so.conf as ldconfig reads it: the Ascend directories configured (driver/lib64 first)
and reached, conf files world-readable in safe directories, every configured directory
present, and an /etc/ld.so.cache newer than the conf and listing their libraries."""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.i18n import T
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
        if not unread and stack is not None and not stack.directories:
            # torch_npu or npu-smi without any /usr/local/Ascend: nothing exists to configure
            # (the libraries' own checks say what is missing); never "ascend.conf not reached"
            yield Finding.skip(T("no Ascend directory exists on this host ({root} is absent): "
                                 "ld.so.conf has nothing to name yet", root="/usr/local/Ascend"),
                               evidence={"conf_files": conf_files})
            return
        yield Finding.fail(
            T("no Ascend directory is configured in /etc/ld.so.conf or the files it includes "
              "(read: {files}); libascendcl.so / libascend_hal.so are then found "
              "only through LD_LIBRARY_PATH", files=", ".join(conf_files)),
            subject="/etc/ld.so.conf", evidence={"conf_files": conf_files, "dirs": conf.dirs},
            # an unread ascend.conf is ASC-LIB-002's case; without one, none was ever written
            kb="ASC-LIB-002" if unread else "ASC-LIB-014", fix="ldconf.ascend-conf",
            explained_by=unread)
        return
    first = ascend[0]
    if not _is_driver_lib64(first.path):
        drivers = [d for d in ascend if _is_driver_lib64(d.path)]
        where = (T("driver/lib64 comes at position {n} ({origin})",
                   n=ascend.index(drivers[0]) + 1, origin=drivers[0].origin)
                 if drivers else T("driver/lib64 is not configured at all"))
        yield Finding.fail(
            T("{path} is searched before the driver's lib64 ({origin}); {where}",
              path=first.path, origin=first.origin, where=where),
            subject=first.origin.rsplit(":", 1)[0], evidence={"order": order},
            kb="ASC-LIB-003", fix="ldconf.ascend-conf")
        return
    yield Finding.passed(T("{path} is the first of {n} Ascend directories ({origin})",
                           path=first.path, n=len(ascend), origin=first.origin),
                         evidence={"order": order})


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
        dirs = ", ".join(u.ascend_dirs) or T("no directories")
        yield Finding.fail(
            T("{path} names {dirs} but is not reached from {conf} (read: {files}): ldconfig "
              "ignores it, so these libraries are not in /etc/ld.so.cache", path=u.path,
              dirs=dirs, conf=LDSO_CONF, files=", ".join(f.path for f in conf.files)),
            subject=u.path, evidence={"file": u.path, "ascend_dirs": list(u.ascend_dirs),
                                      "reached": [f.path for f in conf.files]},
            kb="ASC-LIB-002", fix="ldconf.ascend-conf", fix_params={"unreached": u.path},
            cause=unread_key(u.path))
    if not state.unreached:
        yield Finding.passed(T("every Ascend conf file under /etc/ld.so.conf.d is reached from "
                               "{conf} ({n} file(s) read)", conf=LDSO_CONF, n=len(conf.files)))


@check("ldconf.perms", title="ld.so.conf files are world-readable and their directories safe",
       category=Category.LIBS, tags=("libs", "ldconf", "security"))
def perms(conf: LdSoConf, state: LdConfState) -> Iterator[Finding]:
    bad = 0
    files = list(conf.files) + [ConfFile(u.path, u.mode, u.uid, None, True) for u in state.unreached]
    for f in files:
        if f.mode is not None and not f.mode & 0o004:
            bad += 1
            yield Finding.fail(
                T("{path} has mode {mode}: not readable by everyone — ldconfig run by "
                  "a tool without that user's rights skips it silently (a mode 600 ascend.conf "
                  "keeps libacl.so out of the cache); chmod 644 it and run ldconfig",
                  path=f.path, mode=f"{f.mode:04o}"),
                subject=f.path, evidence={"file": f.path, "mode": f"{f.mode:04o}", "uid": f.uid},
                kb="ASC-LIB-004", fix="ldconf.ascend-conf", fix_params={"chmod": f.path},
                cause=unread_key(f.path))
        elif not f.readable:
            bad += 1
            yield Finding.fail(T("{path} cannot be read by the doctor: {reason}",
                                 path=f.path, reason=f.error),
                               subject=f.path, evidence={"file": f.path, "reason": f.error},
                               kb="ASC-LIB-004")
    for d in state.conf_dirs:
        if d.mode is not None and d.mode & 0o022:
            bad += 1
            who = {0o020: T("group"), 0o002: T("others"),
                   0o022: T("group and others")}[d.mode & 0o022]
            yield Finding.fail(
                T("{path} has mode {mode}: writable by {who} — anyone who can write "
                  "there can add a library directory to every process's search path "
                  "({origin})", path=d.path, mode=f"{d.mode:04o}", who=who, origin=d.origin),
                subject=d.path,
                evidence={"dir": d.path, "mode": f"{d.mode:04o}", "uid": d.uid},
                kb="ASC-LIB-009")
    if not bad:
        yield Finding.passed(T("{files} conf file(s) are world-readable; {dirs} conf "
                               "director(ies) are not group/other-writable",
                               files=len(files), dirs=len(state.conf_dirs)))


@check("ldconf.dirs", title="Every directory in ld.so.conf exists",
       category=Category.LIBS, tags=("libs", "ldconf"))
def dirs_exist(state: LdConfState) -> Iterator[Finding]:
    missing = [d for d in state.search_dirs if not d.exists]
    for d in missing:
        ev = {"dir": d.path, "origin": d.origin}
        if "/Ascend/" in d.path + "/":
            yield Finding.fail(T("{path} is configured ({origin}) but does not exist: the Ascend "
                                 "package that owns it is not installed or was moved",
                                 path=d.path, origin=d.origin),
                               subject=d.path, evidence=ev, kb="ASC-LIB-010")
        else:  # stock distro files name such dirs (/usr/local/lib/<triplet>); ld.so skips them
            yield Finding.info(T("{path} is configured ({origin}) but does not exist; ld.so "
                                 "skips it", path=d.path, origin=d.origin),
                               subject=d.path, evidence=ev)
    if not missing:
        yield Finding.passed(T("all {n} configured directories exist", n=len(state.search_dirs)))


@check("ldconf.cache", title="/etc/ld.so.cache exists and is up to date",
       category=Category.LIBS, tags=("libs", "ldconf", "ldcache"))
def cache_fresh(conf: LdSoConf, cache: LdCache | None, gaps: CacheGaps | None,
                stack: AscendStack | None = None) -> Iterator[Finding]:
    if stack is not None:
        stack.require()  # the cache is checked for the Ascend libraries' sake (ldconf recipe)
    if cache is None:
        yield Finding.fail(T("{cache} is missing: ld.so only searches LD_LIBRARY_PATH, "
                             "RPATH/RUNPATH and the default directories; run ldconfig",
                             cache=LDCACHE),
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
            T("{cache} is older than {path} by {seconds} s ({n} conf file(s) changed after "
              "the last ldconfig): run ldconfig", cache=LDCACHE, path=f.path,
              seconds=f"{(f.mtime or 0) - (cache.mtime or 0):.0f}", n=len(newer)),
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
        more = " …" if len(lacking) > MAX_STALE_SHOWN else ""
        args = {"cache": LDCACHE, "entries": len(cache.entries), "format": cache.format,
                "n": len(lacking), "shown": shown, "more": more, "origin": lacking[0][1]}
        # two literal templates (one per English plural), so extraction sees both
        yield Finding.fail(
            T("{cache} ({entries} entries, {format} format) lacks {n} library present in "
              "configured directories: {shown}{more} (first configured at {origin}): the cache "
              "is stale, run ldconfig", **args) if len(lacking) == 1 else
            T("{cache} ({entries} entries, {format} format) lacks {n} libraries present in "
              "configured directories: {shown}{more} (first configured at {origin}): the cache "
              "is stale, run ldconfig", **args),
            subject=LDCACHE, evidence={"lacking": [p for p, _ in lacking]},
            kb="ASC-LIB-005", fix="ldconf.ascend-conf", fix_params={"ldconfig": True},
            cause=STALE_CACHE, explained_by=[unread_key(p) for p in sorted(origins & unreadable)])
    if not stale:
        listed = (T("lists every library of the configured directories") if gaps is not None
                  else T("(the configured directories could not be listed to compare)"))
        yield Finding.passed(T("{cache} ({format} format, {entries} entries) is newer than the "
                               "{n} conf files and {listed}", cache=LDCACHE,
                               format=cache.format, entries=len(cache.entries),
                               n=len(conf.files), listed=listed))


@check("ldconf.parse", title="ld.so.conf and its includes parse cleanly",
       category=Category.LIBS, tags=("libs", "ldconf"))
def parse_problems(conf: LdSoConf) -> Iterator[Finding]:
    for p in conf.problems:
        kind = (T("include loop") if "include loop" in p else T("not UTF-8") if "UTF-8" in p
                else T("problem"))
        yield Finding.warn(T("{kind}: {problem}", kind=kind, problem=p), subject=p.split(":", 1)[0],
                           evidence={"problem": p}, kb="ASC-LIB-011")
    if not conf.problems:
        yield Finding.passed(T("{n} conf file(s) read without loops or encoding errors",
                               n=len(conf.files)))
