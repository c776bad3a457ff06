"""Lines no marker calls an error, recognised by where the installed stack raises them, and a
launch argument vLLM refused (issue 32, items 1 and 3).

* The source index keeps ``assert cond, "message"`` and a server's error response
  (``create_error_response("…")``) besides raise and log calls.
* A bare line ("LoRA rank 32 is greater than max_lora_rank 16", a client's "Error code: 400 -
  …") that the index traces to a raise, assert, error log or error response is an error event
  of its own; the same text at INFO level, quoted as source in a traceback, or traced to a
  warning is not.
* A ValueError or error response of vLLM naming a flag, or a config field where vLLM checks
  its input, is answered by ASC-ARG-001 (cause invalid-argument); naming what other entries
  answer with the value found (the context length, memory, parallel sizes) it is only a
  candidate.
"""

from __future__ import annotations

import pytest

from ascend_doctor import knowledge
from ascend_doctor.knowledge import owner
from ascend_doctor.knowledge.decide import decide, source_events
from ascend_doctor.knowledge.owner import Frame, argument_of
from ascend_doctor.knowledge.srcindex import SourceIndex, sites_of_source

SITE = "/usr/local/python3.11.13/lib/python3.11/site-packages"

# shaped like vLLM's own code (vllm/lora/peft_helper.py, the OpenAI renderer, the runner)
LORA = '''
class PEFTHelper:
    def validate_legal(self, lora_config):
        error_msg = []
        max_rank = max([self.r, *self.rank_pattern.values()])
        if max_rank > lora_config.max_lora_rank:
            error_msg.append(
                f"LoRA rank {max_rank} is greater than max_lora_rank"
                f" {lora_config.max_lora_rank}."
            )
        if error_msg:
            raise ValueError(" ".join(error_msg))
'''
RENDERER = '''
import logging
logger = logging.getLogger(__name__)


class OnlineRenderer:
    def render_chat(self, request):
        if request.tool_choice == "auto" and not self.enable_auto_tools:
            return self.create_error_response(
                '"auto" tool choice requires '
                "--enable-auto-tool-choice and --tool-call-parser to be set"
            )
        if request.max_tokens > self.max_model_len:
            return self.create_error_response(
                f"This model's maximum context length is {self.max_model_len} tokens; "
                "lower --max-model-len or the request's max_tokens")
        logger.warning("The tokenizer of this model has no chat template %s", request.model)
'''
RUNNER = '''
class GPUModelRunner:
    def _bookkeeping_sync(self, end_idx):
        assert end_idx <= self.max_model_len, (
            "Sampled token IDs exceed the max model length. "
            f"Total number of tokens: {end_idx} > max_model_len: "
            f"{self.max_model_len}"
        )
'''


@pytest.fixture(scope="module")
def kb():
    return knowledge.load()


@pytest.fixture(scope="module")
def index() -> SourceIndex:
    sites = (sites_of_source(LORA, "vllm", "0.32.0", "vllm/lora/peft_helper.py")
             + sites_of_source(RENDERER, "vllm", "0.32.0", "vllm/renderers/online_renderer.py")
             + sites_of_source(RUNNER, "vllm", "0.32.0", "vllm/v1/worker/gpu_model_runner.py"))
    return SourceIndex(sites, {"vllm": "0.32.0"})


def test_asserts_and_error_responses_are_sites():
    kinds = {(s.function, s.kind) for s in sites_of_source(RUNNER, "vllm", "1", "r.py")
             + sites_of_source(RENDERER, "vllm", "1", "o.py")}
    assert ("GPUModelRunner._bookkeeping_sync", "assert") in kinds
    assert ("OnlineRenderer.render_chat", "error response") in kinds
    assert ("OnlineRenderer.render_chat", "logger.warning") in kinds
    # an assert without a message prints nothing to trace
    assert sites_of_source("def f(x):\n    assert x > 0\n", "vllm", "1", "f.py") == []


def _lines(*text: str) -> list[tuple[int, str]]:
    return list(enumerate(text, 1))


def test_a_bare_line_the_stack_raises_is_an_error_event(index):
    lines = _lines("INFO 03-02 10:11:00 [api_server.py:1000] Starting vLLM API server",
                   "LoRA rank 32 is greater than max_lora_rank 16",
                   "AssertionError: Sampled token IDs exceed the max model length. Total "
                   "number of tokens: 4097 > max_model_len: 4096")
    evs = source_events(lines, set(), index)
    assert [(e.kind, e.cause.n) for e in evs] == [("error", 2), ("error", 3)]


