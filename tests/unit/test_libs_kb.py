"""knowledge/libs.toml: bilingual entries whose checks exist, whose fix ids are recipes of
HACKING.md, and whose signatures find the real error lines (for triage)."""

from __future__ import annotations

import re

from ascend_doctor import knowledge
from ascend_doctor.registry import Registry

RECIPES = {"ldconf.ascend-conf", "service.env", "dns.hosts-pin", "sysctl.tcp-ports",
           "service.launch-flags", "versions.pip-match", "tlb.hugepages"}


def test_lib_entries_are_complete():
    kb = knowledge.load()
    checks = set(Registry.discover(plugins=False).checks)
    libs = [e for e in kb.entries.values() if e.domain == "libs"]
    # ASC-LIB-007 merged into ASC-CTR-004 (issue 15): the id still resolves, as an alias
    assert {f"ASC-LIB-{n:03d}" for n in range(1, 13)} - {"ASC-LIB-007"} <= {e.id for e in libs}
    assert kb.get("ASC-LIB-007").id == "ASC-CTR-004"
    for e in libs:
        assert re.fullmatch(r"ASC-LIB-\d{3}", e.id)
        for field in ("title", "cause"):
            assert getattr(e, field).get("en") and getattr(e, field).get("zh"), (e.id, field)
        assert e.steps and all(s.get("en") and s.get("zh") for s in e.steps), e.id
        assert e.checks and set(e.checks) <= checks, (e.id, set(e.checks) - checks)
        assert e.fix is None or e.fix in RECIPES, e.id
        assert e.sources, e.id
        for rx in e.signatures:
            re.compile(rx)


def test_signatures_find_the_real_error_lines():
    kb = knowledge.load()
    cases = {
        "ImportError: libhccl.so: cannot open shared object file: No such file or directory":
            ("ASC-LIB-006", "libhccl.so"),
        "OSError: libascend_hal.so: cannot open shared object file: No such file or directory":
            ("ASC-CTR-004", "libascend_hal.so"),  # ASC-LIB-007 merged into it
        "python: error while loading shared libraries: libmmpa.so: cannot open shared object file":
            ("ASC-LIB-001", "libmmpa.so"),
    }
    for line, (eid, lib) in cases.items():
        matches = kb.match_lines([line])
        ids = [m.entry.id for m in matches]
        assert eid in ids, (line, ids)
        m = next(m for m in matches if m.entry.id == eid)
        assert m.groups.get("lib") == lib
