"""The static ld.so emulation on gcc-built libraries in sysroots, and the libacl.* / new
ldconf.* rules on healthy and broken inputs."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ascend_doctor.checks.ldconf import cache_fresh, dirs_exist, parse_problems, perms, reached
from ascend_doctor.probes.libsearch import gather_lib_search_context
from ascend_doctor.checks.libacl import cann_version, maps, resolve
from ascend_doctor.model import Status
from ascend_doctor.probes.cachegaps import gather_cache_gaps
from ascend_doctor.probes.ascendfiles import ActiveToolkit, AscendLibIndex, MappedLibs, parse_maps
from ascend_doctor.probes.ldconf import gather_ldconf_state, walk_ldconf
from ascend_doctor.probes.libresolve import (Resolver, SearchContext, expand_dst, resolve_targets,
                                      usable_cache)
from ascend_doctor.probes.packages import Package, Packages
from ascend_doctor.probes.procs import ServiceEnv
from tests.fixtures.sysroots import sys_libs
from tests.libfixtures import gcc

TK = "/usr/local/Ascend/ascend-toolkit"


def build(root, rel, *flags):
    return gcc(root.path(rel), *flags)


def ctx(llp=()):
    return SearchContext(tuple(llp), ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"),
                         "lib/x86_64-linux-gnu", "x86_64")


def test_expand_dst():
    c = ctx()
    assert expand_dst("$ORIGIN/../lib", "/opt/a/bin", c) == "/opt/a/lib"
    assert expand_dst("${ORIGIN}/x", "/o", c) == "/o/x"
    assert expand_dst("/opt/$LIB/$PLATFORM", None, c) == "/opt/lib/x86_64-linux-gnu/x86_64"
    assert expand_dst("/a/$UNKNOWN/x", "/o", c) == "/a/$UNKNOWN/x"  # kept literally, as glibc
    assert expand_dst("$ORIGIN/x", None, c) is None and expand_dst("rel/dir", "/o", c) is None


def test_rpath_inherited_runpath_not(sysroot):
    sys_libs(sysroot)
    build(sysroot, "/opt/deep/libdeep.so", "-Wl,-soname,libdeep.so")
    d = sysroot.path("/opt/deep")
    build(sysroot, "/opt/mid/libmid.so", "-Wl,-soname,libmid.so", f"-L{d}", "-ldeep")
    m = sysroot.path("/opt/mid")
    # top has RPATH naming both dirs: libmid's libdeep is found through top's (inherited) RPATH
    build(sysroot, "/opt/top/libtop.so", f"-L{m}", f"-L{d}", "-lmid",
          "-Wl,--disable-new-dtags", "-Wl,-rpath,/opt/mid:/opt/deep")
    build(sysroot, "/opt/top/librun.so", f"-L{m}", f"-L{d}", "-lmid",
          "-Wl,--enable-new-dtags", "-Wl,-rpath,/opt/mid:/opt/deep")
    r = Resolver(sysroot.host(), None, ctx())
    c = r.closure("/opt/top/libtop.so")
    got = {x.name: x for x in c.resolutions}
    assert got["libmid.so"].via == "RPATH" and got["libdeep.so"].found
    assert "RPATH of libtop.so" in got["libdeep.so"].tried[-1]
    c2 = r.closure("/opt/top/librun.so")
    got2 = {x.name: x for x in c2.resolutions}
    assert got2["libmid.so"].via == "RUNPATH"
    assert not got2["libdeep.so"].found  # RUNPATH is not inherited by libmid
    assert "/opt/deep" not in got2["libdeep.so"].tried_dirs


def test_origin_llp_cache_and_wrong_class(sysroot):
    sys_libs(sysroot)
    build(sysroot, "/opt/pkg/lib/libdep.so", "-Wl,-soname,libdep.so")
    lib = sysroot.path("/opt/pkg/lib")
    build(sysroot, "/opt/pkg/libuse.so", f"-L{lib}", "-ldep", "-Wl,-rpath,$ORIGIN/lib")
    build(sysroot, "/opt/other/libuse2.so", f"-L{lib}", "-ldep")
    try:
        build(sysroot, "/opt/bad32/libdep.so", "-m32", "-nostdlib")
    except subprocess.CalledProcessError:
        pytest.skip("gcc -m32 unavailable")
    r = Resolver(sysroot.host(), None, ctx())
    got = {x.name: x for x in r.closure("/opt/pkg/libuse.so").resolutions}
    assert got["libdep.so"].path == "/opt/pkg/lib/libdep.so" and got["libdep.so"].via == "RUNPATH"
    # LD_LIBRARY_PATH: the 32-bit candidate is skipped, the search goes on to the next dir
    r2 = Resolver(sysroot.host(), None, ctx(["/opt/bad32", "/opt/pkg/lib"]))
    dep = {x.name: x for x in r2.closure("/opt/other/libuse2.so").resolutions}["libdep.so"]
    assert dep.found and dep.path == "/opt/pkg/lib/libdep.so" and dep.via == "LD_LIBRARY_PATH"
    assert "wrong ELF class: ELFCLASS32" in dep.skipped[0]
    # a non-ELF candidate stops ld.so
    sysroot.write("/opt/junk/libdep.so", "not an elf\n" * 10)
    r3 = Resolver(sysroot.host(), None, ctx(["/opt/junk", "/opt/pkg/lib"]))
    dep = {x.name: x for x in r3.closure("/opt/other/libuse2.so").resolutions}["libdep.so"]
    assert not dep.found and "invalid ELF header" in dep.error
    # ld.so.cache built by the real ldconfig
    if shutil.which("ldconfig"):
        sysroot.write("/etc/ld.so.conf", "/opt/pkg/lib\n")
        subprocess.run(["ldconfig", "-r", str(sysroot)], check=True)
        cache, _ = usable_cache(sysroot.host())
        r4 = Resolver(sysroot.host(), cache, ctx())
        dep = {x.name: x for x in r4.closure("/opt/other/libuse2.so").resolutions}["libdep.so"]
        assert dep.via == "ld.so.cache" and dep.path == "/opt/pkg/lib/libdep.so"


def test_wrong_machine_candidate_is_skipped(sysroot):
    from ascend_doctor.demo.elfgen import shared_object
    sys_libs(sysroot)
    sysroot.write("/opt/arm/libdep.so", shared_object((), "libdep.so", machine="aarch64"))
    sysroot.write("/opt/x86/libdep.so", shared_object((), "libdep.so"))
    sysroot.write("/opt/app/libapp.so", shared_object(("libdep.so",), "libapp.so"))
    r = Resolver(sysroot.host(), None, ctx(["/opt/arm", "/opt/x86"]))
    (dep,) = r.closure("/opt/app/libapp.so").resolutions
    assert dep.path == "/opt/x86/libdep.so" and "wrong machine EM_AARCH64" in dep.skipped[0]


def test_main_programs_rpath_applies_to_libraries_without_runpath(sysroot):
    """A conda python carries RPATH $ORIGIN/../lib: libraries it dlopens search there."""
    from ascend_doctor.demo.elfgen import shared_object
    sysroot.write("/conda/bin/python3.11", shared_object((), None, rpath="$ORIGIN/../lib"))
    sysroot.write("/conda/lib/libstdx.so", shared_object((), "libstdx.so"))
    sysroot.write("/site/libext.so", shared_object(("libstdx.so",), "libext.so"))
    sysroot.write("/site/libext2.so", shared_object(("libstdx.so",), "libext2.so", runpath=""))
    c = SearchContext((), ("/usr/lib",), "lib64", "x86_64", "/conda/bin", "/conda/bin/python3.11")
    r = Resolver(sysroot.host(), None, c)
    (dep,) = r.closure("/site/libext.so").resolutions
    assert dep.path == "/conda/lib/libstdx.so" and dep.via == "RPATH"
    assert "(main)" in dep.tried[-1]
    (dep2,) = r.closure("/site/libext2.so").resolutions
    assert not dep2.found  # a DT_RUNPATH (even empty) turns every RPATH off


def _ascend_host(sysroot, llp_in_service: bool, version="8.0.0", latest="8.0.0"):
    sys_libs(sysroot)
    build(sysroot, f"{TK}/{version}/lib64/libascendcl.so", "-Wl,-soname,libascendcl.so")
    if latest != version:
        sysroot.mkdir(f"{TK}/{latest}/lib64")
    sysroot.symlink(f"{TK}/latest", latest)
    acl = sysroot.path(f"{TK}/{version}/lib64")
    site = "/venv/lib/python3.11/site-packages"
    build(sysroot, f"{site}/torch_npu/lib/libtorch_npu.so", f"-L{acl}", "-lascendcl",
          "-Wl,-soname,libtorch_npu.so")
    pk = Packages("3.11", "", "test", {"torch-npu": Package(
        "torch_npu", "2.14.0", location=site, files=("torch_npu/lib/libtorch_npu.so",))})
    d = f"{TK}/{version}/lib64"
    env = ServiceEnv({"LD_LIBRARY_PATH": d} if llp_in_service else {"HOME": "/root"},
                     "/proc/4711/environ", 4711)
    host = sysroot.host()
    host._env = {"LD_LIBRARY_PATH": d, "HOME": "/root"}  # the admin's shell had sourced it
    lr = resolve_targets(host, [("torch_npu", f"{site}/torch_npu/lib/libtorch_npu.so")], env,
                         None, pk)
    index = AscendLibIndex(("/usr/local/Ascend",),
                           {"libascendcl.so": (f"{d}/libascendcl.so",)})
    return host, lr, env, index


def test_libacl_resolve_env_did_not_reach_service(sysroot):
    host, lr, env, index = _ascend_host(sysroot, llp_in_service=False)
    fs = list(resolve(lr, env, index, gather_lib_search_context(host, None), None))
    (f,) = [x for x in fs if x.status == Status.FAIL]
    assert "libascendcl.so needed by torch_npu/lib/libtorch_npu.so" in f.message
    assert f"{TK}/8.0.0/lib64/libascendcl.so" in f.message and "never reached" in f.message
    assert f.fix.id == "service.env" and f.kb == ("ASC-LIB-001",)
    assert f.evidence["tried"] and "/proc/4711/environ" in f.message
    info = [x for x in fs if x.status == Status.INFO][0]
    assert "counted as provided by torch" in info.message


def test_libacl_resolve_healthy_and_version_warn(sysroot):
    host, lr, env, index = _ascend_host(sysroot, llp_in_service=True, latest="8.3.RC2")
    fs = list(resolve(lr, env, index, gather_lib_search_context(host, None), None))
    assert [x.status for x in fs] == [Status.PASS]
    active = ActiveToolkit({f"{TK}/latest": f"{TK}/8.3.RC2"})
    (w,) = cann_version(lr, active)
    assert w.status == Status.WARN and f"{TK}/8.0.0" in w.message and "libascendcl.so" in w.message
    (ok,) = cann_version(lr, ActiveToolkit({f"{TK}/latest": f"{TK}/8.0.0"}))
    assert ok.status == Status.PASS


def test_libacl_missing_package_and_maps(sysroot):
    host, lr, env, _ = _ascend_host(sysroot, llp_in_service=False)
    empty = AscendLibIndex(("/usr/local/Ascend",), {})
    (f,) = [x for x in resolve(lr, env, empty, gather_lib_search_context(host, None), None) if x.status == Status.FAIL]
    assert "CANN runtime (toolkit) package is not installed" in f.message
    text = ("7f00-7f10 r-xp 00000000 08:01 12 " + TK + "/8.0.0/lib64/libascendcl.so\n"
            "7f20-7f30 r--p 00000000 08:01 13 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    mapped = MappedLibs(4711, tuple(parse_maps(text)))
    (w,) = maps(lr, mapped)
    assert w.status == Status.WARN and "pid 4711" in w.message
    other = sysroot.root.parent / "r2"
    other.mkdir()
    _, lr2, _, _ = _ascend_host(type(sysroot)(other), llp_in_service=True)
    (p,) = maps(lr2, mapped)
    assert p.status == Status.PASS


def test_ldconf_rules_broken_and_healthy(sysroot):
    sys_libs(sysroot)
    sysroot.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n/opt/gone\n")
    sysroot.write("/etc/ld.so.conf.d/libc.conf", "/usr/local/lib\n", mode=0o600)
    sysroot.write("/etc/ascend.conf", "/usr/local/Ascend/driver/lib64\n")
    sysroot.write("/etc/ld.so.conf.d/ascend.conf.off", "/usr/local/Ascend/driver/lib64\n")
    sysroot.mkdir("/usr/local/lib")
    build(sysroot, "/usr/local/lib/libnew.so", "-Wl,-soname,libnew.so")
    if not shutil.which("ldconfig"):
        pytest.skip("ldconfig not installed")
    sysroot.write("/etc/ld.so.cache", _empty_cache())  # ldconfig ran before libnew.so came
    import os
    os.utime(sysroot.path("/etc/ld.so.cache"), (1000, 1000))
    os.chmod(sysroot.path("/etc/ld.so.conf.d"), 0o777)
    host = sysroot.host()
    conf = walk_ldconf(host)
    state = gather_ldconf_state(host, conf)
    assert [f.status for f in reached(conf, state)] == [Status.FAIL]
    pf = list(perms(conf, state))
    assert any("0600" in f.message for f in pf) and any("writable by group and others" in f.message
                                                       for f in pf)
    (d,) = dirs_exist(state)
    # not an Ascend directory: ld.so skips it (Debian/Ubuntu ship /usr/local/lib/<triplet>)
    assert d.status == Status.INFO and "/opt/gone" in d.message and "/etc/ld.so.conf:2" in d.message
    cache, _ = usable_cache(host)
    from ascend_doctor.probes.ldcache import LdCache
    cache = LdCache(cache.format, cache.entries, cache.generator, cache.source, 1000.0)
    cf = list(cache_fresh(conf, cache, gather_cache_gaps(host, cache, state)))
    assert any("older than" in f.message for f in cf)
    assert any("/usr/local/lib/libnew.so" in f.message and "stale" in f.message for f in cf)
    assert [f.status for f in cache_fresh(conf, None, None)] == [Status.FAIL]
    # healthy: fix everything, run the real ldconfig
    os.chmod(sysroot.path("/etc/ld.so.conf.d"), 0o755)
    os.chmod(sysroot.path("/etc/ld.so.conf.d/libc.conf"), 0o644)
    os.unlink(sysroot.path("/etc/ld.so.conf.d/ascend.conf.off"))
    sysroot.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    subprocess.run(["ldconfig", "-r", str(sysroot)], check=True)
    conf = walk_ldconf(host)
    state = gather_ldconf_state(host, conf)
    cache, _ = usable_cache(host)
    cache = LdCache(cache.format, cache.entries, cache.generator, cache.source,
                    host.stat("/etc/ld.so.cache").mtime)
    for rule in (reached(conf, state), perms(conf, state), dirs_exist(state),
                 cache_fresh(conf, cache, gather_cache_gaps(host, cache, state)), parse_problems(conf)):
        assert [f.status for f in rule] == [Status.PASS]


def _empty_cache() -> bytes:
    from ascend_doctor.probes.ldcache import build_ldcache
    return build_ldcache([])


def test_loop_and_non_utf8_are_findings(sysroot):
    sysroot.write("/etc/ld.so.conf", b"include /etc/ld.so.conf\n/opt/caf\xe9\n")
    conf = walk_ldconf(sysroot.host())
    fs = list(parse_problems(conf))
    assert {f.status for f in fs} == {Status.WARN}
    assert any("include loop" in f.message for f in fs) and any("UTF-8" in f.message for f in fs)


def test_engine_truncated_cache_and_corrupt_elf_are_named_errors(sysroot, tmp_path):
    from ascend_doctor.engine import RunConfig, run
    from ascend_doctor.options import RunOptions
    from ascend_doctor.probes.ldcache import build_ldcache
    sys_libs(sysroot)
    sysroot.write("/etc/ld.so.conf", "/usr/lib/x86_64-linux-gnu\n")
    sysroot.write("/etc/ld.so.cache", build_ldcache([("libc.so.6", "/lib/libc.so.6", 0x303)])[:40])
    # --elf files are the user's (read from this machine, not the sysroot; DESIGN Additions)
    bad = tmp_path / "user" / "bad" / "libbroken.so"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00>\x00")
    good = gcc(tmp_path / "user" / "ok" / "libok.so")
    assert good.exists()
    opts = RunOptions(elf_paths=(str(bad), str(good)))
    r = run(sysroot.host(), options=opts, config=RunConfig(only=("ldconf.cache", "libacl.resolve")))
    by = {x.check_id: x for x in r.results}
    (e,) = by["ldconf.cache"].findings
    assert e.status == Status.ERROR and "/etc/ld.so.cache" in e.message and "truncated" in e.message
    errs = [f for f in by["libacl.resolve"].findings if f.status == Status.ERROR]
    assert len(errs) == 1 and str(bad) in errs[0].message
    # the good library still resolves (libc found in the default dirs despite the bad cache)
    assert not [f for f in by["libacl.resolve"].findings if f.status == Status.FAIL]


def test_libacl_resolve_points_at_the_conf_when_it_is_the_cause(sysroot):
    from ascend_doctor.probes.ldconf import LdConfState, LdSoConf, SearchDir, UnreachedConf
    host, lr, env, index = _ascend_host(sysroot, llp_in_service=False)
    d = f"{TK}/8.0.0/lib64"
    configured = LdSoConf((SearchDir(d, "/etc/ld.so.conf.d/ascend.conf:1"),), ())
    (f,) = [x for x in resolve(lr, env, index, gather_lib_search_context(host, None), configured) if x.status == Status.FAIL]
    assert "is configured (/etc/ld.so.conf.d/ascend.conf:1)" in f.message and "stale" in f.message
    assert f.fix.id == "ldconf.ascend-conf" and "ASC-LIB-005" in f.kb
    state = LdConfState((UnreachedConf("/etc/ld.so.conf.d/ascend.conf", (f"{TK}/latest/lib64",),
                                       0o600, 0),), (), ())
    (g,) = [x for x in resolve(lr, env, index, gather_lib_search_context(host, state), None) if x.status == Status.FAIL]
    assert "which ldconfig does not read" in g.message and g.fix.id == "ldconf.ascend-conf"