def test_what_is_not_an_error_stays_out(index):
    lines = _lines(
        # the same message logged at INFO, quoted as source inside a traceback, cut too short
        "INFO 03-02 10:11:00 [peft_helper.py:90] LoRA rank 32 is greater than max_lora_rank 16",
        '                f"LoRA rank {max_rank} is greater than max_lora_rank"',
        "LoRA rank 32",
        # a warning site's text: the index knows it, but as a warning
        "The tokenizer of this model has no chat template Qwen/Qwen3-8B",
        "a line nothing in the index raises at all")
    assert source_events(lines, set(), index) == []
    # a line an event already holds is not read twice
    assert source_events(_lines("LoRA rank 32 is greater than max_lora_rank 16"), {1}, index) == []


def test_without_an_index_a_bare_line_stays_unread(kb, index):
    lines = _lines("LoRA rank 32 is greater than max_lora_rank 16")
    bare = decide(kb, lines)
    assert bare.traces == [] and not bare.answers
    v = decide(kb, lines, index)
    assert [(t.line, t.source is not None) for t in v.traces] == [(1, True)]
    assert v.answers[0].key == "ASC-ARG-001" and v.confident
    assert v.answers[0].groups["subject"] == "max_lora_rank"
    assert "invalid-argument" in v.answers[0].causes


def test_a_client_error_response_naming_flags_is_a_refused_argument(kb, index):
    v = decide(kb, _lines('openai.BadRequestError: Error code: 400 - {\'object\': \'error\', '
                          '\'message\': \'"auto" tool choice requires --enable-auto-tool-choice '
                          'and --tool-call-parser to be set\', \'type\': \'BadRequestError\'}'),
               index)
    first = v.answers[0]
    assert first.key == "ASC-ARG-001" and v.confident
    assert first.groups["subject"] == "--enable-auto-tool-choice, --tool-call-parser"
    steps = " ".join(first.steps("en"))
    assert "--enable-auto-tool-choice" in steps and "vllm serve --help=all" in steps


def test_a_refusal_about_the_context_length_is_only_a_candidate(kb, index):
    # the context-length entries answer with the value found; the argument reading defers
    v = decide(kb, _lines("Error code: 400 - This model's maximum context length is 4096 "
                          "tokens; lower --max-model-len or the request's max_tokens"), index)
    arg = [a for a in v.answers if a.key == "ASC-ARG-001"]
    assert not (v.answers[0].key == "ASC-ARG-001" and v.confident)
    assert all(a.how == "generic" for a in arg)


@pytest.mark.parametrize("exc,msg,path,func,subject,weak", [
    ("ValueError", "--enable-auto-tool-choice requires --tool-call-parser",
     "vllm/entrypoints/openai/serving_chat.py", "create_chat_completion",
     "--enable-auto-tool-choice, --tool-call-parser", False),
    ("ValueError", "LoRA rank 64 is greater than max_lora_rank 16.",
     "vllm/lora/peft_helper.py", "PEFTHelper.validate_legal", "max_lora_rank", False),
    ("ValueError", "max_loras (4) must be <= max_cpu_loras (2)",
     "vllm/config/lora.py", "LoRAConfig.__post_init__", "max_loras, max_cpu_loras", False),
    ("error_msg.append", "LoRA rank 64 is greater than max_lora_rank 16.",
     "vllm/lora/peft_helper.py", "PEFTHelper.validate_legal", "max_lora_rank", False),
    ("ValueError", "max_num_batched_tokens (2048) is smaller than max_model_len (8192).",
     "vllm/config/scheduler.py", "SchedulerConfig._verify_args",
     "max_num_batched_tokens, max_model_len", True),
    ("ValueError", "--quantization awq is not valid for this checkpoint",
     "vllm/engine/arg_utils.py", "EngineArgs.create_engine_config", "--quantization", True),
])
def test_argument_reading(exc, msg, path, func, subject, weak):
    got = argument_of(exc, msg, [Frame(f"{SITE}/{path}", 10, func, "vllm")])
    assert got is not None and got.owner == owner.ARGUMENT
    assert (got.subject, got.weak) == (subject, weak)


