"""The layers under the curated entries (issue 32 item 1) and the event reading (item 2):
error-code tables, message shapes, the source index, the decisive line."""

from __future__ import annotations

import os
import re
import zipfile

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge import codes, events, shapes, srcindex
from ascend_doctor.knowledge.decide import decide
from ascend_doctor.knowledge.schema import contradictions


# ---- error-code tables -------------------------------------------------------------------

def test_507013_and_507014_are_different_codes():
    sdma = codes.lookup("acl", "507013")
    aicore = codes.lookup("acl", "507014")
    assert sdma.exact and aicore.exact
    assert "DMA" in sdma.text() and "not an AI Core timeout" in sdma.text()
    assert "AI Core" in aicore.text() and "time limit" in aicore.text()


@pytest.mark.parametrize("line,table,code", [
    ("RuntimeError: ACL stream synchronize failed, error code:507013", "acl", "507013"),
    ("c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035", "acl", "507035"),
    ("[ERROR] RUNTIME(1234,python):2025-01-01-00:00:00.000.000 [stream.cc:10] runtime result = 507046", "acl", "507046"),
    ("EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time.", "cann", "EI0006"),
    ("Communication_Error_Bind_IP_Port(EJ0003): Failed to bind the IP port.", "cann", "EJ0003"),
    ("HCCL function error: HcclCommInitRootInfo(numRanks, &rootInfo, rank, &comm), error code is 7", "hccl", "7"),
    ("dcmi module initialize failed. ret is -8005", "dcmi", "-8005"),
    ("call aclnnMatmul failed, error code is 561003", "acl", "561003"),
    ("[ERROR] aclrtSynchronizeStreamWithTimeout (AICPU) failed: 507018", "acl", "507018"),
    ("RuntimeError: run_prepared failed with code 507018", "acl", "507018"),
])
def test_codes_found_in_the_ways_logs_print_them(line, table, code):
    hits = codes.codes_in(line)
    assert (table, code) in [(h.code.table, h.code.code) for h in hits], hits


def test_a_number_after_failed_is_a_code_only_when_the_table_lists_it():
    assert codes.codes_in("safetensors load failed: 123456 bytes read") == []


def test_torch_npu_err_codes_name_the_sub_module_and_the_failure():
    (hit,) = codes.codes_in("[ERROR] 2024-06-20-10:41:32 (PID:1, Device:-1, RankID:-1) "
                            "ERR00008 PTA resource not found")
    assert (hit.code.table, hit.code.code, hit.code.exact) == ("pta", "ERR00008", True)
    assert "PTA" in hit.code.text() and "not found" in hit.code.text() and not hit.code.catchall
    # a failed call into HCCL or AscendCL: the CANN line with it says why
    (hit,) = codes.codes_in("ERR02200 DIST call hccl api failed.")
    assert "DIST" in hit.code.text() and hit.code.catchall
    # torch_npu's error hook tags any exception of the program (_SubModuleID.UNKNOWN = 99,
    # ErrCode.EXCEPT = 999 in torch_npu/utils/_error_code.py): a catch-all that points back
    (hit,) = codes.codes_in("[ERROR] 2025-03-15-11:50:02 (PID:720632, Device:0, RankID:-1) "
                            "ERR99999 UNKNOWN applicaiton exception")
    assert hit.code.exact and hit.code.catchall and "exception line before it" in hit.code.text()
    (other,) = codes.codes_in("ERR99998 UNKNOWN")  # no such error type: the sub-module only
    assert not other.code.exact


def test_internal_errors_are_catch_alls():
    assert codes.lookup("cann", "EE9999").catchall and codes.lookup("acl", "500001").catchall
    assert not codes.lookup("acl", "507014").catchall
    assert not codes.lookup("cann", "EI0006").catchall


