"""HCCN / RoCE rules: each NPU's port is UP at the speed of the others, its network detection
succeeds, hccn.conf is consistent, the optical module is present, PFC is on for the traffic
class HCCL's DSCP maps to.

A down port or a failed detection is the node's RoCE fault: those findings share one cause
key (``ROCE_CAUSE``), and an HCCL connect timeout in the logs (``EI0006`` and its family)
names that key as what explains it, so the report shows one problem with the timeout under
it. The multi-node guides of vllm-ascend require every port `UP` and every detection
`success` before a job starts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterator

from ascend_doctor.i18n import T, join
from ascend_doctor.model import Category, Finding
from ascend_doctor.probes.hccn import (HCCN_CONF, NET_HEALTH_OK, HccnState, ToolAnswer,
                                       subnet)
from ascend_doctor.probes.procs import ServiceEnv
from ascend_doctor.registry import check

ROCE_CAUSE = "hccn.roce"  # "this node's RoCE network is faulty": the symptoms join it
# HCCL codes that a RoCE fault on this node explains: connect/socket timeouts and the
# rendezvous failures that follow them
NET_TIMEOUT_CODES = frozenset({"EI0006", "EI0002", "EJ0002", "EJ0003"})
HCCN_TIMEOUT_S = 150.0  # eight queries per device, 10 s at most, stopping at the first hang
DEFAULT_RDMA_TC = 132  # HCCL_RDMA_TC's default (CANN environment variable reference)


def explained_by_roce(aliases) -> list[str]:
    """The cause keys a log finding of a KB entry with these aliases can be explained by."""
    return [ROCE_CAUSE] if NET_TIMEOUT_CODES.intersection(a.upper() for a in aliases) else []


def _dev(d: int) -> str:
    return T("NPU device {dev}", dev=d)


def _answers(st: HccnState, name: str) -> tuple[list[Finding], dict[int, Any] | None]:
    """Every hccn check's prologue: (findings, {device: parsed answer}).

    Without hccn_tool or without a device to ask, one skip and ``None``; otherwise a hang is
    an error, a query that failed or answered unrecognisably a warn naming its command, and
    the answers that parsed come back by device."""
    if st.tool is None:
        return [Finding.skip(T("hccn_tool is not installed (only {conf} is present): port "
                               "state cannot be read", conf=HCCN_CONF))], None
    if not st.devices:
        return [Finding.skip(T("no NPU device to ask hccn_tool about (npu-smi gave no chips "
                               "and {conf} names none)", conf=HCCN_CONF))], None
    found: list[Finding] = []
    values: dict[int, Any] = {}
    for d in st.devices:
        a: ToolAnswer | None = getattr(d, name)
        if a is None:
            continue
        if a.timed_out:
            found.append(Finding.error(T("`{cmd}` did not answer within the time limit and was "
                                         "killed; later queries were not run",
                                         cmd=" ".join(a.argv)),
                                       subject=_dev(d.dev), kb="ASC-HW-004"))
        elif not a.ok and not (a.failure or "").startswith("not run"):
            found.append(Finding.warn(T("`{cmd}` gave no answer: {reason}", cmd=" ".join(a.argv),
                                        reason=a.failure), subject=_dev(d.dev)))
        elif a.ok:
            values[d.dev] = a.value
    return found, values


@check("hccn.link", title="Every NPU's RoCE port is UP, at the same speed",
       category=Category.NETWORK, tags=("net", "hccn", "npu"), timeout=HCCN_TIMEOUT_S)
def link(st: HccnState) -> Iterator[Finding]:
    pre, states = _answers(st, "link")
    yield from pre
    if states is None:
        return
    down = [dev for dev, v in states.items() if v != "UP"]
    for dev in down:
        yield Finding.fail(T("{subject}: RoCE port link is {state} (`hccn_tool -i {dev} -link "
                             "-g`); {up} of {n} ports are UP", subject=_dev(dev),
                             state=states[dev], dev=dev, up=len(states) - len(down),
                             n=len(states)),
                           subject=_dev(dev), evidence={"links": states}, kb="ASC-HW-004",
                           cause=ROCE_CAUSE)
    spre, speeds = _answers(st, "speed")
    yield from spre
    up_speeds = {d: v for d, v in (speeds or {}).items() if d not in down and v}
    slow = []
    if len(set(up_speeds.values())) > 1:
        top = max(up_speeds.values())
        slow = sorted(d for d, v in up_speeds.items() if v < top)
        yield Finding.warn(T("RoCE port speed differs: device(s) {devs} negotiated {slow} while "
                             "the fastest port runs {top} Mb/s (cable, optical module or switch "
                             "port of the slow one)",
                             devs=", ".join(map(str, slow)),
                             slow=", ".join(f"{up_speeds[d]} Mb/s" for d in slow), top=top),
                           subject=", ".join(str(_dev(d)) for d in slow),
                           evidence={"speeds_mbps": up_speeds}, kb="ASC-HW-004")
    if states and not down and not slow:
        at = T(" at {speed} Mb/s", speed=next(iter(up_speeds.values()))) if up_speeds else ""
        yield Finding.passed(T("all {n} RoCE port(s) are UP{at}", n=len(states), at=at),
                             evidence={"links": states, "speeds_mbps": up_speeds})


@check("hccn.net_health", title="Every NPU's network detection succeeds",
       category=Category.NETWORK, tags=("net", "hccn", "npu"), timeout=HCCN_TIMEOUT_S)
def net_health(st: HccnState) -> Iterator[Finding]:
    pre, res = _answers(st, "net_health")
    yield from pre
    if res is None:
        return
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
    # one subnet per rail (device 0 and 4 in one, 1 and 5 in the next, …) is a layout of its
    # own: every subnet then holds as many devices as the others
    rails = len(counts) > 1 and len(set(counts.values())) == 1 and min(counts.values()) > 1
    if len(counts) > 1 and not rails:
        problems += 1
        main, top = counts.most_common(1)[0]
        odd = {d: str(n) for d, n in nets.items() if n is not None and counts[str(n)] < top}
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
    pre, mods = _answers(st, "optical")
    yield from pre
    if mods is None:
        return
    ok = 0
    for dev, mod in mods.items():
        present = str(mod.get("present", "")).lower()
        if present != "present":
            yield Finding.fail(T("{subject}: optical module is {state} (`hccn_tool -i {dev} "
                                 "-optical -g`)", subject=_dev(dev), state=present or "?",
                                 dev=dev),
                               subject=_dev(dev), evidence=dict(mod),
                               kb="ASC-HW-004", cause=ROCE_CAUSE)
        else:
            ok += 1
    if ok and ok == len(st.devices):
        yield Finding.passed(T("optical modules present on all {n} device(s)", n=ok))


def rdma_dscp(env: ServiceEnv | None) -> tuple[int, str]:
    """The DSCP HCCL marks its RoCE traffic with: ``HCCL_RDMA_TC`` (the IPv4 TOS byte, a
    multiple of 4, default 132) over 4."""
    raw = (env.env.get("HCCL_RDMA_TC") if env is not None else None) or ""
    if raw.strip().isascii() and raw.strip().isdigit() and int(raw) < 256:
        return int(raw) // 4, f"HCCL_RDMA_TC={int(raw)}"
    return DEFAULT_RDMA_TC // 4, f"HCCL_RDMA_TC={DEFAULT_RDMA_TC} (default)"


@check("hccn.pfc", title="PFC is on, on the same priorities on every RoCE port, for the "
       "traffic class HCCL's DSCP maps to",
       category=Category.NETWORK, tags=("net", "hccn", "npu"), timeout=HCCN_TIMEOUT_S)
def pfc(st: HccnState, env: ServiceEnv | None = None) -> Iterator[Finding]:
    pre, pr = _answers(st, "pfc")
    yield from pre
    if pr is None:
        return
    dpre, maps = _answers(st, "dscp")
    yield from dpre
    if not pr:
        return
    off = [d for d, p in pr.items() if not p]
    shapes = Counter(pr.values())
    ev: dict = {"pfc_priorities": {d: list(p) for d, p in pr.items()}}
    problems = 0
    if off:
        problems += 1
        yield Finding.warn(T("PFC is off on device(s) {devs}: RoCEv2 without PFC drops packets "
                             "under congestion and HCCL retransmits or times out",
                             devs=", ".join(map(str, off))), evidence=ev, kb="ASC-HW-004")
    if len(shapes) > 1:
        main = shapes.most_common(1)[0][0]
        odd = [d for d, p in pr.items() if p != main and p]
        if odd:
            problems += 1
            yield Finding.warn(T("PFC priorities differ: most ports use {main}, device(s) "
                                 "{devs} do not", main=list(main),
                                 devs=", ".join(map(str, odd))), evidence=ev, kb="ASC-HW-004")
    dscp, why = rdma_dscp(env)
    lossy = {d: m[dscp] for d, m in (maps or {}).items()
             if dscp in m and d in pr and pr[d] and m[dscp] not in pr[d]}
    if maps:
        ev["dscp_tc"] = {d: m.get(dscp) for d, m in maps.items()}
    if lossy:
        problems += 1
        yield Finding.warn(T("HCCL marks RoCE traffic with DSCP {dscp} ({why}), which device(s) "
                             "{devs} map to a traffic class without PFC ({tcs}): that traffic "
                             "is lossy and times out under congestion",
                             dscp=dscp, why=why, devs=", ".join(map(str, sorted(lossy))),
                             tcs=", ".join(f"TC {t}" for t in sorted(set(lossy.values())))),
                           evidence=ev, kb="ASC-HW-004")
    if not problems:
        tail = (T("; DSCP {dscp} ({why}) maps to a PFC class on {n} port(s)", dscp=dscp, why=why,
                  n=len(maps)) if maps else "")
        yield Finding.passed(T("PFC on priority {p} on all {n} port(s){tail}",
                               p=", ".join(map(str, next(iter(shapes)))), n=len(pr), tail=tail),
                             evidence=ev)
