"""Ascend device nodes, the service's user and groups, and whether we run in a container.

The driver exposes /dev/davinci<N> (one per chip), /dev/davinci_manager, /dev/devmm_svm and
/dev/hisi_hdc; a container needs all of them passed in (``--device``) plus the driver files
that ascend-docker-runtime mounts (facts/ascend-stack.md §2.1). Access is judged the way
the kernel does for an open(O_RDWR): owner, group (primary or supplementary), other.
"""

from __future__ import annotations

import re

from ..errors import SourceError, SourceMissing
from ..host import Host, StatInfo
from dataclasses import dataclass
from ..registry import provider
from .svcaccess import parse_status_ids  # noqa: F401  (re-exported)
from .procs import ServiceProcesses

CONTROL_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
# what ascend-docker-runtime / the vllm-ascend `docker run` mount from the host
CONTAINER_MOUNTS = ("/usr/local/Ascend/driver/lib64", "/usr/local/Ascend/driver/version.info",
                    "/usr/local/dcmi", "/usr/local/bin/npu-smi", "/etc/ascend_install.info")
_CGROUP_HINT = re.compile(r"docker|kubepods|containerd|crio|libpod|lxc", re.IGNORECASE)


@dataclass(frozen=True, eq=False)
class DeviceNode:
    """One /dev node: its stat, or why it could not be read."""

    path: str
    stat: StatInfo | None
    error: str | None = None  # why it could not be stat'ed (None + no stat = absent)


@dataclass(frozen=True, eq=False)
class ServiceUser:
    """Who the service runs as: uid and groups, for the device permission test."""

    pid: int
    uid: int
    gids: tuple[int, ...]  # primary + supplementary (from /proc/<pid>/status)


@dataclass(frozen=True, eq=False)
class AscendDevices:
    """The davinci chip and control nodes, and the service's user."""

    chips: tuple[DeviceNode, ...]  # /dev/davinci<N>, sorted by N
    control: tuple[DeviceNode, ...]
    user: ServiceUser | None = None

    @property
    def chip_indices(self) -> list[int]:
        return [int(re.sub(r"\D", "", n.path.rsplit("davinci", 1)[1])) for n in self.chips]


@dataclass(frozen=True, eq=False)
class ContainerInfo:
    """Whether we run in a container (and the evidence), and which Ascend mounts it has."""

    in_container: bool
    evidence: tuple[str, ...]
    mounts: dict[str, bool]  # CONTAINER_MOUNTS -> present


def can_rw(st: StatInfo, uid: int, gids: tuple[int, ...]) -> bool:
    if uid == 0:
        return True
    if st.uid == uid:
        return st.perm & 0o600 == 0o600
    if st.gid in gids:
        return st.perm & 0o060 == 0o060
    return st.perm & 0o006 == 0o006


def _node(host: Host, path: str) -> DeviceNode:
    try:
        return DeviceNode(path, host.stat(path))
    except SourceMissing:
        return DeviceNode(path, None)
    except SourceError as exc:
        return DeviceNode(path, None, exc.reason)


@provider
def gather_devices(host: Host, procs: ServiceProcesses | None) -> AscendDevices:
    paths = [p for p in host.glob("/dev/davinci*") if re.fullmatch(r"/dev/davinci\d+", p)]
    paths.sort(key=lambda p: int(p[len("/dev/davinci"):]))
    user = None
    if procs is not None and procs.primary is not None:
        pid = procs.primary.pid
        try:
            uid, gids = parse_status_ids(host.proc_read(pid, "status").decode("utf-8", "replace"))
        except (SourceMissing, SourceError):
            uid, gids = None, ()
        if uid is None and procs.primary.proc.uid >= 0:
            uid = procs.primary.proc.uid
        if uid is not None:
            user = ServiceUser(pid, uid, gids)
    return AscendDevices(tuple(_node(host, p) for p in paths),
                         tuple(_node(host, p) for p in CONTROL_NODES), user)


def container_evidence(dockerenv: bool, cgroup: str, containerenv: bool) -> tuple[str, ...]:
    ev = []
    if dockerenv:
        ev.append("/.dockerenv exists")
    if containerenv:
        ev.append("/run/.containerenv exists")
    for line in cgroup.splitlines():
        if _CGROUP_HINT.search(line):
            ev.append(f"/proc/1/cgroup: {line.strip()[:120]}")
            break
    return tuple(ev)


@provider
def gather_container(host: Host) -> ContainerInfo:
    try:
        cgroup = host.read_text("/proc/1/cgroup", 65536)
    except (SourceMissing, SourceError):
        cgroup = ""
    ev = container_evidence(host.exists("/.dockerenv"), cgroup, host.exists("/run/.containerenv"))
    mounts = {p: host.exists(p) for p in CONTAINER_MOUNTS}
    return ContainerInfo(bool(ev), ev, mounts)
