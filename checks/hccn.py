"""HCCN / RoCE rules: each NPU's port is UP, its network detection succeeds, hccn.conf is
consistent, the optical module is present, PFC is on.

A down port or a failed detection is the node's RoCE fault: those findings share one cause
key (``ROCE_CAUSE``), and an HCCL connect timeout in the logs (``EI0006`` and its family)
names that key as what explains it, so the report shows one problem with the timeout under
it. The multi-node guides of vllm-ascend require every port `UP` and every detection
`success` before a job starts.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator

from ascend_doctor.i18n import T, join
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.hccn import (HCCN_CONF, NET_HEALTH_OK, HccnState, ToolAnswer,
                                       subnet)
from ascend_doctor.registry import check

ROCE_CAUSE = "hccn.roce"  # "this node's RoCE network is faulty": the symptoms join it
# HCCL codes that a RoCE fault on this node explains: connect/socket timeouts and the
# rendezvous failures that follow them
NET_TIMEOUT_CODES = frozenset({"EI0006", "EI0002", "EJ0002", "EJ0003"})
HCCN_TIMEOUT_S = 150.0  # six queries per device, 10 s each, stopping at the first hang


def explained_by_roce(aliases) -> list[str]:
    """The cause keys a log finding of a KB entry with these aliases can be explained by."""
    return [ROCE_CAUSE] if NET_TIMEOUT_CODES.intersection(a.upper() for a in aliases) else []


def _dev(d: int) -> str:
    return T("NPU device {dev}", dev=d)


def _tool_or_skip(st: HccnState) -> Iterator[Finding]:
    if st.tool is None:
        yield Finding.skip(T("hccn_tool is not installed (only {conf} is present): port "
                             "state cannot be read", conf=HCCN_CONF))
    elif not st.devices:
        yield Finding.skip(T("no NPU device to ask hccn_tool about (npu-smi gave no chips and "
                             "{conf} names none)", conf=HCCN_CONF))


def _failures(st: HccnState, name: str) -> Iterator[Finding]:
    """A hang is an error; a query that failed or answered unrecognisably is a warn."""
    for d in st.devices:
        a: ToolAnswer = getattr(d, name)
        if a.timed_out:
            yield Finding.error(T("`{cmd}` did not answer within the time limit and was "
                                  "killed; later queries were not run", cmd=" ".join(a.argv)),
                                subject=_dev(d.dev), kb="ASC-HW-004")
        elif not a.ok and not (a.failure or "").startswith("not run"):
            yield Finding.warn(T("`{cmd}` gave no answer: {reason}", cmd=" ".join(a.argv),
                                 reason=a.failure), subject=_dev(d.dev))


@check("hccn.link", title="Every NPU's RoCE port is UP", category=Category.NETWORK,
       tags=("net", "hccn", "npu"), timeout=HCCN_TIMEOUT_S)
def link(st: HccnState) -> Iterator[Finding]:
    skipped = list(_tool_or_skip(st))
    if skipped:
        yield from skipped
        return
    yield from _failures(st, "link")
    states = {d.dev: d.link.value for d in st.devices if d.link.ok}
    down = [dev for dev, v in states.items() if v != "UP"]
    for dev in down:
        yield Finding.fail(T("{subject}: RoCE port link is {state} (`hccn_tool -i {dev} -link "
                             "-g`); {up} of {n} ports are UP", subject=_dev(dev),
                             state=states[dev], dev=dev, up=len(states) - len(down),
                             n=len(states)),
                           subject=_dev(dev), evidence={"links": states}, kb="ASC-HW-004",
                           cause=ROCE_CAUSE)
    if states and not down:
        yield Finding.passed(T("all {n} RoCE port(s) are UP", n=len(states)),
                             evidence={"links": states})


@check("hccn.net_health", title="Every NPU's network detection succeeds",
       category=Category.NETWORK, tags=("net", "hccn", "npu"), timeout=HCCN_TIMEOUT_S)
def net_health(st: HccnState) -> Iterator[Finding]:
    skipped = list(_tool_or_skip(st))
    if skipped:
        yield from skipped
        return
    yield from _failures(st, "net_health")
    res = {d.dev: d.net_health.value for d in st.devices if d.net_health.ok}
    conf = st.conf
    bad = {dev: v for dev, v in res.items() if v != NET_HEALTH_OK}
    for dev, v in bad.items():
        target = conf.value(dev, "netdetect") if conf else None
        where = T(" towards netdetect address {ip}", ip=target) if target else ""
        make = Finding.warn if v in ("Init", "Detect ip set") else Finding.fail
        yield make(T("{subject}: network detection result is {result}{where} "
                     "(`hccn_tool -i {dev} -net_health -g`)", subject=_dev(dev), result=v,
                     where=where, dev=dev),
                   subject=_dev(dev), evidence={"net_health": res}, kb="ASC-HW-004",
                   cause=ROCE_CAUSE)
    if res and not bad:
        yield Finding.passed(T("network detection succeeds on all {n} device(s)", n=len(res)),
                             evidence={"net_health": res})


@check("hccn.conf", title="hccn.conf gives every NPU one address in one subnet",
       category=Category.NETWORK, tags=("net", "hccn", "config"))
def conf_consistent(st: HccnState) -> Iterator[Finding]:
    if st.conf_error:
        yield Finding.error(T("cannot read {conf}: {reason}", conf=HCCN_CONF,
                              reason=st.conf_error), evidence={"source": HCCN_CONF})
        return
    conf = st.conf
    if conf is None:
        yield Finding.skip(T("{conf} is absent: the RoCE addresses were never configured on "
                             "this host", conf=HCCN_CONF))
        return
    problems = 0
    addrs = {d: v["address"] for d, v in conf.devices.items() if v.get("address")}
    if conf.bad_lines:
        problems += 1
        yield Finding.warn(T("{conf}: {n} line(s) are not `key_N=value`: {lines}",
                             conf=HCCN_CONF, n=len(conf.bad_lines),
                             lines="; ".join(f"{n}: {t}" for n, t in conf.bad_lines[:5])),
                           subject=HCCN_CONF, kb="ASC-HW-005")
    if conf.duplicate_keys:
        problems += 1
        yield Finding.warn(T("{conf} sets {keys} more than once (the last value wins)",
                             conf=HCCN_CONF, keys=", ".join(conf.duplicate_keys)),
                           subject=HCCN_CONF, kb="ASC-HW-005")
    by_addr: dict[str, list[int]] = {}
    for d, a in addrs.items():
        by_addr.setdefault(a, []).append(d)
    for a, devs in sorted(by_addr.items()):
        if len(devs) > 1:
            problems += 1
            yield Finding.fail(T("{conf} gives address {ip} to devices {devs}", conf=HCCN_CONF,
                                 ip=a, devs=", ".join(map(str, devs))),
                               subject=HCCN_CONF, kb="ASC-HW-005",
                               evidence={"address": a, "devices": devs})
    missing = [d for d in st.device_ids if d not in addrs]
    if missing and addrs:
        problems += 1
        yield Finding.fail(T("{conf} has no address_N for device(s) {devs} ({n} of {total} "
                             "configured)", conf=HCCN_CONF, devs=", ".join(map(str, missing)),
                             n=len(addrs), total=len(st.device_ids)),
                           subject=HCCN_CONF, kb="ASC-HW-005", evidence={"missing": missing})
    nets = {d: subnet(a, conf.value(d, "netmask") or "") for d, a in addrs.items()}
    invalid = [d for d, n in nets.items() if n is None]
    for d in invalid:
        problems += 1
        yield Finding.fail(T("{conf}: device {dev} has address {ip} with netmask {mask}, "
                             "which is not a valid IPv4 network", conf=HCCN_CONF, dev=d,
                             ip=addrs[d], mask=conf.value(d, "netmask") or "(none)"),
                           subject=HCCN_CONF, kb="ASC-HW-005")
    counts = Counter(str(n) for n in nets.values() if n is not None)
    if len(counts) > 1:
        problems += 1
        main, _ = counts.most_common(1)[0]
        odd = {d: str(n) for d, n in nets.items() if n is not None and str(n) != main}
        yield Finding.warn(T("{conf}: devices are not in one subnet: most are in {main}, "
                             "{odd}", conf=HCCN_CONF, main=main,
                             odd=join(", ", [T("device {dev} in {net}", dev=d, net=n)
                                             for d, n in sorted(odd.items())])),
                           subject=HCCN_CONF, kb="ASC-HW-005",
                           evidence={"subnets": {d: str(n) for d, n in nets.items()}})
    for d, n in sorted(nets.items()):
        for key in ("netdetect", "gateway"):
            v = conf.value(d, key)
            other = subnet(v, "255.255.255.255") if v else None
            if n is not None and v and other is not None and other.network_address not in n:
                problems += 1
                yield Finding.warn(T("{conf}: {key}_{dev}={ip} is outside the device's "
                                     "subnet {net}", conf=HCCN_CONF, key=key, dev=d, ip=v,
                                     net=str(n)), subject=HCCN_CONF, kb="ASC-HW-005")
    for dv in st.devices:
        if dv.ip.ok and dv.dev in addrs and dv.ip.value[0] != addrs[dv.dev]:
            problems += 1
            yield Finding.warn(T("device {dev} has address {live} but {conf} says {ip}: the "
                                 "file was edited and not applied, or the device was set by "
                                 "hand", dev=dv.dev, live=dv.ip.value[0], conf=HCCN_CONF,
                                 ip=addrs[dv.dev]),
                               subject=_dev(dv.dev), kb="ASC-HW-005")
        want_gw = conf.value(dv.dev, "gateway")
        if dv.gateway.ok and want_gw and dv.gateway.value != want_gw:
            problems += 1
            yield Finding.warn(T("device {dev} uses gateway {live} but {conf} says {ip}",
                                 dev=dv.dev, live=dv.gateway.value, conf=HCCN_CONF, ip=want_gw),
                               subject=_dev(dv.dev), kb="ASC-HW-005")
    if not problems:
        yield Finding.passed(T("{conf}: {n} device address(es), one per device, in {nets}",
                               conf=HCCN_CONF, n=len(addrs),
                               nets=", ".join(sorted(counts)) or "-"),
                             evidence={"addresses": addrs})


@check("hccn.optical", title="Every NPU's optical module is present",
       category=Category.NETWORK, tags=("net", "hccn", "npu"), timeout=HCCN_TIMEOUT_S)
def optical(st: HccnState) -> Iterator[Finding]:
    skipped = list(_tool_or_skip(st))
    if skipped:
        yield from skipped
        return
    yield from _failures(st, "optical")
    ok = 0
    for d in st.devices:
        if not d.optical.ok:
            continue
        present = str(d.optical.value.get("present", "")).lower()
        if present != "present":
            yield Finding.fail(T("{subject}: optical module is {state} (`hccn_tool -i {dev} "
                                 "-optical -g`)", subject=_dev(d.dev), state=present or "?",
                                 dev=d.dev),
                               subject=_dev(d.dev), evidence=dict(d.optical.value),
                               kb="ASC-HW-004", cause=ROCE_CAUSE)
        else:
            ok += 1
    if ok and ok == len(st.devices):
        yield Finding.passed(T("optical modules present on all {n} device(s)", n=ok))


@check("hccn.pfc", title="PFC is enabled, on the same priorities, on every RoCE port",
       category=Category.NETWORK, tags=("net", "hccn", "npu"), timeout=HCCN_TIMEOUT_S)
def pfc(st: HccnState) -> Iterator[Finding]:
    skipped = list(_tool_or_skip(st))
    if skipped:
        yield from skipped
        return
    yield from _failures(st, "pfc")
    pr = {d.dev: d.pfc.value for d in st.devices if d.pfc.ok}
    if not pr:
        return
    off = [d for d, p in pr.items() if not p]
    shapes = Counter(pr.values())
    ev = {"pfc_priorities": {d: list(p) for d, p in pr.items()}}
    if off:
        yield Finding.warn(T("PFC is off on device(s) {devs}: RoCEv2 without PFC drops packets "
                             "under congestion and HCCL retransmits or times out",
                             devs=", ".join(map(str, off))), evidence=ev, kb="ASC-HW-004")
    if len(shapes) > 1:
        main = shapes.most_common(1)[0][0]
        odd = [d for d, p in pr.items() if p != main and p]
        if odd:
            yield Finding.warn(T("PFC priorities differ: most ports use {main}, device(s) "
                                 "{devs} do not", main=list(main),
                                 devs=", ".join(map(str, odd))), evidence=ev, kb="ASC-HW-004")
    if not off and len(shapes) == 1:
        yield Finding.passed(T("PFC on priority {p} on all {n} port(s)",
                               p=", ".join(map(str, next(iter(shapes)))), n=len(pr)),
                             evidence=ev)
