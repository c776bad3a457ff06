"""The NET and PROF knowledge entries: bilingual, pointing at real checks and fix recipes."""

from __future__ import annotations

from ascend_doctor import knowledge
from ascend_doctor.registry import Registry

FIXES = {"dns.hosts-pin", "sysctl.tcp-ports", None}


def test_entries_are_bilingual_and_wired():
    kb = knowledge.load()
    reg = Registry.discover(plugins=False)
    mine = [e for e in kb.entries.values() if e.id.startswith(("ASC-NET-", "ASC-PROF-"))]
    assert {e.id for e in mine} >= {"ASC-NET-001", "ASC-NET-002", "ASC-NET-003", "ASC-NET-004",
                                    "ASC-PROF-001", "ASC-PROF-002"}
    for e in mine:
        assert e.title["zh"] and e.cause["zh"] and all(s["zh"] for s in e.steps), e.id
        assert e.checks and all(c in reg.checks for c in e.checks), e.id
        assert e.fix in FIXES and e.sources
    # issue 15: sources are public URLs or named public documents, not seed files
    for eid in ("ASC-NET-001", "ASC-PROF-001"):
        assert any(s.startswith("https://") for s in kb.get(eid).sources), eid
        assert not any(s.startswith(("seed:", "facts:")) for s in kb.get(eid).sources), eid


def test_port_exhaustion_signature_triages():
    kb = knowledge.load()
    hits = kb.match_lines(["java.net.BindException: Cannot assign requested address"])
    assert any(m.entry.id == "ASC-NET-004" for m in hits)