def test_unlisted_codes_get_their_family_and_timestamps_are_no_codes():
    (hit,) = codes.codes_in("EE8888: something went wrong")
    assert not hit.code.exact and "runtime" in hit.code.text()
    (hit,) = codes.codes_in("error code is 507099")
    assert not hit.code.exact and hit.code.table == "acl"
    # glog prefixes (E1203 16:31:16) and bare numbers are not codes
    assert codes.codes_in("[W1203 16:31:16.669119674 utils.cpp:68] Warning: NUMA binding") == []
    assert codes.codes_in("E1203 16:31:16.669 utils.cpp:68] x") == []
    assert codes.codes_in("result: 123456 tokens") == []


def test_every_table_names_its_public_document():
    for name, t in codes.tables().items():
        assert "https://" in t["source"], name
        assert t.get("codes"), name
        for code, row in t["codes"].items():
            assert row.get("en") and row.get("zh"), (name, code)


# ---- message shapes ----------------------------------------------------------------------

SHAPE_LINES = {
    "loader.missing-lib": "ImportError: libhccl.so: cannot open shared object file: No such file or directory",
    "loader.undefined-symbol": "ImportError: /x/torch_npu/lib/libtorch_npu.so: undefined symbol: _ZN3c1010Dispatcher",
    "loader.version-not-found": "ImportError: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.29' not found (required by /x/libascendcl.so)",
    "os.address-in-use": "OSError: [Errno 98] Address already in use",
    "os.no-space": "OSError: [Errno 28] No space left on device",
    "os.shm-bus-error": "Bus error (core dumped)",
    "os.permission-denied": "PermissionError: [Errno 13] Permission denied: '/var/log/vllm.log'",
    "os.file-missing": "FileNotFoundError: [Errno 2] No such file or directory: '/models/q/config.json'",
    "os.killed": "Killed",
    "python.cannot-import-name": "ImportError: cannot import name 'X' from 'vllm.utils' (/x/vllm/utils.py)",
    "python.no-module": "ModuleNotFoundError: No module named 'torch_npu'",
    "python.module-no-attribute": "AttributeError: module 'torch_npu' has no attribute 'npu_geglu'",
    "python.object-no-attribute": "AttributeError: 'MistralTokenizer' object has no attribute "
                                  "'init_kwargs'",
    "python.call-signature": "TypeError: AscendAttentionBackendImpl.__init__() got an unexpected "
                             "keyword argument 'kv_sharing_target_layer_name'",
    "python.unpack": "ValueError: not enough values to unpack (expected 13, got 12)",
    "torch.cuda-error": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "python.connection-refused": "ConnectionRefusedError: [Errno 111] Connection refused",
    "python.name-resolution": "socket.gaierror: [Errno -2] Name or service not known",
    "python.timeout": "TimeoutError: timed out after 600 seconds",
    "python.segfault": "Fatal Python error: Segmentation fault",
    "os.no-memory": "OSError: [Errno 12] Cannot allocate memory",
    "os.connection-timed-out": "TimeoutError: [Errno 110] Connection timed out",
    "os.connection-reset": "ConnectionResetError: [Errno 104] Connection reset by peer",
    "os.too-many-open-files": "OSError: [Errno 24] Too many open files",
    "os.read-only-fs": "OSError: [Errno 30] Read-only file system: '/root/.cache/huggingface'",
    "os.no-such-device": "OSError: [Errno 19] No such device",
    "python.argparse-invalid-choice": "vllm serve: error: argument --quantization/-q: invalid "
                                      "choice: 'ascend' (choose from 'awq', 'fp8')",
    "python.argparse-unrecognized": "api_server.py: error: unrecognized arguments: --foo",
    "pydantic.validation-error": "pydantic_core._pydantic_core.ValidationError: 1 validation "
                                 "error for ModelConfig",
    "torch.tcpstore": "torch.distributed.DistNetworkError: The client socket has timed out after "
                      "600000ms while trying to connect to (10.0.0.1, 29500).",
    "torch.gloo": "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/"
                  "transport/tcp/pair.cc:144] no error",
    "ray.no-resources": "ValueError: Current node has no NPU available. "
                        "current_node_resource={'CPU': 64.0}",
    "hf.offline": "OSError: We couldn't connect to 'https://huggingface.co' to load this file",
    "hf.repo-not-found": "OSError: q/q3 is not a local folder and is not a valid model identifier "
                         "listed on 'https://huggingface.co/models'",
    "hf.gated": "huggingface_hub.errors.GatedRepoError: 401 Client Error.",
    "transformers.unknown-architecture": "ValueError: The checkpoint you are trying to load has "
                                         "model type `glm4_moe_lite` but Transformers does not "
                                         "recognize this architecture.",
    "transformers.trust-remote-code": "ValueError: The repository for x contains custom code "
                                      "which must be executed to correctly load the model.",
    "transformers.no-chat-template": "ValueError: Cannot use chat template functions because "
                                     "tokenizer.chat_template is not set",
    "torch.device-oom": "RuntimeError: NPU out of memory. Tried to allocate 52.00 MiB (NPU 0; "
                        "60.96 GiB total capacity)",
    "http.server-error": 'INFO:     127.0.0.1:37638 - "POST /v1/completions HTTP/1.1" 500 '
                         "Internal Server Error",
    "cann.report-frame": "    build op model failed, result = 500001[FUNC:ReportInnerError]"
                         "[FILE:log_inner.cpp][LINE:145]",
}


