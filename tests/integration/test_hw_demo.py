"""The demo host's node-level hardware fault: NPU device 5's optical module is not seated,
its RoCE port is DOWN and its network detection fails — one problem, named by the report,
while ECC, hccn.conf, PFC and PCIe show what healthy looks like."""

from __future__ import annotations

import json


def test_demo_explains_the_down_roce_port(cli):
    r = cli("demo", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    checks = {c["id"]: c for c in doc["checks"]}
    assert {k: checks[k]["status"] for k in ("hccn.link", "hccn.net_health", "hccn.optical",
                                               "hccn.conf", "hccn.pfc", "npu.ecc",
                                               "pcie.link")} == {
        "hccn.link": "fail", "hccn.net_health": "fail", "hccn.optical": "fail",
        "hccn.conf": "pass", "hccn.pfc": "pass", "npu.ecc": "pass", "pcie.link": "pass"}
    (p,) = [p for p in doc["problems"] if p["cause"] == "hccn.roce"]
    members = {m["check"] for m in p["roots"] + p["symptoms"]}
    assert members == {"hccn.link", "hccn.net_health", "hccn.optical"}
    assert "RoCE port is down" in p["title"]
    link = checks["hccn.link"]["findings"][0]
    assert link["subject"] == "NPU device 5" and "7 of 8 ports are UP" in link["message"]
    rows = next(f for f in checks["npu.smi"]["findings"])["evidence"]["chips"]
    assert [r["logic_id"] for r in rows] == list(range(8))
    assert all(r["ecc_double"] == 0 for r in rows)
