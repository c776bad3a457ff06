"""hccn_tool answers and /etc/hccn.conf: parsers on the documented layouts, the rules on
hand-built facts, and whole runs where shell scripts stand in for hccn_tool and npu-smi:
a DOWN port is the node's RoCE problem and the HCCL EI0006 timeout in the log is listed
under it; a missing, failing, hanging or foreign-language hccn_tool never passes."""

from __future__ import annotations

import pytest

from ascend_doctor import problems as problems_mod
from ascend_doctor.checks.hccn import (ROCE_CAUSE, conf_consistent, explained_by_roce, link,
                                       net_health, optical, pfc)
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import ParseError
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.hccn import (HccnDevice, HccnState, ToolAnswer, parse_dscp,
                                       parse_gateway, parse_hccn_conf, parse_ip, parse_link,
                                       parse_net_health, parse_optical, parse_pfc, parse_speed)
from ascend_doctor.probes.procs import ServiceEnv
from tests.fixtures.capture import read_capture
from tests.fixtures.hccn import (CONF_A2, DSCP, GATEWAY, HEALTH_FAULT, HEALTH_INIT, HEALTH_OK,
                                 HEALTH_SOCKET_FAILED, IP, IP_8DEV, LINK_DOWN, LINK_UP, OPTICAL,
                                 OPTICAL_ABSENT, PFC, SPEED, conf_for, ip_answers)
from tests.fixtures.npusmi import A2, MAP_A2


def test_parsers_on_captured_outputs():
    assert parse_link(LINK_UP) == "UP" and parse_link(LINK_DOWN) == "DOWN"
    assert parse_net_health(HEALTH_OK) == "Success" and parse_net_health(HEALTH_FAULT) == "Fault"
    assert parse_net_health(HEALTH_INIT) == "Init"
    # a word outside DCMI's list (a real 910A node) is still a result, and not a success
    assert parse_net_health(HEALTH_SOCKET_FAILED) == "Socket failed"
    assert parse_net_health("net health status: receive timeout\n") == "Receive timeout"
    assert parse_ip(IP) == ("192.161.200.10", "255.255.255.0")
    ips = {d: parse_ip(t) for d, t in ip_answers(IP_8DEV).items()}
    assert ips[0] == ("192.1.45.172", "255.255.0.0") and ips[7] == ("192.4.32.120", "255.255.0.0")
    assert parse_gateway(GATEWAY) == "29.17.0.1"
    assert parse_optical(OPTICAL)["present"] == "present"
    absent = parse_optical(OPTICAL_ABSENT)
    assert absent["present"] == "not present" and absent["vendor name"] == "Hisense"
    assert parse_pfc(PFC) == (4,)
    assert parse_pfc("PFC configuration:\npriority   : 0 1 2 3 4 5 6 7\n"
                     "enable     : 0 0 0 1 0 0 0 0\n") == (3,)
    dscp = parse_dscp(DSCP)
    assert len(dscp) == 64 and dscp[33] == 4 and dscp[0] == 0 and dscp[63] == 7
    assert parse_speed(SPEED) == 200000 and parse_speed("Speed: Unknown!\n") is None
    conf = parse_hccn_conf(CONF_A2)
    assert conf.value(1, "address") == "192.168.100.102" and conf.value(0, "netdetect") == \
        "192.168.100.1"
    assert conf.duplicate_keys == () and conf.bad_lines == ()


def test_redacted_documentation_address_is_a_parse_error():
    # the guide prints `ipaddr:10.xx.xx.10`: not an address, so not one to compare
    with pytest.raises(ParseError):
        parse_ip(read_capture("hccn", "ip-redacted-faultdiag.txt").text)


@pytest.mark.parametrize("parse,text", [
    (parse_link, "链路状态: UP\n"), (parse_link, "link status: UNKNOWN\n"),
    (parse_net_health, "网络健康状态: 成功\n"), (parse_net_health, "net health status: 成功\n"),
    (parse_ip, "Usage: hccn_tool -i <id> -ip -g\n"), (parse_gateway, "gateway: none\n"),
    (parse_optical, "Tx Power : 1 mW\n"), (parse_pfc, "pfc enable: 1 1\n"),
    (parse_pfc, "PFC configuration:\nenabled    0 0 0 1 0 0 0 0\n"),
    (parse_dscp, "dscp      tc\n"), (parse_dscp, "   1       0\n"),
    (parse_dscp, "dscp      tc\n   1       9\n"), (parse_speed, "速率: 200000 Mb/s\n")])
def test_foreign_or_unknown_answers_are_parse_errors(parse, text):
    with pytest.raises(ParseError):
        parse(text)