def test_every_shape_is_found_on_its_message():
    """Also proves each shape's literals let its own message through."""
    assert set(SHAPE_LINES) == set(shapes.shapes())
    for key, line in SHAPE_LINES.items():
        assert key in [h.key for h in shapes.shapes_in(line)], key


def test_a_pasted_fragment_without_the_library_still_has_its_shape():
    (hit,) = shapes.shapes_in("undefined symbol: MsprofSysCycleTime")
    assert hit.key == "loader.undefined-symbol" and not hit.broad
    assert hit.meaning["en"].startswith("a library was built against") and "{" not in hit.meaning["zh"]


@pytest.mark.parametrize("line,key,shown", [
    # Python before 3.7 (and a paste cut at the name) print no "from '<module>'"
    ("ImportError: cannot import name 'INTERNAL_TIMESTAMP_LOG_KEY'", "python.cannot-import-name",
     "the module imported from has no INTERNAL_TIMESTAMP_LOG_KEY"),
    ("TypeError: forward() takes 3 positional arguments but 4 were given",
     "python.call-signature", "forward() was called with an argument"),
    ("TypeError: load_weights() missing 1 required positional argument: 'weights'",
     "python.call-signature", "load_weights() was called"),
    ("ValueError: too many values to unpack (expected 12)", "python.unpack",
     "code unpacks 12 values from a call that returned another number of values"),
])
def test_cpython_message_variants_keep_their_shape(line, key, shown):
    (hit,) = shapes.shapes_in(line)
    assert hit.key == key and hit.broad and hit.meaning["en"].startswith(shown)
    assert "{" not in hit.meaning["en"] + hit.meaning["zh"] + hit.step["en"] + hit.step["zh"]
    # a module, an object and a call are three messages, each with one shape
    assert [h.key for h in shapes.shapes_in("AttributeError: module 'vllm' has no attribute 'x'")] \
        == ["python.module-no-attribute"]


def test_broad_shapes_are_guesses_unless_a_variant_narrows_them():
    (hit,) = shapes.shapes_in("ModuleNotFoundError: No module named 'foo.bar'")
    assert hit.broad
    (hit,) = shapes.shapes_in("ModuleNotFoundError: No module named 'torch_npu'")
    assert not hit.broad
    (hit,) = shapes.shapes_in("OSError: libfoo.so: cannot open shared object file")
    assert hit.broad
    (hit,) = shapes.shapes_in("OSError: libc_sec.so: cannot open shared object file")
    assert not hit.broad and hit.causes == ("driver-lib-not-found",)


