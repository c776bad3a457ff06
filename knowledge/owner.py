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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

# import name -> the distribution users install and upgrade
PACKAGES = {"vllm_ascend": "vllm-ascend", "vllm": "vllm", "torch_npu": "torch-npu"}
BOUNDARY = "vllm/vllm_ascend"
OWNERS = (*PACKAGES, BOUNDARY)
# the cause key of a defect of each owner (tests/corpus/threads/CAUSES.md)
DEFECT_CAUSE = {"vllm_ascend": "vllm-ascend-bug", "vllm": "vllm-bug", "torch_npu": "torch-npu-bug",
                BOUNDARY: "vllm-vllm-ascend-mismatch"}
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


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str
    package: str | None  # the top-level import name the path belongs to, when known


@dataclass(frozen=True)
class Ownership:
    """A defect answer: the owner, the frame that raised, the exception."""

    owner: str  # a key of PACKAGES, or BOUNDARY
    frame: Frame
    exc: str
    message: str

    @property
    def distribution(self) -> str:
        return PACKAGES.get(self.owner, "vllm-ascend")


def package_of(path: str) -> str | None:
    """The top-level package a source path belongs to: the directory after site-packages /
    dist-packages, else the leftmost path part that names a known package (a source
    checkout: /workspace/vllm-ascend/vllm_ascend/ops/x.py)."""
    m = _SITE.search(path)
    if m:
        return m.group("top")
    parts = re.split(r"[/\\]", path)
    for p in parts[:-1]:
        if p in PACKAGES or p in _OTHER:
            return p
    return None


def frame_of(text: str) -> Frame | None:
    m = FRAME.match(text)
    if not m:
        return None
    path = m.group("path")
    return Frame(path, int(m.group("line")), m.group("func") or "?", package_of(path))


def _top(mod: str) -> str:
    return mod.split(".", 1)[0]


def owner_of(exc: str, message: str, frames: Sequence[Frame]) -> Ownership | None:
    """The defect reading of an exception raised after ``frames`` (outermost first), or None
    when the exception is an expected one, the raising frame is of no known package, or the
    message points at another package or at the user's input."""
    name = exc.rsplit(".", 1)[-1]
    if name not in UNEXPECTED or not frames:
        return None
    inner = frames[-1]
    if inner.package not in PACKAGES:
        return None
    named = [_top(m.group("mod")) for m in _MODULE_NAMED.finditer(message)]
    if name in _IMPORT:
        # a package importing its own module that is not there: its packaging; importing
        # another package's module: a missing package or a mismatched pair (curated entries)
        if not named or any(t != inner.package for t in named):
            return None
        if any(_COMPILED.search(m.group("mod")) for m in _MODULE_NAMED.finditer(message)):
            return None
    elif any(t != inner.package for t in named):
        return None
    if _USER_INPUT.search(message):
        return None
    if name == "KeyError" and _WEIGHT_KEY.search(message):
        return None
    if _READS_INPUT.search(inner.path):
        return None
    owner = inner.package
    shown = {f.package for f in frames}
    if owner in ("vllm", "vllm_ascend") and (
            name in _API and {"vllm", "vllm_ascend"} <= shown
            or name == "TypeError" and _CALL_MISMATCH.search(message)):
        owner = BOUNDARY
    return Ownership(owner, inner, name, message)
