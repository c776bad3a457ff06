"""Audit-log parsing and the block-table replay, on logs written by the real plugin code."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, strategies as st

from ascend_doctor.checks.block_tables import block_tables, findings_for, replay
from ascend_doctor.errors import SourceError, SourceMissing
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.block_audit import (BadLine, Header, StepV1, gather_block_audit, iter_records,
                                       parse_line, parse_text)
from ascend_doctor.probes.procs import ServiceEnv
from ascend_doctor.vllm_plugin import AuditState, install_v1
from ascend_doctor.vllm_plugin.sim import MiniScheduler, run, workload


def simulate(tmp_path, name="audit.jsonl", n=80, every=1, max_mb=None, **kw) -> tuple[str, MiniScheduler]:
    """Run the miniature V1 scheduler under the real plugin wrapper; returns the log path."""
    path = str(tmp_path / name)
    env = {"ASCEND_DOCTOR_BLOCK_AUDIT": path, "ASCEND_DOCTOR_BLOCK_AUDIT_EVERY": str(every)}
    st_ = AuditState(env)
    if max_mb is not None:
        st_.max_bytes = max_mb
    sched = MiniScheduler(**kw)
    workload(sched, n)
    assert install_v1(sched, st_) is not None
    run(sched)
    return path, sched


def audit(path: str):
    with open(path, "rb") as fh:
        return replay(iter_records(fh))


def statuses(path: str, r) -> list[Status]:
    return [f.status for f in findings_for(path, r)]


H = {"t": "hdr", "v": 1, "engine": "v1", "num_gpu_blocks": 100, "block_size": 16,
     "prefix_caching": True, "groups": ["FullAttentionSpec"], "split": 1, "freed_tracking": True}


def log(*recs: dict, header: dict | None = None) -> list:
    lines = [json.dumps(header if header is not None else H)] + [json.dumps(r) for r in recs]
    return parse_text("\n".join(lines) + "\n")


def step(n, new=(), cached=(), fin=(), freed=(), tok=None, full=False):
    d = {"t": "s", "n": n, "new": list(new), "cached": list(cached), "tok": tok or {}}
    if fin:
        d["fin"] = list(fin)
    if freed:
        d["freed"] = list(freed)
    if full:
        d["full"] = 1
    return d


# -- healthy logs --------------------------------------------------------------------------
def test_clean_concurrency_without_prefix_caching(tmp_path):
    path, sched = simulate(tmp_path, prefix_caching=False)
    r = audit(path)
    assert r.steps > 50 and r.requests == 80 and r.max_live > 20 and r.shares == 0
    (f,) = findings_for(path, r)
    assert f.status == Status.PASS and "80 requests" in f.message and f.evidence["steps"] == r.steps


def test_prefix_sharing_is_allowed(tmp_path):
    path, _ = simulate(tmp_path, prefix_caching=True)
    r = audit(path)
    assert r.shares > 50  # shared system prompts hit the prefix cache
    assert statuses(path, r) == [Status.PASS]


def test_resume_with_replace_after_preemption(tmp_path):
    path, sched = simulate(tmp_path, num_blocks=120, prefix_caching=True)
    assert sched.preemptions >= 3
    lines = [json.loads(x) for x in open(path)]
    assert any(True in x["cc"]["res"] for x in lines if x["t"] == "s")  # resumed: replace
    assert any(x.get("freed") for x in lines if x["t"] == "s")
    assert statuses(path, audit(path)) == [Status.PASS]


def test_sampled_log_uses_full_tables(tmp_path):
    path, sched = simulate(tmp_path, every=4, num_blocks=160)
    lines = [json.loads(x) for x in open(path)]
    steps = [x for x in lines if x["t"] == "s"]
    assert steps and all(x.get("full") == 1 for x in steps)
    assert all(x["n"] % 4 == 0 for x in steps)
    assert statuses(path, audit(path)) == [Status.PASS]


def test_rotation_keeps_each_file_self_contained(tmp_path):
    path, _ = simulate(tmp_path, n=120, max_mb=40_000)
    assert os.path.exists(path + ".1") and os.path.exists(path + ".2")
    assert not os.path.exists(path + ".3")  # keep = 2
    for p in (path, path + ".1"):
        first = json.loads(open(p).readline())
        assert first["t"] == "hdr" and first.get("rotation")
        assert os.path.getsize(p) <= 40_000 + 20_000
    lines = [json.loads(x) for x in open(path)]
    assert lines[2]["t"] == "s" and lines[2].get("full") == 1  # the step after the rotation
    assert statuses(path, audit(path)) == [Status.PASS]


def test_null_block_may_repeat():
    recs = log(step(1, new=[["a", [[0, 0, 5, 6]], 0], ["b", [[0, 7]], 0]], tok={"a": 64, "b": 32}))
    r = replay(recs)
    assert not r.counts and statuses("x", r) == [Status.PASS]


# -- broken logs --------------------------------------------------------------------------
def test_injected_duplicate_is_reported_with_step_requests_blocks(tmp_path):
    path, sched = simulate(tmp_path, inject={40: "duplicate"})
    (when, _, victim_req, block) = sched.injected[0]
    r = audit(path)
    fs = list(findings_for(path, r))
    assert fs[0].status == Status.FAIL and fs[0].kb == ("ASC-KV-001",)
    ev = fs[0].evidence
    assert ev["kind"] == "fresh-block-held" and ev["blocks"] == [block]
    ex = ev["examples"][0]
    assert ex["step"] == when and victim_req in ex["requests"] and len(ex["requests"]) == 2
    assert f"block {block}" in fs[0].message and f"step {when}" in fs[0].message


def test_out_of_range_id(tmp_path):
    path, sched = simulate(tmp_path, num_blocks=512, inject={30: "out-of-range"})
    r = audit(path)
    assert r.counts["out-of-range"] == 1
    f = next(f for f in findings_for(path, r) if f.evidence.get("kind") == "out-of-range")
    assert f.status == Status.FAIL and "outside [0, 512)" in f.message
    assert f.evidence["blocks"] == [515]


def test_same_id_twice_in_one_request(tmp_path):
    path, sched = simulate(tmp_path, prefix_caching=False, inject={50: "twice"})
    r = audit(path)
    assert r.counts["twice-in-request"] == 1 and sched.injected[0][1] == "twice"


def test_share_without_prefix_caching():
    recs = log(step(1, new=[["a", [[3, 4, 5]], 0]], tok={"a": 48}),
               step(2, new=[["b", [[3, 9]], 16]], tok={"b": 8}),
               header={**H, "prefix_caching": False})
    r = replay(recs)
    assert r.counts == {"no-prefix-cache": 1}


def test_share_at_other_position_and_partial_block():
    recs = log(step(1, new=[["a", [[3, 4, 5]], 0]], tok={"a": 40}),
               # b hits a's block 4 but at index 0: not a prefix share
               step(2, new=[["b", [[4, 9]], 16]], cached=[["a", 0, None, 40]], tok={"a": 1, "b": 8}),
               # c hits 3 and 5 (index 2): a has 41 tokens = 2 full blocks, 5 is partial
               step(3, new=[["c", [[3, 4, 5, 11]], 48]], tok={"c": 1}))
    r = replay(recs)
    assert r.counts["other-position"] == 1  # b@0 vs a@1 (c@1 matches a@1)
    assert r.counts["partial-block"] == 1


def test_finished_and_freed_blocks_may_be_reused():
    recs = log(step(1, new=[["a", [[3, 4]], 0]], tok={"a": 20}),
               step(2, new=[["b", [[3, 4]], 0]], fin=["a"], tok={"b": 20}),
               step(3, new=[["c", [[3]], 0]], freed=["b"], tok={"c": 5}))
    r = replay(recs)
    assert not r.counts and r.steps == 3


def test_no_freed_tracking_parks_unscheduled_requests():
    """Without free events a preempted request's old blocks must not count as held."""
    h = {**H, "freed_tracking": False}
    recs = log(step(1, new=[["a", [[3, 4]], 0], ["b", [[5]], 0]], tok={"a": 20, "b": 5}),
               step(2, cached=[["b", 0, [[6]], 5]], tok={"b": 1}),       # a preempted (silently)
               step(3, cached=[["b", 0, [[3]], 6]], tok={"b": 1}),       # its block 3 reused
               step(4, cached=[["a", 1, [[7, 8]], 0]], tok={"a": 20}), header=h)  # a resumed
    assert not replay(recs).counts
    with_tracking = log(*[json.loads(json.dumps(x)) for x in (
        step(1, new=[["a", [[3, 4]], 0], ["b", [[5]], 0]], tok={"a": 20, "b": 5}),
        step(2, cached=[["b", 0, [[6]], 5]], tok={"b": 1}),
        step(3, cached=[["b", 0, [[3]], 6]], tok={"b": 1}))])
    assert replay(with_tracking).counts == {"fresh-block-held": 1}  # a was never freed


