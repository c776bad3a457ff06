"""Device nodes and container plumbing: what torch_npu needs to open the NPUs.

Seed 003_d72edf74e71c5e11.txt (K8s): the container user needs read/write on /dev/davinci*,
the driver directory is mounted read-only, ASCEND_RT_VISIBLE_DEVICES="0" for a pod given one
card, and the service should not run as root. vllm-ascend #1440: without the driver mounts
torch_npu fails on libascend_hal.so.
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.devices import AscendDevices, ContainerInfo, can_rw
from ascend_doctor.probes.procs import ServiceEnv, ServiceProcesses
from ascend_doctor.probes.stack import AscendStack
from ascend_doctor.registry import check


@check("container.devices", title="Ascend device nodes exist and the service can open them",
       category=Category.CONTAINER, tags=("container", "devices", "npu"))
def devices(dev: AscendDevices, stack: AscendStack | None = None) -> Iterator[Finding]:
    if stack is not None:
        stack.require()  # no Ascend stack at all: one absence, said once (skip)
    nodes = list(dev.chips) + list(dev.control)
    if not dev.chips and all(n.stat is None and n.error is None for n in dev.control):
        yield Finding.fail("no Ascend device node at all (/dev/davinci<N>, "
                           + ", ".join(n.path for n in dev.control) + "): the driver is not "
                           "loaded, or the container was started without --device",
                           subject="/dev/davinci*", kb="ASC-CTR-001")
        return
    if not dev.chips:
        yield Finding.fail("no /dev/davinci<N> device node: the driver is not loaded, or the "
                           "container was started without --device /dev/davinciN",
                           subject="/dev/davinci*", kb="ASC-CTR-001")
    bad = 0
    for n in nodes:
        if n.stat is None:
            if n.path.startswith("/dev/davinci") and n.path[12:].isdigit():
                continue
            bad += 1
            why = n.error or "missing"
            yield Finding.fail(f"{n.path} is {why}: torch_npu cannot open the NPUs without it "
                               "(pass it with --device)", subject=n.path, kb="ASC-CTR-001")
            continue
        if not n.stat.is_char_device:
            bad += 1
            yield Finding.fail(f"{n.path} is not a character device (mode {n.stat.mode:o}): "
                               "a file or directory stands where the driver's node belongs",
                               subject=n.path, kb="ASC-CTR-001")
            continue
        u = dev.user
        if u is not None and not can_rw(n.stat, u.uid, u.gids):
            bad += 1
            yield Finding.fail(
                f"{n.path} (mode {n.stat.perm:04o}, owner {n.stat.uid}:{n.stat.gid}) is not "
                f"read/writable by the service (pid {u.pid}, uid {u.uid}, groups "
                f"{','.join(map(str, u.gids)) or 'none'})", subject=n.path,
                evidence={"mode": f"{n.stat.perm:04o}", "uid": n.stat.uid, "gid": n.stat.gid,
                          "service_uid": u.uid, "service_gids": list(u.gids)}, kb="ASC-CTR-002")
    if not bad and dev.chips:
        who = (f"the service (uid {dev.user.uid})" if dev.user else
               "(no vLLM server running: access not checked)")
        yield Finding.passed(f"{len(dev.chips)} davinci node(s) and "
                             f"{len(dev.control)} control node(s) present, usable by {who}",
                             evidence={"chips": dev.chip_indices})


def parse_visible(value: str) -> list[int] | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    return [int(p) for p in parts] if parts and all(p.isdigit() for p in parts) else None


@check("container.visible-devices", title="ASCEND_RT_VISIBLE_DEVICES names devices that exist",
       category=Category.CONTAINER, tags=("container", "devices", "env"))
def visible_devices(env: ServiceEnv, dev: AscendDevices) -> Iterator[Finding]:
    value = env.env.get("ASCEND_RT_VISIBLE_DEVICES")
    if value is None:
        yield Finding.skip(f"ASCEND_RT_VISIBLE_DEVICES is not set ({env.source})")
        return
    ids = parse_visible(value)
    n = len(dev.chips)
    ev = {"value": value, "source": env.source, "davinci": dev.chip_indices}
    if ids is None:
        yield Finding.fail(f"ASCEND_RT_VISIBLE_DEVICES={value!r} ({env.source}) is not a comma "
                           "list of device indices", evidence=ev, kb="ASC-CTR-003",
                           fix="service.env", fix_params={"var": "ASCEND_RT_VISIBLE_DEVICES"})
        return
    out = [i for i in ids if i >= n]
    if len(set(ids)) != len(ids):
        yield Finding.fail(f"ASCEND_RT_VISIBLE_DEVICES={value} lists a device twice", evidence=ev,
                           kb="ASC-CTR-003")
    if out:
        yield Finding.fail(
            f"ASCEND_RT_VISIBLE_DEVICES={value} ({env.source}) names device(s) "
            f"{', '.join(map(str, out))} but only {n} davinci node(s) are present "
            f"({', '.join(f'/dev/davinci{i}' for i in dev.chip_indices) or 'none'}); indices are "
            f"logical: in a container given /dev/davinci{dev.chip_indices[0] if n else 'N'} "
            "use 0", evidence=ev, kb="ASC-CTR-003", fix="service.env",
            fix_params={"var": "ASCEND_RT_VISIBLE_DEVICES",
                        "value": ",".join(str(i) for i in range(min(len(ids), n)))})
    elif len(set(ids)) == len(ids):
        yield Finding.passed(f"ASCEND_RT_VISIBLE_DEVICES={value}: {len(ids)} of {n} device(s)",
                             evidence=ev)


@check("container.driver-mounts", title="Inside a container, the host driver files are mounted",
       category=Category.CONTAINER, tags=("container", "driver"))
def driver_mounts(ctr: ContainerInfo) -> Iterator[Finding]:
    if not ctr.in_container:
        yield Finding.skip("not in a container (no /.dockerenv, /run/.containerenv, or container "
                           "cgroup in /proc/1/cgroup)")
        return
    missing = [p for p, ok in ctr.mounts.items() if not ok]
    if missing:
        yield Finding.fail(f"in a container ({ctr.evidence[0]}) without {', '.join(missing)}: "
                           "torch_npu then fails on libascend_hal.so / npu-smi is absent; mount "
                           "them from the host as ascend-docker-runtime does",
                           evidence={"missing": missing, "container": list(ctr.evidence)},
                           kb="ASC-CTR-004")
    else:
        yield Finding.passed(f"in a container ({ctr.evidence[0]}); all {len(ctr.mounts)} driver "
                             "mounts are present", evidence={"container": list(ctr.evidence)})


@check("container.non-root", title="The service does not run as root",
       category=Category.CONTAINER, tags=("container", "security"))
def non_root(procs: ServiceProcesses) -> Iterator[Finding]:
    if procs.primary is None:
        yield Finding.skip("no vLLM server process is running")
        return
    p = procs.primary.proc
    if p.uid == 0:
        yield Finding.warn(f"the vLLM server (pid {p.pid}) runs as root: give it a dedicated "
                           "user in the HwHiAiUser group (runAsUser in K8s) with rw on "
                           "/dev/davinci*", subject=f"pid {p.pid}", kb="ASC-CTR-005")
    elif p.uid > 0:
        yield Finding.passed(f"the vLLM server (pid {p.pid}) runs as uid {p.uid}")
    else:
        yield Finding.skip(f"the user of pid {p.pid} is unknown")
