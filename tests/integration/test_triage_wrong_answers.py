"""The wrong answers issue 32 names, each asserted through the real entry point, and the
mechanism that keeps weak candidates from being given as advice ("no confident match")."""

from __future__ import annotations

import json
import re

import pytest

SET_ENV = re.compile(r"(?:source|\.)\s+\S*set_env\.sh")


def triage(cli, log: str) -> dict:
    r = cli("triage", "-", "--json", "--lang", "en", input=log)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_an_hccl_connect_timeout_is_not_answered_with_the_exec_timeout(cli):
    # the torch_npu wrapper, the DIST wrapper, then CANN's EI0006 (a socket timeout while
    # the communicator connects): the connect timeout, never HCCL_EXEC_TIMEOUT
    log = ("RuntimeError: HcclCommInitRootInfo:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1"
           " HCCL function error: HcclCommInitRootInfo(numRanks, &rootInfo, rank, &comm), error "
           "code is 7\n"
           "[ERROR] 2025-01-01-00:00:00 (PID:1, Device:0, RankID:1) ERR02200 DIST call hccl api "
           "failed.\n"
           "EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time.\n")
    doc = triage(cli, log)
    assert doc["confident"] and doc["decisive"]["line"] == 3
    first = doc["answers"][0]
    assert first["id"] == "ASC-UPS-019" and "hccl-connect-timeout" in first["causes"]
    assert not any("HCCL_EXEC_TIMEOUT" in s for s in first["steps"])
    assert doc["matches"][0]["id"] == "ASC-UPS-019"


def test_507013_is_not_answered_by_the_507014_entry(cli):
    doc = triage(cli, "(EngineCore_DP0 pid=4) ERROR 11-20 03:06:02 [core.py:711] RuntimeError: "
                      "ACL stream synchronize failed, error code:507013\n")
    assert doc["answers"][0]["id"] == "acl:507013"
    ids = {a["id"] for a in doc["answers"]}
    assert not ids & {"ASC-UPS-015", "ASC-LOG-008"}  # the 507014 (AI Core timeout) entries
    # the code table says what 507013 is; no entry names the cause: not confident, no advice
    assert not doc["confident"] and doc["matches"] == []


@pytest.mark.parametrize("log,entry", [
    ("Traceback (most recent call last):\n"
     '  File "/usr/local/lib/python3.10/site-packages/torch_npu/__init__.py", line 15, in <module>\n'
     "    import torch_npu.npu\n"
     "ImportError: libc_sec.so: cannot open shared object file: No such file or directory\n",
     "ASC-CTR-004"),
    ("dcmi module initialize failed. ret is -8005\n", "ASC-NPU-004"),
])
def test_driver_libraries_missing_in_a_container_are_not_a_set_env_problem(cli, log, entry):
    doc = triage(cli, log)
    assert doc["confident"]
    first = doc["answers"][0]
    assert first["id"] == entry and "driver-lib-not-found" in first["causes"]
    assert "cann-env-not-sourced" not in first["causes"]
    assert not any(SET_ENV.search(s) for s in first["steps"]), first["steps"]


def test_bf16_weights_on_a_chip_without_bf16_kernels_get_no_float16_flag(cli):
    doc = triage(cli, "ERROR 02-11 11:32:58 engine.py:389]         Cannot find bin of op "
                      "PromptFlashAttention, integral key 0/1/|bf16/ND/bf16/ND/bf16/ND/bf16/ND/.\n")
    first = doc["answers"][0]
    assert doc["confident"] and first["id"] == "ASC-VER-011"
    assert not any("--dtype float16" in s for s in first["steps"])
    r = cli("explain", "ASC-VER-011", "--lang", "en")
    # the float16 flag appears only as chip-conditional advice that excludes bf16-only weights
    for line in r.stdout.splitlines():
        if "--dtype float16" in line:
            assert "310P" in line and "need bfloat16" in line, line


OOM_CAPACITY = ("RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 2; 29.50 GiB "
                "total capacity; 27.91 GiB already allocated; 27.91 GiB current active; 1.02 GiB "
                "free; 28.02 GiB reserved in total by PyTorch)")


