"""The block audit of the demo host: duplicate KV block ids under high concurrency.

Seed 000_93c34712512482cd.txt §5.3: long-context answers repeated sentences under load and
the block tables held duplicate ids. The log is produced by the real plugin code
(``doctor.vllm_plugin.install_v1``) wrapped around the miniature V1 scheduler, with one
double allocation injected mid-run, and stored where the service's
ASCEND_DOCTOR_BLOCK_AUDIT would point.
"""

from __future__ import annotations

import os
import tempfile

from ...bundle import BundleWriter

AUDIT_PATH = "/var/log/vllm/block_audit.jsonl"
DEMO_INPUTS = {"block_audit": AUDIT_PATH}  # read by `ascend-doctor demo` (manifest demo_inputs)
ENGINE_PID = 4790  # the EngineCore child of the demo's vLLM server
START = 1763608320.0  # 2025-11-20T03:12:00Z, the bundle's time


def audit_log() -> bytes:
    """A deterministic audit log: 64 long prompts, 24 live, block 128, one duplicate."""
    from ...vllm_plugin import AuditState, install_v1
    from ...vllm_plugin.sim import MiniScheduler, run, workload

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "block_audit.jsonl")
        st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": path})
        sched = MiniScheduler(num_blocks=1400, block_size=128, prefix_caching=True,
                              max_num_seqs=24, token_budget=8192, seed=3,
                              inject={61: "duplicate"})
        workload(sched, 64, shared_prefix=1024, groups=2, prompt=(1500, 5200),
                 max_tokens=(16, 64), seed=5)
        rec = install_v1(sched, st)
        rec.header.update(pid=ENGINE_PID, vllm="0.23.0",
                          scheduler="vllm.v1.core.sched.scheduler.Scheduler")
        ticks = iter(range(1_000_000))
        rec.clock = lambda: START + next(ticks) * 0.05
        run(sched)
        with open(path, "rb") as fh:
            return fh.read()


def build(w: BundleWriter) -> None:
    w.file(AUDIT_PATH, audit_log())
