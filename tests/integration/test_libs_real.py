"""The resolver on real ELF files: the torch_npu 2.14.0 / vllm_ascend 0.23.0 wheels in a
real venv (through the CLI, in a pinned process's environment), and a comparison with
`ldd` over this machine's shared libraries."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ascend_doctor.host import LiveHost
from ascend_doctor.probes.libresolve import Resolver, SearchContext, default_dirs_for, usable_cache
from tests.libfixtures import wheel

# facts/observed-wheels.md: DT_NEEDED entries that only CANN provides, per ELF
EXPECTED = {
    "torch_npu/lib/libtorch_npu.so": {"libhccl.so", "libascendcl.so", "libacl_op_compiler.so",
                                      "libge_runner.so", "libgraph.so"},
    "torch_npu/_C.cpython-311-x86_64-linux-gnu.so": {"libhccl.so"},
    "vllm_ascend/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so": {
        "libascendcl.so", "libregister.so", "libplatform.so", "libascendalog.so", "libopapi.so",
        "libruntime.so", "liberror_manager.so", "libprofapi.so", "libge_common_base.so",
        "libunified_dlog.so", "libmmpa.so", "libascend_dump.so", "libc_sec.so"},
}


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A real venv holding the two wheels (no deps, no CANN, no torch)."""
    d = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    site = glob.glob(str(d / "lib/python3*/site-packages"))[0]
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--target", site, str(wheel("torch_npu")), str(wheel("vllm_ascend"))],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return d


@pytest.mark.slow
def test_cli_names_each_missing_ascend_library_per_elf(venv, cli, tmp_path):
    # the "service": a process whose environment lacks what the doctor's shell exported
    svc = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    try:
        r = cli("check", "--json", "--only", "libacl.resolve", "--python",
                str(venv / "bin/python"), "--pid", str(svc.pid),
                env={"LD_LIBRARY_PATH": "/usr/local/Ascend/ascend-toolkit/latest/lib64"})
    finally:
        svc.kill()
        svc.wait()
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    (chk,) = doc["checks"]
    fails = [f for f in chk["findings"] if f["status"] == "fail"]
    by_lib = {f["evidence"]["library"]: f for f in fails}
    for elf, libs in EXPECTED.items():
        for lib in libs:
            assert lib in by_lib, f"{lib} (needed by {elf}) not reported"
            assert any(n.endswith(elf) for n in by_lib[lib]["evidence"]["needed_by"]), (lib, elf)
            assert lib in by_lib[lib]["message"]
    # system and torch libraries are not blamed; the service's environment was used
    assert not {"libstdc++.so.6", "libc.so.6", "libtorch.so", "libc10.so"} & set(by_lib)
    info = [f for f in chk["findings"] if f["status"] == "info"]
    assert any(f"/proc/{svc.pid}/environ" in f["message"] for f in info)
    assert any("counted as provided by torch" in f["message"] for f in info)
    aarch64 = [f for f in info if "built for EM_AARCH64" in f["message"]]
    assert aarch64, "the AICPU kernel (aarch64) should be noted, not resolved"


def _ldd(path: str) -> dict[str, str | None] | None:
    p = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30,
                       env={"PATH": "/usr/bin:/bin"})
    out: dict[str, str | None] = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (not found|\S+)", line)
        if m:
            out[m.group(1)] = None if m.group(2) == "not found" else os.path.realpath(m.group(2))
    if p.returncode != 0 and not out:
        return None  # not a dynamic object ldd can list
    return out


def _ours(res: Resolver, path: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for r in res.closure(path).resolutions:
        out.setdefault(r.name, os.path.realpath(r.real or r.path) if r.found else None)
    return out


@pytest.mark.slow
def test_resolver_agrees_with_ldd_on_this_machine():
    if shutil.which("ldd") is None:
        pytest.skip("ldd not installed")
    files = sorted(f for f in glob.glob("/usr/lib/x86_64-linux-gnu/*.so*")
                   if os.path.isfile(f) and not os.path.islink(f))
    host = LiveHost("/", env={})
    cache, _ = usable_cache(host)
    dirs, lib = default_dirs_for(host, "EM_X86_64")
    res = Resolver(host, cache, SearchContext((), dirs, lib, "x86_64"))
    compared, agree, disagreements = 0, 0, []
    for f in files:
        theirs = _ldd(f)
        if theirs is None:
            continue
        compared += 1
        ours = _ours(res, f)
        strip = lambda d: {k: v for k, v in d.items() if not k.startswith("ld-linux")}  # noqa: E731
        if strip(ours) == strip(theirs):
            agree += 1
        else:
            disagreements.append((f, {k: (ours.get(k, "-"), theirs.get(k, "-"))
                                      for k in set(ours) | set(theirs)
                                      if ours.get(k, "-") != theirs.get(k, "-")}))
    for f, diff in disagreements:
        print(f"DISAGREE {f}: ours vs ldd {diff}")
    print(f"ldd agreement: {agree}/{compared}")
    assert compared >= 300, f"only {compared} shared libraries could be compared"
    assert agree / compared >= 0.995
