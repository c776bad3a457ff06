"""The vLLM general plugin: recording on vLLM 0.11-shaped objects, disabling, entry point."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from ascend_doctor.vllm_plugin import AuditState, install_v1, patch_v0
from ascend_doctor.vllm_plugin.sim import (CacheConfig, CachedRequestData, KVCacheConfig,
                                    KVCacheGroupSpec, FullAttentionSpec, NewRequestData,
                                    SchedulerOutput)

REPO = Path(__file__).resolve().parents[2]


def output_011() -> SchedulerOutput:
    """A SchedulerOutput of vLLM 0.11 (vllm/v1/core/sched/output.py field names)."""
    return SchedulerOutput(
        scheduled_new_reqs=[NewRequestData("cmpl-a-0", [1] * 300, [], None, None,
                                           ([7, 8, 9],), 256)],
        scheduled_cached_reqs=CachedRequestData(
            req_ids=["cmpl-b-0", "cmpl-c-0"], resumed_from_preemption=[False, True],
            new_token_ids=[[], []], new_block_ids=[None, ([3, 4],)],
            num_computed_tokens=[511, 0]),
        num_scheduled_tokens={"cmpl-a-0": 44, "cmpl-b-0": 1, "cmpl-c-0": 200},
        total_num_scheduled_tokens=245, scheduled_spec_decode_tokens={},
        scheduled_encoder_inputs={}, num_common_prefix_blocks=[0],
        finished_req_ids={"cmpl-z-0", "cmpl-y-0"})


class FakeKV:
    def __init__(self) -> None:
        self.freed: list[str] = []
        self.block_pool = SimpleNamespace(free_blocks=lambda blocks: None)  # vLLM 0.11 has one

    def free(self, request) -> None:
        self.freed.append(request.request_id)

    def get_block_ids(self, req_id):
        return ([1, 2],)


class FakeScheduler:
    """Just the attributes vLLM 0.11's Scheduler has that the plugin reads."""

    def __init__(self, outputs) -> None:
        self.cache_config = CacheConfig(block_size=128, enable_prefix_caching=True,
                                        num_gpu_blocks=5765)
        self.kv_cache_config = KVCacheConfig(5765, [], [KVCacheGroupSpec(["l0"],
                                                                         FullAttentionSpec(128))])
        self.kv_cache_manager = FakeKV()
        self.outputs = list(outputs)

    def schedule(self):
        return self.outputs.pop(0)


def lines(path) -> list[dict]:
    from ascend_doctor.vllm_plugin.recorder import flush_all

    flush_all()  # lines are written in batches (64 steps or 500 ms): write them before reading
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def test_records_vllm_011_scheduler_output(tmp_path):
    path = tmp_path / "a.jsonl"
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(path)})
    sched = FakeScheduler([output_011()])
    install_v1(sched, st)
    sched.kv_cache_manager.free(SimpleNamespace(request_id="cmpl-q-0"))  # a preemption
    out = sched.schedule()
    assert out.total_num_scheduled_tokens == 245  # the engine gets vLLM's object back
    assert sched.kv_cache_manager.freed == ["cmpl-q-0"]  # the original free still runs
    hdr, s = lines(path)
    assert hdr["t"] == "hdr" and hdr["engine"] == "v1" and hdr["num_gpu_blocks"] == 5765
    assert hdr["block_size"] == 128 and hdr["prefix_caching"] is True
    assert hdr["groups"] == ["FullAttentionSpec"] and hdr["freed_tracking"] is True
    assert hdr["pid"] == os.getpid() and hdr["split"] == 1
    assert s == {"t": "s", "n": 1, "new": [["cmpl-a-0", [[7, 8, 9]], 256]],
                 "cc": {"ids": ["cmpl-b-0", "cmpl-c-0"], "res": [False, True],
                        "nb": [None, [[3, 4]]], "nc": [511, 0]},
                 "tok": {"cmpl-a-0": 44, "cmpl-b-0": 1, "cmpl-c-0": 200},
                 "fin": ["cmpl-y-0", "cmpl-z-0"], "freed": ["cmpl-q-0"]}


