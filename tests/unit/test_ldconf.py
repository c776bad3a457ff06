"""ld.so.conf parsing (real formats) and the driver-first rule."""

from __future__ import annotations

from ascend_doctor.model import Status
from ascend_doctor.probes.ldconf import LdSoConf, SearchDir, parse_ldconf_text, walk_ldconf
from ascend_doctor.checks.ldconf import driver_first
from tests.fixtures.sysroots import TK, broken_ldconf


def test_parse_directives_real_format():
    text = ("# comment\ninclude /etc/ld.so.conf.d/*.conf\n/usr/local/lib # trailing\n"
            "/opt/a:/opt/b,/opt/c\thwcap 0 nosegneg\n\n")
    ds = parse_ldconf_text(text)
    assert [(d.kind, d.value) for d in ds][:2] == [("include", "/etc/ld.so.conf.d/*.conf"),
                                                  ("dir", "/usr/local/lib")]
    assert [d.value for d in ds if d.kind == "dir"] == ["/usr/local/lib", "/opt/a", "/opt/b",
                                                        "/opt/c"]


def test_walk_follows_includes_relative_nested_and_loops(sysroot):
    sysroot.write("/etc/ld.so.conf", "include ld.so.conf.d/*.conf\n/usr/local/lib\n")
    sysroot.write("/etc/ld.so.conf.d/a.conf", "/usr/local/Ascend/driver/lib64\ninclude /etc/more.conf\n")
    sysroot.write("/etc/more.conf", f"{TK}/lib64\ninclude /etc/ld.so.conf.d/a.conf\n")
    conf = walk_ldconf(sysroot.host())
    assert conf.dirs == ["/usr/local/Ascend/driver/lib64", f"{TK}/lib64", "/usr/local/lib"]
    assert conf.origin_of(f"{TK}/lib64") == "/etc/more.conf:1"
    assert any("include loop" in p for p in conf.problems)


def test_non_utf8_conf_is_a_named_problem(sysroot):
    sysroot.write("/etc/ld.so.conf", b"/usr/local/Ascend/driver/lib64\n# caf\xe9\n")
    conf = walk_ldconf(sysroot.host())
    assert conf.dirs == ["/usr/local/Ascend/driver/lib64"]
    assert any("not UTF-8" in p for p in conf.problems)


def test_rule_on_hand_built_facts():
    good = LdSoConf((SearchDir("/usr/local/Ascend/driver/lib64", "/etc/ld.so.conf.d/ascend.conf:1"),
                     SearchDir(f"{TK}/lib64", "/etc/ld.so.conf.d/ascend.conf:2")), ())
    assert [f.status for f in driver_first(good)] == [Status.PASS]
    bad = LdSoConf((SearchDir(f"{TK}/lib64", "/etc/ld.so.conf.d/ascend.conf:1"),
                    SearchDir("/usr/local/Ascend/driver/lib64", "/etc/ld.so.conf.d/ascend.conf:2")), ())
    (f,) = driver_first(bad)
    assert f.status == Status.FAIL and "position 2" in f.message and f.fix.id == "ldconf.ascend-conf"
    none = LdSoConf((SearchDir("/usr/local/lib", "/etc/ld.so.conf:1"),), ())
    (f,) = driver_first(none)
    # no conf file names an Ascend directory and none is unread: nothing was configured
    # (ASC-LIB-014); "ascend.conf is not reached" (ASC-LIB-002) needs an unread conf file
    assert f.status == Status.FAIL and f.kb == ("ASC-LIB-014",)
    from ascend_doctor.probes.ldconf import LdConfState, UnreachedConf
    state = LdConfState((UnreachedConf("/etc/ascend/ascend.conf", ("/usr/local/Ascend/driver/lib64",),
                                       0o644, 0),), (), ())
    (f,) = driver_first(none, state)
    assert f.kb == ("ASC-LIB-002",) and f.explained_by == ("ldconf.unread:/etc/ascend/ascend.conf",)
    # a stack without any Ascend directory (torch_npu only): nothing to configure, a skip
    from ascend_doctor.probes.stack import AscendStack
    (f,) = driver_first(none, None, AscendStack(packages=("torch_npu",)))
    assert f.status == Status.SKIP and "/usr/local/Ascend is absent" in f.message


def test_end_to_end_on_healthy_and_broken_sysroots(sysroot, tmp_path):
    from ascend_doctor.engine import RunConfig, run
    broken_ldconf(sysroot)
    r = run(sysroot.host(), config=RunConfig(only=("ldconf.order",)))
    assert r.results[0].status == Status.FAIL
    sysroot.write("/etc/ld.so.conf.d/ascend.conf",
                  f"/usr/local/Ascend/driver/lib64\n{TK}/lib64\n")
    r = run(sysroot.host(), config=RunConfig(only=("ldconf.order",)))
    assert r.results[0].status == Status.PASS
