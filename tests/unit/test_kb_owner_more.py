"""Owners beyond vLLM, vllm-ascend and torch_npu (knowledge/owner.py): the model's own code,
a framework that runs the stack, and a feature the NPU build says it lacks; the entries that
answer them (ASC-BUG-005..007) and the curated entries that must keep winning over them."""

from __future__ import annotations

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge import owner
from ascend_doctor.knowledge.decide import decide
from tests.tracebacks import frames as _frames

SITE = "/usr/local/python3.10.17/lib/python3.10/site-packages"
HF = "/root/.cache/huggingface/modules/transformers_modules"


@pytest.fixture(scope="module")
def kb():
    return knowledge.load()



def _tb(exc_line: str, *paths: str, prefix: str = "") -> list[tuple[int, str]]:
    lines = [f"{prefix}Traceback (most recent call last):"]
    for p in paths:
        lines += [f'{prefix}  File "{p}", line 42, in run', f"{prefix}    do_it()"]
    lines.append(prefix + exc_line)
    return list(enumerate(lines, 1))


# --- paths -----------------------------------------------------------------------------------

@pytest.mark.parametrize("path,model", [
    (f"{HF}/chatglm3-6b/tokenization_chatglm.py", "chatglm3-6b"),
    # a hub model: organisation, name, then the commit the code was fetched at
    (f"{HF}/deepseek-ai/DeepSeek-V3/86518964eaef84e3fdd98e9861759a1384f9c29d/modeling_deepseek.py",
     "deepseek-ai/DeepSeek-V3"),
    ("/data/models/Qwen-7B-Chat/modeling_qwen.py", "Qwen-7B-Chat"),  # next to the weights
    ("/data/vllm/models/Qwen-7B/modeling_qwen.py", "Qwen-7B"),  # a folder named like vLLM
    # transformers' and vLLM's own model files are theirs, not the model repository's
    (f"{SITE}/transformers/models/llama/modeling_llama.py", None),
    (f"{SITE}/vllm/model_executor/models/qwen2.py", None),
    ("/workspace/transformers/src/transformers/models/qwen2/modeling_qwen2.py", None),
    ("/home/me/serve.py", None),
])
def test_the_models_own_code_is_told_from_its_path(path, model):
    assert owner.model_of(_frames(path)[0]) == model


@pytest.mark.parametrize("path,pkg", [
    (f"{SITE}/llamafactory/train/sft/workflow.py", "llamafactory"),
    ("/workspace/LLaMA-Factory/src/llamafactory/data/template.py", "llamafactory"),  # checkout
    (f"{SITE}/swift/llm/infer/infer_engine/vllm_engine.py", "swift"),
    ("/root/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", "verl"),
    (f"{SITE}/mindie_llm/text_generator/generator.py", "mindie_llm"),
    (f"{SITE}/gpustack/worker/backends/vllm.py", "gpustack"),
    (f"{HF}/chatglm3-6b/modeling_chatglm.py", owner.REMOTE_CODE),
])
def test_framework_frames_are_named_by_their_import_name(path, pkg):
    assert owner.package_of(path) == pkg


# --- the model's own code --------------------------------------------------------------------

def test_an_unexpected_exception_in_remote_code_is_the_models_defect():
    fr = _frames(f"{SITE}/vllm/transformers_utils/tokenizer.py",
                 f"{SITE}/transformers/tokenization_utils.py",
                 f"{HF}/chatglm3-6b/tokenization_chatglm.py")
    got = owner.read("AttributeError", "'ChatGLMTokenizer' object has no attribute 'tokenizer'. "
                     "Did you mean: 'tokenize'?", fr)
    assert got is not None and got.owner == owner.MODEL and got.subject == "chatglm3-6b"
    assert got.frame is fr[-1]