def test_records_vllm_09_list_and_newer_resumed_set_forms(tmp_path):
    o09 = output_011()
    o09.scheduled_cached_reqs = [
        SimpleNamespace(req_id="cmpl-b-0", resumed_from_preemption=False, new_token_ids=[],
                        new_block_ids=[[5]], num_computed_tokens=511)]
    newer = output_011()
    newer.scheduled_cached_reqs = SimpleNamespace(
        req_ids=["cmpl-b-0", "cmpl-c-0"], resumed_req_ids={"cmpl-c-0"},
        new_block_ids=[None, ([3, 4],)], num_computed_tokens=[511, 0], new_token_ids=[[], []])
    path = tmp_path / "b.jsonl"
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(path)})
    sched = FakeScheduler([o09, newer])
    install_v1(sched, st)
    sched.schedule(), sched.schedule()
    _, a, b = lines(path)
    assert a["cc"] == {"ids": ["cmpl-b-0"], "res": [False], "nb": [[[5]]], "nc": [511]}
    assert b["cc"] == {"ids": ["cmpl-b-0", "cmpl-c-0"], "res": [False, True],
                       "nb": [None, [[3, 4]]], "nc": [511, 0]}
    assert st.enabled


@pytest.mark.parametrize("missing", ["finished_req_ids", "scheduled_cached_reqs",
                                     "num_scheduled_tokens", "block_ids", "req_ids"])
def test_missing_attribute_disables_once_and_never_raises(tmp_path, caplog, missing):
    good = output_011()
    if missing == "block_ids":
        good.scheduled_new_reqs = [SimpleNamespace(req_id="x", num_computed_tokens=0)]
    elif missing == "req_ids":
        good.scheduled_cached_reqs = SimpleNamespace(new_block_ids=[], num_computed_tokens=[])
    else:
        delattr(good, missing)
    path = tmp_path / "c.jsonl"
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(path)})
    sched = FakeScheduler([good, output_011(), output_011()])
    install_v1(sched, st)
    with caplog.at_level(logging.WARNING, logger="vllm.ascend_doctor.block_audit"):
        results = [sched.schedule() for _ in range(3)]
    assert all(r is not None for r in results)  # the engine kept running
    assert not st.enabled and "AttributeError" in st.reason
    warnings = [r for r in caplog.records if "block audit disabled" in r.getMessage()]
    assert len(warnings) == 1
    recs = lines(path)
    assert [r["t"] for r in recs] == ["hdr", "off"]  # nothing recorded after disabling
    assert "SchedulerOutput" in recs[1]["reason"]


def test_unexpected_scheduler_disables_at_install(tmp_path, caplog):
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(tmp_path / "d.jsonl")})
    sched = SimpleNamespace(schedule=lambda: 1, kv_cache_manager=FakeKV())  # no cache_config
    with caplog.at_level(logging.WARNING, logger="vllm.ascend_doctor.block_audit"):
        assert install_v1(sched, st) is None
        assert install_v1(sched, st) is None
    assert not st.enabled and "cache_config" in st.reason
    assert sum("disabled" in r.getMessage() for r in caplog.records) == 1
    assert sched.schedule() == 1  # untouched


def test_failing_free_hook_never_breaks_the_free(tmp_path):
    class Flaky:  # the plugin's read fails, vLLM's own read works
        reads = 0

        @property
        def request_id(self):
            Flaky.reads += 1
            if Flaky.reads == 1:
                raise RuntimeError("boom")
            return "cmpl-r-0"

    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(tmp_path / "e.jsonl")})
    sched = FakeScheduler([output_011()])
    install_v1(sched, st)
    sched.kv_cache_manager.free(Flaky())
    assert not st.enabled and "boom" in st.reason
    assert sched.kv_cache_manager.freed == ["cmpl-r-0"]  # the real free still ran
    assert sched.schedule() is not None


