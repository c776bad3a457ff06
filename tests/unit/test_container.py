"""Device nodes (real character devices made with mknod when root), the service's access,
ASCEND_RT_VISIBLE_DEVICES, driver mounts inside containers, and root services."""

from __future__ import annotations

import os
import stat

import pytest

from ascend_doctor.checks.container import devices, driver_mounts, non_root, visible_devices
from ascend_doctor.host import LiveHost, ProcInfo
from ascend_doctor.model import Status
from ascend_doctor.probes.devices import (CONTAINER_MOUNTS, AscendDevices, ContainerInfo, DeviceNode,
                                   ServiceUser, gather_container, gather_devices,
                                   parse_status_ids)
from ascend_doctor.probes.procs import ServiceEnv, ServiceProcess, ServiceProcesses

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of character devices needs root")
STATUS = "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t27 1001\n"


def mknodes(root, n=2, mode=0o660, gid=1001):
    for name in [f"davinci{i}" for i in range(n)] + ["davinci_manager", "devmm_svm", "hisi_hdc"]:
        p = root.path(f"/dev/{name}")
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mknod(p, stat.S_IFCHR | mode, os.makedev(1, 3))  # the /dev/null major:minor
        os.chown(p, 0, gid)
        os.chmod(p, mode)  # mknod applies the umask


def service(root, uid=1000):
    root.write("/proc/4711/stat", "4711 (python3) S 1 4711 4711 0 -1\n")
    root.write("/proc/4711/cmdline", "python3\0-m\0vllm.entrypoints.openai.api_server\0")
    root.write("/proc/4711/status", STATUS.replace("1000", str(uid)))
    return ServiceProcesses((ServiceProcess(ProcInfo(4711, 1, "python3", ("python3",), uid=uid)),))


def test_parse_status_ids():
    assert parse_status_ids(STATUS) == (1000, (1000, 27, 1001))


@root_only
def test_devices_present_and_accessible_through_group(sysroot):
    mknodes(sysroot)
    dev = gather_devices(sysroot.host(), service(sysroot))
    assert dev.chip_indices == [0, 1] and dev.user.gids == (1000, 27, 1001)
    assert [f.status for f in devices(dev)] == [Status.PASS]


@root_only
def test_devices_not_accessible_to_service_user(sysroot):
    mknodes(sysroot, gid=0)
    fs = list(devices(gather_devices(sysroot.host(), service(sysroot))))
    assert len(fs) == 5 and all(f.status == Status.FAIL for f in fs)
    assert "not read/writable by the service (pid 4711, uid 1000" in fs[0].message
    assert fs[0].kb == ("ASC-CTR-002",)


@root_only
def test_missing_control_node(sysroot):
    mknodes(sysroot)
    os.unlink(sysroot.path("/dev/hisi_hdc"))
    fs = [f for f in devices(gather_devices(sysroot.host(), None)) if f.status != Status.PASS]
    assert len(fs) == 1 and "/dev/hisi_hdc is missing" in fs[0].message


def test_regular_file_instead_of_device_is_named(sysroot):
    for name in ("davinci0", "davinci_manager", "devmm_svm", "hisi_hdc"):
        sysroot.write(f"/dev/{name}", "")
    fs = list(devices(gather_devices(sysroot.host(), None)))
    assert all(f.status == Status.FAIL and "not a character device" in f.message for f in fs)


def test_no_device_nodes_at_all(sysroot):
    (f,) = devices(gather_devices(sysroot.host(), None))
    assert f.status == Status.FAIL and f.kb == ("ASC-CTR-001",)


def _dev(n: int) -> AscendDevices:
    st = LiveHost("/").stat("/dev/null")
    return AscendDevices(tuple(DeviceNode(f"/dev/davinci{i}", st) for i in range(n)), ())


def test_visible_devices_rules():
    env = lambda v: ServiceEnv({"ASCEND_RT_VISIBLE_DEVICES": v}, "/proc/4711/environ", 4711)
    (f,) = visible_devices(env("0"), _dev(1))
    assert f.status == Status.PASS
    (f,) = visible_devices(env("1"), _dev(1))  # seed 003: a one-card pod must use 0
    assert f.status == Status.FAIL and "only 1 davinci node(s)" in f.message and "use 0" in f.message
    assert f.fix.id == "service.env" and f.fix.params["value"] == "0"
    (f,) = visible_devices(env("0,x"), _dev(2))
    assert f.status == Status.FAIL and "not a comma list" in f.message
    (f,) = visible_devices(ServiceEnv({}, "own"), _dev(2))
    assert f.status == Status.SKIP


def test_driver_mounts_in_container(sysroot):
    sysroot.write("/.dockerenv", "")
    sysroot.write("/proc/1/cgroup", "0::/kubepods/besteffort/pod1234/abcd\n")
    sysroot.mkdir("/usr/local/Ascend/driver/lib64")
    ctr = gather_container(sysroot.host())
    assert ctr.in_container and ctr.mounts["/usr/local/Ascend/driver/lib64"]
    (f,) = driver_mounts(ctr)
    assert f.status == Status.FAIL and "/usr/local/dcmi" in f.message and f.kb == ("ASC-CTR-004",)
    for p in CONTAINER_MOUNTS[1:]:
        sysroot.write(p, "x")
    (f,) = driver_mounts(gather_container(sysroot.host()))
    assert f.status == Status.PASS


def test_bare_metal_skips_driver_mounts(sysroot):
    sysroot.write("/proc/1/cgroup", "0::/init.scope\n")
    (f,) = driver_mounts(gather_container(sysroot.host()))
    assert f.status == Status.SKIP


def test_non_root_rule(sysroot):
    (f,) = non_root(service(sysroot, uid=0))
    assert f.status == Status.WARN and f.kb == ("ASC-CTR-005",)
    (f,) = non_root(service(sysroot, uid=1000))
    assert f.status == Status.PASS
    (f,) = non_root(ServiceProcesses(()))
    assert f.status == Status.SKIP


def test_container_without_any_ascend_stack_is_one_absence(sysroot):
    """A container given no NPU at all: the run says 'no Ascend stack', not 'mounts missing'."""
    from ascend_doctor.probes.stack import NO_STACK_SOURCE, AscendStack
    from ascend_doctor.errors import SourceMissing
    sysroot.write("/.dockerenv", "")
    ctr = gather_container(sysroot.host())
    assert ctr.in_container
    with pytest.raises(SourceMissing) as e:
        list(driver_mounts(ctr, AscendStack()))
    assert e.value.source == NO_STACK_SOURCE
    # a device node alone is a stack: the missing driver mounts are then a real failure
    (f,) = driver_mounts(ctr, AscendStack(devices=("/dev/davinci0",)))
    assert f.status == Status.FAIL and f.kb == ("ASC-CTR-004",)
