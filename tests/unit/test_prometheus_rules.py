"""deploy/prometheus/: the PrometheusRule object holds exactly the plain rules file's groups,
promtool's unit tests pass (each alert has a case that fires and one that stays quiet), and
the demo node, exported through the real exporter code, pages for each of its high and
critical failing findings while a node with only medium ones stays quiet."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
PROM = REPO / "deploy" / "prometheus"
RULES = PROM / "ascend-doctor-rules.yml"
OBJECT = PROM / "ascend-doctor-rules.prometheusrule.yaml"
PAGING = ("critical", "high")


def _promtool() -> str:
    p = shutil.which("promtool")
    if p is None:
        pytest.skip("promtool (Debian package prometheus, installed by .ci/run) is missing")
    return p


def test_prometheusrule_object_holds_the_same_rules():
    plain = yaml.safe_load(RULES.read_text())
    obj = yaml.safe_load(OBJECT.read_text())
    assert (obj["apiVersion"], obj["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert obj["metadata"]["namespace"] == "ascend-doctor"
    expected = yaml.safe_dump({"spec": {"groups": plain["groups"]}}, sort_keys=False, width=100)
    assert obj["spec"]["groups"] == plain["groups"], (
        f"{OBJECT.name} differs from {RULES.name}; its spec should be:\n{expected}")


def test_every_alert_has_a_firing_and_a_quiet_case():
    plain = yaml.safe_load(RULES.read_text())
    tests = yaml.safe_load((PROM / "ascend-doctor-rules.test.yml").read_text())["tests"]
    cases = [c for t in tests for c in t.get("alert_rule_test", [])]
    for g in plain["groups"]:
        for r in g["rules"]:
            if "alert" not in r:
                continue
            mine = [c for c in cases if c["alertname"] == r["alert"]]
            assert any(c["exp_alerts"] for c in mine), f"{r['alert']}: no case where it fires"
            assert any(not c["exp_alerts"] for c in mine), f"{r['alert']}: no quiet case"


def test_promtool_unit_tests_pass():
    p = subprocess.run([_promtool(), "test", "rules", "ascend-doctor-rules.test.yml"],
                       cwd=PROM, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "SUCCESS" in p.stdout + p.stderr, p.stdout + p.stderr


def test_podmonitor_sets_the_job_the_rules_select():
    pm = yaml.safe_load((REPO / "deploy" / "k8s" / "podmonitor.yaml").read_text())
    (ep,) = pm["spec"]["podMetricsEndpoints"]
    assert {"targetLabel": "job", "replacement": "ascend-doctor"} in ep["relabelings"]
    assert 'up{job="ascend-doctor"}' in RULES.read_text()


def _findings_series(exposition: bytes) -> list[tuple[dict[str, str], float]]:
    out = []
    for fam in text_string_to_metric_families(exposition.decode()):
        if fam.name == "ascend_doctor_findings":
            out += [(dict(s.labels), s.value) for s in fam.samples]
    return out


def test_demo_node_pages_and_a_medium_only_node_does_not(tmp_path):
    promtool = _promtool()
    from ascend_doctor.cli import build_options, demo_host
    from ascend_doctor.cli_exporter import FAULT_SAMPLING_CHECKS, run_once
    from ascend_doctor.exporter import exposition

    snap = run_once(demo_host, build_options({"service_url": None}), FAULT_SAMPLING_CHECKS,
                    None, "demo", 0.0)
    assert snap.report is not None
    series = _findings_series(exposition(snap))
    # what should page, computed from the report, not from the exposition
    want: dict[tuple[str, str], int] = {}
    for _, f in snap.report.findings():
        if f.status.value == "fail" and f.severity.value in PAGING:
            for kb in f.kb or ("none",):
                want[(kb, f.severity.value)] = want.get((kb, f.severity.value), 0) + 1
    assert len(want) >= 5, want  # the demo is a badly broken node
    quiet = [(lab, v) for lab, v in series if lab["severity"] not in PAGING]
    assert quiet, "the demo has medium/low findings too: the quiet node is built from them"
    inputs = []
    for node, rows in (("demo", series), ("medium-only", quiet)):
        for lab, v in rows:
            lab = dict(lab, node=node, instance=f"{node}:9464")
            sel = ",".join(f'{k}="{lab[k]}"' for k in sorted(lab))
            inputs.append({"series": f"ascend_doctor_findings{{{sel}}}", "values": f"{v:g}x10"})
    exp = [{"exp_labels": {"severity": "critical", "node": "demo", "instance": "demo:9464",
                           "kb": kb, "finding_severity": sev},
            "exp_annotations": {"summary": (
                f"ascend-doctor on demo:9464 reports {sev} problem {kb} ({n} failing "
                f"finding(s); see `ascend-doctor explain {kb}`)")}}
           for (kb, sev), n in sorted(want.items())]
    doc = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": inputs,
        "alert_rule_test": [{"eval_time": "5m", "alertname": "AscendDoctorSevereFinding",
                             "exp_alerts": exp}]}]}
    test = tmp_path / "demo.test.yml"
    test.write_text(yaml.safe_dump(doc))
    p = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
