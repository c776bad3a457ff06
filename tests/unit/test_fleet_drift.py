"""`fleet` and `diff` lead with the drift that matters: kernel, driver, firmware, CANN, torch,
torch_npu, vLLM, vllm-ascend and the launch flags, in that order, and name the odd nodes first.

Fleets are generated: 100 nodes where one tenth differs in each of those fields (the last
tenth is clean), plus noise that must not lead (an environment variable set on a third of
the nodes, a per-node address). The fold is tested on NodeSummaries (fast), the whole path on
100 demo-derived bundles through the real `ascend-doctor fleet` (marked slow)."""

from __future__ import annotations

import json
import os

import pytest

from ascend_doctor.cli_fleet import render_diff, render_fleet
from ascend_doctor.fleet import STACK, FleetAccumulator, NodeSummary, diff_nodes
from tests.conftest import run_cli

BASE = {"kernel": "5.15.0-105-generic", "driver": "24.1.rc3", "firmware": "7.5.0.1.129",
        "cann": "8.3.RC2", "torch": "2.13.0", "torch_npu": "2.10.0.post4", "vllm": "0.23.0",
        "vllm_ascend": "0.23.0"}
ODD = {"kernel": "5.15.0-112-generic", "driver": "24.1.rc2", "firmware": "7.5.0.1.100",
       "cann": "8.3.RC1", "torch": "2.13.1", "torch_npu": "2.10.0", "vllm": "0.23.1",
       "vllm_ascend": "0.22.0"}
FIELDS = STACK + ("block-size",)  # the nine fields; node i differs in FIELDS[i % 10]


def _summary(i: int) -> NodeSummary:
    name = f"node-{i:03d}.tar.gz"
    k = FIELDS[i % 10] if i % 10 < len(FIELDS) else None
    versions = {f: (ODD[f] if f == k else BASE[f]) for f in STACK}
    flags = {"block-size": "128" if k == "block-size" else "16", "host": f"10.0.0.{i}"}
    env = {"HCCL_CONNECT_TIMEOUT": "1800"} if i % 3 == 0 else {}
    checks = {"ldconf.order": "fail", "versions.matrix": "fail" if k == "cann" else "pass"}
    return NodeSummary(name, hostname=name[:-7], checks=checks, versions=versions,
                       flags=flags, env=env)


def _fleet(n: int = 100) -> dict:
    acc = FleetAccumulator()
    for i in range(n):
        acc.add(_summary(i))
    return acc.result()


def _tenth(k: int, n: int = 100) -> list[str]:
    return [f"node-{i:03d}.tar.gz" for i in range(n) if i % 10 == k]


def test_fleet_json_ranks_stack_drift_first_and_names_each_odd_tenth():
    r = _fleet()
    key = [x for x in r["drift"] if x.get("key")]
    assert [x["field"] for x in key] == [f"version {f}" for f in STACK] + ["flag --block-size"]
    assert r["drift"][:len(key)] == key  # before any other drift (the env variable)
    for k, x in enumerate(key):
        assert x["majority_count"] == 90
        (other,) = x["others"]
        assert other["nodes"] == _tenth(k), x["field"]
    rest = [(x["field"], x["per_node"]) for x in r["drift"] if not x.get("key")]
    assert rest == [("flag --host", True), ("env HCCL_CONNECT_TIMEOUT", False)]
    odd = r["stack_odd_nodes"]
    assert len(odd) == 90 and {o["node"] for o in odd} == {
        f"node-{i:03d}.tar.gz" for i in range(100) if i % 10 != 9}
    assert all(len(o["fields"]) == 1 for o in odd)


def test_fleet_text_leads_with_the_kernel_and_its_odd_nodes():
    lines = render_fleet(_fleet())
    assert lines[0] == "fleet: 100 nodes read"
    assert lines[1].startswith("stack drift (kernel, driver")
    assert lines[2].startswith("  version kernel: 5.15.0-112-generic on node-000.tar.gz, "
                               "node-010.tar.gz")
    assert "(majority: 5.15.0-105-generic on 90)" in lines[2]
    order = [ln.split(":")[0].strip() for ln in lines[2:11]]
    assert order == [f"version {f}" for f in STACK] + ["flag --block-size"]
    assert lines[11].startswith("  odd nodes (90): node-000.tar.gz (kernel)")
    text = "\n".join(lines)
    assert text.index("version kernel") < text.index("outcome groups") < text.index(
        "other drift") < text.index("env HCCL_CONNECT_TIMEOUT")


def test_one_node_with_a_newer_kernel_only():
    acc = FleetAccumulator()
    for i in range(20):
        s = _summary(9)  # the clean shape
        s.name, s.hostname = f"n{i:02d}.tar.gz", f"n{i:02d}"
        if i == 13:
            s.versions = dict(s.versions, kernel="5.15.0-112-generic")
        acc.add(s)
    r = acc.result()
    assert len(r["groups"]) == 1  # same check outcomes: only the kernel tells them apart
    assert r["stack_odd_nodes"] == [{"node": "n13.tar.gz", "fields": ["version kernel"]}]


