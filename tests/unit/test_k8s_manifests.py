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


CORE = ("namespace.yaml", "serviceaccount.yaml", "daemonset.yaml", "collect-cronjob.yaml",
        "networkpolicy.yaml")


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


def test_service_env_patch_adds_only_dac_read_search():
    merged = _merge(_one("daemonset.yaml"), _one("service-env.patch.yaml"))
    kv.validate(merged, VERSION, strict=True)
    (c,) = merged["spec"]["template"]["spec"]["containers"]
    assert c["securityContext"]["capabilities"]["add"] == ["SYS_PTRACE", "DAC_READ_SEARCH"]
    assert c["securityContext"]["readOnlyRootFilesystem"] and c["volumeMounts"]


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
        if p.name not in ("kustomization.yaml", "npu-smi-privileged.patch.yaml",
                          "service-env.patch.yaml"))
    for patch in ("npu-smi-privileged.patch.yaml", "service-env.patch.yaml"):
        assert patch in (K8S / "kustomization.yaml").read_text()


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


def _here(args: list[str], root: str) -> list[str]:
    """The args with --root=/host pointing at a directory that exists here (click checks)."""
    return [f"--root={root}" if a == "--root=/host" else a for a in args]


def test_container_args_are_real_cli_options(tmp_path):
    from ascend_doctor.cli import main

    ds, cj = _one("daemonset.yaml"), _one("collect-cronjob.yaml")
    (c,) = _pod(ds)["spec"]["containers"]
    sub = main.get_command(None, c["args"][0])
    ctx = sub.make_context(c["args"][0], _here(list(c["args"][1:]), str(tmp_path)))
    assert ctx.params["root"] == str(tmp_path)
    assert ctx.params["port"] == c["ports"][0]["containerPort"]
    assert ctx.params["listen"] == "0.0.0.0"
    for probe in ("livenessProbe", "readinessProbe"):  # never /healthz: degraded != dead
        assert c[probe]["httpGet"]["path"] == "/metrics"
    (j,) = _pod(cj)["spec"]["containers"]
    jctx = main.get_command(None, j["args"][0]).make_context(
        j["args"][0], _here(list(j["args"][1:]), str(tmp_path)))
    assert jctx.params["root"] == str(tmp_path)


@pytest.mark.parametrize("name", ["daemonset.yaml", "collect-cronjob.yaml"])
def test_least_privilege(name):
    doc = _one(name)
    pod = _pod(doc)["spec"]
    assert pod["hostPID"] is True and pod["automountServiceAccountToken"] is False
    assert "priorityClassName" not in pod  # never system-node-critical: it may evict serving
    assert not pod.get("hostNetwork") and not pod.get("hostIPC")
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc.get("privileged", False) is False
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}
    assert c["resources"]["limits"]["memory"] and c["resources"]["limits"]["cpu"]
    host = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    # the node's / read-only at /host (the node-exporter pattern), and no device hostPaths
    root = [n for n, h in host.items() if h["path"] == "/"]
    assert root and mounts[root[0]]["mountPath"] == "/host" and mounts[root[0]]["readOnly"]
    assert mounts[root[0]]["recursiveReadOnly"] in ("Enabled", "IfPossible")
    assert not [h for h in host.values() if h.get("type") == "CharDevice"]
    assert "--root=/host" in c["args"]
    writable = {host[n]["path"] for n in host if not mounts[n].get("readOnly")}
    assert writable == ({"/var/lib/ascend-doctor/bundles"} if doc["kind"] == "CronJob" else set())


def test_daemonset_gets_npus_through_the_ascend_docker_runtime_on_every_ascend_node():
    pod = _pod(_one("daemonset.yaml"))["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["ASCEND_VISIBLE_DEVICES"] == "all" and env["ASCEND_DOCTOR_NODE_TOOLS"] == "npu-smi"
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    (expr,) = term["matchExpressions"]
    assert expr["key"] == "accelerator" and {"huawei-Ascend910", "huawei-Ascend310P"} <= set(
        expr["values"])
    tolerated = {t["key"] for t in pod["tolerations"]}
    assert {"huawei.com/Ascend910", "huawei.com/Ascend310P"} <= tolerated


def test_networkpolicy_admits_prometheus_and_reaches_only_vllm_and_npu_exporter():
    np_, ds = _one("networkpolicy.yaml"), _one("daemonset.yaml")
    assert np_["spec"]["podSelector"]["matchLabels"].items() <= _pod(ds)["metadata"][
        "labels"].items()
    assert set(np_["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    (ing,) = np_["spec"]["ingress"]
    (c,) = _pod(ds)["spec"]["containers"]
    assert [p["port"] for p in ing["ports"]] == [c["ports"][0]["containerPort"]]
    (eg,) = np_["spec"]["egress"]
    assert sorted(p["port"] for p in eg["ports"]) == [8000, 8082] and "to" not in eg
