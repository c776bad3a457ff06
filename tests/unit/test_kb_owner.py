"""A package's defect read from a traceback's frames (knowledge/owner.py), entries that need a
package's frames (``raised_in``), and ranking ties on placeholder text (knowledge/decide.py)."""

from __future__ import annotations

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge import owner
from ascend_doctor.knowledge.decide import decide
from tests.tracebacks import frames as _frames
from ascend_doctor.knowledge.schema import validate_entry

SITE = "/usr/local/python3.11/lib/python3.11/site-packages"



@pytest.mark.parametrize("path,pkg", [
    (f"{SITE}/vllm_ascend/worker/model_runner_v1.py", "vllm_ascend"),
    ("/usr/lib/python3/dist-packages/torch_npu/npu/utils.py", "torch_npu"),
    ("/workspace/vllm/vllm/entrypoints/cli/main.py", "vllm"),  # a source checkout
    ("/opt/src/vllm-ascend/vllm_ascend/ops/fused_moe.py", "vllm_ascend"),
    # vLLM's own subpackage named like another package stays vLLM's
    (f"{SITE}/vllm/model_executor/models/transformers/base.py", "vllm"),
    (f"{SITE}/torch/cuda/__init__.py", "torch"),
    ("<stdin>", None),
    ("/home/me/serve.py", None),
])
def test_the_owner_of_a_frame_comes_from_its_path(path, pkg):
    assert owner.package_of(path) == pkg


def test_an_unexpected_exception_in_a_package_frame_is_its_defect():
    fr = _frames(f"{SITE}/vllm/v1/worker/worker_base.py", f"{SITE}/vllm_ascend/attention/mla_v1.py")
    got = owner.owner_of("IndexError", "list index out of range", fr)
    assert got is not None and got.owner == "vllm_ascend" and got.frame is fr[-1]
    assert owner.owner_of("KeyError", "'prefill_metadata'", fr).owner == "vllm_ascend"


@pytest.mark.parametrize("exc,msg,why", [
    ("RuntimeError", "shape '[38400, 0, -1]' is invalid", "an exception code raises on purpose"),
    ("ValueError", "max_model_len too large", "an exception code raises on purpose"),
    ("AttributeError", "module 'vllm' has no attribute '__version__'", "names another package"),
    ("ImportError", "cannot import name 'FusedMoE' from 'vllm.model_executor.layers'",
     "another package's module: a mismatched pair"),
    ("ModuleNotFoundError", "No module named 'transformers.models.qwen3'", "another package"),
    ("ModuleNotFoundError", "No module named 'vllm_ascend.vllm_ascend_C'", "a compiled extension"),
    ("NotImplementedError", "W4A4 is not supported for moe", "the user's input"),
    ("TypeError", "--max-num-seqs must be an int", "the user's input"),
    ("KeyError", "'model.layers.3.mlp.experts.0.weight_scale'", "a checkpoint's weight name"),
])
def test_messages_that_point_elsewhere_are_no_defect(exc, msg, why):
    fr = _frames(f"{SITE}/vllm_ascend/ops/fused_moe.py")
    assert owner.owner_of(exc, msg, fr) is None, why


@pytest.mark.parametrize("path", [
    f"{SITE}/vllm/model_executor/models/registry.py",
    f"{SITE}/vllm/config/model.py",
    f"{SITE}/vllm/engine/arg_utils.py",
    f"{SITE}/vllm/transformers_utils/config.py",
    f"{SITE}/vllm_ascend/quantization/quant_config.py",
])
def test_code_that_reads_the_users_input_owns_no_defect(path):
    # vLLM's troubleshooting guide: "'NoneType' object is not iterable" in the registry is a
    # config.json without architectures, not a vLLM defect
    got = owner.owner_of("TypeError", "'NoneType' object is not iterable", _frames(path))
    assert got is None


def test_a_package_importing_its_own_missing_module_is_its_packaging():
    fr = _frames("/usr/local/bin/vllm", f"{SITE}/vllm/entrypoints/cli/main.py")
    got = owner.owner_of("ModuleNotFoundError", "No module named 'vllm.benchmarks.latency'", fr)
    assert got is not None and got.owner == "vllm"