@pytest.mark.parametrize("exc,msg,path,func", [
    # a snake_case name outside vLLM's input checks is an internal variable, not a flag
    ("ValueError", "hidden_dim must be divisible by tp_size", "vllm/model_executor/x.py",
     "fused_gemm"),
    # not an exception vLLM raises to refuse input
    ("KeyError", "'max_lora_rank'", "vllm/config/lora.py", "LoRAConfig.verify"),
    ("AssertionError", "Sampled token IDs exceed max_model_len", "vllm/config/model.py",
     "verify"),
    # a feature said to be missing has its own owner (FEATURE)
    ("ValueError", "--enable-lora is not supported on NPU yet", "vllm/config/lora.py", "verify"),
    # a framework's own check
    ("ValueError", "--tool-call-parser required", "llamafactory/api/app.py", "create_app"),
])
def test_not_a_refused_argument(exc, msg, path, func):
    pkg = path.split("/", 1)[0]
    assert argument_of(exc, msg, [Frame(f"{SITE}/{path}", 10, func, pkg)]) is None


def test_a_traceback_of_vllms_config_check_is_answered(kb):
    tb = _lines("Traceback (most recent call last):",
                f'  File "{SITE}/vllm/engine/arg_utils.py", line 1402, in create_engine_config',
                "    lora_config = LoRAConfig(",
                f'  File "{SITE}/vllm/config/lora.py", line 98, in __post_init__',
                "    raise ValueError(",
                "ValueError: max_loras (4) must be <= max_cpu_loras (2)")
    v = decide(kb, tb)  # no index: the frames name the raise site
    assert v.answers[0].key == "ASC-ARG-001" and v.confident
    assert v.answers[0].groups["file"] == "lora.py"


@pytest.mark.parametrize("source,defect", [
    ("    raise KeyError(", False),  # said on purpose: not a defect of vLLM
    ("    return self.parsers[name]", True),  # an operation failed: a defect reading
    ("    raise exc", True),  # passes on what an operation raised
])
def test_an_exception_the_shown_source_raises_on_purpose_is_no_defect(kb, source, defect):
    tb = _lines("Traceback (most recent call last):",
                f'  File "{SITE}/vllm/entrypoints/openai/serving_x.py", line 80, in build',
                "    parser = lookup(name)",
                f'  File "{SITE}/vllm/entrypoints/openai/serving_x.py", line 62, in lookup',
                source,
                "KeyError: 'unknown renderer: plain (registered: { chatml,default })'")
    v = decide(kb, tb)
    assert any(a.key == "ASC-BUG-002" for a in v.answers) is defect
    assert owner.read("KeyError", "x", [Frame(f"{SITE}/vllm/a.py", 1, "f", "vllm")],
                      raised=True) is None


def test_a_warning_naming_an_error_it_may_cause_is_not_that_error(kb):
    # vLLM 0.32's start-up warning on a host whose fd limit it cannot raise
    warn = ("(APIServer pid=7792) WARNING 12-07 07:04:30 [system_utils.py:255] Found ulimit of "
            "20000 and failed to automatically increase with error current limit exceeds "
            "maximum limit. This can cause fd limit errors like `OSError: [Errno 24] Too many "
            "open files`. Consider increasing with ulimit -n")
    v = decide(kb, _lines(warn, "ValueError: No tokenizer file found."))
    assert not any(a.key == "shape:os.too-many-open-files" for a in v.answers)
    assert v.answers[0].key == "ASC-START-036" and v.confident
    # the same message as an error is answered
    v = decide(kb, _lines("OSError: [Errno 24] Too many open files"))
    assert any(a.key == "shape:os.too-many-open-files" for a in v.answers)


def test_pydantics_trailer_is_not_a_field_the_user_set():
    msg = ("num_speculative_tokens must be provided with speculative model unless the draft "
           "model config contains an n_predict parameter. [type=value_error, "
           "input_value=ArgsKwargs((), {'method': 'ngram'}), input_type=ArgsKwargs]")
    got = argument_of("ValueError", msg, [Frame(f"{SITE}/vllm/config/speculative.py", 1820,
                                                "SpeculativeConfig._verify_args", "vllm")])
    assert got is not None and got.subject == "num_speculative_tokens, n_predict"