def test_a_cuda_error_says_what_cuda_means_and_is_never_the_answer_alone():
    # one line as a paste joins torch's report and its hint
    (hit,) = shapes.shapes_in("RuntimeError: CUDA error: device-side assert triggered CUDA "
                              "kernel errors might be asynchronously reported at some other API "
                              "call, so the stacktrace below might be incorrect.")
    assert hit.groups["what"] == "device-side assert triggered"
    assert "index out of range" in hit.meaning["en"] and hit.causes == ()
    (hit,) = shapes.shapes_in("torch.AcceleratorError: CUDA error: unspecified launch failure")
    assert hit.broad and hit.meaning["en"].startswith("a CUDA runtime error (unspecified launch")
    (hit,) = shapes.shapes_in("RuntimeError: CUDA error: no kernel image is available for "
                              "execution on the device")
    assert hit.causes == ("wrong-package-build",)


def test_a_driver_library_is_the_driver_not_set_env():
    (hit,) = shapes.shapes_in("ImportError: libc_sec.so: cannot open shared object file")
    assert hit.causes == ("driver-lib-not-found",)
    assert "mount" in hit.step["en"].lower() and "does not bring driver files" in hit.step["en"]
    (hit,) = shapes.shapes_in("ImportError: libascendcl.so: cannot open shared object file")
    assert "cann-env-not-sourced" in hit.causes


# ---- source index ------------------------------------------------------------------------

MODULE = '''
import logging
logger = logging.getLogger(__name__)

class Worker:
    def determine_num_blocks(self, cfg, free):
        if free <= 0:
            raise ValueError(f"No available memory for the cache blocks. Try increasing "
                             f"`gpu_memory_utilization` (now {cfg.util}) when initializing the engine.")
        if cfg.block_size not in (16, 32):
            raise NotImplementedError("Block size %d is not supported by %s" % (cfg.block_size, cfg.backend))
        logger.warning("Cannot use %s backend on NPU, falling back to %s.", cfg.backend, "eager")
        raise RuntimeError("device {} failed with code {}".format(cfg.dev, 3))

def short():
    raise ValueError("bad")  # too little text to trace by
'''


def test_sites_are_templates_with_function_and_guard():
    sites = srcindex.sites_of_source(MODULE, "vllm_ascend", "0.23.0", "vllm_ascend/worker.py")
    by_kind = {s.kind: s for s in sites}
    v = by_kind["raise ValueError"]
    assert v.function == "Worker.determine_num_blocks" and v.guard == "free <= 0"
    assert v.shown().startswith("No available memory for the cache blocks. Try increasing "
                                "`gpu_memory_utilization` (now {…})")
    assert by_kind["raise NotImplementedError"].shown() == \
        "Block size {…} is not supported by {…}"
    assert by_kind["raise NotImplementedError"].guard == "cfg.block_size not in (16, 32)"
    assert by_kind["logger.warning"].shown() == \
        "Cannot use {…} backend on NPU, falling back to {…}."
    assert by_kind["raise RuntimeError"].shown() == "device {…} failed with code {…}"
    assert "short" not in [s.function for s in sites]


def test_a_log_line_traces_to_its_raise_site():
    ix = srcindex.SourceIndex(srcindex.sites_of_source(MODULE, "vllm_ascend", "0.23.0", "w.py"),
                              {"vllm_ascend": "0.23.0"})
    site, cov = ix.trace("Block size 64 is not supported by ASCEND_MLA")
    assert site.line == 11 and cov > 0.5
    assert ix.trace("nothing like any template here") is None


def test_the_index_is_cached_per_version_in_the_users_cache(xdg):
    calls = []

    def files():
        calls.append(1)
        yield "vllm_ascend/w.py", MODULE.encode()

    a = srcindex.load_or_build("vllm_ascend", "0.23.0", "/site", files)
    b = srcindex.load_or_build("vllm_ascend", "0.23.0", "/site", files)
    assert len(calls) == 1 and [s.to_dict() for s in a] == [s.to_dict() for s in b]
    names = os.listdir(xdg / "ascend-doctor")
    assert any(n.startswith("srcindex-vllm_ascend-0.23.0-") for n in names)
    srcindex.load_or_build("vllm_ascend", "0.23.1", "/site", files)
    assert len(calls) == 2  # another version is another index


