"""ld.so's search rules on aarch64, on arm64 objects built with the cross compiler inside
the Debian userland: $ORIGIN, $LIB (Debian's lib/aarch64-linux-gnu), $PLATFORM (the
AT_PLATFORM qemu gives, "aarch64"), RPATH vs RUNPATH, LD_LIBRARY_PATH, the cache, a
wrong-machine candidate skipped (an x86_64 object of the same name) and a missing name.
The resolver's answer must equal the arm64 ld.so's for each."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from tests.aarch64 import userland
from tests.aarch64.rpmroot import CROSS_CC, cross_lib
from tests.aarch64.userland import compare_all

pytestmark = pytest.mark.aarch64


@pytest.fixture(scope="module")
def tree():
    """(root, the fixture's root-relative top, its two target objects); removed afterwards."""
    root = userland.root()
    if shutil.which(CROSS_CC) is None:
        userland._unavailable(f"{CROSS_CC} not installed (apt-get install gcc-aarch64-linux-gnu)")
    rel = f"/tmp/h-arm-dst-{uuid.uuid4().hex[:8]}"
    top = root / rel.lstrip("/")
    deps = {"libo.so": "deps", "libl.so": "lib/aarch64-linux-gnu", "libp.so": "plat/aarch64",
            "libe.so": "llp", "libr.so": "rpath"}
    for name, sub in deps.items():
        cross_lib(top / sub / name, name)
    # a same-named x86_64 object earlier in the search: ld.so skips it for the arm64 one
    if shutil.which("gcc"):
        x86 = top / "llp-first" / "libe.so"
        x86.parent.mkdir(parents=True)
        c = x86.with_name("x.c")
        c.write_text("int e(void){return 0;}\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(x86), str(c)], check=True)
        c.unlink()
    link = [f"-L{top / sub}" for sub in deps.values()]
    # the userland's own zlib, named as a file: DT_NEEDED libz.so.1, found through the cache
    needed = ["-l:libo.so", "-l:libl.so", "-l:libp.so", "-l:libe.so",
              str(root / "usr/lib/aarch64-linux-gnu/libz.so.1")]
    cross_lib(top / "app/libapp.so", "libapp.so", *link, *needed,
              f"-Wl,-rpath,$ORIGIN/../deps:{rel}/$LIB:{rel}/plat/$PLATFORM", "-Wl,--enable-new-dtags")
    # DT_RPATH (old tags): searched before LD_LIBRARY_PATH, and inherited by what it loads
    cross_lib(top / "old/libold.so", "libold.so", f"-L{top / 'rpath'}", "-l:libr.so",
              f"-L{top / 'app'}", "-l:libapp.so", f"-Wl,-rpath,{rel}/rpath:{rel}/app",
              "-Wl,--disable-new-dtags")
    # a name nothing provides
    miss = top / "miss"
    cross_lib(miss / "libgone.so", "libgone.so")
    cross_lib(top / "app/libneedsgone.so", "libneedsgone.so", f"-L{miss}", "-l:libgone.so")
    shutil.rmtree(miss)
    try:
        yield root, rel, [f"{rel}/app/libapp.so", f"{rel}/old/libold.so",
                          f"{rel}/app/libneedsgone.so"]
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_dst_runpath_rpath_llp_equal_arm64_ldso(tree):
    root, rel, targets = tree
    llp = (f"{rel}/llp-first", f"{rel}/llp")
    compared, disagree, answers = compare_all(root, targets, llp)
    assert not disagree, disagree
    app = answers[targets[0]]
    assert app["libo.so"] == f"{rel}/deps/libo.so"
    assert app["libl.so"] == f"{rel}/lib/aarch64-linux-gnu/libl.so"
    assert app["libp.so"] == f"{rel}/plat/aarch64/libp.so"
    assert app["libe.so"] == f"{rel}/llp/libe.so"  # the x86_64 one in llp-first skipped
    assert app["libz.so.1"].startswith("/usr/lib/aarch64-linux-gnu/")
    assert answers[targets[2]]["libgone.so"] is None


def test_without_library_path_the_llp_dependency_is_not_found(tree):
    root, rel, targets = tree
    compared, disagree, answers = compare_all(root, targets[:1], ())
    assert not disagree, disagree
    assert answers[targets[0]]["libe.so"] is None
