"""deploy/k8s/ against the Kubernetes OpenAPI schemas (kubernetes-validate ships them, so
this runs offline; there is no cluster here), plus what no schema knows: the PodMonitor
(a Prometheus Operator CRD kubernetes-validate has no schema for) matches the DaemonSet,
the containers' args are real `ascend-doctor` options, and the least-privilege settings."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
kv = pytest.importorskip("kubernetes_validate")

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
VERSION = "1.30.0"  # the oldest we claim; strict: unknown fields are errors


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _one(name: str) -> dict:
    (d,) = _docs(name)
    return d


CORE = ("namespace.yaml", "serviceaccount.yaml", "daemonset.yaml", "collect-cronjob.yaml")


@pytest.mark.parametrize("name", CORE)
@pytest.mark.parametrize("version", [VERSION, kv.latest_version()])
def test_manifest_validates_strictly(name, version):
    for doc in _docs(name):
        kv.validate(doc, version, strict=True)


def test_the_validator_rejects_a_broken_daemonset():
    ds = _one("daemonset.yaml")
    bad = copy.deepcopy(ds)
    bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, VERSION, strict=True)
    bad = copy.deepcopy(ds)
    bad["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "9464"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, VERSION, strict=True)


def _merge(base, patch):
    """Strategic-merge enough for our patch: dicts merge, lists of named items merge by name."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(patch, list) and all(
            isinstance(x, dict) and "name" in x for x in base + patch):
        by = {x["name"]: x for x in base}
        return [_merge(by[p["name"]], p) if p["name"] in by else p for p in patch] + [
            x for x in base if x["name"] not in {p["name"] for p in patch}]
    return patch


def test_privileged_patch_applies_and_validates():
    merged = _merge(_one("daemonset.yaml"), _one("npu-smi-privileged.patch.yaml"))
    kv.validate(merged, VERSION, strict=True)
    (c,) = merged["spec"]["template"]["spec"]["containers"]
    assert c["securityContext"]["privileged"] is True and c["volumeMounts"]


def test_kustomization_lists_every_resource():
    k = _one("kustomization.yaml")
    assert k["kind"] == "Kustomization"
    assert sorted(k["resources"]) == sorted(
        p.name for p in K8S.glob("*.yaml")
        if p.name not in ("kustomization.yaml", "npu-smi-privileged.patch.yaml"))
    assert "npu-smi-privileged.patch.yaml" in (K8S / "kustomization.yaml").read_text()


def _pod(doc: dict) -> dict:
    spec = doc["spec"]
    return (spec["jobTemplate"]["spec"]["template"] if doc["kind"] == "CronJob"
            else spec["template"])


def test_podmonitor_selects_the_exporter_port():
    pm, ds = _one("podmonitor.yaml"), _one("daemonset.yaml")
    assert (pm["apiVersion"], pm["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    labels = _pod(ds)["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (ep,) = pm["spec"]["podMetricsEndpoints"]
    (c,) = _pod(ds)["spec"]["containers"]
    assert ep["port"] in {p["name"] for p in c["ports"]} and ep["path"] == "/metrics"
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in \
        ep["relabelings"]


def test_container_args_are_real_cli_options():
    from ascend_doctor.cli import main

    ds, cj = _one("daemonset.yaml"), _one("collect-cronjob.yaml")
    (c,) = _pod(ds)["spec"]["containers"]
    sub = main.get_command(None, c["args"][0])
    ctx = sub.make_context(c["args"][0], list(c["args"][1:]))
    assert ctx.params["port"] == c["ports"][0]["containerPort"]
    assert ctx.params["listen"] == "0.0.0.0"
    for probe in ("livenessProbe", "readinessProbe"):  # never /healthz: degraded != dead
        assert c[probe]["httpGet"]["path"] == "/metrics"
    (j,) = _pod(cj)["spec"]["containers"]
    main.get_command(None, j["args"][0]).make_context(j["args"][0], list(j["args"][1:]))


@pytest.mark.parametrize("name", ["daemonset.yaml", "collect-cronjob.yaml"])
def test_least_privilege(name):
    doc = _one(name)
    pod = _pod(doc)["spec"]
    assert pod["hostPID"] is True and pod["automountServiceAccountToken"] is False
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc.get("privileged", False) is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"]["add"]) <= {"SYS_PTRACE", "DAC_READ_SEARCH", "SETUID", "SETGID"}
    assert c["resources"]["limits"]["memory"] and c["resources"]["limits"]["cpu"]
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    writable = {host[n] for n in host if not mounts[n].get("readOnly")}
    assert writable == ({"/var/lib/ascend-doctor/bundles"} if doc["kind"] == "CronJob" else set())
    assert {"/etc/ld.so.conf", "/etc/ld.so.conf.d", "/usr/local/Ascend"} <= set(host.values())
    if doc["kind"] == "DaemonSet":
        assert {f"/dev/davinci{i}" for i in range(8)} | {"/dev/davinci_manager"} <= set(host.values())
