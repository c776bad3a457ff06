"""Triage ranks by evidence (issue 15): the decisive specific line beats frequent generic
ones, wrapped pastes and partial first lines still find their family, CANN's
``runtime result = N`` reads like torch_npu's ``error code is N``."""

from __future__ import annotations

from ascend_doctor import knowledge
# as pasted in a vllm-ascend start-up failure: two generic lines, one decisive
SQ_CQ_LOG = """\
[ERROR] RUNTIME(1234,python):2025-03-01-10:00:00.000.000 [stream.cc:1007]1234 SetupStream:Alloc sq cq fail
EZ9999: Inner Error!
EZ9999: [PID: 1234] 2025-03-01-10:00:00.000.000 Alloc sq cq fail, stream_id=3
RuntimeError: SetDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:38 NPU function error: aclrtCreateStream, error code is 507899
[ERROR] 2025-03-01-10:00:00 (PID:1234, Device:0, RankID:-1) ERR00100 PTA call acl api failed
""".splitlines()


def ids(lines: list[str]) -> list[str]:
    return [m.entry.id for m in knowledge.load().match_lines(lines)]


def test_generic_entries_give_way_to_the_specific_line():
    got = ids(SQ_CQ_LOG)
    kb = knowledge.load()
    assert got[0] == "ASC-LOG-007", got  # ASC-UPS-016 merged into it
    assert not any(kb.entries[i].generic for i in got), got


def test_generic_entry_ranks_when_nothing_specific_matched():
    got = ids(["EZ9999: Inner Error!", "EZ9999: [PID: 1] aclnnFoo failed"])
    assert got == ["ASC-LOG-002"], got


def test_runtime_result_reads_as_error_code():
    got = ids(["[ERROR] RUNTIME(2305,python):2025-06-10-09:13:21.000.000 [npu_driver.cc:1144]"
               "2305 DevMemAlloc:alloc device memory failed, runtime result = 207001"])
    assert got and got[0] == "ASC-ACL-001", got
    assert not ids(["the runtime result was fine"])


def test_wrapped_paste_is_joined():
    wrapped = ["RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 0; 60.97 GiB to",
               "tal capacity; 58.92 GiB already allocated; 58.92 GiB current active; 1.66 GiB",
               "free; 58.95 GiB reserved in total by PyTorch)"]
    ms = {m.entry.id: m for m in knowledge.load().match_lines(wrapped)}
    assert ms["ASC-UPS-013"].groups["free"] == "1.66 GiB"
    assert ms["ASC-UPS-013"].lines[0][0] == 1  # reported at the line where the join began


def test_partial_first_line_finds_the_oom_family():
    assert "ASC-LOG-004" in ids(["RuntimeError: NPU out of memory."])


def test_nothing_matched_names_the_next_command(cli):
    r = cli("triage", "-", "--lang", "en", input="all quiet on the host\n")
    assert r.returncode == 1
    assert "no known signature matched" in r.stdout
    assert "ascend-doctor check --only libs" in r.stdout


# vllm-ascend #4454 / #5707 shape: the worker's exception, then the API server's summary
ENGINE_CORE_LOG = """\
(EngineCore_DP0 pid=1255038) ERROR 11-26 11:43:04 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=1255038) ERROR 11-26 11:43:04 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=1255038) ERROR 11-26 11:43:04 [core.py:708]   File "/vllm-workspace/vllm/vllm/v1/engine/core.py", line 699, in run_engine_core
(EngineCore_DP0 pid=1255038) ERROR 11-26 11:43:04 [core.py:708] NotImplementedError: <class 'vllm_ascend.attention.attention_v1.AscendAttentionBackend'> is not yet supported.
(APIServer pid=585)     raise RuntimeError("Engine core initialization failed. "
(APIServer pid=585) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
""".splitlines()


def _answer(lines, eid):
    from ascend_doctor.knowledge.decide import decide

    v = decide(knowledge.load(), list(enumerate(lines, 1)))
    return v, next(a for a in v.answers if a.key == eid)


def test_engine_core_failure_quotes_the_exception_above_it():
    v, a = _answer(ENGINE_CORE_LOG, "ASC-UPS-027")
    msg = a.title()
    assert "NotImplementedError: <class 'vllm_ascend.attention.attention_v1.AscendAttentionBackend'>" \
        " is not yet supported." in msg, msg
    assert "Engine core initialization failed" not in a.groups["cause"]
    # the death line and the quoted cause, with their numbers; the cause is the decisive line
    assert [n for n, _ in a.shown_lines()] == [6, 4]
    assert v.decisive.n == 4


def test_engine_core_failure_without_a_cause_says_so():
    _, a = _answer(ENGINE_CORE_LOG[-1:], "ASC-UPS-027")
    assert "no exception line above it" in a.title()


def test_a_known_root_cause_outranks_the_engine_core_summary():
    log = ["(EngineCore_DP0 pid=1102) ValueError: No available memory for the cache blocks. Try "
           "increasing `gpu_memory_utilization` when initializing the engine.",
           *ENGINE_CORE_LOG[-1:]]
    got = ids(log)
    assert "ASC-UPS-027" not in got and got[0] == "ASC-LOG-006", got


def test_triage_prints_the_quoted_cause(cli):
    r = cli("triage", "-", "--lang", "en", input="\n".join(ENGINE_CORE_LOG) + "\n")
    assert r.returncode == 0
    assert "root cause above it: NotImplementedError:" in r.stdout


def test_chinese_output_says_where_an_answer_came_from_in_chinese(cli):
    log = ("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
           "address already in use\n"
           "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    zh = cli("triage", "-", "--lang", "zh", input=log)
    en = cli("triage", "-", "--lang", "en", input=log)
    assert "来源：知识库条目 ASC-START-003（特征匹配）" in zh.stdout, zh.stdout
    assert "来源：消息形态 torch.cuda-error" in zh.stdout, zh.stdout
    assert "源码索引：不可用（未指定已安装的软件栈" in zh.stderr, zh.stderr
    for english in ("curated entry", "message shape", "signature", "no installed stack"):
        assert english not in zh.stdout + zh.stderr, english
    assert "source: curated entry ASC-START-003 (signature)" in en.stdout, en.stdout
    assert "source index: not available (no installed stack named" in en.stderr