def test_a_cache_directory_of_another_user_is_not_used(xdg):
    (xdg / "ascend-doctor").mkdir(mode=0o700)
    os.chown(xdg / "ascend-doctor", 65534, 65534)
    calls = []

    def files():
        calls.append(1)
        yield "w.py", MODULE.encode()

    srcindex.load_or_build("vllm", "0.1", "/s", files)
    srcindex.load_or_build("vllm", "0.1", "/s", files)
    assert len(calls) == 2 and not os.listdir(xdg / "ascend-doctor")


def test_the_real_vllm_ascend_wheel_traces_its_own_messages(tmp_path, xdg):
    """The installed-stack layer on a real package: vllm-ascend 0.23.0's own sources."""
    from tests.artifacts import wheel
    from ascend_doctor.probes.srcindex import index_local

    whl = wheel("vllm-ascend==0.23.0", "vllm_ascend-0.23.0-*.whl")
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if name.startswith(("vllm_ascend/", "vllm_ascend-0.23.0.dist-info/")) \
                    and (name.endswith(".py") or name.endswith("METADATA")):
                z.extract(name, tmp_path)
    ix = index_local([str(tmp_path)])
    assert ix.packages == {"vllm_ascend": "0.23.0"} and len(ix.sites) > 500
    hit = ix.trace("RuntimeError: Failed to get correct chip_logic_id from command "
                   "'npu-smi info -m'.".split(": ", 1)[1])
    assert hit is not None and hit[0].file == "vllm_ascend/cpu_binding.py", hit


# ---- events and the decisive line ------------------------------------------------------

DEATH_LOG = """\
(APIServer pid=10) ERROR 11-20 03:05:01 [serving_chat.py:200] Error in preprocessing prompt inputs
(APIServer pid=10) ERROR 11-20 03:05:01 [serving_chat.py:200] ValueError: This model's maximum context length is 4096 tokens. However, you requested 9000 tokens in the messages.
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711] Traceback (most recent call last):
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711]   File "/vllm/v1/engine/core.py", line 702, in run_engine_core
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711]     engine_core.run_busy_loop()
(EngineCore_DP0 pid=415) ERROR 11-20 03:06:02 [core.py:711] RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 2; 29.50 GiB total capacity; 25.1 GiB already allocated)
(APIServer pid=10) ERROR 11-20 03:06:03 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
""".splitlines()


def test_an_engine_death_names_the_oom_not_the_request_rejected_a_minute_earlier():
    v = decide(knowledge.load(), list(enumerate(DEATH_LOG, 1)))
    assert v.decisive.n == 7
    assert v.answers[0].entry.id == "ASC-LOG-004" and v.answers[0].decisive
    svc = next(a for a in v.answers if a.key == "ASC-SVC-002")
    assert svc.groups["cause"].startswith("RuntimeError: NPU out of memory")
    assert "maximum context length" not in svc.title()
    assert [n for n, _ in svc.shown_lines()] == [3, 7]


def test_a_traceback_chain_is_one_event_with_its_innermost_cause():
    log = ["Traceback (most recent call last):",
           '  File "a.py", line 1, in <module>',
           "ImportError: libc_sec.so: cannot open shared object file: No such file or directory",
           "",
           "The above exception was the direct cause of the following exception:",
           "",
           "Traceback (most recent call last):",
           '  File "b.py", line 2, in <module>',
           "RuntimeError: Failed to load the backend extension: torch_npu. You can disable "
           "extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0."]
    evs = [e for e in events.events(list(enumerate(log, 1))) if e.kind == "traceback"]
    assert len(evs) == 1 and evs[0].cause.n == 3 and [c.n for c in evs[0].chain] == [3, 9]
    v = decide(knowledge.load(), list(enumerate(log, 1)))
    assert v.decisive.n == 3 and v.answers[0].entry.id == "ASC-CTR-004"


def test_a_wrapper_defers_to_the_cann_line_after_it():
    log = ["RuntimeError: call aclnnMatmul failed, detail:EZ9999: Inner Error!",
           "[ERROR] 2025-01-01-00:00:00 (PID:1, Device:0, RankID:-1) ERR00100 PTA call acl api failed",
           "EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time."]
    evs = events.events(list(enumerate(log, 1)))
    assert evs[0].cause.n == 3