def test_vllm_ascend_split_is_mapped_back():
    h = {**H, "split": 2}
    ok = log(step(1, new=[["a", [[6, 7, 8, 9]], 0]], tok={"a": 20}),
             step(2, new=[["b", [[6, 7, 20, 21]], 16]], tok={"b": 4}), header=h)
    r = replay(ok)
    assert not r.counts and r.shares == 1  # kernel ids 6,7 = block 3 at index 0 in both
    bad = log(step(1, new=[["a", [[6, 7, 9, 10]], 0]], tok={"a": 20}),
              step(2, new=[["b", [[8, 9]], 0]], tok={"b": 4}), header=h)
    r = replay(bad)
    assert r.counts["split-mismatch"] == 1 and r.counts["fresh-block-held"] == 1


def test_hybrid_groups_check_full_attention_only():
    h = {**H, "groups": ["FullAttentionSpec", "SlidingWindowSpec"]}
    recs = log(step(1, new=[["a", [[3, 4], [10, 11]], 0]], tok={"a": 20}),
               step(2, new=[["b", [[5], [10]], 0]], tok={"b": 10}), header=h)
    r = replay(recs)
    assert not r.counts
    (f,) = findings_for("x", r)
    assert f.status == Status.PASS and "SlidingWindowSpec" in f.message
    swa = log(step(1, new=[["a", [[3, 4], [10]], 0]], tok={"a": 20}),
              step(2, new=[["b", [[10], [12]], 0]], tok={"b": 10}), header=h)
    assert not replay(swa).counts  # the SWA group may have dropped 10 silently
    h2 = {**H, "groups": ["FullAttentionSpec", "MLAAttentionSpec"]}
    clash = log(step(1, new=[["a", [[3, 4], [10]], 0]], tok={"a": 20}),
                step(2, new=[["b", [[10], [12]], 0]], tok={"b": 10}), header=h2)
    assert replay(clash).counts == {"fresh-block-held": 1}  # one pool across groups


