"""doctor/fleet.py on demo-scenario bundles with variations: the environment diff is
redacted (also a secret the bundle's writer left in), hostile names cannot drive the
terminal, and the fleet fold reports unset variables and per-node values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_doctor.bundle import BundleData
from ascend_doctor.demo import demo_bundle_bytes
from ascend_doctor.fleet import FleetAccumulator, NodeSummary, diff_nodes, fleet_registry, load_node
from tests.conftest import run_cli

ENVIRON = "4711/environ"


def _variant(path: Path, *, env_extra: dict[str, str] | None = None,
             hostname: str | None = None, files: dict[str, bytes] | None = None) -> Path:
    """The demo bundle with the server's environ extended (as a hand-made bundle could be:
    secrets not redacted), another hostname and/or other file contents."""
    data = BundleData.load(demo_bundle_bytes())
    for p, content in (files or {}).items():
        data.index["read"][p] = [{"blob": data.blob(content)}]
    if env_extra:
        old = data.blobs[data.index["proc"][ENVIRON][0]["blob"]]
        extra = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env_extra.items())
        data.index["proc"][ENVIRON] = [{"blob": data.blob(old.rstrip(b"\0") + b"\0" + extra)}]
    if hostname is not None:
        data.index["info"][""] = [dict(data.index["info"][""][0], hostname=hostname)]
    data.write(str(path))
    return path


@pytest.fixture(scope="module")
def registry():
    return fleet_registry()


def test_demo_node_summary_has_the_stack(tmp_path, registry):
    node = load_node(str(_variant(tmp_path / "a.tar.gz")), registry)
    assert node.error == "" and node.hostname == "atlas800t-a2-07"
    v = node.versions
    assert (v["cann"], v["driver"], v["torch"], v["vllm_ascend"]) == (
        "8.3.RC2", "24.1.rc3", "2.13.0", "0.23.0")
    assert v["npu_smi"] == "23.0.3" and "910B4" in v["chip"]
    assert node.ldconf == ["/usr/local/lib", "/usr/lib/x86_64-linux-gnu"]
    assert node.npu["5/0"] == "Warning" and node.npu["0/0"] == "OK"
    assert node.env["HF_TOKEN"] == "<redacted>"
    assert node.flags["block-size"] == "16"
    assert node.checks["ldconf.order"] == "fail" and "fleet.snapshot" not in node.checks
    assert "ASC-LIB-002" in node.kb["ldconf.order"]


def test_diff_redacts_a_secret_left_in_a_bundle(tmp_path, registry):
    a = _variant(tmp_path / "a.tar.gz")
    b = _variant(tmp_path / "b.tar.gz", env_extra={"DB_PASSWORD": "hunter2",
                                                   "HCCL_CONNECT_TIMEOUT": "1800"})
    d = diff_nodes(load_node(str(a), registry), load_node(str(b), registry))
    env = {x["name"]: (x["a"], x["b"]) for x in d["env"]}
    assert env == {"DB_PASSWORD": (None, "<redacted>"), "HCCL_CONNECT_TIMEOUT": (None, "1800")}
    assert d["checks"] == [] or all(c["check"] != "ldconf.order" for c in d["checks"])
    for args in (("diff", str(a), str(b)), ("diff", "--json", str(a), str(b))):
        r = run_cli(*args)
        assert r.returncode == 1, r.stderr
        assert "hunter2" not in r.stdout and "DB_PASSWORD" in r.stdout
        assert "HCCL_CONNECT_TIMEOUT" in r.stdout


def test_hostile_hostname_is_shown_not_obeyed(tmp_path):
    a = _variant(tmp_path / "a.tar.gz")
    b = _variant(tmp_path / "b.tar.gz", hostname="evil\x1b]52;c;cm0gLXJmIH4=\x07")
    r = run_cli("diff", str(a), str(b))
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "B = b.tar.gz (evil\\x1b]52;c;cm0gLXJmIH4=\\x07)" in r.stdout
    j = run_cli("diff", "--json", str(a), str(b))
    assert json.loads(j.stdout)["b_host"] == "evil\x1b]52;c;cm0gLXJmIH4=\x07"
    assert "\x1b" not in j.stdout


def _node(name: str, env: dict[str, str], checks: dict[str, str]) -> NodeSummary:
    return NodeSummary(name, checks=checks, env=env, versions={"cann": "8.3.RC2"})


def test_fold_reports_unset_variables_per_node_values_and_all_but():
    acc = FleetAccumulator()
    for i in range(5):
        env = {"NODE_IP": f"10.0.0.{i}"}
        if i != 2:
            env["HCCL_BUFFSIZE"] = "200"
        acc.add(_node(f"n{i}", env, {"ldconf.order": "fail" if i != 4 else "pass",
                                     "npu.health": "pass"}))
    r = acc.result()
    drift = {x["field"]: x for x in r["drift"]}
    assert drift["env HCCL_BUFFSIZE"]["majority"] == "200"
    assert drift["env HCCL_BUFFSIZE"]["others"] == [{"value": "(unset)", "nodes": ["n2"]}]
    assert drift["env NODE_IP"]["per_node"] is True
    assert "version cann" not in drift
    (order,) = r["some_problems"]
    assert (order["check"], order["count"], order["absent_on"]) == ("ldconf.order", 4, ["n4"])
    assert r["odd_nodes"] == ["n4"] and r["groups"][0]["size"] == 4
    assert r["groups"][1]["missing_vs_majority"] == ["ldconf.order fail"]


def test_fold_keeps_a_refused_bundle_apart():
    acc = FleetAccumulator()
    acc.add(NodeSummary("bad.tar.gz", error="bad.tar.gz is not a readable bundle"))
    acc.add(_node("n0", {}, {"a.b": "pass"}))
    r = acc.result()
    assert r["nodes"] == 1 and r["refused"] == [{"bundle": "bad.tar.gz",
                                                 "reason": "bad.tar.gz is not a readable bundle"}]
    assert r["odd_nodes"] == []


def test_diff_shows_the_sysctl_that_explains_net_tcp_ports(tmp_path, registry):
    """The demo's 2000-port range with 1400 TIME_WAIT fails net.tcp-ports; a node with the
    default range does not, and the diff names both the check and the sysctl."""
    bad = _variant(tmp_path / "bad.tar.gz")
    good = _variant(tmp_path / "good.tar.gz",
                    files={"/proc/sys/net/ipv4/ip_local_port_range": b"32768\t60999\n"})
    d = diff_nodes(load_node(str(good), registry), load_node(str(bad), registry))
    assert {"name": "net.ipv4.ip_local_port_range", "a": "32768 60999", "b": "50000 51999"} \
        in d["sysctls"]
    tcp = next(c for c in d["checks"] if c["check"] == "net.tcp-ports")
    assert (tcp["a"], tcp["b"]) == ("warn", "fail")  # 1400 TIME_WAIT of 28 232 ports: a warn
    assert d["checks"][0]["b"] == "fail"  # worse on B first
    r = run_cli("diff", str(good), str(bad))
    assert "sysctls that differ:" in r.stdout
    assert any(ln.split() == ["net.ipv4.ip_local_port_range", "A", "32768", "60999", "B",
                              "50000", "51999"] for ln in r.stdout.splitlines()), r.stdout