def test_repeated_noise_weighs_less_than_one_decisive_error():
    noise = [f"(EngineCore_DP0 pid=4) ERROR 11-20 03:0{i % 10}:00 [x.py:1] Failed to fetch metric {i}"
             for i in range(20)]
    log = noise[:10] + ["(EngineCore_DP0 pid=4) ERROR 11-20 03:09:59 [y.py:2] ValueError: User-"
                        "specified max_model_len (65536) is greater than the derived max_model_len "
                        "(max_position_embeddings=32768 or model_max_length=None in model's "
                        "config.json)."] + noise[10:]
    v = decide(knowledge.load(), list(enumerate(log, 1)))
    assert v.decisive.n == 11 and v.answers[0].entry.id == "ASC-START-002"
    assert "--max-model-len 32768" in v.answers[0].steps()[0]


def test_advice_depends_on_the_value_found():
    e = knowledge.load().get("ASC-START-001")
    with_value = e.steps_for("en", {"estimated": "43488", "max_model_len": "131072"})
    assert "--max-model-len 43488" in with_value[0]
    without = e.steps_for("en", {"max_model_len": "131072"})
    assert not any("{estimated}" in s for s in without)  # the step needing it is left out


# ---- kb lint: steps that contradict their cause -----------------------------------------

def _entry(**kw):
    d = {"id": "ASC-TST-001", "title": {"en": "t", "zh": "t"}, "cause": {"en": "c", "zh": "c"},
         "steps": [{"en": "s", "zh": "s"}], "sources": ["https://example.org"]}
    d.update(kw)
    return d


def test_lint_rejects_the_exec_timeout_for_a_connect_failure():
    bad = _entry(title={"en": "EI0006: HCCL socket timed out while connecting", "zh": "x"},
                 steps=[{"en": "raise it", "zh": "x", "cmd": "export HCCL_EXEC_TIMEOUT=3600"}])
    assert any("connect phase" in str(p) for p in contradictions(bad))
    good = _entry(title={"en": "EI0006: HCCL socket timed out while connecting", "zh": "x"},
                  steps=[{"en": "raise it", "zh": "x", "cmd": "export HCCL_CONNECT_TIMEOUT=600"}])
    assert contradictions(good) == []


def test_lint_rejects_a_variable_the_cause_rules_out():
    bad = _entry(cause={"en": "The fix is HCCL_BUFFSIZE, not HCCL_EXEC_TIMEOUT.", "zh": "x"},
                 steps=[{"en": "x", "zh": "x", "cmd": "export HCCL_EXEC_TIMEOUT=60"}])
    assert any("says is not the one" in str(p) for p in contradictions(bad))


def test_lint_rejects_float16_for_weights_that_need_bf16():
    bad = _entry(cause={"en": "These weights are bf16-only.", "zh": "x"},
                 steps=[{"en": "add --dtype float16", "zh": "x"}])
    assert any("float16" in str(p) for p in contradictions(bad))


def test_lint_rejects_lowering_to_a_literal_whatever_the_value():
    bad = _entry(steps=[{"en": "Lower --gpu-memory-utilization to 0.9", "zh": "x"}])
    assert any("lowers to 0.9" in str(p) for p in contradictions(bad))
    ok = _entry(steps=[{"en": "Lower --gpu-memory-utilization to 0.9", "zh": "x",
                        "when_value": "utilization > 0.9"}])
    assert contradictions(ok) == []


def test_lint_rejects_a_code_group_wider_than_the_aliases():
    bad = _entry(signatures=[r"error code:(?P<code>5070\d\d)"], aliases=["507014"])
    probs = [str(p) for p in contradictions(bad)]
    assert any("507013" in p for p in probs) and not any("507014" in p for p in probs)