def test_an_api_error_where_vllm_and_the_plugin_meet_is_the_boundary():
    fr = _frames(f"{SITE}/vllm/v1/engine/core.py", f"{SITE}/vllm_ascend/worker/worker_v1.py")
    got = owner.owner_of("TypeError", "init_device() got an unexpected keyword argument 'rank'", fr)
    assert got is not None and got.owner == owner.BOUNDARY
    # the same exception with no vLLM frame shown is the plugin's own
    got = owner.owner_of("TypeError", "unsupported operand type(s) for +: 'int' and 'NoneType'",
                         fr[1:])
    assert got is not None and got.owner == "vllm_ascend"


def test_a_call_signature_type_error_is_the_boundary_even_in_vllms_frame():
    # vLLM calls the platform plugin's override with an argument it does not take: the frame
    # shown is vLLM's, the callee is vllm-ascend's
    fr = _frames(f"{SITE}/vllm/attention/selector.py")
    got = owner.owner_of("TypeError", "NPUPlatform.get_attn_backend_cls() got an unexpected "
                         "keyword argument 'use_sparse'", fr)
    assert got is not None and got.owner == owner.BOUNDARY
    got = owner.owner_of("TypeError", "forward() missing 1 required positional argument: "
                         "'attn_metadata'", fr)
    assert got is not None and got.owner == owner.BOUNDARY


def test_frames_of_user_code_or_torch_own_nothing():
    fr = _frames("/home/me/run.py", f"{SITE}/torch/nn/modules/module.py")
    assert owner.owner_of("AttributeError", "'NoneType' object has no attribute 'shape'", fr) is None
    assert owner.owner_of("AttributeError", "x", []) is None


def _tb(exc_line: str, *paths: str, prefix: str = "") -> list[tuple[int, str]]:
    lines = [f"{prefix}Traceback (most recent call last):"]
    for p in paths:
        lines += [f'{prefix}  File "{p}", line 42, in run', f"{prefix}    do_it()"]
    lines.append(prefix + exc_line)
    return list(enumerate(lines, 1))


def test_decide_answers_a_defect_with_the_owner_entry_and_its_frame():
    kb = knowledge.load()
    lines = _tb("AssertionError: block table and slot mapping disagree",
                f"{SITE}/vllm/v1/worker/gpu_worker.py", f"{SITE}/vllm_ascend/worker/model_runner_v1.py",
                prefix="(VllmWorker rank=1 pid=88) ERROR 05-12 10:01:02 [multiproc_executor.py:527] ")
    v = decide(kb, lines)
    first = v.answers[0]
    assert first.key == "ASC-BUG-001" and first.how == "owner" and v.confident
    assert first.groups["func"] == "run" and first.groups["file"] == "model_runner_v1.py"
    assert "vllm-ascend" in first.title("en") and "AssertionError" in first.title("en")
    assert first.to_dict()["owner"]["package"] == "vllm_ascend"


def test_a_curated_signature_outranks_the_owner_reading():
    kb = knowledge.load()
    lines = _tb("ImportError: cannot import name 'SamplingParams' from 'vllm' (unknown location)",
                f"{SITE}/vllm_ascend/__init__.py")
    v = decide(kb, lines)
    assert v.answers[0].key == "ASC-ENV-009"
    assert not any(a.how == "owner" for a in v.answers)


def test_the_owner_reading_uses_the_version_the_source_index_knows():
    from ascend_doctor.knowledge.decide import _owner_groups

    got = owner.owner_of("IndexError", "tuple index out of range",
                         _frames(f"{SITE}/torch_npu/npu/streams.py"))

    class Index:
        packages = {"torch_npu": "2.5.1.post1"}

    assert _owner_groups(got, Index())["version"] == "2.5.1.post1"  # type: ignore[arg-type]
    assert _owner_groups(got, None)["version"] == "?"


