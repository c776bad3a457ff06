"""Would ld.so find libascendcl.so, libhccl.so, … for torch_npu and vllm_ascend — in the
service's environment — and which file would it pick?  (seed 000_93c34712512482cd.txt:
"libacl.so not found" because LD_LIBRARY_PATH was exported in a shell, not in the service.)"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Iterator

from ascend_doctor.checks.ldconf import STALE_CACHE, unread_key
from ascend_doctor.i18n import T
from ascend_doctor.model import Category, Finding
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.ascendfiles import ActiveToolkit, AscendLibIndex, MappedLibs, version_dir
from ascend_doctor.probes.ldconf import LdSoConf
from ascend_doctor.probes.libresolve import LibResolution, Resolution
from ascend_doctor.probes.libsearch import LibSearchContext
from ascend_doctor.probes.procs import ServiceEnv
from ascend_doctor.registry import check

# which CANN package ships a library (torch_npu's own loader says libascendcl ⇒ runtime,
# libhccl ⇒ cann/compiler package: torch_npu/_init/core/module_loader.py)
PACKAGE_OF = {
    "libascendcl.so": "CANN runtime (toolkit) package", "libruntime.so": "CANN runtime package",
    "libacl_op_compiler.so": "CANN runtime (toolkit) package",
    "libacl_tdt_channel.so": "CANN runtime (toolkit) package",
    "libhccl.so": "CANN hccl / compiler package", "libge_runner.so": "CANN compiler (GE) package",
    "libgraph.so": "CANN compiler (GE) package", "libfmk_parser.so": "CANN compiler (GE) package",
    "libregister.so": "CANN compiler (GE) package", "libge_common_base.so": "CANN compiler package",
    "libopapi.so": "CANN ops (opp kernels) package", "libnnopbase.so": "CANN ops package",
    "libatb.so": "NNAL/ATB package (source /usr/local/Ascend/nnal/atb/set_env.sh)",
    "libascend_hal.so": "Ascend driver (HDK)", "libdrvdsmi_host.so": "Ascend driver (HDK)",
    "libdcmi.so": "Ascend driver (HDK)",
}
DRIVER_LIBS = ("libascend_hal.so", "libdrvdsmi_host.so", "libdcmi.so")
SHOW_DIRS = 8


def _short(path: str, n: int = 3) -> str:
    parts = path.split("/")
    return "/".join(parts[-n:]) if len(parts) > n + 1 else path


def _libraries(n: int) -> str:
    return T("library") if n == 1 else T("libraries")


def _ascend_libraries(n: int) -> str:
    """"Ascend library"/"Ascend libraries" as one message, so a translation can put its
    measure word before the name ("个 Ascend 库")."""
    return T("Ascend library") if n == 1 else T("Ascend libraries")


def _tried_text(r: Resolution) -> str:
    t = list(r.tried)
    more = f", … {len(t) - SHOW_DIRS} more" if len(t) > SHOW_DIRS else ""
    return "; ".join(t[:SHOW_DIRS]) + more


@check("libacl.resolve", title="ld.so finds every library torch_npu / vllm_ascend need",
       category=Category.LIBS, tags=("libs", "libacl"))
def resolve(lr: LibResolution, env: ServiceEnv, index: AscendLibIndex, ctx: LibSearchContext,
            conf: LdSoConf | None, options: RunOptions | None = None) -> Iterator[Finding]:
    envtext = (f"LD_LIBRARY_PATH from {lr.env_source}: "
               + (":".join(lr.ld_library_path) if lr.ld_library_path else "(unset)"))
    named = set(options.elf_paths) if options is not None else set()
    for c in lr.closures:
        if c.error and c.target in named:
            # the user's file (doctor/inputs.py): say where it was looked for
            yield Finding.error(T("cannot read --elf {target} as an ELF file: {reason} (--elf "
                                  "names the caller's file: relative to the current directory "
                                  "and read on this machine, also with --root, never a path "
                                  "inside the inspected root)", target=c.target,
                                  reason=c.error),
                                subject=c.target, evidence={"target": c.target,
                                                            "reason": c.error,
                                                            "source": f"--elf {c.target}"})
        elif c.error:
            yield Finding.error(T("cannot read {target} as an ELF file: {reason}",
                                  target=c.target, reason=c.error),
                                subject=c.target, evidence={"target": c.target,
                                                            "reason": c.error})
    foreign = [c for c in lr.closures if c.foreign]
    if foreign:
        yield Finding.info(
            T("{n} shared object(s) are built for another machine and are not loaded by this "
              "host's ld.so (e.g. {example}: {why})", n=len(foreign),
              example=_short(foreign[0].target), why=foreign[0].foreign),
            evidence={"files": [c.target for c in foreign]})
    conf_dirs = {d.path: d.origin for d in conf.search_dirs} if conf else {}
    groups: dict[str, list[Resolution]] = {}
    for r in lr.unresolved:
        groups.setdefault(r.name, []).append(r)
    for name, rs in groups.items():
        yield _unresolved(name, rs, lr, env, index, conf_dirs, ctx)
    read = [c for c in lr.closures if not c.error and not c.foreign]
    if not groups and read:
        n = sum(len(c.resolutions) for c in read)
        yield Finding.passed(
            T("all {n} DT_NEEDED entries of {files} ELF file(s) resolve ({env}; {preload})",
              n=n, files=len(read), env=envtext, preload=lr.preload_note),
            evidence={"env_source": lr.env_source, "ld_library_path": list(lr.ld_library_path),
                      "preload": lr.preload_note, "targets": [c.target for c in lr.closures]})
    elif groups:
        yield Finding.info(T("resolved in the service's environment — {env}; {preload}",
                             env=envtext, preload=lr.preload_note),
                           evidence={"env_source": lr.env_source, "pid": lr.service_pid,
                                     "ld_library_path": list(lr.ld_library_path),
                                     "default_dirs": list(lr.default_dirs),
                                     "ld_so_cache": lr.cache_source})


def _unresolved(name: str, rs: list[Resolution], lr: LibResolution, env: ServiceEnv,
                index: AscendLibIndex, conf_dirs: dict[str, str],
                ctx: LibSearchContext) -> Finding:
    """The finding for one unresolved soname; it establishes ``libs.missing:<name>`` and
    names what explains it (an unread conf file, a stale cache) when the facts show it."""
    f = _unresolved_finding(name, rs, lr, env, index, conf_dirs, ctx)
    return replace(f, cause=missing_key(name))


def missing_key(name: str) -> str:
    """Cause key "ld.so does not find this soname" (torch_npu.import names it)."""
    return f"libs.missing:{name}"


def _unresolved_finding(name: str, rs: list[Resolution], lr: LibResolution, env: ServiceEnv,
                        index: AscendLibIndex, conf_dirs: dict[str, str],
                        ctx: LibSearchContext) -> Finding:
    unread = ctx.unread_dirs
    first = rs[0]
    needers = [r.needed_by for r in rs]
    shown = [_short(n) for n in dict.fromkeys(needers)]
    who = (T("{first} (and {n} more)", first=", ".join(shown[:4]), n=len(shown) - 4)
           if len(shown) > 4 else ", ".join(shown))
    tried = set(first.tried_dirs)
    elsewhere = sorted((p for p in index.where(name) if posixpath.dirname(p) not in tried),
                       key=lambda p: ("/latest/" not in p and "/Ascend/cann/" not in p, p))
    evidence = {"library": name, "needed_by": needers, "tried": list(first.tried),
                "skipped": list(first.skipped), "found_elsewhere": elsewhere,
                "env_source": lr.env_source, "ld_library_path": list(lr.ld_library_path)}
    if first.error:
        return Finding.fail(
            T("{name} needed by {who}: ld.so stops at {error} (not a loadable ELF file); tried "
              "{tried}", name=name, who=who, error=first.error, tried=_tried_text(first)),
            subject=name, evidence=evidence, kb="ASC-LIB-012")
    # every "not found" message starts with the same words: name, needers, the search order
    a = {"name": name, "who": who, "tried": _tried_text(first),
         "skipped": (T("; skipped {n} of the wrong class/machine ({first})",
                       n=len(first.skipped), first=first.skipped[0]) if first.skipped else "")}
    if elsewhere:
        d = posixpath.dirname(elsewhere[0])
        a.update(found=elsewhere[0], dir=d, env_source=lr.env_source)
        if d in conf_dirs:
            return Finding.fail(
                T("{name} needed by {who} is not found; tried in order: {tried}{skipped}"
                  "; a file of that name exists at {found}, outside the search path"
                  " — {dir} is configured "
                  "({origin}) but /etc/ld.so.cache does not list it: the cache is stale or "
                  "ldconfig skipped the conf file; run ldconfig", origin=conf_dirs[d], **a),
                subject=name, evidence=evidence, kb=("ASC-LIB-005", "ASC-LIB-004"),
                fix="ldconf.ascend-conf", fix_params={"dirs": [d], "library": name},
                explained_by=STALE_CACHE)
        if d in unread:
            conf_path, named = unread[d]
            return Finding.fail(
                T("{name} needed by {who} is not found; tried in order: {tried}{skipped}"
                  "; a file of that name exists at {found}, outside the search path"
                  " — {dir} is named in "
                  "{conf}, which ldconfig does not read (not included from /etc/ld.so.conf, or "
                  "not world-readable): fix the conf and run ldconfig, or put it on the "
                  "service's LD_LIBRARY_PATH", conf=named, **a),
                subject=name, evidence={**evidence, "unread_conf": named},
                kb=("ASC-LIB-002", "ASC-LIB-004", "ASC-LIB-001"), fix="ldconf.ascend-conf",
                fix_params={"dirs": [d], "library": name, "conf": named},
                explained_by=unread_key(conf_path))
        if d in ctx.own_ld_library_path and env.pid is not None:
            msg = T("{name} needed by {who} is not found; tried in order: {tried}{skipped}"
                    "; a file of that name exists at {found}, outside the search path"
                    " — {dir} is on the "
                    "doctor's own LD_LIBRARY_PATH but not on the service's ({env_source}): the "
                    "variable was exported in a shell and never reached the service", **a)
        else:
            msg = T("{name} needed by {who} is not found; tried in order: {tried}{skipped}"
                    "; a file of that name exists at {found}, outside the search path"
                    " — neither "
                    "LD_LIBRARY_PATH (from {env_source}) nor ld.so.conf names {dir}; source "
                    "set_env.sh in the service's environment", **a)
        return Finding.fail(msg, subject=name, evidence=evidence,
                            kb="ASC-LIB-001", fix="service.env",
                            fix_params={"add_ld_library_path": [d], "library": name,
                                        "pid": env.pid, "env_source": lr.env_source})
    pkg = PACKAGE_OF.get(name, "CANN package that ships it")
    roots = ", ".join(index.roots)
    if name in DRIVER_LIBS and ctx.in_container:
        return Finding.fail(T("{name} needed by {who} is not found; tried in order: {tried}"
                              "{skipped}; no {name} under {roots}: "
                              "inside a container the host's /usr/local/Ascend/driver/lib64 "
                              "must be mounted", roots=roots, **a),
                            subject=name, evidence=evidence, kb="ASC-CTR-004")
    return Finding.fail(T("{name} needed by {who} is not found; tried in order: {tried}{skipped}"
                          "; no file of that name under "
                          "{roots}: the {pkg} is not installed (or installed elsewhere)",
                          roots=roots, pkg=pkg, **a), subject=name,
                        evidence={**evidence, "package": pkg},
                        kb=("ASC-LIB-006", "ASC-CTR-004") if name in DRIVER_LIBS
                        else "ASC-LIB-006")


@check("libacl.cann_version", title="Ascend libraries come from the active CANN toolkit",
       category=Category.LIBS, tags=("libs", "libacl", "versions"))
def cann_version(lr: LibResolution, active: ActiveToolkit) -> Iterator[Finding]:
    want = active.version_dirs
    off: dict[str, list[Resolution]] = {}
    total = 0
    for c in lr.closures:
        for r in c.resolutions:
            vd = version_dir(r.real or r.path or "") if r.found else None
            if vd is None:
                continue
            total += 1
            if vd not in want:
                off.setdefault(vd, []).append(r)
    links = ", ".join(f"{k} → {v}" for k, v in active.links.items())
    for vd, rs in off.items():
        names = sorted({r.name for r in rs})
        yield Finding.warn(
            T("{n} {libs} resolve into {vd}, not the active toolkit ({links}): {names} (first "
              "via {via}, needed by {needer})", n=len(names), libs=_libraries(len(names)),
              vd=vd, links=links, names=", ".join(names[:6]), via=rs[0].via,
              needer=_short(rs[0].needed_by)),
            subject=vd, evidence={"version_dir": vd, "active": active.links,
                                  "libraries": {r.name: r.real or r.path for r in rs}},
            kb="ASC-LIB-008", fix="service.env",
            fix_params={"stale_dir": vd, "active": sorted(want)})
    if not off:
        yield Finding.passed(T("{n} {libs} resolve inside the active toolkit ({links})",
                               n=total, libs=_ascend_libraries(total), links=links) if total else
                             T("no library resolves into a CANN version directory ({links})",
                               links=links),
                             evidence={"active": active.links})


@check("libacl.maps", title="The service's mapped Ascend libraries match the static answer",
       category=Category.LIBS, tags=("libs", "libacl", "live"))
def maps(lr: LibResolution, mapped: MappedLibs) -> Iterator[Finding]:
    static: dict[str, Resolution] = {}
    for c in lr.closures:
        for r in c.resolutions:
            static.setdefault(r.name, r)
    live = mapped.by_name()
    ascend_live = {n: p for n, p in live.items() if "/Ascend/" in p}
    diffs = 0
    for name, path in sorted(ascend_live.items()):
        r = static.get(name)
        if r is None:
            continue
        if not r.found:
            diffs += 1
            yield Finding.warn(
                T("pid {pid} has {path} mapped, but the static resolution in {env_source} does "
                  "not find {name}: the process was started with another environment or loaded "
                  "it by dlopen with a full path", pid=mapped.pid, path=path,
                  env_source=lr.env_source, name=name),
                subject=name, evidence={"mapped": path, "tried": list(r.tried)}, kb="ASC-LIB-001")
        elif (r.real or r.path) != path and r.path != path:
            diffs += 1
            yield Finding.warn(
                T("pid {pid} maps {path}, the static resolution picks {static} for {name} (via "
                  "{via})", pid=mapped.pid, path=path, static=r.real or r.path, name=name,
                  via=r.via), subject=name,
                evidence={"mapped": path, "static": r.real or r.path}, kb="ASC-LIB-008")
    if not diffs:
        yield Finding.passed(
            T("pid {pid} maps {n} {libs}, all where the static resolution puts them",
              pid=mapped.pid, n=len(ascend_live), libs=_ascend_libraries(len(ascend_live))),
            evidence={"mapped": ascend_live})
