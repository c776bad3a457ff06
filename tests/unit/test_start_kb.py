"""Start-up and request failures every vLLM operator meets (issue 32 item 3): each family is
recognised in the wording of the releases users run, its first step depends on the value
the message reports, and look-alike lines of other causes go to their own entries.

The logs are typed from the raise sites of vLLM / vllm-ascend (the message as the source
formats it) with the prefixes the V0 and V1 engines put in front of it."""

from __future__ import annotations

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge.decide import decide


def first(log: str):
    """The first answer triage gives for a pasted log."""
    v = decide(knowledge.load(), list(enumerate(log.strip("\n").splitlines(), 1)))
    assert v.answers, log
    return v.answers[0]


V1_BATCHED = """\
INFO 03-11 09:12:38 [__init__.py:239] Automatically detected platform npu.
INFO 03-11 09:12:40 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.3) with config: model='/models/Qwen2.5-7B-Instruct'
Traceback (most recent call last):
  File "/usr/local/python3.10/lib/python3.10/site-packages/vllm/config.py", line 1514, in __post_init__
    self._verify_args()
  File "/usr/local/python3.10/lib/python3.10/site-packages/vllm/config.py", line 1528, in _verify_args
    raise ValueError(
ValueError: max_num_batched_tokens (4096) is smaller than max_model_len (32768). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.
"""


def test_batched_tokens_below_the_context_raises_the_budget_to_the_context():
    a = first(V1_BATCHED)
    assert a.entry.id == "ASC-START-013"
    steps = a.steps()
    assert "at least 32768" in steps[0] and "--max-model-len to 4096" in steps[0]
    assert not any("max_num_seqs" in s or "{" in s for s in steps)


def test_batched_tokens_below_max_num_seqs_names_both_values():
    a = first("ValueError: max_num_batched_tokens (128) must be greater than or equal to "
              "max_num_seqs (256).")
    assert a.entry.id == "ASC-START-013"
    assert "at least 256" in a.steps()[0] and "--max-num-seqs to 128" in a.steps()[0]


HEADS = """\
(APIServer pid=2048) INFO 09-02 11:04:17 [api_server.py:1805] vLLM API server version 0.10.1.1
(APIServer pid=2048) Traceback (most recent call last):
(APIServer pid=2048)   File "/usr/local/lib/python3.11/site-packages/vllm/config/__init__.py", line 2140, in verify_with_parallel_config
(APIServer pid=2048)     raise ValueError(
(APIServer pid=2048) ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).
"""


def test_heads_not_divisible_names_the_head_count_and_the_size_that_fails():
    a = first(HEADS)
    assert a.entry.id == "ASC-START-014"
    assert "divides 28" in a.steps()[0] and "(8 does not)" in a.steps()[0]


def test_the_partition_assertion_is_the_same_cause():
    a = first("(VllmWorker rank=1 pid=77) ERROR 09-02 11:04:30 [multiproc_executor.py:546] "
              "AssertionError: 18944 is not divisible by 3")
    assert a.entry.id == "ASC-START-014"


@pytest.mark.parametrize("line,devices", [
    ("AssertionError: please set tensor_parallel_size (8) to less than max local gpu count (4)", "4"),
    ("RuntimeError: please ensure that world_size (16) is less than than max local gpu count (8)", "8"),
])
def test_tp_above_the_devices_says_how_many_there_are(line, devices):
    a = first(line)
    assert a.entry.id == "ASC-START-015"
    assert any(f"at most {devices}" in s for s in a.steps())


def test_older_wording_without_numbers_still_matches_and_leaves_the_value_step_out():
    a = first("AssertionError: please set tensor_parallel_size to less than max local gpu count")
    assert a.entry.id == "ASC-START-015"
    assert not any("{devices}" in s for s in a.steps())


ARGPARSE = """\
usage: vllm serve [model_tag] [options]
vllm serve: error: argument --tool-call-parser: invalid choice: 'qwen3_coder' (choose from 'deepseek_v3', 'hermes', 'mistral')
"""


def test_an_invalid_choice_offers_the_choices_of_this_release():
    a = first(ARGPARSE)
    assert a.entry.id == "ASC-START-016"
    assert "'deepseek_v3', 'hermes', 'mistral'" in a.steps()[1]


