"""The arm64 userland of tests/aarch64/build_userland.sh, and running its programs under qemu.

The userland is built once (root, debootstrap, qemu-user-static; .ci/run does it) into
tests/.cache/aarch64/rootfs, or the directory ASCEND_DOCTOR_AARCH64_ROOT names. Where it
is absent or arm64 programs cannot run here, the tests skip and say which; with
ASCEND_DOCTOR_AARCH64=require (CI) they fail instead, so CI cannot lose the run silently;
=ran (set by .ci/run after its aarch64 step) skips them in the later whole-suite run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ascend_doctor.host import LiveHost
from ascend_doctor.probes.elf import ElfHeader
from ascend_doctor.probes.libresolve import (Resolver, SearchContext, default_dirs_for,
                                             usable_cache)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_ROOT = REPO / "tests" / ".cache" / "aarch64" / "rootfs"
BINFMT = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
LOADER = "/lib/ld-linux-aarch64.so.1"
SITE = "/opt/vllm/lib/python3.11/site-packages"
BUILD_HINT = "tests/aarch64/build_userland.sh (root; apt-get install debootstrap qemu-user-static binfmt-support)"


def _unavailable(reason: str) -> None:
    if os.environ.get("ASCEND_DOCTOR_AARCH64") == "require":
        pytest.fail(f"aarch64 run required (ASCEND_DOCTOR_AARCH64=require) but {reason}")
    pytest.skip(reason)


def root() -> Path:
    """The built userland, or a skip that says what is missing."""
    if os.environ.get("ASCEND_DOCTOR_AARCH64") == "ran":
        pytest.skip("already run against the arm64 userland by .ci/run's aarch64 step")
    path = Path(os.environ.get("ASCEND_DOCTOR_AARCH64_ROOT") or DEFAULT_ROOT)
    if not (path / ".ascend-doctor-stamp").is_file():
        _unavailable(f"no arm64 userland at {path}: build it with {BUILD_HINT}")
    if os.geteuid() != 0 or shutil.which("chroot") is None:
        _unavailable("running the userland's programs needs root and chroot")
    if not BINFMT.is_file() or "enabled" not in BINFMT.read_text():
        _unavailable(f"arm64 programs cannot run here: no enabled {BINFMT} "
                     "(mount binfmt_misc; update-binfmts --enable qemu-aarch64)")
    interp = re.search(r"^interpreter (\S+)", BINFMT.read_text(), re.M)
    if interp and "F" not in BINFMT.read_text().split("flags:", 1)[-1].split("\n", 1)[0] \
            and not (path / interp.group(1).lstrip("/")).exists():
        _unavailable(f"{interp.group(1)} (binfmt's qemu) is missing inside {path}: rebuild it")
    return path


def chroot(root_dir: Path, argv: list[str], env: dict[str, str] | None = None,
           timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``argv`` run inside ``root_dir`` (arm64, through binfmt + qemu) with exactly ``env``.

    The environment is set inside the root by its own ``env -i``: loader variables given
    to the host's chroot would act on that x86_64 program instead (LD_TRACE_LOADED_OBJECTS
    would list chroot's own libraries)."""
    pairs = [f"{k}={v}" for k, v in {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **(env or {})}.items()]
    return subprocess.run(["chroot", str(root_dir), "/usr/bin/env", "-i", *pairs, *argv],
                          capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


_LIST_LINE = re.compile(r"^\s*(\S+) => (not found|\S+)")


def parse_ld_list(text: str) -> dict[str, str | None]:
    """ld.so's trace (ldd's format): name → the path it mapped (first listing), None for
    "not found"."""
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        m = _LIST_LINE.match(line)
        if m:
            out.setdefault(m.group(1), None if m.group(2) == "not found" else m.group(2))
    return out


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def wheel_elves(root_dir: Path, site: str = SITE) -> list[str]:
    """Every ELF file the torch_npu and vllm_ascend wheels installed (root-relative paths)."""
    base = root_dir / site.lstrip("/")
    out = []
    for top in sorted(base.iterdir()):
        if not top.name.startswith(("torch_npu", "vllm_ascend")) or top.name.endswith(".dist-info"):
            continue
        for dirpath, _dirs, files in os.walk(top):
            for f in sorted(files):
                p = Path(dirpath) / f
                if not p.is_symlink() and p.is_file() and is_elf(p):
                    out.append("/" + str(p.relative_to(root_dir)))
    return sorted(out)


def ld_list(root_dir, elf: str, llp: tuple[str, ...]) -> tuple[dict[str, str | None], str]:
    """The arm64 ld.so's own answer for ``elf``, run inside the userland under qemu, as
    ldd runs it (LD_TRACE_LOADED_OBJECTS=1: every name is listed, "not found" ones too;
    ``--list`` stops at the first missing one)."""
    env = {"LD_TRACE_LOADED_OBJECTS": "1", **({"LD_LIBRARY_PATH": ":".join(llp)} if llp else {})}
    r = chroot(root_dir, [LOADER, elf], env=env)
    return parse_ld_list(r.stdout), (r.stdout + r.stderr)


def ours(res: Resolver, host: LiveHost, elf: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for r in res.closure(elf).resolutions:
        out.setdefault(r.name, host.realpath(r.path) if r.found and r.path else None)
    return out


def resolver_for(root_dir, llp: tuple[str, ...]) -> tuple[Resolver, LiveHost]:
    host = LiveHost(str(root_dir), env={})
    assert host.info().arch == "aarch64", "an arm64 root is an aarch64 host"
    cache, why = usable_cache(host)
    assert cache is not None, why
    dirs, lib = default_dirs_for(host, "EM_AARCH64")
    return Resolver(host, cache, SearchContext(llp, dirs, lib, "aarch64")), host


def compare_all(root_dir, elves: list[str], llp: tuple[str, ...]) -> tuple[int, list, dict]:
    """(ELF files compared, disagreements, ld.so's answers per loadable ELF).

    An ELF the resolver sets aside as another machine's (vllm_ascend's AI Core kernels,
    e_machine 4137) must be one ld.so refuses to load; every other one must get the same
    file (realpath inside the root) or "not found" for every name ld.so lists."""
    res, host = resolver_for(root_dir, llp)
    compared, disagree, answers = 0, [], {}
    for elf in elves:
        theirs, raw = ld_list(root_dir, elf, llp)
        h = res.header(elf)
        compared += 1
        if isinstance(h, ElfHeader) and h.machine != "EM_AARCH64":
            if theirs or f"{elf}: cannot open shared object file" not in raw:
                disagree.append((elf, f"ours: built for {h.machine}, not loaded; ld.so: {raw[-300:]}"))
            continue
        if not theirs:
            disagree.append((elf, f"ld.so listed nothing: {raw[-500:]}"))
            continue
        theirs = {k: host.realpath(v) if v else None for k, v in theirs.items()
                  if not k.startswith(("ld-linux", "linux-vdso"))}
        mine = {k: v for k, v in ours(res, host, elf).items() if not k.startswith("ld-linux")}
        answers[elf] = theirs
        if mine != theirs:
            disagree.append((elf, {k: (mine.get(k, "-"), theirs.get(k, "-"))
                                   for k in set(mine) | set(theirs)
                                   if mine.get(k, "-") != theirs.get(k, "-")}))
    return compared, disagree, answers