def _ok(v):
    return ToolAnswer(("hccn_tool",), v)


def _dev(d, link="UP", health="Success", ip=None, present="present", prio=(4,),
         speed=200000, dscp=None):
    return HccnDevice(d, _ok(link), _ok(health), _ok((ip or f"192.168.100.{101 + d}",
                                                      "255.255.255.0")),
                      _ok("192.168.100.1"), _ok({"present": present}), _ok(prio),
                      _ok(speed), _ok(dscp if dscp is not None else parse_dscp(DSCP)))


def _state(devs, conf_text=None, n=None):
    conf = parse_hccn_conf(conf_text if conf_text is not None else conf_for(len(devs)))
    return HccnState(conf, None, "/usr/local/bin/hccn_tool", tuple(devs),
                     tuple(range(n if n is not None else len(devs))))


def test_healthy_node_passes_everything():
    st = _state([_dev(d) for d in range(8)])
    for rule in (link, net_health, conf_consistent, optical, pfc):
        fs = list(rule(st))
        assert [f.status for f in fs] == [Status.PASS], (rule.__name__, fs)


def test_down_link_and_failed_detection_share_the_roce_cause():
    st = _state([_dev(0), _dev(1), _dev(2), _dev(3, link="DOWN", health="Fault",
                                                   present="not present")])
    (f,) = link(st)
    assert f.status == Status.FAIL and f.subject == "NPU device 3" and "3 of 4" in f.message
    (g,) = net_health(st)
    assert g.status == Status.FAIL and "Fault" in g.message and "192.168.100.1" in g.message
    (o,) = optical(st)
    assert o.status == Status.FAIL and "not present" in o.message
    assert f.cause == g.cause == o.cause == ROCE_CAUSE
    (w,) = net_health(_state([_dev(0, health="Init")]))
    assert w.status == Status.WARN


def test_hccn_conf_inconsistencies():
    bad = conf_for(4).replace("address_2=192.168.100.103", "address_2=192.168.100.101")
    bad = bad.replace("address_3=192.168.100.104\n", "")  # device 3 has no address
    bad += "address_1=192.168.100.102\nnetmask_1=255.255.255.0\n"  # set twice
    bad = bad.replace("address_0=192.168.100.101", "address_0=192.168.100.101")
    fs = list(conf_consistent(_state([_dev(d) for d in range(4)], bad)))
    msgs = " | ".join(f.message for f in fs)
    assert "gives address 192.168.100.101 to devices 0, 2" in msgs
    assert "no address_N for device(s) 3" in msgs and "address_1" in msgs
    assert all(f.status != Status.PASS for f in fs)
    other = conf_for(4).replace("address_3=192.168.100.104", "address_3=10.0.0.4")
    fs = list(conf_consistent(_state([_dev(d) for d in range(3)] + [_dev(3, ip="10.0.0.4")],
                                     other)))
    msgs = " | ".join(f.message for f in fs)
    assert "not in one subnet" in msgs and "device 3 in 10.0.0.0/24" in msgs
    assert "netdetect_3=192.168.100.1 is outside" in msgs
    drift = list(conf_consistent(_state([_dev(0, ip="192.168.100.150")], conf_for(1))))
    assert drift[0].status == Status.WARN and "192.168.100.150" in drift[0].message
    gw = conf_for(1).replace("gateway_0=192.168.100.1", "gateway_0=192.168.100.254")
    (g,) = conf_consistent(_state([_dev(0)], gw))
    assert g.status == Status.WARN and "uses gateway 192.168.100.1" in g.message


def test_pfc_off_or_different_warns():
    fs = list(pfc(_state([_dev(0), _dev(1, prio=())])))
    assert [f.status for f in fs] == [Status.WARN] and "device(s) 1" in fs[0].message
    fs = list(pfc(_state([_dev(0), _dev(1), _dev(2, prio=(3, 4))])))
    assert [f.status for f in fs] == [Status.WARN] and "differ" in fs[0].message


def _env(**kw):
    return ServiceEnv(dict(kw), "test")


def test_hccl_dscp_must_land_in_a_pfc_class():
    # the default HCCL_RDMA_TC=132 is DSCP 33, which the rendered map puts in TC 4: PFC on 4
    (f,) = pfc(_state([_dev(0), _dev(1)]), None)
    assert f.status == Status.PASS and "DSCP 33" in f.message and "(default)" in f.message
    # the service marks TOS 104 (DSCP 26 → TC 3) while PFC protects priority 4 only
    fs = list(pfc(_state([_dev(0), _dev(1)]), _env(HCCL_RDMA_TC="104")))
    assert [f.status for f in fs] == [Status.WARN]
    assert "DSCP 26 (HCCL_RDMA_TC=104)" in fs[0].message and "TC 3" in fs[0].message
    assert fs[0].evidence["dscp_tc"] == {0: 3, 1: 3}
    # one port maps DSCP 33 elsewhere: that port alone is named
    odd = {**parse_dscp(DSCP), 33: 0}
    (w,) = pfc(_state([_dev(0), _dev(1, dscp=odd)]), _env())
    assert w.status == Status.WARN and "device(s) 1 map" in w.message