def test_a_renamed_flag_is_an_unknown_argument_but_nccl_flags_keep_their_entry():
    assert first("vllm serve: error: unrecognized arguments: --disable-log-requests"
                 ).entry.id == "ASC-START-016"
    assert first("api_server.py: error: unrecognized arguments: --distributed-backend=hccl"
                 ).entry.id == "ASC-ENV-005"


@pytest.mark.parametrize("line", [
    "ValueError: Unknown quantization method: bitblas. Must be one of ['aqlm', 'awq', 'fp8', 'gptq'].",
    "  Value error, awq quantization is currently not supported in npu. [type=value_error]",
    "NotImplementedError: Currently, vLLM Ascend only supports following quant types:['W8A8', 'W8A8_DYNAMIC']",
    "ERROR 03-11 09:12:40 engine.py:381] KeyError: 'model.layers.3.self_attn.qkv_proj.quant_bias'",
])
def test_quantisation_methods_the_release_does_not_run(line):
    assert first(line).entry.id == "ASC-START-017"


def test_a_quant_flag_against_the_config_is_an_argument_to_change():
    a = first("ValueError: Quantization method specified in the model config (compressed-tensors) "
              "does not match the quantization method specified in the `quantization` argument "
              "(ascend).")
    assert a.entry.id == "ASC-START-018" and "(compressed-tensors)" in a.steps()[0]


def test_an_unknown_architecture_is_not_a_transformers_problem():
    a = first("(APIServer pid=9) Value error, Model architectures ['Glm4MoeForCausalLM'] are not "
              "supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])")
    assert a.entry.id == "ASC-START-019" and "Glm4MoeForCausalLM" in a.title()
    t = first("ValueError: The checkpoint you are trying to load has model type `glm4_moe` but "
              "Transformers does not recognize this architecture.")
    assert t.entry.id == "ASC-START-006"


@pytest.mark.parametrize("line", [
    "ValueError: Invalid repository ID or local directory specified: '/models/Qwen3-8B'.",
    "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
    "'namespace/repo_name': '/data/models/qwen/'. Use `repo_type` argument if needed.",
    "OSError: /mnt/models does not appear to have a file named config.json. Checkout "
    "'https://huggingface.co//mnt/models/tree/None' for available files.",
    "RuntimeError: Cannot find any model weights with `/models/DeepSeek-V3-W8A8`",
    "ValueError: Unrecognized model in /data/ckpt/lora-qwen. Should have a `model_type` key in its "
    "config.json, or contain one of the following strings in its name: albert, align, bart",
])
def test_a_wrong_model_path(line):
    assert first(line).entry.id == "ASC-START-020"


def test_a_gated_repo_asks_for_a_token_not_for_a_mirror():
    a = first("huggingface_hub.errors.GatedRepoError: 401 Client Error.\n\nCannot access gated "
              "repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.")
    assert a.entry.id == "ASC-START-021" and "HF_TOKEN" in a.steps()[0]


def test_offline_mode_and_a_mirror_endpoint_are_the_hub_entry():
    assert first("huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/"
                 "api/models/Qwen/Qwen3-8B: offline mode is enabled. To disable it, please unset the "
                 "`HF_HUB_OFFLINE` environment variable.").entry.id == "ASC-START-005"
    assert first("OSError: We couldn't connect to 'https://hf-mirror.com' to load this file, couldn't "
                 "find it in the cached files").entry.id == "ASC-START-005"


def test_the_tokenizer_wrappers_of_vllm_go_to_their_own_cause():
    remote = ("RuntimeError: Failed to load the tokenizer. If the tokenizer is a custom tokenizer not "
              "yet available in the HuggingFace transformers library, consider setting "
              "`trust_remote_code=True` in LLM or using the `--trust-remote-code` flag in the CLI.")
    assert first(remote).entry.id == "ASC-START-008"
    assert first("Exception: data did not match any variant of untagged enum ModelWrapper at line "
                 "1251003 column 3").entry.id == "ASC-START-022"