def test_v0_records_seq_group_metadata_block_tables(tmp_path):
    @dataclass
    class SequenceGroupMetadata:  # vllm/sequence.py names
        request_id: str
        is_prompt: bool
        block_tables: dict
        computed_block_nums: list | None = None

    class Scheduler:  # V0 vllm/core/scheduler.py: schedule() -> (metadata, outputs, async)
        def __init__(self):
            self.cache_config = SimpleNamespace(num_gpu_blocks=900, block_size=16,
                                                enable_prefix_caching=False)

        def schedule(self):
            return ([SequenceGroupMetadata("r1", False, {0: [1, 2], 1: [1, 3]}),
                     SequenceGroupMetadata("r2", True, {2: [2, 4]}, [])], object(), False)

    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(tmp_path / "v0.jsonl")})
    patch_v0(Scheduler, st)
    patch_v0(Scheduler, st)  # idempotent
    s = Scheduler()
    assert len(s.schedule()) == 3
    hdr, rec = lines(tmp_path / "v0.jsonl")
    assert hdr["engine"] == "v0" and hdr["num_gpu_blocks"] == 900
    assert rec == {"t": "s0", "n": 1, "g": [["r1", {"0": [1, 2], "1": [1, 3]}, None],
                                            ["r2", {"2": [2, 4]}, []]]}
    from ascend_doctor.checks.block_tables import replay
    from ascend_doctor.probes.block_audit import parse_text
    r = replay(parse_text((tmp_path / "v0.jsonl").read_bytes()))
    assert r.counts == {"other-position": 1}  # block 2: r1 index 1, r2 index 0


def test_entry_point_is_declared_in_the_installed_distribution():
    from importlib.metadata import distribution, entry_points

    eps = [e for e in distribution("ascend-doctor").entry_points
           if e.group == "vllm.general_plugins"]
    assert [(e.name, e.value) for e in eps] == [("ascend_doctor_block_audit",
                                                 "ascend_doctor.vllm_plugin:register")]
    (ep,) = [e for e in entry_points(group="vllm.general_plugins")
             if e.name == "ascend_doctor_block_audit"]
    assert callable(ep.load())


def _run(code: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_DOCTOR_BLOCK_AUDIT")}
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([str(cwd), str(REPO)])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=e, cwd=cwd, timeout=120)


def test_inert_without_the_env_var(tmp_path):
    r = _run("""
        import sys
        from importlib.metadata import entry_points
        n = len(sys.meta_path)
        (ep,) = [e for e in entry_points(group="vllm.general_plugins")
                 if e.name == "ascend_doctor_block_audit"]
        ep.load()()          # what vllm.plugins.load_general_plugins does
        import ascend_doctor.vllm_plugin as p
        assert p.state() is None, "state created"
        assert len(sys.meta_path) == n, "import hook installed"
        assert not any(m.startswith("vllm") for m in sys.modules), "vllm imported"
        print("inert")
    """, {}, tmp_path)
    assert r.returncode == 0 and "inert" in r.stdout, r.stderr


def fake_vllm(root: Path) -> None:
    """A stand-in `vllm` package: the V1 scheduler module and an AscendScheduler subclass."""
    for d in ("vllm", "vllm/v1", "vllm/v1/core", "vllm/v1/core/sched", "vllm_ascend",
              "vllm_ascend/core"):
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d / "__init__.py").write_text("")
    (root / "vllm/v1/core/sched/scheduler.py").write_text(
        "from ascend_doctor.vllm_plugin.sim import MiniScheduler\n\n"
        "class Scheduler(MiniScheduler):\n    pass\n")
    (root / "vllm_ascend/core/scheduler.py").write_text(
        "from vllm.v1.core.sched.scheduler import Scheduler\n\n"
        "class AscendScheduler(Scheduler):\n"
        "    calls = 0\n"
        "    def schedule(self):  # its own schedule(), like vllm-ascend 0.9-0.11\n"
        "        AscendScheduler.calls += 1\n"
        "        return super().schedule()\n")