def test_raised_in_entries_need_a_frame_of_their_package():
    kb = knowledge.load()
    script = _tb("AssertionError: Torch not compiled with CUDA enabled", "/home/me/infer.py",
                 f"{SITE}/torch/cuda/__init__.py")
    v = decide(kb, script)
    cfg = [a for a in v.answers if a.key == "ASC-CFG-009"]
    assert cfg and cfg[0].how == "generic" and not v.confident
    served = _tb("AssertionError: Torch not compiled with CUDA enabled",
                 f"{SITE}/vllm/platforms/cuda.py", f"{SITE}/torch/cuda/__init__.py")
    v = decide(kb, served)
    assert v.answers[0].key == "ASC-CFG-009" and v.confident
    # a bare line (no frames pasted) keeps the entry first, as a candidate: any code that
    # calls torch.cuda prints it, vLLM's platform choice is one reading among several
    for bare in ("RuntimeError: No CUDA GPUs are available",
                 "Torch not compiled with CUDA enabled"):
        v = decide(kb, [(1, bare)])
        assert v.answers[0].key == "ASC-CFG-009" and v.answers[0].how == "unshown"
        assert not v.confident and "no traceback frames" in v.why_not_confident()
        assert "no frame shows" in v.answers[0].origin()


def test_a_bare_line_takes_its_raiser_from_the_installed_stack():
    """No frames pasted: an entry with ``needs_frames`` is a full answer when the source
    index's raise site of the message lies in one of its packages, a candidate otherwise;
    an entry with ``raised_in`` alone keeps answering bare lines."""
    from ascend_doctor.knowledge.srcindex import SourceIndex, sites_of_source

    kb = knowledge.load()
    assert kb.entries["ASC-CFG-009"].needs_frames
    assert not kb.entries["ASC-START-026"].needs_frames
    v = decide(kb, [(1, "ModuleNotFoundError: No module named "
                        "'vllm.model_executor.layers.fused_moe.expert_map_manager'")])
    assert v.answers[0].key == "ASC-START-026" and v.confident
    cuda = "No CUDA GPUs are available"
    src = f"def f():\n    raise RuntimeError({cuda!r})\n"
    for pkg, how in (("vllm", "signature"), ("torch", "unshown")):
        idx = SourceIndex(sites_of_source(src, pkg, "1.0", f"{pkg}/x.py"), {pkg: "1.0"})
        v = decide(kb, [(1, f"RuntimeError: {cuda}")], idx)
        cfg = next(a for a in v.answers if a.key == "ASC-CFG-009")
        assert cfg.how == how and v.confident is (how == "signature"), pkg


def test_placeholder_text_is_no_evidence_in_a_tie():
    kb = knowledge.load()
    v = decide(kb, [(1, "OSError: libatb.so: cannot open shared object file: No such file or directory")])
    assert v.answers[0].key == "ASC-UPS-002"
    v = decide(kb, [(1, "OSError: libhccl.so: cannot open shared object file: No such file or directory")])
    assert v.answers[0].key != "ASC-UPS-002"


def _entry(**kw):
    d = {"id": "ASC-BUG-099", "title": {"en": "t", "zh": "标题"}, "cause": {"en": "c", "zh": "原因"},
         "steps": [{"en": "s", "zh": "步骤"}], "sources": ["https://example.org/x"]}
    d.update(kw)
    return d


@pytest.mark.parametrize("kw,problem", [
    ({"owner": "transformers", "causes": ["vllm-bug"]}, "owner"),
    ({"owner": "vllm", "causes": ["vllm-ascend-bug"]}, "must name vllm-bug"),
    ({"owner": "vllm", "causes": ["vllm-bug"], "signatures": ["Boom"], "examples": ["Boom"]},
     "not a signature"),
    ({"raised_in": ["vllm", "cuda"]}, "raised_in"),
    ({"raised_in": []}, "raised_in"),
    ({"needs_frames": True}, "needs_frames: needs raised_in"),
    ({"needs_frames": "yes", "raised_in": ["vllm"]}, "needs_frames: must be true or false"),
])
def test_lint_rejects_owner_and_raised_in_misuse(kw, problem):
    probs = validate_entry(_entry(**kw))
    assert any(problem in p for p in probs), probs


def test_lint_accepts_the_shipped_owner_entries():
    kb = knowledge.load()
    owned = {e.owner for e in kb.entries.values() if e.owner}
    assert owned == set(owner.OWNERS)
