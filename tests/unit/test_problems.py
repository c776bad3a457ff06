"""doctor/ranking.py and doctor/problems.py on hand-built results (issue 14)."""

from __future__ import annotations

from dataclasses import dataclass

from ascend_doctor import problems, ranking
from ascend_doctor.model import Category, CheckResult, Finding, HostInfo, Report, Severity, Status


@dataclass
class Entry:
    id: str
    severity: str

    def text(self, field: str, lang: str = "en") -> str:
        return f"title of {self.id}"


class KB:
    def __init__(self, **sev: str) -> None:
        self.entries = {k.replace("_", "-"): Entry(k.replace("_", "-"), v) for k, v in sev.items()}

    def get(self, kid: str):
        return self.entries.get(kid)


def res(cid: str, *findings: Finding, severity: Severity | None = None) -> CheckResult:
    return CheckResult(cid, cid, Category.LIBS, (), findings, severity=severity)


def report(*results: CheckResult) -> Report:
    return Report("0", HostInfo(), "sysroot", "", 0.0, results)


def test_severity_comes_from_the_kb_then_the_check_then_the_status():
    kb = KB(ASC_LIB_002="critical")
    f = Finding.fail("x", kb="ASC-LIB-002")
    assert ranking.severity(f, res("a.b", f), kb) is Severity.CRITICAL
    plain = Finding.fail("y")
    assert ranking.severity(plain, res("a.b", plain, severity=Severity.LOW)) is Severity.LOW
    assert ranking.severity(plain, res("a.b", plain)) is Severity.HIGH  # from status
    chosen = Finding.fail("z", severity=Severity.MEDIUM)
    assert ranking.severity(chosen, res("a.b", chosen, severity=Severity.LOW)) is Severity.MEDIUM


def test_a_crash_never_outranks_a_real_critical_or_high_fail():
    kb = KB(ASC_X_001="critical", ASC_CTR_001="critical")
    crash = res("a.crash", Finding.error("check crashed: KeyError", kb="ASC-X-001"))
    high = res("z.high", Finding.fail("a real failure"))
    assert ranking.severity(crash.findings[0], crash, kb) is Severity.MEDIUM
    assert ranking.worst(report(crash, high).findings(), kb)[0].check_id == "z.high"
    assert problems.group(report(crash, high), kb)[0].head[0].check_id == "z.high"
    warn = res("b.warn", Finding.warn("hot", kb="ASC-CTR-001"))
    assert ranking.severity(warn.findings[0], warn, kb) is Severity.MEDIUM  # warn capped


def test_findings_sharing_a_cause_are_one_problem_and_symptoms_follow_transitively():
    conf = "ldconf.unread:/etc/ld.so.conf.d/ascend.conf"
    rep = report(
        res("ldconf.reached", Finding.fail("not included", cause=conf)),
        res("ldconf.perms", Finding.fail("mode 0600", cause=conf)),
        res("libacl.resolve",
            Finding.fail("libhccl.so not found", subject="libhccl.so",
                         cause="libs.missing:libhccl.so", explained_by=conf),
            Finding.fail("libascendcl.so not found", subject="libascendcl.so",
                         cause="libs.missing:libascendcl.so", explained_by=conf)),
        res("torch_npu.import", Finding.fail("ImportError: libhccl.so",
                                             explained_by="libs.missing:libhccl.so")),
        res("dns.latency", Finding.fail("p99 200 ms", explained_by="dns.per-request:1.2.3.4")),
        res("other.ok", Finding.passed("fine")),
    )
    probs = problems.group(rep)
    assert [p.key for p in probs][0] == conf
    top = probs[0]
    assert {r.check_id for r, _ in top.roots} == {"ldconf.reached", "ldconf.perms"}
    assert sorted(r.check_id for r, _ in top.symptoms) == [
        "libacl.resolve", "libacl.resolve", "torch_npu.import"]
    # a cause that is not in the run explains nothing: the finding stands alone
    alone = [p for p in probs if p.head[0].check_id == "dns.latency"]
    assert len(alone) == 1 and not alone[0].symptoms
    assert len(probs) == 2
    # ordered by how much a problem explains among equal severities
    assert len(top.members) == 5


def test_explained_by_may_name_a_check_id_and_cycles_stop():
    rep = report(res("a.cause", Finding.fail("root")),
                 res("b.effect", Finding.fail("effect", explained_by="a.cause")),
                 res("c.x", Finding.fail("x", cause="k1", explained_by="k2")),
                 res("d.y", Finding.fail("y", cause="k2", explained_by="k1")))
    probs = problems.group(rep)
    by_head = {p.head[0].check_id: p for p in probs}
    assert [r.check_id for r, _ in by_head["a.cause"].symptoms] == ["b.effect"]
    members = sorted(r.check_id for p in probs for r, _ in p.members)
    assert members == ["a.cause", "b.effect", "c.x", "d.y"]  # each exactly once


def test_problems_are_ordered_by_severity_then_by_how_much_they_explain():
    kb = KB(ASC_LIB_002="high", ASC_NPU_002="critical")
    rep = report(
        res("a.one", Finding.fail("one", kb="ASC-LIB-002")),
        res("b.big", Finding.fail("big", kb="ASC-LIB-002", cause="k"),
            Finding.fail("b2", explained_by="k"), Finding.fail("b3", explained_by="k")),
        res("c.crit", Finding.fail("hot", kb="ASC-NPU-002")),
        res("d.warn", Finding.warn("w")),
    )
    order = [p.head[0].check_id for p in problems.group(rep, kb)]
    assert order == ["c.crit", "b.big", "a.one", "d.warn"]


def test_the_tui_worst_is_the_head_of_the_worst_problem():
    from ascend_doctor.tui.state import RunState

    kb = KB(ASC_LIB_002="high", ASC_NPU_002="critical")
    st = RunState()
    for r in (res("a.fix", Finding.fail("fixable", kb="ASC-LIB-002", fix="ldconf.ascend-conf")),
              res("b.crit", Finding.fail("86 °C", kb="ASC-NPU-002")),
              res("c.crash", Finding.error("check crashed"))):
        st.add(r)
    row, f = st.worst(kb)
    assert row.id == "b.crit" and f.message == "86 °C"