def test_link_speed_differs_warns_and_unknown_speed_of_a_down_port_is_ignored():
    fs = list(link(_state([_dev(0), _dev(1), _dev(2, speed=100000)])))
    assert [f.status for f in fs] == [Status.WARN]
    assert "device(s) 2 negotiated 100000 Mb/s" in fs[0].message and "200000" in fs[0].message
    fs = list(link(_state([_dev(0), _dev(1, link="DOWN", speed=None)])))
    assert [f.status for f in fs] == [Status.FAIL]
    (p,) = link(_state([_dev(0), _dev(1)]))
    assert p.status == Status.PASS and "at 200000 Mb/s" in p.message


def test_a_device_not_asked_for_speed_or_dscp_is_neither_a_pass_nor_a_warn_of_its_own():
    # a bundle from before the speed/DSCP queries: the other answers still decide
    dev = HccnDevice(0, _ok("UP"), _ok("Success"), _ok(("192.168.100.101", "255.255.255.0")),
                     _ok("192.168.100.1"), _ok({"present": "present"}), _ok((4,)))
    st = _state([dev])
    assert [f.status for f in link(st)] == [Status.PASS]
    (f,) = pfc(st)
    assert f.status == Status.PASS and "DSCP" not in f.message


def test_one_subnet_per_rail_is_consistent_but_a_lone_odd_device_is_not():
    ips = {d: parse_ip(t) for d, t in ip_answers(IP_8DEV).items()}
    conf = "".join(f"address_{d}={a}\nnetmask_{d}={m}\n" for d, (a, m) in ips.items())
    devs = [_dev(d, ip=a) for d, (a, _) in ips.items()]
    (f,) = conf_consistent(_state(devs, conf))
    assert f.status == Status.PASS and "192.1.0.0/16" in f.message
    odd = conf.replace("address_7=192.4.32.120", "address_7=192.5.32.120")
    fs = list(conf_consistent(_state(devs[:7] + [_dev(7, ip="192.5.32.120")], odd)))
    assert [f.status for f in fs] == [Status.WARN]
    assert "device 3 in 192.4.0.0/16" in fs[0].message and "device 7 in 192.5.0.0/16" in \
        fs[0].message


def test_no_tool_and_no_conf_states():
    only_conf = HccnState(parse_hccn_conf(conf_for(2)), None, None, (), (0, 1))
    (s,) = link(only_conf)
    assert s.status == Status.SKIP and "hccn_tool" in s.message
    (p,) = conf_consistent(only_conf)
    assert p.status == Status.PASS
    (e,) = conf_consistent(HccnState(None, "not UTF-8 text (invalid start byte)"))
    assert e.status == Status.ERROR and "/etc/hccn.conf" in e.message


def test_timeout_codes_are_explained_by_roce():
    assert explained_by_roce(["EI0006", "EI0002"]) == [ROCE_CAUSE]
    assert explained_by_roce(["EZ9999"]) == []


# -- whole runs with stand-in tools --------------------------------------------------------
def tools(root, down: set[int] = frozenset(), hccn_body: str | None = None):
    out = root.path("/opt/out")
    root.write("/opt/out/table.txt", A2)
    root.write("/opt/out/map.txt", MAP_A2)
    root.script("/usr/local/bin/npu-smi",
                f'case "$*" in\n  "info") cat {out}/table.txt;;\n  "info -m") cat {out}/map.txt;;\n'
                '  *) echo "unknown"; exit 2;;\nesac\n')
    ipd = {f"ip{d}": f"ipaddr:192.168.100.{101 + d}\nnetmask:255.255.255.0\n" for d in (0, 1)}
    for name, text in (("up", LINK_UP), ("down", LINK_DOWN), ("ok", HEALTH_OK),
                       ("fault", HEALTH_FAULT), *ipd.items(),
                       ("gw", "default gateway:192.168.100.1, Iface:eth0\n"), ("opt", OPTICAL),
                       ("pfc", PFC), ("speed", SPEED), ("dscp", DSCP)):
        root.write(f"/opt/out/h-{name}.txt", text)
    root.write("/etc/hccn.conf", conf_for(2))
    bad = " ".join(map(str, sorted(down)))
    body = hccn_body or (
        'dev=$2\nbad=0\n'
        f'for d in {bad}; do [ "$d" = "$dev" ] && bad=1; done\n'
        'case "$3" in\n'
        f'  -link) if [ $bad = 1 ]; then cat {out}/h-down.txt; else cat {out}/h-up.txt; fi;;\n'
        f'  -net_health) if [ $bad = 1 ]; then cat {out}/h-fault.txt; else cat {out}/h-ok.txt; fi;;\n'
        f'  -ip) cat {out}/h-ip$dev.txt;;\n  -gateway) cat {out}/h-gw.txt;;\n'
        f'  -optical) cat {out}/h-opt.txt;;\n  -pfc) cat {out}/h-pfc.txt;;\n'
        f'  -speed) cat {out}/h-speed.txt;;\n  -dscp_to_tc) cat {out}/h-dscp.txt;;\n'
        '  *) exit 2;;\nesac\n')
    root.script("/usr/local/bin/hccn_tool", body)