@pytest.mark.parametrize("exc,msg,why", [
    ("ModuleNotFoundError", "No module named 'flash_attn'", "a missing package"),
    ("ImportError", "cannot import name 'is_torch_fx_available' from 'transformers.utils'",
     "another package's module: transformers too new or too old"),
    ("ModuleNotFoundError", "No module named 'transformers_modules.Qwen1'",
     "the cache or a dot in the folder name, not the code"),
    ("AttributeError", "Please install flash-attn first", "the user's input"),
    ("KeyError", "'model.layers.3.mlp.gate.weight'", "a checkpoint's weight name"),
    ("ValueError", "rope_scaling must be a dict", "an exception code raises on purpose"),
])
def test_model_code_rule_outs(exc, msg, why):
    fr = _frames(f"{HF}/Qwen-7B-Chat/modeling_qwen.py")
    assert owner.read(exc, msg, fr) is None, why


def test_an_exception_in_torch_called_from_model_code_owns_nothing():
    fr = _frames(f"{HF}/Qwen-7B-Chat/modeling_qwen.py", f"{SITE}/torch/nn/functional.py")
    assert owner.read("IndexError", "index out of range in self", fr) is None


# --- frameworks ------------------------------------------------------------------------------

@pytest.mark.parametrize("path,project", [
    (f"{SITE}/llamafactory/data/template.py", "LLaMA-Factory"),
    (f"{SITE}/swift/llm/infer/infer_engine/vllm_engine.py", "ms-swift"),
    ("/root/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", "verl"),
    (f"{SITE}/xinference/model/llm/vllm/core.py", "Xinference"),
    (f"{SITE}/mindie_llm/text_generator/generator.py", "MindIE LLM"),
])
def test_an_unexpected_exception_in_a_framework_is_its_defect(path, project):
    fr = _frames(f"{SITE}/vllm/entrypoints/llm.py", path)
    got = owner.read("AttributeError", "'NoneType' object has no attribute 'generate'", fr)
    assert got is not None and got.owner == owner.FRAMEWORK and got.subject == project
    assert got.home.startswith("https://")


@pytest.mark.parametrize("exc,msg,path,why", [
    ("ModuleNotFoundError", "No module named 'vllm'", f"{SITE}/swift/llm/infer/infer_engine/vllm_engine.py",
     "the package is not installed at all: no pairing to blame"),
    ("ImportError", "cannot import name 'X' from 'vllm._C'", f"{SITE}/verl/utils/vllm_utils.py",
     "a compiled extension"),
    ("ModuleNotFoundError", "No module named 'flash_attn.ops'", f"{SITE}/trl/trainer/utils.py",
     "a package outside the stack"),
    ("AttributeError", "--use-vllm needs vllm installed", f"{SITE}/trl/trainer/grpo_trainer.py",
     "the user's input"),
    ("KeyError", "'rollout'", f"{SITE}/verl/utils/config.py", "code that reads input"),
    ("RuntimeError", "CUDA error: invalid device ordinal", f"{SITE}/swift/llm/infer/base.py",
     "an exception code raises on purpose"),
])
def test_framework_rule_outs(exc, msg, path, why):
    assert owner.read(exc, msg, _frames(path)) is None, why


def test_vllms_own_frame_under_a_framework_stays_vllms():
    fr = _frames(f"{SITE}/llamafactory/chat/vllm_engine.py", f"{SITE}/vllm/v1/engine/core.py")
    got = owner.read("IndexError", "list index out of range", fr)
    assert got is not None and got.owner == "vllm"


# --- features the NPU build lacks ------------------------------------------------------------

@pytest.mark.parametrize("exc,msg,feature", [
    ("NotImplementedError", "Batched rotary embedding is currently not supported on NPU.",
     "Batched rotary embedding"),
    ("NotImplementedError", "ngram is not supported yet.", "ngram"),
    ("NotImplementedError", "Context parallelism is not supported by Ascend NPU model runner v2.",
     "Context parallelism"),
    ("ValueError", "Mix placement is not supported with shared expert DP or multistream overlap.",
     "Mix placement"),
    ("RuntimeError", "Ascend NPU does not support guided decoding with xgrammar",
     "guided decoding with xgrammar"),
])
def test_a_feature_the_plugin_says_it_lacks(exc, msg, feature):
    fr = _frames(f"{SITE}/vllm/v1/engine/core.py", f"{SITE}/vllm_ascend/worker/model_runner_v1.py")
    got = owner.read(exc, msg, fr)
    assert got is not None and got.owner == owner.FEATURE and not got.weak
    assert got.subject == feature