def test_lint_rejects_set_env_for_the_drivers_libraries():
    bad = _entry(title={"en": "libc_sec.so missing in the container", "zh": "x"},
                 causes=["driver-lib-not-found"],
                 steps=[{"en": "source it", "zh": "x",
                         "cmd": "source /usr/local/Ascend/ascend-toolkit/set_env.sh"}])
    assert any("no set_env.sh brings" in str(p) for p in contradictions(bad))
    # the same step for a toolkit library is the fix
    ok = _entry(title={"en": "libhccl.so missing", "zh": "x"}, causes=["cann-env-not-sourced"],
                steps=bad["steps"])
    assert contradictions(ok) == []
    # an entry without cause keys is judged by the libraries it names
    dcmi = _entry(cause={"en": "DCMI cannot be loaded: libdcmi.so is not mounted", "zh": "x"},
                  steps=bad["steps"])
    assert any("no set_env.sh brings" in str(p) for p in contradictions(dcmi))


def test_lint_rejects_the_allocator_for_an_oom_that_is_not_fragmentation():
    bad = _entry(causes=["npu-oom"], steps=[{"en": "Set the allocator:", "zh": "x",
                                             "cmd": "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"}])
    assert any("fragmentation" in str(p) for p in contradictions(bad))
    stated = _entry(causes=["npu-oom"], steps=[{**bad["steps"][0],
                                                "en": "Fragmented (reserved >> allocated):"}])
    assert contradictions(stated) == []
    named = _entry(causes=["npu-oom", "allocator-fragmentation"], steps=bad["steps"])
    assert contradictions(named) == []


def test_the_shipped_entries_pass_the_contradiction_rules():
    from ascend_doctor.knowledge import data_files
    from ascend_doctor.knowledge.schema import tomllib

    for name, raw in data_files():
        for d in tomllib.loads(raw.decode()).get("entry", []):
            assert contradictions(d) == [], d["id"]


def test_every_entry_says_which_causes_its_steps_fix():
    known = set(re.findall(r"`([a-z0-9-]+)`", CAUSE_KEYS))
    for e in knowledge.load().entries.values():
        assert set(e.causes) <= known, (e.id, e.causes)


# the keys of tests/corpus/threads/CAUSES.md this branch was written against
CAUSE_KEYS = """
`cann-env-not-sourced` `cann-lib-not-found` `driver-lib-not-found` `nnal-atb-not-loaded`
`atb-torch-npu-mismatch` `cann-torch-npu-mismatch` `torch-torch-npu-mismatch`
`vllm-vllm-ascend-mismatch` `vllm-ascend-kernels-missing` `driver-cann-mismatch`
`driver-not-active` `op-kernel-package-missing` `soc-mismatch` `chip-unsupported`
`op-unsupported` `python-package-conflict` `transformers-version` `python-version-unsupported`
`local-source-shadow` `platform-not-detected` `wrong-package-build` `device-not-visible`
`device-permission` `device-busy` `npu-hardware-fault` `container-privileges` `shm-too-small`
`vnpu-config` `npu-smi-failure` `npu-oom` `model-too-large` `kv-cache-too-small`
`no-kv-cache-memory` `host-oom` `allocator-fragmentation` `memory-leak`
`max-model-len-too-large` `port-in-use` `chat-template-missing` `hub-unreachable`
`model-path-wrong` `trust-remote-code` `model-arch-unsupported` `quant-dtype-conflict`
`quant-unsupported` `tp-exceeds-devices` `tp-not-divisible` `block-size-invalid`
`batched-tokens-too-small` `invalid-argument` `feature-unsupported` `graph-capture-resources`
`graph-mode-unsupported` `mla-heads-unsupported` `tokenizer-error` `env-var-wrong`
`mp-start-method` `kv-connector-config` `request-invalid` `disk-full` `file-permission`
`hccl-connect-timeout` `hccl-exec-timeout` `hccl-buffer-too-small` `hccl-port-in-use`
`hccl-init-failure` `npu-nic-down` `network-interface-config` `rendezvous-timeout`
`proxy-breaks-rendezvous` `ray-no-npu-resources` `vllm-ascend-bug` `vllm-bug` `torch-npu-bug`
`cann-bug` `framework-bug` `model-code-bug`
"""
