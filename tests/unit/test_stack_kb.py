"""The stack's knowledge entries: bilingual, pointing at checks that exist and known fixes."""

from __future__ import annotations

from ascend_doctor import knowledge
from ascend_doctor.registry import Registry

FIXES = {"ldconf.ascend-conf", "service.env", "dns.hosts-pin", "sysctl.tcp-ports",
         "service.launch-flags", "versions.pip-match", "tlb.hugepages"}


def test_stack_entries_are_complete():
    kb = knowledge.load()
    checks = set(Registry.discover(plugins=False).checks)
    mine = [e for e in kb.entries.values() if e.domain in ("versions", "npu", "ctr")]
    assert len(mine) >= 20
    for e in mine:
        for part in (e.title, e.cause):
            assert part.get("en") and part.get("zh"), e.id
        assert e.steps and all(s.get("en") and s.get("zh") for s in e.steps), e.id
        assert e.checks and set(e.checks) <= checks, (e.id, set(e.checks) - checks)
        assert e.fix is None or e.fix in FIXES, e.id
        assert e.sources, e.id
        e.compiled  # signatures compile


def test_signatures_match_real_strings():
    kb = knowledge.load()
    cases = {
        "ImportError: libhccl.so: cannot open shared object file: No such file or directory": "ASC-VER-009",
        "RuntimeError: Failed to load the backend extension: torch_npu. You can disable extension "
        "auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.": "ASC-VER-009",
        "dcmi module initialize failed. ret is -8005": "ASC-NPU-004",
        "ImportError: libascend_hal.so: cannot open shared object file: No such file or directory": "ASC-CTR-004",
        "RuntimeError: Failed to infer device type": "ASC-VER-007",
        "ASCEND_DEVICE_NOT_FOUND": "ASC-NPU-006",
    }
    for line, want in cases.items():
        assert want in [m.entry.id for m in kb.match_lines([line])], line
