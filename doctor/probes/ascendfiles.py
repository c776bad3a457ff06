"""Where Ascend shared objects lie on disk (bounded), the active CANN toolkit, and the
libraries a service process has mapped — the facts that turn "libhccl.so not found" into
"it is at /usr/local/Ascend/…/lib64, which the service's LD_LIBRARY_PATH lacks"."""

from __future__ import annotations

import posixpath
import re

from ..errors import SourceMissing
from ..i18n import N_, T
from ..host import Host
from dataclasses import dataclass, field
from ..registry import provider
from .procs import ServiceEnv, ServiceProcesses

ASCEND_ROOT = "/usr/local/Ascend"
# library directories of the driver, toolkit (classic and cann-<ver> layouts), NNAL/ATB
LIB_GLOBS = ("*/lib64/*.so*", "*/lib64/*/*.so*", "*/*/lib64/*.so*", "*/*/lib64/*/*.so*",
             "*/*/lib64/plugin/*/*.so*", "*/*/*/lib64/*.so*", "*/*/*/lib64/*/*.so*",
             "*/*/*/*/lib64/*.so*", "nnal/*/*/*/cxx_abi_*/lib/*.so*")
MAX_FILES = 20000
_VERSION_DIR = re.compile(r"/Ascend/(?:ascend-toolkit/(?P<tk>[^/]+)|(?P<cann>cann-[^/]+))/")


@dataclass(frozen=True, eq=False)
class AscendLibIndex:
    """basename → paths of shared objects under the Ascend roots."""

    roots: tuple[str, ...]
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    truncated: bool = False

    def where(self, name: str) -> tuple[str, ...]:
        return self.files.get(name, ())


@dataclass(frozen=True, eq=False)
class ActiveToolkit:
    """The CANN version directories the `latest` / `cann` links point at."""

    links: dict[str, str]  # link path → realpath

    @property
    def version_dirs(self) -> set[str]:
        return {version_dir(t) or t for t in self.links.values()}


def version_dir(path: str) -> str | None:
    """The CANN version directory a path lies in (…/ascend-toolkit/8.0.0, …/cann-8.5.0)."""
    m = _VERSION_DIR.search(path + "/")
    if not m or m.group("tk") == "latest":
        return None
    return path[:m.end() - 1]


def ascend_roots(env: dict[str, str], own: dict[str, str]) -> tuple[str, ...]:
    roots = [ASCEND_ROOT]
    for e in (env, own):
        home = e.get("HOME")
        if home and posixpath.join(home, "Ascend") not in roots:
            roots.append(posixpath.join(home, "Ascend"))
    return tuple(roots)


@provider
def gather_ascend_libs(host: Host, env: ServiceEnv) -> AscendLibIndex:
    roots = ascend_roots(env.env, host.environ())
    files: dict[str, list[str]] = {}
    count = 0
    truncated = False
    for root in roots:
        for pat in LIB_GLOBS:
            for p in host.glob(posixpath.join(root, pat)):
                count += 1
                if count > MAX_FILES:
                    truncated = True
                    break
                files.setdefault(posixpath.basename(p), []).append(p)
    return AscendLibIndex(roots, {k: tuple(dict.fromkeys(v)) for k, v in files.items()},
                          truncated)


@provider
def gather_active_toolkit(host: Host) -> ActiveToolkit:
    links = {}
    for link in (f"{ASCEND_ROOT}/ascend-toolkit/latest", f"{ASCEND_ROOT}/cann"):
        if host.exists(link):
            links[link] = host.realpath(link)
    if not links:
        raise SourceMissing(f"{ASCEND_ROOT}/ascend-toolkit/latest",
                            T("no CANN toolkit link (ascend-toolkit/latest or cann)"))
    return ActiveToolkit(links)


def parse_maps(text: str) -> list[str]:
    """File paths mapped in a /proc/<pid>/maps image, in first-mapped order."""
    out: dict[str, None] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            path = parts[5].removesuffix(" (deleted)")
            out.setdefault(path, None)
    return list(out)


@dataclass(frozen=True, eq=False)
class MappedLibs:
    """The shared objects the service process has mapped (from /proc/<pid>/maps)."""

    pid: int
    paths: tuple[str, ...]  # shared objects mapped in the service process

    def by_name(self) -> dict[str, str]:
        return {posixpath.basename(p): p for p in self.paths}


@provider
def gather_mapped_libs(host: Host, procs: ServiceProcesses) -> MappedLibs:
    if procs.primary is None:
        raise SourceMissing(N_("vLLM service process"), T("no vLLM server is running"))
    pid = procs.primary.pid
    text = host.proc_read(pid, "maps").decode("utf-8", "replace")
    paths = [p for p in parse_maps(text) if ".so" in posixpath.basename(p)]
    return MappedLibs(pid, tuple(paths))
