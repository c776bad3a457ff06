"""`fleet` and `diff` name the node and the device whose hardware differs from the rest:
a RoCE port DOWN, PFC off on one port, double-bit ECC on one chip, one card on other
firmware. Bundles are the demo's (its device 5 is DOWN on every node, so that is the
majority, not drift) with one node's answers edited, run through the real CLI."""

from __future__ import annotations

import json
import os

from tests.conftest import run_cli


def _edit(data, argv: list[str], old: bytes, new: bytes) -> None:
    key = json.dumps(argv, separators=(",", ":"))
    rec = data.index["run"][key][0]
    blob = data.blobs[rec["out"]]
    assert old in blob, (argv, old)
    rec["out"] = data.blob(blob.replace(old, new))


def _fleet(tmp_path) -> list[str]:
    from ascend_doctor.bundle import BundleData
    from ascend_doctor.demo import demo_bundle_bytes

    base = demo_bundle_bytes()
    paths = []
    for i in range(3):
        data = BundleData.load(base)
        name = f"node-{i}"
        data.index["info"][""] = [dict(data.index["info"][""][0], hostname=name)]
        if i == 2:  # the odd node: port 3 down, PFC off on port 2, chip 1/0 failing HBM
            _edit(data, ["hccn_tool", "-i", "3", "-link", "-g"], b"UP", b"DOWN")
            _edit(data, ["hccn_tool", "-i", "2", "-pfc", "-g"], b"0 0 0 0 1 0 0 0",
                  b"0 0 0 0 0 0 0 0")
            _edit(data, ["npu-smi", "info", "-t", "ecc", "-i", "1", "-c", "0"],
                  b"HBM Double Bit Error Count               : 0",
                  b"HBM Double Bit Error Count               : 2")
            _edit(data, ["npu-smi", "info", "-t", "board", "-i", "6"], b"7.5.0.1.129",
                  b"7.5.0.1.100")
        p = os.path.join(tmp_path, f"{name}.tar.gz")
        data.write(p)
        paths.append(p)
    return paths


def test_fleet_and_diff_name_the_node_and_device_that_differ(tmp_path):
    paths = _fleet(str(tmp_path))
    r = run_cli("fleet", "--json", str(tmp_path), timeout=600)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    odd = {(x["node"].split(" ")[0], x["device"]): (x["value"], x["majority"])
           for x in doc["hardware_odd"]}
    assert odd == {("node-2.tar.gz", "roce 3 link"): ("DOWN", "UP"),
                   ("node-2.tar.gz", "roce 2 pfc"): ("off", "4"),
                   ("node-2.tar.gz", "ecc 1/0"): ("double 2", "ok"),
                   ("node-2.tar.gz", "firmware npu 6"): ("7.5.0.1.100", "7.5.0.1.129")}, odd
    # device 5 is down on every node: the majority, not a difference
    assert not any("roce 5" in d for _, d in odd)
    text = run_cli("fleet", str(tmp_path), timeout=600).stdout
    assert "node-2.tar.gz: roce 3 link is DOWN (majority: UP on 2)" in text
    d = run_cli("diff", paths[0], paths[2], timeout=600)
    lines = d.stdout.splitlines()
    hw = lines.index("hardware that differs (RoCE port, ECC, firmware by device):")
    assert hw == 2  # right after A = / B =: the stack is the same, the hardware leads
    rows = [ln.split() for ln in lines[hw + 1:hw + 5]]
    assert rows == [["ecc", "1/0", "A", "ok", "B", "double", "2"],
                    ["firmware", "npu", "6", "A", "7.5.0.1.129", "B", "7.5.0.1.100"],
                    ["roce", "2", "pfc", "A", "4", "B", "off"],
                    ["roce", "3", "link", "A", "UP", "B", "DOWN"]]
    checks = lines.index(next(ln for ln in lines if ln.startswith("checks that differ")))
    listed = {ln.split()[0] for ln in lines[checks + 1:] if ln.startswith("  ") and
              not ln.startswith("      ")}
    # hccn.link fails on both nodes (device 5), so its status does not differ: only the
    # hardware section says that node-2 lost port 3 as well
    assert checks > hw and {"npu.ecc", "hccn.pfc", "npu.smi"} <= listed
    assert "hccn.link" not in listed