def test_v0_forks_share_and_cross_request_duplicates_fail():
    h = {**H, "engine": "v0", "prefix_caching": False}
    fork = {"t": "s0", "n": 1, "g": [["r1", {"0": [0, 1, 2], "1": [0, 1, 3]}, None],
                                     ["r2", {"2": [4, 5]}, None]]}
    r = replay(log(fork, fork, header=h))
    assert not r.counts and r.shares == 4  # blocks 0 and 1 shared by the fork, twice
    dup = {"t": "s0", "n": 2, "g": [["r1", {"0": [0, 1, 2]}, None], ["r2", {"2": [2, 5]}, None]]}
    r = replay(log(dup, dup, header=h))
    assert r.counts == {"other-position": 1}  # reported once, not per step
    same = {"t": "s0", "n": 3, "g": [["r1", {"0": [7, 1]}, None], ["r2", {"2": [7]}, None]]}
    assert replay(log(same, header=h)).counts == {"no-prefix-cache": 1}


# -- bad input ---------------------------------------------------------------------------
def test_truncated_and_garbled_lines_are_counted_with_numbers(tmp_path):
    path, _ = simulate(tmp_path, n=30)
    data = open(path, "rb").read()
    lines = data.split(b"\n")
    lines[5] = lines[5][: len(lines[5]) // 2]          # garbled mid-file
    lines[8] = b"\xff\xfe not json"
    cut = b"\n".join(lines)[:-1]
    cut = cut[: len(cut) - 40]                          # cut off mid-line at the end
    r = replay(parse_text(cut))
    assert r.bad_lines == 3 and r.truncated_at == len(lines) - 1
    assert [n for n, _ in r.bad_examples][:2] == [6, 9]
    fs = list(findings_for(path, r))
    assert fs[0].status == Status.WARN and "line 6" in fs[0].message and "cut off" in fs[0].message
    assert any(f.status in (Status.PASS, Status.FAIL) for f in fs[1:])


def test_only_truncated_tail_is_info():
    recs = parse_text(json.dumps(H) + "\n" + json.dumps(step(1, new=[["a", [[3]], 0]]))
                      + '\n{"t": "s", "n": 2, "new": [["b", [[')
    r = replay(recs)
    assert [f.status for f in findings_for("x", r)] == [Status.INFO, Status.PASS]


def test_garbage_file_is_an_error_finding():
    r = replay(parse_text(b"\x00\x01garbage\nnot json either\n"))
    (f,) = findings_for("/tmp/x", r)
    assert f.status == Status.ERROR and "/tmp/x" in f.message and "line 1" in f.message


def test_wrong_types_and_unknown_kinds():
    assert isinstance(parse_line(b'{"t":"s","n":1,"new":[["a","oops",0]]}', 3), BadLine)
    assert isinstance(parse_line(b'{"t":"s","n":1,"new":[["a",[[1,true]],0]]}', 3), BadLine)
    assert isinstance(parse_line(b'{"t":"hdr","engine":"v9"}', 1), BadLine)
    assert isinstance(parse_line(b'{"t":"zz"}', 1), BadLine)
    assert isinstance(parse_line(b'[1,2]', 1), BadLine)
    assert parse_line(b"   \n", 1) is None
    cc = b'{"t":"s","n":1,"cc":{"ids":["a","b"],"res":[false],"nb":[null,null],"nc":[1,2]}}'
    assert "differ in length" in parse_line(cc, 4).reason
    assert isinstance(parse_line(json.dumps(H).encode(), 1), Header)
    assert isinstance(parse_line(json.dumps(step(1)).encode(), 2), StepV1)


def test_overlong_line_is_skipped():
    import io
    data = json.dumps(H).encode() + b"\n" + b"x" * 5000 + b"\n" + json.dumps(step(1)).encode() + b"\n"
    recs = list(iter_records(io.BytesIO(data), max_line=1000))
    assert isinstance(recs[1], BadLine) and "longer than" in recs[1].reason
    assert isinstance(recs[2], StepV1) and recs[2].line == 3


def test_disabled_plugin_and_empty_log_warn():
    off = {"t": "off", "n": 3, "reason": "cannot record SchedulerOutput (AttributeError: x)"}
    r = replay(log(off))
    fs = list(findings_for("x", r))
    assert [f.status for f in fs] == [Status.WARN, Status.WARN]
    assert "disabled itself" in fs[0].message and "AttributeError" in fs[0].message


@given(st.binary(max_size=400))
def test_fuzz_random_bytes_never_crash(data):
    r = replay(parse_text(data))
    list(findings_for("f", r))


_REAL = [json.dumps(H), json.dumps(step(1, new=[["a", [[3, 4, 0]], 0]], tok={"a": 40})),
         json.dumps(step(2, cached=[["a", 0, [[5]], 40], ["b", 1, [[3, 4]], 16]], fin=["z"],
                         freed=["y"], tok={"a": 1, "b": 3})),
         json.dumps({"t": "s0", "n": 3, "g": [["r", {"0": [1, 2]}, [1]]]}),
         json.dumps({"t": "s", "n": 4, "new": [], "tok": {"a": 1, "b": 1},
                     "cc": {"ids": ["a", "b"], "res": [False, True], "nb": [None, [[6, 7]]],
                            "nc": [41, 0]}})]


@given(st.lists(st.sampled_from(_REAL), min_size=1, max_size=8), st.data())
def test_fuzz_mutated_real_lines(lines, data):
    text = bytearray("\n".join(lines).encode())
    for _ in range(data.draw(st.integers(0, 6))):
        if not text:
            break
        i = data.draw(st.integers(0, len(text) - 1))
        op = data.draw(st.sampled_from(["flip", "del", "dup"]))
        if op == "flip":
            text[i] = data.draw(st.integers(0, 255))
        elif op == "del":
            del text[i]
        else:
            text[i:i] = text[i:i + 5]
    recs = parse_text(bytes(text))
    assert all(hasattr(x, "line") for x in recs)
    list(findings_for("f", replay(recs)))


# -- provider -----------------------------------------------------------------------------
def test_provider_option_and_service_environment(sysroot, tmp_path):
    path, _ = simulate(tmp_path, n=10)
    sysroot.write("/var/log/vllm/block_audit.jsonl", open(path, "rb").read())
    host = sysroot.host()
    # --block-audit names the user's file: read from this machine even with a sysroot
    got = gather_block_audit(host, RunOptions(block_audit=str(path)), None)
    assert got.origin == "--block-audit" and got.paths == (str(path),)
    (f,) = block_tables(got)
    assert f.status == Status.PASS
    for pid in (4711, 1):  # the service's account: the file it names is read with its rights
        sysroot.write(f"/proc/{pid}/status", "Name:\tpython3\nUid:\t1001\t1001\t1001\t1001\n"
                                             "Gid:\t1001\t1001\t1001\t1001\nGroups:\t1001\n")
    env = ServiceEnv({"ASCEND_DOCTOR_BLOCK_AUDIT": "/var/log/vllm/block_audit.jsonl"},
                     "/proc/4711/environ", 4711)
    got = gather_block_audit(host, RunOptions(), env)
    assert got.paths == ("/var/log/vllm/block_audit.jsonl",) and "/proc/4711/environ" in got.origin
    sysroot.write("/var/log/vllm/ba.4790.jsonl", open(path, "rb").read())
    env = ServiceEnv({"ASCEND_DOCTOR_BLOCK_AUDIT": "/var/log/vllm/ba.{pid}.jsonl"}, "/proc/1/environ", 1)
    assert gather_block_audit(host, RunOptions(), env).paths == ("/var/log/vllm/ba.4790.jsonl",)
    with pytest.raises(SourceMissing, match="ASCEND_DOCTOR_BLOCK_AUDIT is not set"):
        gather_block_audit(host, RunOptions(), ServiceEnv({}, "/proc/4711/environ", 4711))
    with pytest.raises(SourceError, match="--block-audit /nope.jsonl: not found"):
        gather_block_audit(host, RunOptions(block_audit="/nope.jsonl"), None)
    # the sysroot's file is not the user's: naming its host path finds nothing here
    with pytest.raises(SourceError, match="not found"):
        gather_block_audit(host, RunOptions(block_audit="/var/log/vllm/block_audit.jsonl"), None)


def test_sampled_log_still_catches_a_lasting_duplicate(tmp_path):
    path, sched = simulate(tmp_path, every=4, prefix_caching=False, inject={21: "duplicate"})
    assert sched.injected
    r = audit(path)
    assert r.counts["no-prefix-cache"] >= 1
    assert sched.injected[0][3] in r.blocks_by_kind["no-prefix-cache"]


def test_service_named_audit_file_is_read_with_the_services_rights(sysroot):
    """ASCEND_DOCTOR_BLOCK_AUDIT=/etc/shadow must not put root's file into a report (20.1)."""
    import os
    sysroot.write("/etc/shadow", "root:$6$secretsalt$hash:19000:0:99999:7:::\n")
    os.chmod(sysroot.path("/etc/shadow"), 0o600)
    sysroot.write("/proc/4711/status", "Uid:\t1001\t1001\t1001\t1001\nGid:\t1001\t1001\t1001\t1001\n")
    env = ServiceEnv({"ASCEND_DOCTOR_BLOCK_AUDIT": "/etc/shadow"}, "/proc/4711/environ", 4711)
    with pytest.raises(SourceError) as exc:
        gather_block_audit(sysroot.host(), RunOptions(), env)
    assert "uid 1001 cannot read /etc/shadow" in str(exc.value)
    assert "secretsalt" not in str(exc.value)
    # unknown reader (no status, no process-table uid): refused too
    env = ServiceEnv({"ASCEND_DOCTOR_BLOCK_AUDIT": "/etc/shadow"}, "/proc/99/environ", 99)
    with pytest.raises(SourceError, match="cannot tell the uid of pid 99"):
        gather_block_audit(sysroot.host(), RunOptions(), env)