def test_patches_the_scheduler_when_vllm_imports_it(tmp_path):
    fake_vllm(tmp_path)
    log = tmp_path / "audit-{pid}.jsonl"
    r = _run("""
        import os, sys
        from importlib.metadata import entry_points
        (ep,) = [e for e in entry_points(group="vllm.general_plugins")
                 if e.name == "ascend_doctor_block_audit"]
        ep.load()()
        assert "vllm.v1.core.sched.scheduler" not in sys.modules  # nothing imported early
        from vllm_ascend.core.scheduler import AscendScheduler
        from ascend_doctor.vllm_plugin.sim import workload, run
        s = AscendScheduler(num_blocks=200, inject={25: "duplicate"})
        workload(s, 40)
        steps = run(s)
        assert AscendScheduler.calls == steps
        print(os.getpid(), steps)
    """, {"ASCEND_DOCTOR_BLOCK_AUDIT": str(log)}, tmp_path)
    assert r.returncode == 0, r.stderr
    pid, steps = map(int, r.stdout.split())
    path = tmp_path / f"audit-{pid}.jsonl"
    recs = lines(path)
    assert recs[0]["scheduler"] == "vllm_ascend.core.scheduler.AscendScheduler"
    assert sum(x["t"] == "s" for x in recs) == steps  # once per step, not twice
    from ascend_doctor.checks.block_tables import replay
    from ascend_doctor.probes.block_audit import parse_text
    assert replay(parse_text(path.read_bytes())).counts["fresh-block-held"] == 1


def test_unwritable_audit_file_disables_without_raising(tmp_path, caplog):
    (tmp_path / "afile").write_text("x")
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(tmp_path / "afile" / "audit.jsonl")})
    sched = FakeScheduler([output_011(), output_011()])
    install_v1(sched, st)
    with caplog.at_level(logging.WARNING, logger="vllm.ascend_doctor.block_audit"):
        assert sched.schedule() is not None and sched.schedule() is not None
    assert not st.enabled and ("NotADirectory" in st.reason or "Errno" in st.reason)
    assert sum("disabled" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("layout,named", [
    ({"kv_cache_manager": None}, "Scheduler.kv_cache_manager"),
    ({"drop": "block_pool"}, "KVCacheManager.block_pool"),
    ({"drop": "free"}, "KVCacheManager.free()"),
])
def test_unknown_vllm_layout_turns_the_audit_off_with_one_line(tmp_path, caplog, monkeypatch,
                                                                layout, named):
    """A vLLM whose scheduler moved the KV cache manager / its free / its block pool (a fake
    module layout of a future version): one log line naming what was not found, no file
    written, the scheduler untouched; the version comes from ``vllm.__version__``."""
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(__version__="0.99.0"))
    import importlib.metadata as md

    def no_dist(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "version", no_dist)
    sched = FakeScheduler([output_011()])
    if "kv_cache_manager" in layout:
        sched.kv_cache_manager = None
    else:
        km = FakeKV()
        if layout["drop"] == "free":
            km = SimpleNamespace(get_block_ids=km.get_block_ids, block_pool=km.block_pool)
        else:
            del km.block_pool
        sched.kv_cache_manager = km
    path = tmp_path / "u.jsonl"
    st = AuditState({"ASCEND_DOCTOR_BLOCK_AUDIT": str(path)})
    orig = sched.schedule
    with caplog.at_level(logging.WARNING, logger="vllm.ascend_doctor.block_audit"):
        assert install_v1(sched, st) is None
    msgs = [r.getMessage() for r in caplog.records if "block audit" in r.getMessage()]
    assert len(msgs) == 1 and named in msgs[0] and "vLLM 0.99.0" in msgs[0], msgs
    assert not st.enabled and not path.exists()
    assert sched.schedule == orig and sched.schedule() is not None  # untouched, still runs
