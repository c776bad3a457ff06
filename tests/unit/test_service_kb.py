"""The service/config/perf/log knowledge entries: bilingual, wired to real checks and fix ids,
signatures that compile and match the real lines they are for; the demo shows the service."""

from __future__ import annotations

import json
import re

from ascend_doctor import knowledge
from ascend_doctor.registry import Registry

FIXES = {"ldconf.ascend-conf", "service.env", "dns.hosts-pin", "sysctl.tcp-ports",
         "service.launch-flags", "versions.pip-match", "tlb.hugepages"}
MINE = ("svc", "cfg", "perf", "log")


def entries():
    return [e for e in knowledge.load().entries.values() if e.domain in MINE]


def test_entries_bilingual_and_wired():
    checks = set(Registry.discover(plugins=False).checks)
    es = entries()
    assert len(es) >= 30
    for e in es:
        assert re.fullmatch(r"ASC-(SVC|CFG|PERF|LOG)-\d{3}", e.id), e.id
        for field in (e.title, e.cause):
            assert field.get("en") and field.get("zh"), e.id
        assert e.steps and all(s.get("en") and s.get("zh") for s in e.steps), e.id
        assert e.checks and set(e.checks) <= checks, (e.id, set(e.checks) - checks)
        assert e.fix is None or e.fix in FIXES, e.id
        assert e.sources, e.id
        for a in e.advice:
            assert a.get("en") and a.get("zh") and a.get("when"), e.id
        e.compiled  # every signature compiles


REAL_LINES = {
    "ASC-LOG-001": "RuntimeError: SetDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:38 NPU "
                   "function error: c10_npu::SetDevice(device_id_), error code is 507033",
    "ASC-LOG-002": "EZ9999: Inner Error! numHeads / numKvHeads = 8, MLA only support {32, 64, 128}",
    "ASC-LOG-003": "EI0002: [PID: 1] The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [1].",
    "ASC-UPS-019": "EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time.",
    "ASC-LOG-004": "RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 0; 60.97 GiB total",
    "ASC-VER-007": "RuntimeError: Failed to infer device type",  # ASC-LOG-005 merged into it
    "ASC-LOG-006": "ValueError: No available memory for the cache blocks. Try increasing "
                   "`gpu_memory_utilization` when initializing the engine.",
    "ASC-LOG-007": "NPUGraph.cpp AclmdlRICaptureBegin error code is 207008 EL0009 The stream resources "
                   "are insufficient",
    "ASC-LOG-008": "ACL stream synchronize failed, error code:507035 ... error code is 507014 aicore timeout",
    "ASC-SVC-002": "ERROR 11-20 [core.py:711] EngineCore encountered a fatal error.",
    "ASC-CFG-009": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
}


def test_signatures_match_real_lines_first():
    kb = knowledge.load()
    for eid, line in REAL_LINES.items():
        ids = [m.entry.id for m in kb.match_lines([line])]
        if kb.entries[eid].generic and eid not in ids:
            # issue 15: a generic entry ranks only when no specific one explains the line
            assert ids and not kb.entries[ids[0]].generic, (eid, ids)
            continue
        assert eid in ids, (eid, ids)
    assert not kb.match_lines(["INFO 11-20 [api_server.py:1971] Starting vLLM API server 0"])


def test_demo_reports_the_service(cli):
    r = cli("demo", "--json")
    doc = json.loads(r.stdout)
    by = {c["id"]: c for c in doc["checks"]}
    assert by["tlb.faults"]["status"] == "fail"
    assert "12 000/s" in by["tlb.faults"]["findings"][0]["message"]
    assert by["config.block-size"]["findings"][0]["evidence"]["effective"] == 32
    assert by["service.metrics"]["status"] == "fail"
    assert by["logs.signatures"]["status"] == "fail"
    assert "hf_demoSecret" not in r.stdout and "sk-demo" not in r.stdout
