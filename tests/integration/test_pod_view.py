"""The DaemonSet's container view of a node, run for real: a mount namespace (``unshare``)
holding what deploy/k8s/daemonset.yaml gives the container — its volumeMounts at their paths
(the node's / read-only at /host, an in-memory /tmp), a read-only root, the node's /proc
(hostPID) — entered with ``chroot`` and ``setpriv`` as the manifest's user with only the
manifest's capabilities and no_new_privs. podman cannot run on this machine (its runtime
cannot set its rlimits), so this is the same confinement built by hand from the manifest.

A sysroot stands in for the node (the demo scenario, written by `export-root`). The pod's
verdicts equal `check --root` on that sysroot. Then each capability is measured: dropped,
what stops working (the table in deploy/k8s/README.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
DS = REPO / "deploy" / "k8s" / "daemonset.yaml"
EXE = str(Path(sys.executable).parent / "ascend-doctor")
TOOLS = ("unshare", "setpriv", "chroot", "mount")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in TOOLS),
    reason="needs root and util-linux (unshare, setpriv, mount) to build the pod's view")


def _container() -> tuple[dict, dict]:
    (ds,) = [d for d in yaml.safe_load_all(DS.read_text()) if d]
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    return pod, c


def _image_dirs() -> list[str]:
    """What stands in for the image: the distribution's directories and the doctor's venv
    (its interpreter may live under /root, e.g. pyenv). All read-only."""
    dirs = ["/usr", "/etc", "/opt", "/root", str(REPO)]
    real = os.path.realpath(sys.executable)
    dirs += [os.path.dirname(os.path.dirname(real))]
    return sorted({d for d in dirs if os.path.isdir(d)}, key=len)


def pod_script(node: Path, croot: Path, caps: list[str] | None = None,
               live_proc: bool = False) -> str:
    """A shell script that builds the container's mount tree at ``croot`` from the manifest
    (hostPath ``p`` -> ``node``/p) and execs its argv there as the manifest's user."""
    pod, c = _container()
    sc = c["securityContext"]
    vols = {v["name"]: v for v in pod["volumes"]}
    q = lambda s: "'" + str(s).replace("'", "'\\''") + "'"  # noqa: E731
    lines = ["set -eu", f"R={q(croot)}", "mount -t tmpfs -o mode=755,size=8m pod-root \"$R\""]
    # image dirs under a volume's mount path (a checkout in /tmp, where the pod has an
    # emptyDir) are bound after the volumes, or the volume would hide them
    paths = [m["mountPath"].rstrip("/") for m in c["volumeMounts"]]
    under = [d for d in _image_dirs() if any(d == p or d.startswith(p + "/") for p in paths)]

    def bind_ro(d: str) -> list[str]:
        return [f"mkdir -p \"$R\"{q(d)}", f"mount --rbind {q(d)} \"$R\"{q(d)}",
                f"mount -o remount,bind,ro \"$R\"{q(d)}"]

    for d in _image_dirs():
        if d not in under:
            lines += bind_ro(d)
    for link in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(link):
            lines.append(f"ln -s {q(os.readlink(link))} \"$R\"{q(link)}")
        elif os.path.isdir(link):
            lines += [f"mkdir -p \"$R\"{q(link)}", f"mount --rbind {q(link)} \"$R\"{q(link)}",
                      f"mount -o remount,bind,ro \"$R\"{q(link)}"]
    assert pod["hostPID"] is True
    lines += ["mkdir -p \"$R\"/proc \"$R\"/dev", "mount --rbind /proc \"$R\"/proc",
              "mount -t tmpfs -o mode=755,size=1m pod-dev \"$R\"/dev"]
    for n in ("null", "zero", "urandom", "random"):
        lines += [f"touch \"$R\"/dev/{n}", f"mount --bind /dev/{n} \"$R\"/dev/{n}"]
    for m in c["volumeMounts"]:
        v = vols[m["name"]]
        dst = '"$R"' + q(m["mountPath"])
        lines.append(f"mkdir -p {dst}")
        if "emptyDir" in v:
            size = v["emptyDir"].get("sizeLimit", "64Mi").replace("Mi", "m")
            lines.append(f"mount -t tmpfs -o size={size} pod-empty {dst}")
        else:
            src = node / v["hostPath"]["path"].lstrip("/")
            lines.append(f"mount --rbind {q(src)} {dst}")
            if m.get("readOnly"):
                lines.append(f"mount -o remount,bind,ro {dst}")
            if live_proc and v["hostPath"]["path"] == "/":  # the node's real procfs
                lines.append(f"mount --rbind /proc {dst}/proc")
                if m.get("recursiveReadOnly") in ("Enabled", "IfPossible"):
                    lines.append(f"mount -o remount,bind,ro {dst}/proc")
    for d in under:
        lines += bind_ro(d)
    if sc["readOnlyRootFilesystem"]:
        lines.append("mount -o remount,ro \"$R\"")
    add = [x.lower() for x in (sc["capabilities"]["add"] if caps is None else caps)]
    assert sc["capabilities"]["drop"] == ["ALL"]
    bounding = "-all" + "".join(f",+{x}" for x in add)
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CI": "true",
           "ASCEND_DOCTOR_CACHE": "0"}
    env.update({e["name"]: e["value"] for e in c["env"]})
    nnp = [] if sc["allowPrivilegeEscalation"] else ["--no-new-privs"]
    user = ["--reuid=%d" % sc["runAsUser"], "--regid=%d" % sc["runAsGroup"], "--clear-groups"]
    lines.append("exec chroot \"$R\" setpriv " + " ".join(
        user + [f"--bounding-set={bounding}", "--inh-caps=-all"] + nnp) + " env -i " + " ".join(
        q(f"{k}={v}") for k, v in env.items()) + ' "$@"')
    return "\n".join(lines) + "\n"