def test_vllms_platform_layer_counts_its_other_layers_do_not():
    msg = "Sleep mode is not supported on this platform."
    got = owner.read("NotImplementedError", msg, _frames(f"{SITE}/vllm/platforms/interface.py"))
    assert got is not None and got.owner == owner.FEATURE
    # the same words from vLLM's model code are vLLM's business (other entries, or nothing)
    assert owner.read("ValueError", msg, _frames(f"{SITE}/vllm/model_executor/models/qwen2.py")) is None


@pytest.mark.parametrize("msg", [
    "Currently, vLLM Ascend doesn't support w4a8_dynamic for FusedMoE.",  # a quantisation
    "MLA is not supported on 310P currently.",  # a chip
    "Expert Parallel is not supported on 310P. Please remove --enable-expert-parallel.",
    "bfloat16 is not supported on this device",  # a dtype on a chip
    "DeepseekOCRForCausalLM is not supported yet.",  # an architecture
    "operator npu_moe_gating_top_k is not implemented for this shape",  # an operator
])
def test_a_message_naming_what_other_entries_answer_is_a_weak_reading(msg):
    got = owner.feature_of("NotImplementedError", msg, _frames(f"{SITE}/vllm_ascend/ops/fused_moe.py"))
    assert got is not None and got.weak


@pytest.mark.parametrize("exc,msg", [
    ("NotImplementedError", ""),  # an abstract method nobody overrode: a defect, not a feature
    ("RuntimeError", "shape '[38400, 0, -1]' is invalid"),
    ("KeyError", "'not supported'"),
])
def test_no_feature_reading_without_a_message_that_says_so(exc, msg):
    assert owner.feature_of(exc, msg, _frames(f"{SITE}/vllm_ascend/ops/fused_moe.py")) is None


def test_a_bare_not_implemented_error_in_the_plugin_stays_its_defect(kb):
    v = decide(kb, _tb("NotImplementedError", f"{SITE}/vllm_ascend/attention/attention_v1.py"))
    assert v.answers[0].key == "ASC-BUG-001"


def test_a_feature_answer_is_confident_and_names_the_feature(kb):
    v = decide(kb, _tb("NotImplementedError: Batched rotary embedding is currently not supported "
                       "on NPU.", f"{SITE}/vllm/model_executor/layers/rotary_embedding.py",
                       f"{SITE}/vllm_ascend/ops/rotary_embedding.py"))
    first = v.answers[0]
    assert first.key == "ASC-FEAT-001" and first.how == "owner" and v.confident
    assert first.title("en").startswith("Batched rotary embedding: not supported")
    assert "supported_features" in " ".join(first.steps("en"))
    assert "Batched rotary embedding" in first.title("zh")


def test_a_weak_feature_answer_is_never_confident(kb):
    v = decide(kb, _tb("RuntimeError: MLA is not supported on 310P currently.",
                       f"{SITE}/vllm_ascend/_310p/attention/attention_v1.py"))
    feat = [a for a in v.answers if a.key == "ASC-FEAT-001"]
    assert feat and feat[0].how == "generic" and "weak" in feat[0].origin()
    assert not (v.answers[0].key == "ASC-FEAT-001" and v.confident)


