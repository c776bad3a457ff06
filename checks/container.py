"""Device nodes and container plumbing: what torch_npu needs to open the NPUs.

Seed 003_d72edf74e71c5e11.txt (K8s): the container user needs read/write on /dev/davinci*,
the driver directory is mounted read-only, ASCEND_RT_VISIBLE_DEVICES="0" for a pod given one
card, and the service should not run as root. vllm-ascend #1440: without the driver mounts
torch_npu fails on libascend_hal.so.
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.i18n import T
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
        yield Finding.fail(T("no Ascend device node at all (/dev/davinci<N>, {nodes}): the "
                             "driver is not loaded, or the container was started without "
                             "--device", nodes=", ".join(n.path for n in dev.control)),
                           subject="/dev/davinci*", kb="ASC-CTR-001")
        return
    if not dev.chips:
        yield Finding.fail(T("no /dev/davinci<N> device node: the driver is not loaded, or the "
                             "container was started without --device /dev/davinciN"),
                           subject="/dev/davinci*", kb="ASC-CTR-001")
    bad = 0
    for n in nodes:
        if n.stat is None:
            if n.path.startswith("/dev/davinci") and n.path[12:].isdigit():
                continue
            bad += 1
            why = n.error or T("missing")
            yield Finding.fail(T("{path} is {why}: torch_npu cannot open the NPUs without it "
                                 "(pass it with --device)", path=n.path, why=why),
                               subject=n.path, kb="ASC-CTR-001")
            continue
        if not n.stat.is_char_device:
            bad += 1
            yield Finding.fail(T("{path} is not a character device (mode {mode}): a file or "
                                 "directory stands where the driver's node belongs",
                                 path=n.path, mode=f"{n.stat.mode:o}"),
                               subject=n.path, kb="ASC-CTR-001")
            continue
        u = dev.user
        if u is not None and not can_rw(n.stat, u.uid, u.gids):
            bad += 1
            yield Finding.fail(
                T("{path} (mode {mode}, owner {uid}:{gid}) is not read/writable by the service "
                  "(pid {pid}, uid {suid}, groups {groups})", path=n.path,
                  mode=f"{n.stat.perm:04o}", uid=n.stat.uid, gid=n.stat.gid, pid=u.pid,
                  suid=u.uid, groups=",".join(map(str, u.gids)) or T("none")), subject=n.path,
                evidence={"mode": f"{n.stat.perm:04o}", "uid": n.stat.uid, "gid": n.stat.gid,
                          "service_uid": u.uid, "service_gids": list(u.gids)}, kb="ASC-CTR-002")
    if not bad and dev.chips:
        who = (T("the service (uid {uid})", uid=dev.user.uid) if dev.user else
               T("(no vLLM server running: access not checked)"))
        yield Finding.passed(T("{chips} davinci node(s) and {control} control node(s) present, "
                               "usable by {who}", chips=len(dev.chips),
                               control=len(dev.control), who=who),
                             evidence={"chips": dev.chip_indices})


def parse_visible(value: str) -> list[int] | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    return [int(p) for p in parts] if parts and all(p.isdigit() for p in parts) else None


@check("container.visible-devices", title="ASCEND_RT_VISIBLE_DEVICES names devices that exist",
       category=Category.CONTAINER, tags=("container", "devices", "env"))
def visible_devices(env: ServiceEnv, dev: AscendDevices) -> Iterator[Finding]:
    value = env.env.get("ASCEND_RT_VISIBLE_DEVICES")
    if value is None:
        yield Finding.skip(T("ASCEND_RT_VISIBLE_DEVICES is not set ({source})",
                             source=env.source))
        return
    ids = parse_visible(value)
    n = len(dev.chips)
    ev = {"value": value, "source": env.source, "davinci": dev.chip_indices}
    if ids is None:
        yield Finding.fail(T("ASCEND_RT_VISIBLE_DEVICES={value} ({source}) is not a comma "
                             "list of device indices", value=repr(value), source=env.source),
                           evidence=ev, kb="ASC-CTR-003",
                           fix="service.env", fix_params={"var": "ASCEND_RT_VISIBLE_DEVICES"})
        return
    out = [i for i in ids if i >= n]
    if len(set(ids)) != len(ids):
        yield Finding.fail(T("ASCEND_RT_VISIBLE_DEVICES={value} lists a device twice",
                             value=value), evidence=ev,
                           kb="ASC-CTR-003")
    if out:
        yield Finding.fail(
            T("ASCEND_RT_VISIBLE_DEVICES={value} ({source}) names device(s) {out} but only {n} "
              "davinci node(s) are present ({nodes}); indices are logical: in a container "
              "given /dev/davinci{first} use 0", value=value, source=env.source,
              out=", ".join(map(str, out)), n=n,
              nodes=", ".join(f"/dev/davinci{i}" for i in dev.chip_indices) or T("none"),
              first=dev.chip_indices[0] if n else "N"),
            evidence=ev, kb="ASC-CTR-003", fix="service.env",
            fix_params={"var": "ASCEND_RT_VISIBLE_DEVICES",
                        "value": ",".join(str(i) for i in range(min(len(ids), n)))})
    elif len(set(ids)) == len(ids):
        yield Finding.passed(T("ASCEND_RT_VISIBLE_DEVICES={value}: {k} of {n} device(s)",
                               value=value, k=len(ids), n=n),
                             evidence=ev)


@check("container.driver-mounts", title="Inside a container, the host driver files are mounted",
       category=Category.CONTAINER, tags=("container", "driver"))
def driver_mounts(ctr: ContainerInfo, stack: AscendStack | None = None) -> Iterator[Finding]:
    if not ctr.in_container:
        yield Finding.skip(T("not in a container (no /.dockerenv, /run/.containerenv, or "
                             "container cgroup in /proc/1/cgroup)"))
        return
    if stack is not None:
        # no device node, driver, CANN or service either: a container that was not given
        # NPUs at all — one absence, said once, not a critical "mounts missing"
        stack.require()
    missing = [p for p, ok in ctr.mounts.items() if not ok]
    if missing:
        yield Finding.fail(T("in a container ({why}) without {missing}: torch_npu then fails "
                             "on libascend_hal.so / npu-smi is absent; mount them from the host "
                             "as ascend-docker-runtime does", why=ctr.evidence[0],
                             missing=", ".join(missing)),
                           evidence={"missing": missing, "container": list(ctr.evidence)},
                           kb="ASC-CTR-004")
    else:
        yield Finding.passed(T("in a container ({why}); all {n} driver mounts are present",
                               why=ctr.evidence[0], n=len(ctr.mounts)),
                             evidence={"container": list(ctr.evidence)})


@check("container.non-root", title="The service does not run as root",
       category=Category.CONTAINER, tags=("container", "security"))
def non_root(procs: ServiceProcesses) -> Iterator[Finding]:
    if procs.primary is None:
        yield Finding.skip(T("no vLLM server process is running"))
        return
    p = procs.primary.proc
    if p.uid == 0:
        yield Finding.warn(T("the vLLM server (pid {pid}) runs as root: give it a dedicated "
                             "user in the HwHiAiUser group (runAsUser in K8s) with rw on "
                             "/dev/davinci*", pid=p.pid), subject=f"pid {p.pid}", kb="ASC-CTR-005")
    elif p.uid > 0:
        yield Finding.passed(T("the vLLM server (pid {pid}) runs as uid {uid}", pid=p.pid,
                               uid=p.uid))
    else:
        yield Finding.skip(T("the user of pid {pid} is unknown", pid=p.pid))
