"""Which package a Python exception belongs to, from the traceback's file paths, and whether
the exception reads as a defect of that package.

A traceback whose innermost exception is one code does not raise on purpose (AttributeError,
KeyError, IndexError, AssertionError, …) in a frame of vllm_ascend, vllm or torch_npu is, when
nothing in the message points elsewhere, a defect of that package: the first step is its
latest patch release, then its issue tracker. What points elsewhere is ruled out first:

* a message naming another package's module (``module 'vllm' has no attribute …``,
  ``No module named 'transformers.x'``, ``cannot import name 'X' from 'vllm.y'``): a version
  mismatch, a missing package or a shadowing directory, which curated entries answer;
* a message about the user's input (a flag, the config, the checkpoint, "not supported",
  "please …");
* an import error for a module of another package than the one whose frame raised it;
* a frame of code that reads the user's input (config, model registry, arguments,
  tokenizer files): there the exception says the input is not what the code expects.

An AttributeError, TypeError or ImportError raised where vllm and vllm_ascend frames meet (the
plugin calls vLLM or vLLM calls the plugin) cannot be told from a mismatched pair of releases:
it is answered as the boundary owner ``vllm/vllm_ascend``, whose advice checks the pair first;
so is a TypeError about a call's arguments in either package, which is raised at the call,
in the caller's frame, while the callee may be the other package's override.
Ownership is decided from paths only, never from the message text.

The same reading names four more owners (after the same rule-outs):

* the model's own code (``MODEL``): a frame of Hugging Face remote code
  (``…/transformers_modules/<model>/modeling_x.py``, what ``trust_remote_code`` imports) or
  a model's ``modeling_*.py`` / ``configuration_*.py`` outside any installed package: a
  defect of the model repository's code (or code written for another transformers release);
* a framework that runs vLLM or torch_npu (``FRAMEWORKS``: LLaMA-Factory, ms-swift, verl,
  SGLang, LMDeploy, Xinference, MindIE, GPUStack, OpenRLHF, TRL, …): a defect of that
  framework or of its pairing with the installed stack, whose first step is the framework's
  own version matrix;
* a feature the NPU build does not have (``FEATURE``): a NotImplementedError with a message,
  or a ValueError / RuntimeError / AssertionError whose message says "not supported", "not
  implemented" or "does not support", raised in a frame of vllm_ascend or of vLLM's platform
  layer. When the message names a quantisation, an operator, a chip or dtype, or a model
  architecture, the answer is marked weak: entries of those causes are the better reading;
* a launch argument vLLM refused (``ARGUMENT``): a ValueError, or an error response to the
  client, raised in vllm or vllm_ascend whose message names a flag (``--tool-call-parser``),
  or, in vLLM's config and argument code or a validate/verify/check function, a config field
  (``max_lora_rank``). Weak when it names what other entries answer with the value found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

# import name -> the distribution users install and upgrade
PACKAGES = {"vllm_ascend": "vllm-ascend", "vllm": "vllm", "torch_npu": "torch-npu"}
BOUNDARY = "vllm/vllm_ascend"
MODEL = "model"  # the model repository's own code (remote code, modeling_*.py)
FRAMEWORK = "framework"  # a framework that runs vLLM / torch_npu (FRAMEWORKS)
FEATURE = "feature"  # a feature the NPU build of the stack does not have
ARGUMENT = "argument"  # a launch argument vLLM's own validation refused
OWNERS = (*PACKAGES, BOUNDARY, MODEL, FRAMEWORK, FEATURE, ARGUMENT)
# the cause key of a defect of each owner (tests/corpus/threads/CAUSES.md)
DEFECT_CAUSE = {"vllm_ascend": "vllm-ascend-bug", "vllm": "vllm-bug", "torch_npu": "torch-npu-bug",
                BOUNDARY: "vllm-vllm-ascend-mismatch", MODEL: "model-code-bug",
                FRAMEWORK: "framework-bug", FEATURE: "feature-unsupported",
                ARGUMENT: "invalid-argument"}
# frameworks that run vLLM or torch_npu on NPU: import name -> (project, its home page, where
# its issues are); the import names are those of the projects' own source trees
FRAMEWORKS = {
    "llamafactory": ("LLaMA-Factory", "https://github.com/hiyouga/LLaMA-Factory"),
    "llmtuner": ("LLaMA-Factory", "https://github.com/hiyouga/LLaMA-Factory"),  # its old name
    "swift": ("ms-swift", "https://github.com/modelscope/ms-swift"),
    "verl": ("verl", "https://github.com/volcengine/verl"),
    "sglang": ("SGLang", "https://github.com/sgl-project/sglang"),
    "lmdeploy": ("LMDeploy", "https://github.com/InternLM/lmdeploy"),
    "xinference": ("Xinference", "https://github.com/xorbitsai/inference"),
    "mindie_llm": ("MindIE LLM", "https://www.hiascend.com/software/mindie"),
    "atb_llm": ("MindIE LLM (ATB models)", "https://www.hiascend.com/software/mindie"),
    "gpustack": ("GPUStack", "https://github.com/gpustack/gpustack"),
    "openrlhf": ("OpenRLHF", "https://github.com/OpenRLHF/OpenRLHF"),
    "trl": ("TRL", "https://github.com/huggingface/trl"),
    "xtuner": ("XTuner", "https://github.com/InternLM/xtuner"),
    "mindspeed_llm": ("MindSpeed-LLM", "https://gitee.com/ascend/MindSpeed-LLM"),
    "mindspeed_rl": ("MindSpeed-RL", "https://gitee.com/ascend/MindSpeed-RL"),
}
# the stack a framework runs on: a name of it the framework cannot find is their pairing
_STACK = frozenset({"vllm", "vllm_ascend", "torch_npu", "torch", "transformers"})
# the import name Hugging Face gives a model's remote code (trust_remote_code)
REMOTE_CODE = "transformers_modules"
# packages whose frames only pass a call along: never the owner of what they raise
_OTHER = {"torch", "transformers", "ray", "numpy", "asyncio", "concurrent", "multiprocessing",
          "threading", "importlib", "uvicorn", "fastapi", "starlette", "pydantic", "safetensors",
          "huggingface_hub", "tokenizers", "accelerate", "torchair", "triton"}
# exceptions no code raises on purpose to tell a user something
UNEXPECTED = frozenset({"AttributeError", "KeyError", "IndexError", "TypeError", "AssertionError",
                        "NameError", "UnboundLocalError", "ZeroDivisionError", "NotImplementedError",
                        "ModuleNotFoundError", "ImportError", "RecursionError"})
_API = frozenset({"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError"})
_IMPORT = frozenset({"ImportError", "ModuleNotFoundError"})

FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?')
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<top>[A-Za-z_]\w*)")
# a message naming a module: the package it belongs to is the first dotted part
_MODULE_NAMED = re.compile(r"(?:No module named|module|from|import name '\w+' from) "
                           r"'(?P<mod>[A-Za-z_][\w.]*)'")
# a message about what the user asked for, not about the code
_USER_INPUT = re.compile(r"not (?:yet )?supported|unsupported(?! operand)|does(?:n't| not) support|please|"
                         r"--[a-z]|\bconfig(?:uration)?\b|checkpoint|environment variable|"
                         r"\binstall|\bmust be\b|\bshould be\b|\btoken(?:izer)?\b|\.safetensors",
                         re.IGNORECASE)
# the same for a model's own code, whose config and tokenizer files are the model's
_USER_INPUT_MODEL = re.compile(r"not (?:yet )?supported|unsupported(?! operand)|does(?:n't| not) "
                               r"support|please|--[a-z]|environment variable|\binstall|"
                               r"\bmust be\b|\bshould be\b|\.safetensors", re.IGNORECASE)
# a compiled extension that is not there (vllm._C, torch_npu._C): a build or a shadowing
# source tree, not the code
_COMPILED = re.compile(r"(?:^|\.)_?C$|_C$|_ext$")
# code that reads what the user gave (the model's config, the architecture registry, the
# arguments, the tokenizer files): an unexpected exception there usually says the input is
# not what the code expects ("'NoneType' object is not iterable" for a config.json without
# `architectures`, vLLM's troubleshooting guide), not that the code is wrong
_READS_INPUT = re.compile(r"[/\\](?:configs?|transformers_utils|tokenizers?)[/\\]|"
                          r"[/\\](?:\w+_)?config\.py$|[/\\](?:arg_utils|cli_args|registry)\.py$")
# a call whose arguments do not fit the callee: raised at the call, so the frame shown is the
# caller's while the callee may be the other package (vLLM calling the plugin's override)
_CALL_MISMATCH = re.compile(r"unexpected keyword argument|required (?:positional|keyword-only) "
                            r"argument|takes (?:from )?\d+ (?:to \d+ )?positional arguments? but")
# a KeyError on a weight's name is the checkpoint against the model, not the code
_WEIGHT_KEY = re.compile(r"\.(?:weight|bias|scale|offset)\b|layers\.\d+")
# a model repository's own code files (the names transformers gives them)
_REVISION = re.compile(r"^[0-9a-f]{40}$")  # a hub commit directory under transformers_modules
_MODEL_FILE = re.compile(r"[/\\](?:modeling|configuration|tokenization)_\w+\.py$")
# a message that says a feature is missing, with the feature's name when it can be cut out:
# "Batched rotary embedding is currently not supported on NPU.", "MTP is not supported yet.",
# "vLLM Ascend doesn't support X for Y", "X not implemented for Y"
_FEATURE_SAYS = re.compile(r"not (?:yet |currently )?(?:supported|implemented)|"
                           r"does(?:n't| not) (?:yet )?support|is unsupported", re.IGNORECASE)
_FEATURE_NAME = (
    re.compile(r"^(?:Currently,? )?(?:vLLM[ -]Ascend|Ascend(?: NPU)?|NPU|\w+) does(?:n't| not) "
               r"(?:yet )?support (?P<feature>[^.;:!]{3,80})", re.IGNORECASE),
    re.compile(r"^(?P<feature>[^.;:!]{3,80}?) (?:is|are) (?:currently |still |yet )?"
               r"(?:not|un)(?: yet| currently)? ?(?:supported|implemented)", re.IGNORECASE),
    re.compile(r"^(?P<feature>[^.;:!]{3,80}?) not (?:yet )?(?:supported|implemented)",
               re.IGNORECASE),
)
_FEATURE_FRAME = re.compile(r"(?:^|[/\\])vllm[/\\]platforms[/\\]")
_FEATURE_EXC = frozenset({"NotImplementedError", "ValueError", "RuntimeError", "AssertionError"})
# a message that names what other entries answer: a quantisation (quant-unsupported), an
# operator (op-unsupported), a chip or a dtype on it (chip-unsupported), a model architecture
# (model-arch-unsupported): the feature reading is then only a weak one
_NAMES_OTHER = re.compile(
    r"quant|\bw\d+a\d+|\b(?:awq|gptq|fp8|int[48]|mxfp\w*|gguf|marlin|bitsandbytes|smoothquant)\b|"
    r"\bop(?:erator)?s?\b|\baclnn\w*|\bkernel|\bnpu_\w+|"
    r"\b310P\b|\b910(?:[ABC]\d*|_93)?\b|\bAtlas\b|\bsoc(?:_version)?\b|\bchip\b|"
    r"\b(?:b?float16|bf16|fp16|float64|fp64|dtype)\b|"
    r"architecture|\w+For(?:CausalLM|ConditionalGeneration|SequenceClassification)\b|model[_ ]type",
    re.IGNORECASE)


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str
    package: str | None  # the top-level import name the path belongs to, when known


@dataclass(frozen=True)
class Ownership:
    """A defect answer: the owner, the frame that raised, the exception."""

    owner: str  # a key of PACKAGES, BOUNDARY, MODEL, FRAMEWORK or FEATURE
    frame: Frame
    exc: str
    message: str
    # MODEL: the model's directory name; FRAMEWORK: the project; FEATURE: the feature named
    subject: str = ""
    home: str = ""  # FRAMEWORK: the project's page (its issues and releases live there)
    weak: bool = False  # FEATURE: the message names a cause other entries answer
    # FRAMEWORK: the framework's code reaches for a name the installed stack does not have
    pairing: bool = False

    @property
    def distribution(self) -> str:
        return PACKAGES.get(self.owner, "vllm-ascend")


def package_of(path: str) -> str | None:
    """The top-level package a source path belongs to: the directory after site-packages /
    dist-packages, else the leftmost path part that names a known package (a source
    checkout: /workspace/vllm-ascend/vllm_ascend/ops/x.py)."""
    m = _SITE.search(path)
    parts = re.split(r"[/\\]", path)
    if REMOTE_CODE in parts[:-1]:  # ~/.cache/huggingface/modules/transformers_modules/<model>/
        return REMOTE_CODE
    if m:
        return m.group("top")
    for p in parts[:-1]:
        if p in PACKAGES or p in _OTHER or p in FRAMEWORKS:
            return p
    return None


def model_of(frame: Frame) -> str | None:
    """The model directory a frame of the model's own code belongs to (remote code, or a
    ``modeling_*.py`` outside every installed package), else None."""
    parts = re.split(r"[/\\]", frame.path)
    if frame.package == REMOTE_CODE:
        # …/transformers_modules/Qwen-7B-Chat/x.py or …/transformers_modules/org/name/<sha>/x.py
        i = parts.index(REMOTE_CODE)
        named = [p for p in parts[i + 1:-1] if p and not _REVISION.match(p)]
        return "/".join(named) or REMOTE_CODE
    # vllm, vllm_ascend and torch_npu have no file of these names: a path that only passes
    # through a folder named like them (/data/vllm/models/Qwen-7B/modeling_qwen.py) is a model's
    if (frame.package is None or frame.package in PACKAGES and not _SITE.search(frame.path)) \
            and _MODEL_FILE.search(frame.path) and len(parts) > 1:
        return parts[-2] or "?"
    return None


def frame_of(text: str) -> Frame | None:
    m = FRAME.match(text)
    if not m:
        return None
    path = m.group("path")
    return Frame(path, int(m.group("line")), m.group("func") or "?", package_of(path))


def _top(mod: str) -> str:
    return mod.split(".", 1)[0]


def owner_of(exc: str, message: str, frames: Sequence[Frame],
             raised: bool = False) -> Ownership | None:
    """The defect reading of an exception raised after ``frames`` (outermost first), or None
    when the exception is an expected one, the raising frame is of no known package, the
    message points at another package or at the user's input, or the traceback shows the
    code raising it on purpose (``raised``: the innermost frame's source line is a ``raise``
    statement, as vLLM's ``raise KeyError("invalid tool call parser: …")``)."""
    name = exc.rsplit(".", 1)[-1]
    if name not in UNEXPECTED or not frames or raised:
        return None
    inner = frames[-1]
    model = model_of(inner)
    if inner.package not in PACKAGES and inner.package not in FRAMEWORKS and model is None:
        return None
    named = [_top(m.group("mod")) for m in _MODULE_NAMED.finditer(message)]
    if inner.package in FRAMEWORKS and _pairing(name, message):
        project, home = FRAMEWORKS[inner.package]
        return Ownership(FRAMEWORK, inner, name, message, subject=project, home=home,
                         pairing=True)
    if name in _IMPORT:
        # a package importing its own module that is not there: its packaging; importing
        # another package's module: a missing package or a mismatched pair (curated entries)
        if not named or any(t != inner.package for t in named):
            return None
        if any(_COMPILED.search(m.group("mod")) for m in _MODULE_NAMED.finditer(message)):
            return None
    elif any(t != inner.package for t in named):
        return None
    if name == "KeyError" and _WEIGHT_KEY.search(message):
        return None
    if model is not None:
        # the model's config and tokenizer code are its own files: a message about them is
        # about the model repository, not about what the user passed
        # an import that fails under transformers_modules is the cache or the model's folder
        # name (a dot in it), not the code
        if _USER_INPUT_MODEL.search(message) or name in _IMPORT:
            return None
        return Ownership(MODEL, inner, name, message, subject=model)
    if _USER_INPUT.search(message):
        return None
    if _READS_INPUT.search(inner.path):
        return None
    if inner.package in FRAMEWORKS:
        project, home = FRAMEWORKS[inner.package]
        return Ownership(FRAMEWORK, inner, name, message, subject=project, home=home)
    owner = inner.package
    assert owner is not None  # in PACKAGES: the other cases returned above
    shown = {f.package for f in frames}
    if owner in ("vllm", "vllm_ascend") and (
            name in _API and {"vllm", "vllm_ascend"} <= shown
            or name == "TypeError" and _CALL_MISMATCH.search(message)):
        owner = BOUNDARY
    return Ownership(owner, inner, name, message)


def _pairing(name: str, message: str) -> bool:
    """Whether a framework's exception says the installed stack lacks a name the framework
    was written for: an import of a submodule or a name of vllm / vllm_ascend / torch_npu /
    torch / transformers that is not there, or such a module without an attribute. The
    package itself is installed (a dotted module, or a name imported from it); the framework,
    not vLLM's pairing with the plugin, chose that release."""
    if name not in _API:
        return False
    mods = [m.group("mod") for m in _MODULE_NAMED.finditer(message)]
    if not mods or any(_top(m) not in _STACK or _COMPILED.search(m) for m in mods):
        return False
    if name in _IMPORT:
        return "import name" in message or all("." in m for m in mods)
    return name == "AttributeError" and message.startswith("module ")


def feature_of(exc: str, message: str, frames: Sequence[Frame]) -> Ownership | None:
    """The missing-feature reading of an exception: a NotImplementedError with a message, or
    a ValueError / RuntimeError / AssertionError saying "not supported" / "not implemented" /
    "does not support", raised in a frame of vllm_ascend or of vLLM's platform layer. Weak when
    the message names a quantisation, an operator, a chip or dtype, or an architecture."""
    name = exc.rsplit(".", 1)[-1]
    if name not in _FEATURE_EXC or not frames or not message.strip():
        return None
    inner = frames[-1]
    if inner.package != "vllm_ascend" and not (
            inner.package == "vllm" and _FEATURE_FRAME.search(inner.path)):
        return None
    if not _FEATURE_SAYS.search(message):
        return None
    feature = message.strip()
    for rx in _FEATURE_NAME:
        m = rx.search(feature)
        if m:
            feature = m.group("feature")
            break
    feature = feature.strip(" '\"`")[:120]
    return Ownership(FEATURE, inner, name, message, subject=feature,
                     weak=bool(_NAMES_OTHER.search(message)))


# a launch flag a message names: "--enable-auto-tool-choice", "--max-lora-rank"
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# a config field a validation function names: "max_lora_rank", "tool_call_parser"
_FIELD = re.compile(r"(?<![\w.`'\"-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w(.])")
# where vLLM checks what the user passed: its config classes and argument parsers, or a
# function named for validating (``validate_legal``, ``_verify_args``, ``check_…``)
_CHECKS_INPUT = re.compile(r"[/\\]config[/\\]|[/\\](?:arg_utils|cli_args)\.py$")
_VALIDATES = re.compile(r"(?:^|[._])_?(?:validate|verify|check)", re.IGNORECASE)
_ARG_EXC = frozenset({"ValueError", "error response"})
# what pydantic appends to a validator's message: not the user's words
_PYDANTIC_TRAILER = re.compile(r"\s*\[type=\w+(?:, input_value=.*)?\]?\s*$")
# arguments whose refusal other entries answer with the value found (context length, memory,
# parallel sizes, block and batch sizes, dtype, remote code, chat template): the argument
# reading is then only a weak one
_NAMES_ARG_OTHER = re.compile(
    r"max[_ -]model[_ -]len|context length|parallel[_ -]size|divisible|memory[_ -]utili[sz]ation|"
    r"block[_ -]size|max[_ -]num[_ -]batched[_ -]tokens|max[_ -]num[_ -]seqs|remote[_ -]code|"
    r"chat[_ -]template|kv[_ -]cache|tokenizer", re.IGNORECASE)


def argument_of(exc: str, message: str, frames: Sequence[Frame]) -> Ownership | None:
    """The refused-argument reading: a ValueError (or an error response to the client)
    raised in a frame of vllm or vllm_ascend whose message names a launch flag
    (``--tool-call-parser``), or, raised where vLLM checks its input (config classes,
    argument parsers, a validate/verify/check function), a config field (``max_lora_rank``).
    The subject is what it names. Weak when it names what other entries answer (a
    quantisation, a dtype, a chip, the context length, memory, parallel sizes, …)."""
    # an error gathered into a list (``error_msg.append(…)``) is raised or answered later
    name = "error" if exc.endswith(".append") else exc.rsplit(".", 1)[-1]
    if (name not in _ARG_EXC and name != "error") or not frames:
        return None
    inner = frames[-1]
    if inner.package not in ("vllm", "vllm_ascend") or _FEATURE_SAYS.search(message):
        return None
    message = _PYDANTIC_TRAILER.sub("", message)  # "[type=value_error, input_value=…]"
    named = _FLAG.findall(message)
    if not named and (_CHECKS_INPUT.search(inner.path) or _VALIDATES.search(inner.func)):
        named = _FIELD.findall(message)
    if not named:
        return None
    subject = ", ".join(dict.fromkeys(named))[:120]
    weak = bool(_NAMES_OTHER.search(message) or _NAMES_ARG_OTHER.search(message))
    return Ownership(ARGUMENT, inner, name, message, subject=subject, weak=weak)


def read(exc: str, message: str, frames: Sequence[Frame],
         raised: bool = False) -> Ownership | None:
    """What a traceback's innermost exception says about who must change: a feature the NPU
    build lacks first (it is said on purpose), then an argument vLLM refused, else a defect of
    the frame's owner (never for an exception the shown source line raises on purpose)."""
    return (feature_of(exc, message, frames) or argument_of(exc, message, frames)
            or owner_of(exc, message, frames, raised))