def test_fork_after_npu_init_asks_for_spawn():
    a = first("(EngineCore_DP0 pid=5) ERROR 11-27 08:19:08 [core.py:708] RuntimeError: Cannot "
              "re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use "
              "the 'spawn' start method")
    assert a.entry.id == "ASC-START-023"
    assert "VLLM_WORKER_MULTIPROC_METHOD=spawn" in a.steps()[0]


def test_enospc_on_a_disk_and_on_dev_shm_are_different_fixes():
    disk = first("OSError: [Errno 28] No space left on device: '/root/.cache/vllm/torch_compile_cache/"
                 "a1b2/rank_0_0/inductor_cache'")
    shm = first("OSError: [Errno 28] No space left on device: '/dev/shm/psm_9f3a'")
    assert disk.entry.id == "ASC-START-024" and shm.entry.id == "ASC-START-010"


def test_a_file_permission_is_not_a_device_permission():
    a = first("PermissionError: [Errno 13] Permission denied: '/home/vllm/.cache/huggingface/hub'")
    assert a.entry.id == "ASC-START-025" and "/home/vllm/.cache/huggingface/hub" in a.steps()[0]
    assert first("PermissionError: [Errno 13] Permission denied: '/dev/davinci3'"
                 ).entry.id != "ASC-START-025"


MISMATCH = """\
INFO 07-02 10:00:01 [__init__.py:36] Available plugins for group vllm.platform_plugins:
INFO 07-02 10:00:01 [__init__.py:38] - ascend -> vllm_ascend:register
Traceback (most recent call last):
  File "/usr/local/python3.11.13/lib/python3.11/site-packages/vllm_ascend/ops/fused_moe.py", line 27, in <module>
    from vllm.model_executor.layers.fused_moe.config import FusedMoEParallelConfig
ImportError: cannot import name 'FusedMoEParallelConfig' from 'vllm.model_executor.layers.fused_moe.config' (/usr/local/python3.11.13/lib/python3.11/site-packages/vllm/model_executor/layers/fused_moe/config.py)
"""


def test_a_vllm_module_missing_for_vllm_ascend_is_the_version_pair():
    a = first(MISMATCH)
    assert a.entry.id == "ASC-START-026"
    assert "vllm.model_executor.layers.fused_moe.config" in a.title()


def test_the_harmless_vllm_c_warning_on_ascend_is_not_a_mismatch():
    line = ("WARNING 07-02 10:00:01 [_custom_ops.py:21] Failed to import from vllm._C with "
            "ModuleNotFoundError(\"No module named 'vllm._C'\")")
    assert "ASC-START-026" not in [m.entry.id for m in knowledge.load().match_lines([line])]


@pytest.mark.parametrize("line", [
    "(APIServer pid=7) ERROR 10-01 08:00:00 [serving_chat.py:222] ValueError: This model's maximum "
    "context length is 8192 tokens. However, you requested 9216 tokens (8192 in the messages, 1024 "
    "in the completion). Please reduce the length of the messages or completion.",
    "ValueError: The decoder prompt (length 9001) is longer than the maximum model length of 8192. "
    "Make sure that `max_model_len` is no smaller than the number of text tokens.",
    "WARNING 06-20 23:20:13 scheduler.py:1010] Input prompt (9001 tokens) is too long and exceeds "
    "limit of 8192",
])
def test_a_request_too_long_names_the_served_context(line):
    a = first(line)
    assert a.entry.id == "ASC-START-027"
    assert "within 8192" in a.steps()[0] and "above 8192" in a.steps()[1]


V0_ON_ASCEND = """\
INFO 10-14 02:11:09 [__init__.py:225] Platform plugin ascend is activated
WARNING 10-14 02:11:10 [arg_utils.py:1683] --kv-transfer-config is not supported by the V1 Engine. Falling back to V0.
Traceback (most recent call last):
  File "/usr/local/python3.11.13/lib/python3.11/site-packages/vllm_ascend/platform.py", line 124, in check_and_update_config
    raise ValueError("vLLM Ascend does not support V0 engine.")
ValueError: vLLM Ascend does not support V0 engine.
"""


