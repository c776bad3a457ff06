"""deploy/Containerfile builds from distribution packages only, and a pod reading the node at
/host runs the node's npu-smi (a node tool placed at its own path) but never a file of /host."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from ascend_doctor.errors import SourceMissing
from ascend_doctor.host import LiveHost

REPO = Path(__file__).resolve().parents[2]
CF = (REPO / "deploy" / "Containerfile").read_text()
if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the tomli backport (a dependency there)
    import tomli as tomllib


def _apt_packages() -> set[str]:
    m = re.search(r"apt-get install -y --no-install-recommends \\\n(.*?)\n \&\&", CF, re.S)
    assert m, "no apt-get install line"
    return set(m[1].replace("\\", " ").split())


def test_only_a_distribution_base_image():
    froms = re.findall(r"^FROM\s+(\S+)", CF, re.M)
    assert froms == ["${BASE}"]
    (base,) = re.findall(r"^ARG BASE=(\S+)", CF, re.M)
    assert re.fullmatch(r"docker\.io/library/debian:[a-z]+-slim", base), base


def test_every_runtime_dependency_but_the_tui_is_a_debian_package():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!;\s\[]", d, maxsplit=1)[0].lower() for d in deps}
    names -= {"textual", "tomli"}  # the TUI is not in the image; tomli only below 3.11
    apt = _apt_packages()
    assert {f"python3-{n.replace('_', '-')}" for n in names} <= apt, names
    # pip installs the doctor alone, from the copied source, without the network
    pips = [p.rstrip(" \\") for p in re.findall(r"pip install ([^\n]*)", CF)]
    assert pips == ["--no-deps --no-index --no-build-isolation /src"]


def test_the_image_runs_what_the_daemonset_runs():
    yaml = pytest.importorskip("yaml")
    (ds,) = [d for d in yaml.safe_load_all((REPO / "deploy/k8s/daemonset.yaml").read_text())
             if d]
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    cmd = re.search(r'^CMD \[(.*)\]', CF, re.M)[1]
    assert [a.strip(' "') for a in cmd.split(",")][:2] == c["args"][:2]  # exporter --root=/host
    assert re.search(r'^ENTRYPOINT \["/opt/ascend-doctor/bin/ascend-doctor"\]', CF, re.M)
    assert re.search(r"^USER 0:0", CF, re.M) and c["securityContext"]["runAsUser"] == 0


def _stub(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho " + text + "\n")
    path.chmod(0o755)


def test_a_node_tool_runs_from_the_pods_own_filesystem_never_from_the_root(tmp_path):
    root, tools = tmp_path / "host", tmp_path / "pod-bin"
    _stub(root / "usr/local/bin/npu-smi", "from-the-root")  # a file of /host: data
    _stub(tools / "npu-smi", "the-node-tool")  # placed by the runtime at the pod's path
    _stub(root / "usr/bin/ls", "root-ls")
    env = {"PATH": str(tools)}
    h = LiveHost(str(root), env, node_tools=("npu-smi", "ls", "sh"))
    assert h.node_tools == {"npu-smi"}  # only names the doctor knows as node tools
    assert h.run(["npu-smi", "info"]).text.strip() == "the-node-tool"
    for argv in (["ls"], ["/usr/local/bin/npu-smi", "info"]):
        with pytest.raises(SourceMissing, match="sysroot binaries are not executed"):
            h.run(argv)
    plain = LiveHost(str(root), env)  # without the opt-in: refused as before
    with pytest.raises(SourceMissing, match="sysroot binaries are not executed"):
        plain.run(["npu-smi", "info"])


def test_open_host_takes_node_tools_from_the_environment(tmp_path, monkeypatch):
    from ascend_doctor.opening import open_host

    monkeypatch.setenv("ASCEND_DOCTOR_NODE_TOOLS", "npu-smi,evil")
    assert open_host(str(tmp_path), None).node_tools == {"npu-smi"}
    assert open_host(None, None).node_tools == frozenset()
    monkeypatch.delenv("ASCEND_DOCTOR_NODE_TOOLS")
    assert open_host(str(tmp_path), None).node_tools == frozenset()
