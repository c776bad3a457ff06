"""The RPM-style (openEuler / Kylin) arm64 sysroot of tests/aarch64/rpmroot.py: /usr/lib64,
ld.so.conf.d, the Ascend driver's lib64 dirs, pip's lib64 platlib; its ld.so.cache written by
the arm64 ldconfig inside it. The resolver, the cache parser and ``check --root`` against
the arm64 ld.so and ldconfig run there under qemu."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from ascend_doctor.host import LiveHost
from ascend_doctor.probes.ldcache import parse_ldcache
from ascend_doctor.probes.libresolve import default_dirs_for
from tests.aarch64 import userland
from tests.aarch64.rpmroot import CROSS_CC, DRIVER, PY_SITE, build_rpm_root
from tests.aarch64.test_arm64_userland import CANN_ONLY, _doctor, _findings
from tests.aarch64.userland import chroot, compare_all, wheel_elves

pytestmark = pytest.mark.aarch64

LLP = ("/usr/local/Ascend/ascend-toolkit/latest/lib64",)


@pytest.fixture(scope="module")
def rpmroot(tmp_path_factory):
    deb = userland.root()
    if shutil.which(CROSS_CC) is None:
        userland._unavailable(f"{CROSS_CC} not installed (apt-get install gcc-aarch64-linux-gnu)")
    return build_rpm_root(deb, tmp_path_factory.mktemp("openeuler-arm64"))


def test_lib64_layout_default_dirs(rpmroot):
    host = LiveHost(str(rpmroot), env={})
    assert host.info().arch == "aarch64"
    assert default_dirs_for(host, "EM_AARCH64") == (("/lib64", "/usr/lib64"), "lib64")


def test_cache_from_ld_so_conf_d_equals_ldconfig_p(rpmroot):
    cache = parse_ldcache((rpmroot / "etc/ld.so.cache").read_bytes())
    r = chroot(rpmroot, ["/usr/sbin/ldconfig", "-p"])
    assert r.returncode == 0, r.stderr
    theirs = [(m.group(1), m.group(2)) for m in
              re.finditer(r"^\s+(\S+) \(libc6,AArch64\) => (\S+)$", r.stdout, re.M)]
    assert [(e.name, e.path) for e in cache.entries] == theirs
    paths = {e.path for e in cache.entries}
    assert f"{DRIVER}/common/libc_sec.so" in paths and f"{DRIVER}/driver/libascend_hal.so" in paths
    assert "/usr/lib64/libstdc++.so.6" in paths
    assert not any("aarch64-linux-gnu" in p for p in paths)


@pytest.mark.slow
def test_resolver_equals_arm64_ldso_on_rpm_layout(rpmroot):
    elves = wheel_elves(rpmroot, PY_SITE)
    assert len(elves) >= 5, elves
    compared, disagree, answers = compare_all(rpmroot, elves, LLP)
    assert not disagree, "\n".join(f"{e}: ours vs ld.so {d}" for e, d in disagree)
    assert compared == len(elves)
    found = {lib: p for a in answers.values() for lib, p in a.items() if p}
    missing = {lib for a in answers.values() for lib, p in a.items() if p is None}
    assert CANN_ONLY <= missing
    # the driver's library comes from the cache that ascend.conf fed, as ld.so says
    assert found["libc_sec.so"] == f"{DRIVER}/common/libc_sec.so"
    assert found["libstdc++.so.6"].startswith("/usr/lib64/")


def test_check_root_on_openeuler_layout(rpmroot):
    r = _doctor("check", "--root", str(rpmroot), "--json", "--only", "libs,versions")
    assert r.returncode == 1, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["host"]["arch"] == "aarch64" and "openEuler" in doc["host"]["os"], doc["host"]
    resolve = _findings(doc, "libacl.resolve")
    fails = {f["evidence"].get("library"): f for f in resolve if f["status"] == "fail"}
    assert CANN_ONLY <= set(fails), [f["message"] for f in resolve]
    assert all(any(n.startswith(PY_SITE) for n in fails[lib]["evidence"]["needed_by"])
               for lib in CANN_ONLY)
    assert "libc_sec.so" not in fails and "libstdc++.so.6" not in fails