def in_pod(node: Path, tmp: Path, argv: list[str], **kw) -> subprocess.CompletedProcess:
    croot = tmp / "pod-root"
    croot.mkdir(exist_ok=True)
    script = tmp / "pod.sh"
    script.write_text(pod_script(node, croot, **kw))
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "--",
                           "sh", str(script), *argv], capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Path:
    """The demo host as a sysroot: the node the pod looks at."""
    root = tmp_path_factory.mktemp("node") / "root"
    r = subprocess.run([EXE, "export-root", str(root)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return root


CHECK = ["check", "--json", "--sample-seconds", "0.5"]


def _verdicts(doc: dict, root: str) -> dict[str, tuple]:
    """check id -> (status, the findings' statuses and messages with the root spelled out)."""
    out = {}
    at = re.compile(r"(?<![\w/.])" + re.escape(root) + r"(?=[/\s`'\"):,]|$)")
    # tlb.faults reports the wall time it sampled over, which varies with the load
    span = re.compile(r"over \d+(?:\.\d+)? s\b")
    for c in doc["checks"]:
        fs = tuple(sorted((f["status"], span.sub("over <t> s", at.sub("<root>", f["message"])))
                          for f in c["findings"]))
        out[c["id"]] = (c["status"], fs)
    return out


def test_pod_view_gives_the_verdicts_of_check_root(node, tmp_path):
    pod, c = _container()
    assert "--root=/host" in c["args"]
    env = {e["name"]: e["value"] for e in c["env"]}
    inside = in_pod(node, tmp_path, [EXE, *CHECK, "--root=/host"])
    assert inside.returncode in (0, 1), inside.stderr[-3000:]
    outside = subprocess.run(
        [EXE, *CHECK, f"--root={node}"], capture_output=True, text=True, timeout=600,
        env={**os.environ, "CI": "true", "ASCEND_DOCTOR_CACHE": "0",
             "ASCEND_DOCTOR_NODE_TOOLS": env["ASCEND_DOCTOR_NODE_TOOLS"]})
    assert outside.returncode in (0, 1), outside.stderr[-3000:]
    a = _verdicts(json.loads(inside.stdout), "/host")
    b = _verdicts(json.loads(outside.stdout), str(node))
    assert a.keys() == b.keys()
    diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert not diff, json.dumps(diff, indent=1, ensure_ascii=False)[:4000]
    # the node's ld.so.conf and libraries are judged, not the image's (0.1.0's pod judged
    # its own /etc/ld.so.cache and /usr/lib*: the demo's failures became passes)
    statuses = {k: v[0] for k, v in a.items()}
    assert statuses["ldconf.order"] == statuses["libacl.resolve"] == "fail"
    assert statuses["versions.matrix"] == "fail"  # the node's site-packages, not the image's
    assert inside.returncode == 1


def test_the_pod_cannot_write_the_node_or_its_root(node, tmp_path):
    probe = ("import os\n"
             "for p in ('/host/etc/ld.so.conf', '/etc/x', '/usr/x', '/tmp/x'):\n"
             "    try:\n"
             "        open(p, 'a').close(); print(p, 'written')\n"
             "    except OSError as e:\n"
             "        print(p, e.strerror)\n")
    r = in_pod(node, tmp_path, [sys.executable, "-c", probe])
    assert r.returncode == 0, r.stderr
    got = dict(ln.split(" ", 1) for ln in r.stdout.splitlines())
    assert got == {"/host/etc/ld.so.conf": "Read-only file system",
                   "/etc/x": "Read-only file system", "/usr/x": "Read-only file system",
                   "/tmp/x": "written"}


# -- capabilities, measured ----------------------------------------------------------------
PROBE = r"""
import json, sys
from ascend_doctor.host import LiveHost
from ascend_doctor.errors import SourceError, SourceMissing
h = LiveHost("/host")
out = {}
pid = int(sys.argv[1])
for name, call in (("environ", lambda: h.proc_read(pid, "environ")),
                   ("maps", lambda: h.proc_read(pid, "maps")),
                   ("owner-only file", lambda: h.read_bytes("/srv/vllm/secret-config.yaml")),
                   ("run python3 as the service", lambda: h.run(["python3", "-c", "0"]))):
    try:
        call()
        out[name] = "ok"
    except (SourceError, SourceMissing) as e:
        out[name] = type(e).__name__ + ": " + str(getattr(e, "reason", e))[:60]
print(json.dumps(out))
"""
MANIFEST_CAPS = ["SYS_PTRACE"]
ISSUE_CAPS = ["SYS_PTRACE", "DAC_READ_SEARCH", "SETUID", "SETGID"]  # what 0.1.0 granted


@pytest.fixture
def service_process(node):
    """A process of another uid (65534) with a secret in its environment, as the vLLM
    service is to the pod; and a file only its owner may read on the node."""
    secret = node / "srv" / "vllm" / "secret-config.yaml"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("api-key: x\n")
    os.chown(secret, 65534, 65534)
    os.chmod(secret, 0o600)
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", py,
                          "-c", "import time; time.sleep(120)"],
                         env={"PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_secret"})
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def _measure(node, tmp, pid, caps):
    r = in_pod(node, tmp, [sys.executable, "-c", PROBE, str(pid)], caps=caps, live_proc=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_each_capability_measured(node, tmp_path, service_process):
    full = _measure(node, tmp_path, service_process, ISSUE_CAPS)
    mine = _measure(node, tmp_path, service_process, MANIFEST_CAPS)
    table = {"all four (0.1.0)": full, "SYS_PTRACE (manifest)": mine}
    for cap in ISSUE_CAPS:
        table[f"without {cap}"] = _measure(node, tmp_path, service_process,
                                           [c for c in ISSUE_CAPS if c != cap])
    print(json.dumps(table, indent=1))
    assert full["environ"] == full["maps"] == full["owner-only file"] == "ok"
    # SYS_PTRACE: the service's /proc files (another uid) need it; maps is 0444
    assert mine["maps"] == "ok"
    assert "permission denied" in table["without SYS_PTRACE"]["maps"]
    assert "permission denied" in table["without SYS_PTRACE"]["environ"]
    # DAC_READ_SEARCH: environ is 0400 of the service's uid, so it needs DAC_READ_SEARCH as
    # well as SYS_PTRACE; and a file its owner alone may read. Not granted by default
    # (deploy/k8s/service-env.patch.yaml adds it): both read "permission denied", said so.
    for row in (mine, table["without DAC_READ_SEARCH"]):
        assert "permission denied" in row["environ"]
        assert "permission denied" in row["owner-only file"]
        assert row["maps"] == "ok"
    # SETUID/SETGID: nothing runs as the service under --root (a node's binaries are data)
    for row in table.values():
        assert row["run python3 as the service"].startswith("SourceMissing")
    assert table["without SETUID"] == table["without SETGID"] == full


def test_dropping_setuid_setgid_dac_changes_no_verdict_on_the_demo_node(node, tmp_path):
    a = in_pod(node, tmp_path, [EXE, *CHECK, "--root=/host"], caps=ISSUE_CAPS)
    b = in_pod(node, tmp_path, [EXE, *CHECK, "--root=/host"], caps=MANIFEST_CAPS)
    assert a.returncode == b.returncode == 1, (a.stderr[-1500:], b.stderr[-1500:])
    assert _verdicts(json.loads(a.stdout), "/host") == _verdicts(json.loads(b.stdout), "/host")


def test_the_script_follows_the_manifest(tmp_path):
    s = pod_script(tmp_path / "node", tmp_path / "r")
    assert "--bounding-set=-all,+sys_ptrace" in s and "--no-new-privs" in s
    assert re.search(r"mount --rbind '[^']*/node' \"\$R\"'/host'", s)
    assert "mount -o remount,bind,ro \"$R\"'/host'" in s and "mount -o remount,ro \"$R\"" in s
    assert "'ASCEND_VISIBLE_DEVICES=all'" in s and "'--reuid=0'" not in s and "--reuid=0" in s
