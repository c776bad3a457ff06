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
from ascend_doctor.probes.hccn import (HccnDevice, HccnState, ToolAnswer, parse_gateway,
                                       parse_hccn_conf, parse_ip, parse_link, parse_net_health,
                                       parse_optical, parse_pfc)
from tests.fixtures.hccn import (CONF_A2, GATEWAY, HEALTH_FAULT, HEALTH_OK, IP, LINK_DOWN,
                                 LINK_UP, OPTICAL, OPTICAL_ABSENT, PFC, conf_for)
from tests.fixtures.npusmi import A2, MAP_A2


def test_parsers_on_documented_layouts():
    assert parse_link(LINK_UP) == "UP" and parse_link(LINK_DOWN) == "DOWN"
    assert parse_net_health(HEALTH_OK) == "Success" and parse_net_health(HEALTH_FAULT) == "Fault"
    assert parse_net_health("net health status: receive timeout\n") == "Receive timeout"
    assert parse_ip(IP) == ("192.168.100.101", "255.255.255.0")
    assert parse_gateway(GATEWAY) == "192.168.100.1"
    assert parse_optical(OPTICAL)["present"] == "present"
    assert parse_optical(OPTICAL_ABSENT)["present"] == "not present"
    assert parse_pfc(PFC) == (3,)
    conf = parse_hccn_conf(CONF_A2)
    assert conf.value(1, "address") == "192.168.100.102" and conf.value(0, "netdetect") == \
        "192.168.100.1"
    assert conf.duplicate_keys == () and conf.bad_lines == ()


@pytest.mark.parametrize("parse,text", [
    (parse_link, "链路状态: UP\n"), (parse_link, "link status: UNKNOWN\n"),
    (parse_net_health, "网络健康状态: 成功\n"), (parse_net_health, "net health status: maybe\n"),
    (parse_ip, "Usage: hccn_tool -i <id> -ip -g\n"), (parse_gateway, "gateway: none\n"),
    (parse_optical, "Tx Power : 1 mW\n"), (parse_pfc, "pfc enable: 1 1\n")])
def test_foreign_or_unknown_answers_are_parse_errors(parse, text):
    with pytest.raises(ParseError):
        parse(text)


def _ok(v):
    return ToolAnswer(("hccn_tool",), v)


def _dev(d, link="UP", health="Success", ip=None, present="present", prio=(3,)):
    return HccnDevice(d, _ok(link), _ok(health), _ok((ip or f"192.168.100.{101 + d}",
                                                      "255.255.255.0")),
                      _ok("192.168.100.1"), _ok({"present": present}), _ok(prio))


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
    fs = list(pfc(_state([_dev(0), _dev(1), _dev(2, prio=(4,))])))
    assert [f.status for f in fs] == [Status.WARN] and "differ" in fs[0].message


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
    for name, text in (("up", LINK_UP), ("down", LINK_DOWN), ("ok", HEALTH_OK),
                       ("fault", HEALTH_FAULT), ("ip0", IP),
                       ("ip1", IP.replace(".101", ".102")), ("gw", GATEWAY), ("opt", OPTICAL),
                       ("pfc", PFC)):
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