def test_the_v0_engine_on_vllm_ascend_0_10_and_later():
    a = first(V0_ON_ASCEND)
    assert a.entry.id == "ASC-START-028" and "VLLM_USE_V1" in a.steps()[0]


def test_acl_graph_with_launch_blocking_and_torchair_options_without_torchair():
    a = first("ValueError: ACL graph is incompatible with ASCEND_LAUNCH_BLOCKING=1. Please unset "
              "ASCEND_LAUNCH_BLOCKING or set it to 0.")
    assert a.entry.id == "ASC-START-029" and "unset ASCEND_LAUNCH_BLOCKING" in a.steps()[0]
    t = first("RuntimeError: enable_kv_nz is valid only when Torchair graph mode is enabled")
    assert t.entry.id == "ASC-START-030" and "remove enable_kv_nz" in t.steps()[0]
    other = knowledge.load().match_lines(["RuntimeError: enable_super_kernel is valid only when "
                                          "tensor_parallel_size is 1"])
    assert "ASC-START-030" not in [m.entry.id for m in other]


def test_a_chat_template_path_that_does_not_exist():
    a = first("ValueError: The supplied chat template (./tool_chat_template_qwen.jinja) appears "
              "path-like, but doesn't exist!")
    assert a.entry.id == "ASC-START-004"
    assert any("./tool_chat_template_qwen.jinja" in s for s in a.steps())
    plain = first("ValueError: As of transformers v4.44, default chat template is no longer allowed, "
                  "so you must provide a chat template if the tokenizer does not define one.")
    assert not any("{template}" in s for s in plain.steps())


def test_no_start_entry_prints_a_placeholder_its_log_did_not_fill():
    """A wording without a value (the older releases') never shows '{name}' to the reader."""
    kb = knowledge.load()
    for e in kb.entries.values():
        if not e.id.startswith("ASC-START-"):
            continue
        for ex in e.examples:
            lines = ex.splitlines()
            a = first(ex)
            if a.entry is None or a.entry.id != e.id:
                continue
            shown = [a.title(), *a.steps(), *a.steps("zh")]
            assert not any(re_placeholder(s) for s in shown), (e.id, ex, shown, lines)


def re_placeholder(text: str) -> bool:
    import re
    return bool(re.search(r"\{(?:max_model_len|estimated|available|port|heads|tp|size|devices|"
                          r"batched|max_num_seqs|choices|args|supported|method|config_method|"
                          r"arch|model|path|module|option|template|derived)\}", text))


@pytest.mark.parametrize("line", [
    "AssertionError: Error in memory profiling. Initial free memory 61342253056, current free memory "
    "61980000256. This happens when the NPU memory was not properly cleaned up before initializing "
    "the vLLM instance.",
    "AssertionError: Error in memory profiling. Initial free memory 52.1 GiB, current free memory "
    "53.4 GiB. This happens when other processes sharing the same container release GPU memory while "
    "vLLM is profiling during initialization.",
])
def test_memory_profiling_disturbed_by_another_process(line):
    a = first(line)
    assert a.entry.id == "ASC-START-031" and a.steps()[0].endswith("`npu-smi info`")


def test_a_class_missing_from_transformers_is_the_transformers_release():
    a = first("ImportError: cannot import name 'Qwen3MoeConfig' from 'transformers' "
              "(/usr/local/lib/python3.10/site-packages/transformers/__init__.py)")
    assert a.entry.id == "ASC-START-032" and "Qwen3MoeConfig" in a.title()
    # the same shape from vLLM's own package stays the vLLM / vllm-ascend pair
    assert first("ImportError: cannot import name 'SamplingMetadata' from "
                 "'vllm.model_executor.sampling_metadata'").entry.id == "ASC-START-026"


def test_a_wheel_for_another_chip_and_a_chip_vllm_ascend_does_not_know():
    built = first("AssertionError: Current device type: AscendDeviceType.A3 does not match the "
                  "installed version's device type: AscendDeviceType._310P, please check your "
                  "installation package.")
    assert built.entry.id == "ASC-VER-008"
    soc = first("RuntimeError: Can not support soc_version: 240.")
    assert soc.entry.id == "ASC-START-033" and "240" in soc.title()
