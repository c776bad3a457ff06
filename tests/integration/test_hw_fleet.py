"""`fleet` and `diff` carry the hardware facts: bundles written by `collect --root` of three
nodes whose /etc/hccn.conf and sysfs PCIe links agree, except node-03's (two devices share
an address, and NPU 0000:c2:00.0 trained at x8): the fleet names node-03 and the device,
`diff` lists those checks first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Sysroot, run_cli
from tests.fixtures.hccn import conf_for


def _node(root: Path, *, dup: bool = False, narrow: bool = False) -> Sysroot:
    s = Sysroot(root)
    root.mkdir()
    conf = conf_for(4)
    if dup:
        conf = conf.replace("address_2=192.168.100.103", "address_2=192.168.100.101")
    s.write("/etc/hccn.conf", conf)
    for i, bus in enumerate(("c1", "c2", "81", "82")):
        base = f"/sys/bus/pci/devices/0000:{bus}:00.0"
        width = "8" if narrow and bus == "c2" else "16"
        for name, value in (("vendor", "0x19e5"), ("device", "0xd802"), ("class", "0x120000"),
                            ("current_link_width", width), ("max_link_width", "16"),
                            ("current_link_speed", "16.0 GT/s PCIe"),
                            ("max_link_speed", "16.0 GT/s PCIe")):
            s.write(f"{base}/{name}", value + "\n")
    return s


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hwfleet")
    out = d / "bundles"
    out.mkdir()
    made = {}
    for name, kw in (("node-01", {}), ("node-02", {}), ("node-03", {"dup": True, "narrow": True})):
        path = out / f"{name}.tar.gz"
        r = run_cli("collect", "--root", str(_node(d / name, **kw).root), "-o", str(path))
        assert r.returncode == 0, r.stderr
        made[name] = path
    return made


def test_fleet_names_the_node_and_device(bundles):
    r = run_cli("fleet", "--json", str(bundles["node-01"].parent))
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["nodes"] == 3
    probs = d["some_problems"]
    text = json.dumps(probs)
    for check, needle in (("hccn.conf", "gives address 192.168.100.101 to devices 0, 2"),
                          ("pcie.link", "0000:c2:00.0: PCIe link trained at x8 of x16")):
        (p,) = [p for p in probs if p["check"] == check]
        assert [n.split(" ")[0] for n in p["nodes"]] == ["node-03.tar.gz"], text
        assert needle in p["message"], p


def test_diff_shows_the_hardware_difference_first(bundles):
    r = run_cli("diff", "--json", str(bundles["node-01"]), str(bundles["node-03"]))
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    worse = [c["check"] for c in d["checks"] if c["b"] in ("fail", "warn")]
    assert set(worse[:2]) == {"hccn.conf", "pcie.link"}, d["checks"]