HCCN = ("hccn.link", "hccn.net_health", "hccn.conf", "hccn.optical", "hccn.pfc")


def _results(root, only=HCCN, options=None):
    rep = run(root.host(), options=options, config=RunConfig(only=only))
    return rep, {x.check_id: x for x in rep.results}


def test_healthy_node_run(sysroot):
    tools(sysroot)
    _, res = _results(sysroot)
    assert {k: v.status for k, v in res.items()} == {k: Status.PASS for k in HCCN}


def test_down_port_explains_the_ei0006_timeout_in_the_log(sysroot, tmp_path):
    tools(sysroot, down={1})
    log = tmp_path / "vllm.log"
    log.write_text("INFO starting\n[PID: 749] 2025-12-29-03:16:15.787.356 "
                   "EI0006: Getting socket times out. Reason: Remote Rank did not send the "
                   "data in time.\n", encoding="utf-8")
    rep, res = _results(sysroot, HCCN + ("logs.signatures",), RunOptions(logs=(str(log),)))
    assert res["hccn.link"].status == Status.FAIL
    (p,) = [p for p in problems_mod.group(rep) if p.key == ROCE_CAUSE]
    assert {r.check_id for r, _ in p.roots} == {"hccn.link", "hccn.net_health"}
    # every KB entry the EI0006 line matches (the HCCL-timeout entries) is a symptom of it
    assert {r.check_id for r, _ in p.symptoms} == {"logs.signatures"}
    assert all("EI0006" in f.message for _, f in p.symptoms)


def test_hccn_tool_failing_hanging_or_foreign_never_passes(sysroot, monkeypatch):
    tools(sysroot, hccn_body='echo "设备不存在" >&2\nexit 1\n')
    _, res = _results(sysroot, ("hccn.link", "hccn.net_health"))
    for cid in ("hccn.link", "hccn.net_health"):
        assert res[cid].status == Status.WARN, res[cid]
        assert all("exited 1" in f.message for f in res[cid].findings)
    # an older hccn_tool without -speed/-dscp_to_tc: the port checks still judge what it
    # answered, and name the two queries it refused
    tools(sysroot)
    script = sysroot.path("/usr/local/bin/hccn_tool")
    script.write_text(script.read_text().replace("  -speed)", "  -speed-x)")
                      .replace("  -dscp_to_tc)", "  -dscp-x)"))
    _, res = _results(sysroot, ("hccn.link", "hccn.pfc"))
    for cid, flag in (("hccn.link", "-speed"), ("hccn.pfc", "-dscp_to_tc")):
        ws = [f for f in res[cid].findings if f.status == Status.WARN]
        assert len(ws) == 2 and all(flag in f.message and "exited 2" in f.message for f in ws)
        assert res[cid].status == Status.WARN
    tools(sysroot, hccn_body='echo "链路状态: 正常"\n')
    _, res = _results(sysroot, ("hccn.link",))
    assert res["hccn.link"].status == Status.WARN
    assert "link status" in res["hccn.link"].findings[0].message
    import ascend_doctor.probes.hccn as hccn_probe
    monkeypatch.setattr(hccn_probe, "HCCN_TIMEOUT_S", 1.0)
    tools(sysroot, hccn_body="exec sleep 100\n")
    _, res = _results(sysroot, ("hccn.link",))
    assert res["hccn.link"].status == Status.ERROR


def test_no_hccn_tool_nor_conf_is_a_skip(sysroot):
    _, res = _results(sysroot, ("hccn.link", "hccn.conf"))
    assert res["hccn.link"].status == Status.SKIP and res["hccn.conf"].status == Status.SKIP
    assert "hccn_tool" in res["hccn.link"].findings[0].message
