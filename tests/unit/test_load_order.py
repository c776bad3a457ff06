"""The resolver models a real process's load order: what `import torch`, `import torch_npu`,
`import vllm_ascend` loaded (by soname) satisfies a later extension's DT_NEEDED — on
gcc-built libraries and on the real torch_npu 2.14.0 / vllm_ascend 0.23.0 wheels."""

from __future__ import annotations

import pytest

from ascend_doctor.probes.libsearch import gather_lib_search_context
from ascend_doctor.checks.libacl import resolve
from ascend_doctor.host import LiveHost
from ascend_doctor.model import Status
from ascend_doctor.probes.ascendfiles import AscendLibIndex
from ascend_doctor.probes.libresolve import Resolver, SearchContext, resolve_targets
from ascend_doctor.probes.packages import Package, Packages
from ascend_doctor.probes.procs import ServiceEnv
from tests.libfixtures import gcc, unpack_sos
from tests.fixtures.sysroots import sys_libs

SITE = "/venv/lib/python3.11/site-packages"


def _by(lr, target_end: str, name: str):
    (c,) = [c for c in lr.closures if c.target.endswith(target_end)]
    return [r for r in c.resolutions if r.name == name]


def test_soname_satisfied_only_by_an_earlier_loaded_package(sysroot):
    """torch_npu/_C.so pulls libcore.so from torch_npu/lib; torch_npu/sub/_ext.so and a
    vllm_ascend extension need libcore.so but cannot find it on their own paths."""
    sys_libs(sysroot)
    lib = sysroot.path(f"{SITE}/torch_npu/lib")
    gcc(sysroot.path(f"{SITE}/torch_npu/lib/libcore.so"), "-Wl,-soname,libcore.so")
    gcc(sysroot.path(f"{SITE}/torch_npu/_C.so"), f"-L{lib}", "-lcore",
        "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib")
    gcc(sysroot.path(f"{SITE}/torch_npu/sub/_ext.so"), f"-L{lib}", "-lcore",
        "-Wl,--disable-new-dtags,-rpath,$ORIGIN")
    gcc(sysroot.path(f"{SITE}/vllm_ascend/ops/_k.so"), f"-L{lib}", "-lcore")
    gcc(sysroot.path("/opt/other/libx.so"), f"-L{lib}", "-lcore")
    pk = Packages("3.11", "", "test", {
        "torch-npu": Package("torch_npu", "2.14.0", location=SITE, files=(
            "torch_npu/lib/libcore.so", "torch_npu/_C.so", "torch_npu/sub/_ext.so")),
        "vllm-ascend": Package("vllm_ascend", "0.23.0", location=SITE, files=(
            "vllm_ascend/ops/_k.so",))})
    host = sysroot.host()
    targets = [("torch_npu", f"{SITE}/torch_npu/_C.so"),
               ("torch_npu", f"{SITE}/torch_npu/sub/_ext.so"),
               ("torch_npu", f"{SITE}/torch_npu/lib/libcore.so"),
               ("vllm_ascend", f"{SITE}/vllm_ascend/ops/_k.so"),
               ("", "/opt/other/libx.so")]
    env = ServiceEnv({}, "/proc/1/environ", 1)
    lr = resolve_targets(host, targets, env, None, pk)
    # on its own, _ext.so would not find libcore.so (its RPATH is $ORIGIN only)
    alone = Resolver(host, None, SearchContext((), ("/usr/lib/x86_64-linux-gnu",))).closure(
        f"{SITE}/torch_npu/sub/_ext.so")
    assert [r.name for r in alone.unresolved] == ["libcore.so"]
    (own,) = _by(lr, "torch_npu/_C.so", "libcore.so")
    assert own.via == "RPATH" and own.path.endswith("torch_npu/lib/libcore.so")
    for t in ("torch_npu/sub/_ext.so", "vllm_ascend/ops/_k.so"):
        (r,) = _by(lr, t, "libcore.so")
        assert r.found and r.via == "loaded" and r.path.endswith("torch_npu/lib/libcore.so"), t
    # an --elf file outside the imported packages is resolved on its own: still missing
    (x,) = _by(lr, "/opt/other/libx.so", "libcore.so")
    assert not x.found
    assert [r.needed_by for r in lr.unresolved] == ["/opt/other/libx.so"]
    assert "`import torch_npu`" in lr.preload_note


@pytest.mark.slow  # downloads the real torch_npu and vllm_ascend wheels (tests/.cache)
def test_real_wheels_with_stub_cann_is_healthy(tmp_path):
    """The real wheels unpacked into a site dir, every CANN soname they need stubbed on the
    service's LD_LIBRARY_PATH: no libacl.resolve fail (the torchair extensions' RPATH
    $ORIGIN/../../../../torch_npu.libs misses libtorch_npu.so, which `import torch_npu`
    already loaded)."""
    site = tmp_path / "site"
    files = {p: tuple(unpack_sos(p, site)) for p in ("torch_npu", "vllm_ascend")}
    pk = Packages("3.11", "", "test", {
        "torch-npu": Package("torch_npu", "2.14.0", location=str(site), files=files["torch_npu"]),
        "vllm-ascend": Package("vllm_ascend", "0.23.0", location=str(site),
                               files=files["vllm_ascend"])})
    targets = [(p, str(site / f)) for p, fs in files.items() for f in fs]
    host = LiveHost("/", env={})
    bare = resolve_targets(host, targets, ServiceEnv({}, "/proc/1/environ", 1), None, pk)
    missing = sorted({r.name for r in bare.unresolved})
    assert "libascendcl.so" in missing and "libtorch_npu.so" not in missing
    stubs = tmp_path / "cann" / "lib64"
    for name in missing:
        gcc(stubs / name, f"-Wl,-soname,{name}")
    env = ServiceEnv({"LD_LIBRARY_PATH": str(stubs)}, "/proc/1/environ", 1)
    lr = resolve_targets(host, targets, env, None, pk)
    assert lr.unresolved == []
    for t in ("dynamo/torchair/core/_npu_graph_executor.so", "dynamo/torchair/core/_npu_utils.so"):
        (r,) = _by(lr, t, "libtorch_npu.so")
        assert r.via == "loaded" and r.path.endswith("torch_npu/lib/libtorch_npu.so"), t
    index = AscendLibIndex((str(tmp_path / "cann"),),
                           {n: (str(stubs / n),) for n in missing})
    fs = list(resolve(lr, env, index, gather_lib_search_context(host, None), None))
    assert [f.status for f in fs if f.status != Status.INFO] == [Status.PASS], fs