def test_diff_leads_with_the_stack_then_flags_then_checks():
    good, bad = _summary(9), _summary(0)
    bad.versions = dict(bad.versions, driver="24.1.rc2")
    bad.flags = dict(bad.flags, **{"block-size": "128"})
    bad.checks = dict(bad.checks, **{"versions.matrix": "fail"})
    d = diff_nodes(good, bad)
    assert [x["name"] for x in d["stack"]] == ["kernel", "driver"]
    lines = render_diff(d)
    assert lines[2].startswith("stack that differs (kernel")
    assert lines[3].split() == ["kernel", "A", "5.15.0-105-generic", "B", "5.15.0-112-generic"]
    assert lines[4].split()[0] == "driver"
    assert lines[5] == "launch flags that differ:"
    text = "\n".join(lines)
    assert text.index("--block-size") < text.index("checks that differ") < text.index(
        "versions.matrix")
    assert "versions that differ" not in text  # the stack is not listed twice


# -- the whole path: 100 generated bundles through the real CLI ----------------------------
SP = "/usr/local/lib/python3.11/site-packages/"
EDITS = {  # field -> (where, path, old bytes, new bytes) in the demo bundle
    "driver": ("read", "/usr/local/Ascend/driver/version.info", b"Version=24.1.rc3",
               b"Version=24.1.rc2"),
    "firmware": ("read", "/usr/local/Ascend/firmware/version.info", b"Version=7.5.0.1.129",
                 b"Version=7.5.0.1.100"),
    "cann": ("read", "/usr/local/Ascend/ascend-toolkit/8.3.RC2/x86_64-linux/"
             "ascend_toolkit_install.info", b"version=8.3.RC2", b"version=8.3.RC1"),
    "torch": ("read", SP + "torch-2.13.0.dist-info/METADATA", b"Version: 2.13.0",
              b"Version: 2.13.1"),
    "torch_npu": ("read", SP + "torch_npu-2.10.0.post4.dist-info/METADATA",
                  b"Version: 2.10.0.post4", b"Version: 2.10.0"),
    "vllm": ("read", SP + "vllm-0.23.0.dist-info/METADATA", b"Version: 0.23.0",
             b"Version: 0.23.1"),
    "vllm_ascend": ("read", SP + "vllm_ascend-0.23.0.dist-info/METADATA", b"Version: 0.23.0",
                    b"Version: 0.22.0"),
    "block-size": ("proc", "4711/cmdline", b"--block-size\x0016\x00",
                   b"--block-size\x00128\x00"),
}


def write_fleet(outdir: str, n: int = 100) -> list[str]:
    """n bundles from the demo: node i differs from the demo in FIELDS[i % 10] (none for
    i % 10 == 9), every node has its own hostname."""
    from ascend_doctor.bundle import BundleData
    from ascend_doctor.demo import demo_bundle_bytes

    base = demo_bundle_bytes()
    paths = []
    for i in range(n):
        data = BundleData.load(base)
        name = f"node-{i:03d}"
        info = dict(data.index["info"][""][0], hostname=name)
        k = FIELDS[i % 10] if i % 10 < len(FIELDS) else None
        if k == "kernel":
            info["kernel"] = ODD["kernel"]
        elif k is not None:
            where, path, old, new = EDITS[k]
            blob = data.blobs[data.index[where][path][0]["blob"]]
            assert old in blob, (path, old)
            data.index[where][path] = [{"blob": data.blob(blob.replace(old, new))}]
        if k == "block-size":  # the process table holds the argv too
            for proc in data.index["processes"][""][0]:
                if proc["pid"] == 4711:
                    argv = proc["cmdline"]
                    argv[argv.index("--block-size") + 1] = "128"
        data.index["info"][""] = [info]
        p = os.path.join(outdir, f"{name}.tar.gz")
        data.write(p)
        paths.append(p)
    return paths


@pytest.mark.slow
def test_fleet_cli_on_100_generated_bundles(tmp_path):
    write_fleet(str(tmp_path))
    r = run_cli("fleet", "--json", str(tmp_path), timeout=900)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    key = [x for x in doc["drift"] if x.get("key")]
    assert [x["field"] for x in key] == [f"version {f}" for f in STACK] + ["flag --block-size"]
    for k, x in enumerate(key):
        (other,) = x["others"]
        assert [nd.split(" ")[0] for nd in other["nodes"]] == _tenth(k), x["field"]
        assert x["majority_count"] == 90
    assert len(doc["stack_odd_nodes"]) == 90
    text = run_cli("fleet", str(tmp_path), timeout=900).stdout.splitlines()
    assert text[1].startswith("stack drift") and text[2].startswith(
        "  version kernel: 5.15.0-112-generic on node-000.tar.gz")