def test_check_logs_offers_the_utilization_not_the_allocator_for_an_oom_at_capacity(cli, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    log = tmp_path / "server.log"
    log.write_text("INFO starting\n" + OOM_CAPACITY + "\n")
    r = cli("check", "--root", str(root), "--log", str(log), "--only", "logs", "--json",
            env={"XDG_STATE_HOME": str(tmp_path / "state")})
    doc = json.loads(r.stdout)
    findings = [f for c in doc["checks"] for f in c["findings"]]
    found = [f for f in findings if set(f.get("kb") or ()) & {"ASC-LOG-004", "ASC-UPS-013"}]
    assert found, [f.get("kb") for f in findings]
    assert all(f["fix"] == {"id": "service.launch-flags",
                            "params": {"relieve": "gpu-memory-utilization"}} for f in found), found
    assert "PYTORCH_NPU_ALLOC_CONF" not in json.dumps(findings)
    assert not any(p.get("fix") == "service.env" for p in doc["problems"])


DEATH_LOG = """\
(APIServer pid=10) INFO 11-20 03:05:00 [logger.py:41] Received request chatcmpl-1: prompt: 'hi'
(APIServer pid=10) ERROR 11-20 03:05:01 [serving_chat.py:200] Error in preprocessing prompt inputs
(APIServer pid=10) ERROR 11-20 03:05:01 [serving_chat.py:200] ValueError: This model's maximum context length is 4096 tokens. However, you requested 9000 tokens in the messages.
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711] Traceback (most recent call last):
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711]   File "/vllm/v1/engine/core.py", line 702, in run_engine_core
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711]     engine_core.run_busy_loop()
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711] RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 2; 29.50 GiB total capacity; 25.1 GiB already allocated)
(APIServer pid=10) ERROR 11-20 03:06:03 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


def test_engine_death_blames_the_npu_oom_not_a_request_rejected_a_minute_earlier(cli):
    doc = triage(cli, DEATH_LOG)
    assert doc["confident"] and doc["decisive"]["line"] == 8
    assert doc["answers"][0]["id"] == "ASC-LOG-004"
    svc = [a for a in doc["answers"] if a["id"] == "ASC-SVC-002"]
    for a in svc:
        assert "maximum context length" not in a["title"]
    r = cli("triage", "-", "--lang", "en", "--limit", "9", input=DEATH_LOG)
    assert "maximum context length" not in "\n".join(
        ln for ln in r.stdout.splitlines() if "ASC-SVC-002" in ln)


# ---- the mechanism: weak candidates are candidates, not advice --------------------------

def test_a_wrapper_match_does_not_outrank_the_cann_line_after_it(cli):
    """torch_npu's OPS wrapper carries the call's return code (100000, parameter check); the
    CANN line after it says what failed. What matched the wrapper alone is not the answer."""
    log = ("2025-02-13 10:46:42.386 | ERROR | app:run:130 - InnerRun:build/CMakeFiles/torch_npu"
           ".dir/compiler_depend.ts:210 OPS function error: NonZero, error code is 100000\n"
           "[ERROR] 2025-02-13-10:46:42 (PID:28007, Device:1, RankID:-1) ERR01100 OPS call acl "
           "api failed\n"
           "E19999: Inner Error!\n")
    doc = triage(cli, log)
    assert doc["decisive"]["line"] == 3
    assert not doc["confident"] and doc["matches"] == []
    assert "another line" in doc["not_confident_because"]
    r = cli("triage", "-", "--lang", "en", input=log)
    assert r.stdout.startswith("no confident match")
    assert "decisive line 3: E19999" in r.stdout and "ascend-doctor check --only libs" in r.stdout
    assert "ASCEND_LAUNCH_BLOCKING" not in r.stdout  # a candidate entry's steps are not shown


def test_a_catch_all_code_alone_gives_no_advice(cli):
    doc = triage(cli, "(CL error, the error code is : 500001.)\n")
    assert not doc["confident"] and doc["matches"] == []
    assert all(a["how"] in ("generic", "catchall") for a in doc["answers"])
    assert doc["answers"][0]["code"]["catchall"] is True or doc["answers"][0]["how"] == "generic"


def test_equally_specific_entries_tie_on_agreement_not_file_order(cli):
    """libhccl.so missing: 'environment not sourced' and 'toolkit not installed' fit alike;
    the entry whose steps tell them apart (both causes) comes first."""
    doc = triage(cli, "ImportError: libhccl.so: cannot open shared object file: No such file or "
                      "directory. Please check that the cann package is installed.\n")
    first = doc["answers"][0]
    assert doc["confident"]
    assert {"cann-env-not-sourced", "cann-lib-not-found"} <= set(first["causes"])


def test_every_error_line_says_where_it_was_traced(cli):
    doc = triage(cli, DEATH_LOG + "EE9999: Inner Error!\nsomething printed for no reason\n")
    by_line = {d["line"]: d for d in doc["error_lines"]}
    assert by_line[8]["source"] == "curated"
    assert {"layer": "curated", "id": "ASC-LOG-004"} in by_line[8]["traced_to"]
    assert by_line[10]["source"] == "code-table"
    assert by_line[10]["traced_to"][0] == {"layer": "code-table", "table": "cann",
                                           "code": "EE9999", "exact": True}
    assert 11 not in by_line  # not an error line
    assert 1 not in by_line  # a request the server received is no error
    # the rejected request is an error line of the API server, traced or not, but reported
    assert 3 in by_line and "source" in by_line[3]


def test_check_logs_names_a_weak_candidate_without_giving_it_as_the_answer(cli, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    log = tmp_path / "server.log"
    log.write_text("INFO starting\n(CL error, the error code is : 500001.)\n")
    r = cli("check", "--root", str(root), "--log", str(log), "--only", "logs", "--json",
            env={"XDG_STATE_HOME": str(tmp_path / "state")})
    findings = [f for c in json.loads(r.stdout)["checks"] for f in c["findings"]]
    (f,) = [f for f in findings if "decisive line 2" in f["message"]]
    assert f["status"] == "info" and not f.get("kb") and not f.get("fix")
    assert "no confident match" in f["message"] and "next: ascend-doctor check" in f["message"]
    assert f["evidence"]["answer"]["confident"] is False
