"""The doctor on a real arm64 Debian userland (tests/aarch64/build_userland.sh), checked
against that userland's own programs run under qemu-user: its ld.so (``--list``), its
ldconfig (``-p``), and the doctor itself installed there by arm64 pip.

Skipped with the reason where the userland is not built or arm64 programs cannot run;
CI builds it and sets ASCEND_DOCTOR_AARCH64=require, so there a skip is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from ascend_doctor.host import LiveHost
from ascend_doctor.probes.ldcache import EXPECTED_FLAGS, parse_ldcache
from ascend_doctor.probes.libresolve import default_dirs_for
from tests.aarch64 import userland
from tests.aarch64.userland import LOADER, SITE, chroot, compare_all, wheel_elves

pytestmark = pytest.mark.aarch64

# a Kunpeng service's environment: torch_npu's own lib dir, and the CANN toolkit that is
# not installed (set_env.sh exported it, the directory does not exist)
LLP = (f"{SITE}/torch_npu/lib", "/usr/local/Ascend/ascend-toolkit/latest/lib64",
       "/usr/local/Ascend/driver/lib64/driver")
# DT_NEEDED entries only CANN provides (tests/integration/test_libs_real.py, x86_64 wheels)
CANN_ONLY = {"libascendcl.so", "libhccl.so"}


@pytest.fixture(scope="module")
def root():
    return userland.root()


@pytest.mark.slow
def test_resolver_equals_arm64_ldso_on_every_wheel_elf(root):
    elves = wheel_elves(root)
    assert len(elves) >= 5, f"expected the torch_npu / vllm_ascend ELF files, got {elves}"
    t0 = time.monotonic()
    compared, disagree, answers = compare_all(root, elves, LLP)
    print(f"arm64 ld.so vs resolver: {compared} ELF files in {time.monotonic() - t0:.1f} s")
    assert not disagree, "\n".join(f"{e}: ours vs ld.so {d}" for e, d in disagree)
    assert compared == len(elves)
    # the verdict that matters on a Kunpeng host without CANN: ld.so itself says not found
    missing = {lib for a in answers.values() for lib, path in a.items() if path is None}
    assert CANN_ONLY <= missing, missing
    # and libraries the userland has are found where its ld.so finds them
    found = {lib: p for a in answers.values() for lib, p in a.items() if p}
    assert found.get("libstdc++.so.6", "").startswith("/usr/lib/aarch64-linux-gnu/"), found


@pytest.mark.slow
def test_resolver_equals_arm64_ldso_without_library_path(root):
    """No LD_LIBRARY_PATH: the extensions' own RUNPATH/RPATH and the cache decide."""
    elves = [e for e in wheel_elves(root) if "/torch_npu/" in e][:12]
    compared, disagree, _ = compare_all(root, elves, ())
    assert compared == len(elves) and not disagree, disagree


def test_default_dirs_equal_arm64_ldso_system_search_path(root):
    r = chroot(root, [LOADER, "--help"])
    assert r.returncode == 0, r.stderr
    system = re.findall(r"^\s+(/\S+) \(system search path\)", r.stdout, re.M)
    assert system, r.stdout
    dirs, lib = default_dirs_for(LiveHost(str(root), env={}), "EM_AARCH64")
    assert list(dirs) == [d.rstrip("/") for d in system]
    assert lib == "lib/aarch64-linux-gnu"


_LDCONFIG_P = re.compile(r"^\s+(\S+) \(([^)]*)\) => (\S+)$")


def test_ldcache_parser_equals_arm64_ldconfig_p(root):
    data = (root / "etc/ld.so.cache").read_bytes()
    cache = parse_ldcache(data, "/etc/ld.so.cache")
    r = chroot(root, ["/sbin/ldconfig", "-p"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    m = re.match(r"(\d+) libs found in cache", lines[0])
    assert m, lines[0]
    theirs = []
    for line in lines[1:]:
        g = _LDCONFIG_P.match(line)
        assert g, f"unexpected ldconfig -p line {line!r}"
        theirs.append((g.group(1), g.group(2).split(",")[:2], g.group(3)))
    assert int(m.group(1)) == len(cache.entries) == len(theirs) > 20
    mine = [(e.name, ["libc6", e.arch], e.path) for e in cache.entries]
    assert mine == theirs  # same names, same AArch64 flags, same paths, same order
    assert cache.format == "new"
    assert cache.generator and "ldconfig" in cache.generator
    # every entry is the kind an aarch64 ld.so accepts, and lookup picks it
    want = EXPECTED_FLAGS[(64, "EM_AARCH64")]
    assert {e.flags for e in cache.entries} == {want}
    libc = cache.lookup("libc.so.6", want)
    assert libc is not None and libc.path == "/lib/aarch64-linux-gnu/libc.so.6"
    assert cache.lookup("libc.so.6", EXPECTED_FLAGS[(64, "EM_X86_64")]) is None


def _doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ascend_doctor", *args], capture_output=True,
                          text=True, timeout=300,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                               "HOME": os.environ.get("HOME", "/root"), "CI": "true",
                               "ASCEND_DOCTOR_CACHE": "0", **(env or {})})


def _findings(doc: dict, check_id: str) -> list[dict]:
    return [f for c in doc["checks"] if c["id"] == check_id for f in c["findings"]]


def test_check_root_gives_a_kunpeng_host_without_cann_verdicts(root):
    r = _doctor("check", "--root", str(root), "--json", "--python", "/opt/vllm/bin/python",
                "--only", "libs,versions")
    assert r.returncode in (0, 1), r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["host"]["arch"] == "aarch64", doc["host"]
    resolve = _findings(doc, "libacl.resolve")
    fails = {f["evidence"].get("library"): f for f in resolve if f["status"] == "fail"}
    assert CANN_ONLY <= set(fails), [f["message"] for f in resolve]
    for lib in CANN_ONLY:
        assert any("/opt/vllm/lib/python3.11/site-packages/" in n
                   for n in fails[lib]["evidence"]["needed_by"]), fails[lib]["evidence"]
    # the wheels are aarch64 like the host: nothing is set aside as another machine's
    assert not [f for f in resolve if "built for EM_AARCH64" in f["message"]]
    # the userland's own libraries are not blamed
    assert not {"libc.so.6", "libstdc++.so.6", "libm.so.6"} & set(fails)
    assert r.returncode == 1


def test_doctor_runs_inside_the_arm64_userland(root):
    """The package itself on aarch64: arm64 CPython under qemu runs the bundled demo."""
    t0 = time.monotonic()
    r = chroot(root, ["/opt/doctor/bin/python", "-m", "ascend_doctor", "demo", "--json"],
               env={"HOME": "/root", "LANG": "C.UTF-8", "CI": "true"}, timeout=600)
    took = time.monotonic() - t0
    print(f"demo --json inside the arm64 userland under qemu: {took:.1f} s")
    assert r.returncode == 1, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    host = _doctor("demo", "--json")
    theirs = json.loads(host.stdout)
    verdicts = lambda d: sorted((c["id"], c["status"]) for c in d["checks"])  # noqa: E731
    assert verdicts(doc) == verdicts(theirs)
    assert len(doc["checks"]) > 40