@pytest.mark.parametrize("line,winner", [
    ("NotImplementedError: Currently, vLLM Ascend only supports following quant types:"
     "['W4A8_DYNAMIC', 'W8A8', 'W8A8_DYNAMIC', 'C8']", "ASC-START-017"),
    ("RuntimeError: Can not support soc_version: 100.", "ASC-START-033"),
])
def test_specific_entries_keep_winning_over_the_feature_reading(kb, line, winner):
    v = decide(kb, _tb(line, f"{SITE}/vllm/v1/engine/core.py",
                       f"{SITE}/vllm_ascend/quantization/quant_config.py"))
    assert v.answers[0].key == winner and v.confident


# --- the shipped entries ---------------------------------------------------------------------

def test_every_owner_entrys_example_is_answered_by_it(kb):
    with_examples = [e for e in kb.entries.values() if e.owner and e.examples]
    assert {e.owner for e in with_examples} >= {owner.MODEL, owner.FRAMEWORK, owner.FEATURE}
    for e in with_examples:
        for ex in e.examples:
            v = decide(kb, list(enumerate(ex.splitlines(), 1)))
            assert v.answers and v.answers[0].key == e.id and v.confident, (e.id, v.answers[:2])


def test_the_framework_answer_names_the_project_and_its_page(kb):
    v = decide(kb, _tb("AttributeError: 'NoneType' object has no attribute 'fix_special_tokens'",
                       "/usr/local/bin/llamafactory-cli", f"{SITE}/llamafactory/data/template.py"))
    first = v.answers[0]
    assert first.key == "ASC-BUG-006" and v.confident
    assert "LLaMA-Factory" in first.title("en")
    assert any("https://github.com/hiyouga/LLaMA-Factory" in s for s in first.steps("en"))


def test_new_syntax_on_an_old_python_is_the_interpreter_not_a_vllm_defect(kb):
    # PEP 604 annotations evaluated on Python 3.9 raise this TypeError in whichever package's
    # frame holds the annotation; without ASC-ENV-010 the owner reading would say vllm-bug
    v = decide(kb, _tb("TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'",
                       f"{SITE}/vllm/__init__.py", f"{SITE}/vllm/config/parallel.py"))
    assert v.answers[0].key == "ASC-ENV-010" and v.confident
    v = decide(kb, _tb("TypeError: unsupported operand type(s) for |: 'int' and 'str'",
                       f"{SITE}/vllm_ascend/worker/model_runner_v1.py"))
    assert v.answers[0].key == "ASC-BUG-001"


def test_lint_knows_the_new_owners_and_their_causes():
    from ascend_doctor.knowledge.schema import validate_entry

    d = {"id": "ASC-BUG-099", "title": {"en": "t", "zh": "标题"}, "cause": {"en": "c", "zh": "原因"},
         "steps": [{"en": "s", "zh": "步骤"}], "sources": ["https://example.org/x"]}
    for own, cause in ((owner.MODEL, "model-code-bug"), (owner.FRAMEWORK, "framework-bug"),
                       (owner.FEATURE, "feature-unsupported")):
        assert not any("owner" in p or "must name" in p
                       for p in validate_entry({**d, "owner": own, "causes": [cause]}))
        assert any("must name" in p for p in validate_entry({**d, "owner": own, "causes": ["vllm-bug"]}))


# --- the source index's raise site in the frame that raised confirms the owner answer ---------

class _Index:
    """A source index that traces every message to one raise site."""

    packages = {"vllm_ascend": "0.23.0"}

    def __init__(self, file: str, coverage: float = 0.9):
        from ascend_doctor.knowledge.srcindex import Site

        self.site = Site(file.split("/", 1)[0], "0.23.0", file, 36, "init_speculator",
                         "raise NotImplementedError", "x")
        self.coverage = coverage

    def trace(self, message: str):
        return self.site, self.coverage


def test_the_raise_site_in_the_raising_frame_confirms_the_owner_answer(kb):
    f = "vllm_ascend/worker/v2/spec_decode/eagle/__init__.py"
    lines = _tb("NotImplementedError: ngram is not supported yet.", f"{SITE}/vllm/v1/engine/core.py",
                f"{SITE}/{f}")
    v = decide(kb, lines, index=_Index(f))  # type: ignore[arg-type]
    assert v.answers[0].key == "ASC-FEAT-001" and v.confident
    assert v.answers[1].key == f"src:{f}:36"
    # a raise site in another file is no confirmation: the better-covered site stays first
    v = decide(kb, lines, index=_Index("vllm_ascend/other.py"))  # type: ignore[arg-type]
    assert v.answers[0].key == "src:vllm_ascend/other.py:36" and not v.confident


def test_without_frames_the_raise_site_stands_for_the_frame(kb):
    # a bare exception line, or vLLM's ERROR record of it, traced by the source index to a
    # `raise NotImplementedError` of the installed plugin
    f = "vllm_ascend/worker/v2/spec_decode/eagle/__init__.py"
    for line in ("NotImplementedError: ngram is not supported yet.",
                 "(EngineCore_DP0 pid=7) ERROR 11-20 08:14:52 [core.py:843] NotImplementedError: "
                 "ngram is not supported yet."):
        v = decide(kb, [(1, line)], index=_Index(f))  # type: ignore[arg-type]
        assert v.answers[0].key == "ASC-FEAT-001" and v.confident, line
        assert v.answers[0].groups["subject"] == "ngram"
    # without the index nothing says where the line was raised: no feature reading
    v = decide(kb, [(1, "NotImplementedError: ngram is not supported yet.")])
    assert not any(a.key == "ASC-FEAT-001" for a in v.answers)
    # a raise site in vLLM's model code is no platform's missing feature
    v = decide(kb, [(1, "ValueError: ngram is not supported yet.")],
               index=_Index("vllm/model_executor/models/qwen2.py"))  # type: ignore[arg-type]
    assert not any(a.key == "ASC-FEAT-001" for a in v.answers)


def test_a_framework_calling_vllm_with_an_argument_it_no_longer_takes_is_the_framework(kb):
    # the TypeError is raised at the call, in the framework's frame: its version matrix names
    # the vLLM it was written for
    v = decide(kb, _tb("TypeError: LLM.generate() got an unexpected keyword argument "
                       "'prompt_token_ids'", "/usr/local/bin/llamafactory-cli",
                       f"{SITE}/llamafactory/chat/vllm_engine.py"))
    assert v.answers[0].key == "ASC-BUG-006" and v.confident
    assert "framework-bug" in v.answers[0].causes


@pytest.mark.parametrize("exc_line,path", [
    ("ImportError: cannot import name 'get_tensor_model_parallel_group' from "
     "'vllm.distributed.parallel_state' (/usr/local/lib/python3.10/site-packages/vllm/distributed/"
     "parallel_state.py)", f"{SITE}/verl/workers/rollout/vllm_rollout/__init__.py"),
    ("ModuleNotFoundError: No module named 'vllm.lora.models'",
     f"{SITE}/swift/llm/infer/infer_engine/vllm_engine.py"),
    ("AttributeError: module 'vllm.distributed.parallel_state' has no attribute '_TP'",
     "/workspace/OpenRLHF/openrlhf/trainer/ray/vllm_worker_wrap.py"),
])
def test_a_framework_reaching_for_a_name_the_stack_lacks_is_the_frameworks_pairing(kb, exc_line, path):
    # the message shape of an import error reads vLLM against the plugin; the importer here is
    # the framework, which chose the vLLM release (its version matrix is the fix)
    v = decide(kb, _tb(exc_line, path))
    first = v.answers[0]
    assert first.key == "ASC-BUG-006" and v.confident, [(a.key, a.causes) for a in v.answers[:3]]
    assert first.owned is not None and first.owned.pairing


def test_specific_signatures_still_win_over_a_frameworks_pairing(kb):
    # a source tree shadowing vllm is named by its own entry whoever imports it
    v = decide(kb, _tb("ImportError: cannot import name 'SamplingParams' from 'vllm' (unknown location)",
                       f"{SITE}/llamafactory/chat/vllm_engine.py"))
    assert v.answers[0].key == "ASC-ENV-009"
