"""Log triage on a realistic vllm-ascend log against ``grep -E -n -i`` with the knowledge
base's own signatures (same file, run alternately; the ratio is the median of the pairs).

The log (``realistic_log``) is built from the real vLLM server's own output in
tests/corpus/realvllm (its start-up banner and its tracebacks) and the real failure lines of
tests/corpus/triage, in the proportions of a busy server: ~40 % ``Received request …
prompt:`` lines with 3 prompts in 8 Chinese or Japanese, ~40 % access lines, stats and
scheduler lines, warnings, and a traceback every 50 000 lines (~400 bytes a line).

Rows: ``triage FILE --json`` and the logs check's scan (``match_file``), each with the
engines available (Hyperscan, pure Python), at 10⁴, 10⁵ and 10⁶ lines, each writing its
output to a file as grep does; the plain line-by-line path (``ASCEND_DOCTOR_SCAN_ENGINE=line``,
what the engines are speed code over) at 10⁵ (quick) or 10⁶; growth rows (time, peak RSS,
lines/s) of the default engine at 10⁵, 10⁶ and, with ``BENCH_LOGS_10M=1``, 10⁷ lines (4 GB,
minutes); plus a newline-free 1 GiB stream (generated lazily through a pipe, never written)
for the bounded-memory row. The peer's pattern is the signatures converted to POSIX ERE
(``grep_pattern``: ``\\d`` inside brackets becomes ``0-9``, not ``[0-9]``), and
``peer_agrees`` checks grep finds the very lines ours finds (and, up to 10⁵ lines, that the
engines find the plain path's lines).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure_once, measure_pair, pyc_envs  # noqa: E402

CORPUS = REPO / "tests" / "corpus"

_CHECK = r"""
import sys, json
sys.path.insert(0, {repo!r})
from ascend_doctor import knowledge
from ascend_doctor.checks.logs import match_file
from ascend_doctor.probes.logmatch import prefilter
from ascend_doctor.probes.logs import LogScan, scan_engine
kb = knowledge.load()
scan = LogScan()
with open(sys.argv[1], "rb") as fh:
    m = match_file(kb, fh, None, scan, scan_engine(prefilter(kb).literals, sys.argv[2]))
print(json.dumps([[a.entry.id, a.count, a.lines] for a in m]), scan.lines)
"""

EN = ["Summarize the following support ticket and suggest a next step for the on-call engineer.",
      "Write a Python function that merges two sorted lists without using the standard library.",
      "Explain the difference between tensor parallelism and pipeline parallelism in two sentences.",
      "Translate this release note into plain language for customers who do not read changelogs.",
      "What is the capital of Australia, and why is it not Sydney?"]
ZH = ["请用三句话总结下面这段客服对话，并给出下一步处理建议。",
      "帮我写一首关于秋天的七言绝句，要求押韵。",
      "解释一下大模型推理中的 KV cache 是什么，为什么会占用这么多显存？",
      "把下面的英文邮件翻译成正式的中文商务信函。"]
JA = ["次の文章を要約して、重要なポイントを三つ挙げてください。",
      "東京から大阪まで新幹線で行く場合の所要時間と料金を教えてください。",
      "このエラーメッセージの意味を初心者にも分かるように説明してください。"]
PARAMS = ("SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
          "temperature=0.7, top_p=0.95, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], "
          "bad_words=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens={mt}, "
          "min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
          "spaces_between_special_tokens=True, truncate_prompt_tokens=None, guided_decoding=None, "
          "extra_args=None)")


def _real_parts() -> tuple[list[str], list[list[str]]]:
    """The real server's start-up banner, and real failure blocks (its own tracebacks and
    the corpus's pasted failures)."""
    server = (CORPUS / "realvllm" / "head-dim-8-first-request-engine-dead.log").read_text(
        encoding="utf-8").splitlines()
    cut = next(i for i, ln in enumerate(server) if "Application startup complete" in ln) + 1
    banner = server[:cut]
    blocks = [server[cut + 1:]]
    blocks.append((CORPUS / "realvllm" / "block-size-16-engine-init-failed.log").read_text(
        encoding="utf-8").splitlines()[10:])
    for f in sorted((CORPUS / "triage").glob("*.txt"))[:40]:
        part = f.read_text(encoding="utf-8").partition("# ---\n")[2].splitlines()
        if part:
            blocks.append(part[:40])
    return banner, blocks


def realistic_log(path: Path, lines: int, seed: int = 7, blocks_every: int = 50_000) -> int:
    """Write ``lines`` lines of a busy vllm-ascend server's log to ``path`` with a real
    failure block every ``blocks_every`` lines; returns the number of blocks inserted."""
    rnd = random.Random(seed)
    banner, blocks = _real_parts()
    n, inserted, minute = 0, 0, 0
    with open(path, "w", encoding="utf-8") as fh:
        for ln in banner:
            fh.write(ln + "\n")
            n += 1
        while n < lines:
            if n % blocks_every < 1 and n > len(banner):
                for ln in blocks[inserted % len(blocks)]:
                    fh.write(ln + "\n")
                    n += 1
                inserted += 1
                continue
            sec = (n // 40) % 60
            if sec == 0:
                minute += 1
            ts = f"12-03 16:{minute % 60:02d}:{sec:02d}"
            r = rnd.random()
            if r < 0.40:
                k = rnd.random()
                prompt = (rnd.choice(ZH) if k < 0.25 else rnd.choice(JA) if k < 0.375
                          else rnd.choice(EN)) * rnd.randint(1, 3)
                rid = "%032x" % rnd.getrandbits(128)
                fh.write(f"(APIServer pid=28809) INFO {ts} [logger.py:49] Received request "
                         f"cmpl-{rid}-0: prompt: {prompt!r}, params: "
                         f"{PARAMS.format(mt=rnd.choice((128, 256, 512, 1024)))}, "
                         f"prompt_token_ids: None, prompt_embeds shape: None, lora_request: None.\n")
            elif r < 0.80:
                fh.write(f"(APIServer pid=28809) INFO:     10.0.{rnd.randint(0, 9)}.{rnd.randint(2, 250)}:"
                         f"{rnd.randint(30000, 60000)} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n")
            elif r < 0.90:
                fh.write(f"(APIServer pid=28809) INFO {ts} [loggers.py:257] Engine 000: Avg prompt "
                         f"throughput: {rnd.uniform(500, 6000):.1f} tokens/s, Avg generation "
                         f"throughput: {rnd.uniform(100, 1500):.1f} tokens/s, Running: "
                         f"{rnd.randint(1, 64)} reqs, Waiting: {rnd.randint(0, 40)} reqs, GPU KV "
                         f"cache usage: {rnd.uniform(5, 95):.1f}%, Prefix cache hit rate: "
                         f"{rnd.uniform(0, 60):.1f}%\n")
            elif r < 0.97:
                fh.write(f"(APIServer pid=28809) INFO {ts} [async_llm.py:323] Added request "
                         f"chatcmpl-{rnd.getrandbits(64):016x}.\n")
            else:
                fh.write(f"(EngineCore_DP0 pid=28874) WARNING {ts} [scheduler.py:1021] "
                         f"Sequence group {rnd.getrandbits(32):08x} is preempted by "
                         f"PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
                         f"space.\n")
            n += 1
    return inserted


# ---- the peer's pattern -----------------------------------------------------------------

_CLASS_IN = {"d": "0-9", "w": "A-Za-z0-9_", "s": "[:space:]"}
_CLASS_OUT = {"d": "[0-9]", "w": "[A-Za-z0-9_]", "s": "[[:space:]]", "D": "[^0-9]",
              "W": "[^A-Za-z0-9_]", "S": "[^[:space:]]"}


def to_ere(rx: str) -> str:
    """A Python signature as a POSIX ERE that matches at least the same lines: class escapes
    converted inside and outside brackets, groups made plain, lookarounds dropped (a
    superset), lazy repeats made greedy (the same lines match)."""
    out, i, n = [], 0, len(rx)
    in_class = False
    while i < n:
        c = rx[i]
        if c == "\\" and i + 1 < n:
            e = rx[i + 1]
            if in_class:
                out.append(_CLASS_IN.get(e, "\\\\" if e == "\\" else e))
            elif e in _CLASS_OUT:
                out.append(_CLASS_OUT[e])
            elif e in "bB":
                out.append("\\" + e)
            elif e.isalnum():
                out.append(e)
            else:
                out.append("\\" + e)
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and rx[i] == "^":
                out.append("^")
                i += 1
            if i < n and rx[i] == "]":
                out.append("]")
                i += 1
            continue
        if rx.startswith("(?P<", i):
            i = rx.index(">", i) + 1
            out.append("(")
            continue
        if rx.startswith("(?:", i):
            out.append("(")
            i += 3
            continue
        if rx.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):  # drop the lookaround
            depth, j = 0, i
            while j < n:
                if rx[j] == "\\":
                    j += 2
                    continue
                depth += {"(": 1, ")": -1}.get(rx[j], 0)
                j += 1
                if depth == 0:
                    break
            i = j
            continue
        if c in "*+?}" and i + 1 < n and rx[i + 1] == "?":  # lazy: greedy finds the same lines
            out.append(c)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def grep_pattern() -> str:
    from ascend_doctor import knowledge

    return "|".join(f"({to_ere(s)})" for s in knowledge.load().signatures())


def our_signature_lines(path: Path, engine: str) -> set[int]:
    """Line numbers any signature matches among the lines the scan engine hands on (what
    triage and the logs check match)."""
    from ascend_doctor import knowledge
    from ascend_doctor.probes.logmatch import prefilter
    from ascend_doctor.probes.logs import LogScan, scan_engine, scan_lines

    kb = knowledge.load()
    rxs = [rx for e in kb.entries.values() for rx in e.compiled]
    pre = prefilter(kb)
    with open(path, "rb") as fh:
        return {n for n, line in scan_lines(fh, None, pre, LogScan(),
                                            scan_engine(pre.literals, engine))
                if any(r.search(line) for r in rxs)}


def grep_lines(path: Path) -> set[int]:
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    r = subprocess.run(["grep", "-E", "-n", "-i", grep_pattern(), str(path)],
                       capture_output=True, env=env, check=False)
    return {int(ln.split(b":", 1)[0]) for ln in r.stdout.splitlines() if ln}


def peer_agrees(path: Path, full: bool = False) -> str:
    """Whether grep finds the lines ours finds (each engine); with ``full``, also whether
    the engines find the lines the plain path finds (every line decoded and tested). A note
    for the row; raises when an engine and the plain path differ (a bug, not a result)."""
    got = grep_lines(path)
    ours = {eng: our_signature_lines(path, eng) for eng in engines()}
    if full:
        want = our_signature_lines(path, "line")
        for eng, lines in ours.items():
            if lines != want:
                raise AssertionError(f"{eng} engine: {len(want - lines)} lines missed, "
                                     f"{len(lines - want)} added against the plain path")
    ref = ours["python"]
    if all(lines == ref for lines in ours.values()) and got == ref:
        return f"grep and ours match the same {len(ref)} lines" + (
            " (= the plain path's)" if full else "")
    return (f"grep misses {len(ref - got)} of our {len(ref)} lines, adds {len(got - ref)}; "
            + ", ".join(f"{e}: {len(v)}" for e, v in ours.items()))


def endless_line(gib: float = 1.0) -> dict:
    """``triage -`` on ``gib`` GiB without a newline, generated lazily into a pipe: time and
    peak RSS (bounded by design: one block plus one 64 KiB line head)."""
    import time

    from common import GNU_TIME

    total = int(gib * (1 << 30))
    chunk = b"x" * (1 << 20)
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as out:
        argv = [GNU_TIME, "-f", "%M", "-o", out.name, sys.executable, "-m", "ascend_doctor",
                "triage", "-", "--json"]
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        assert p.stdin is not None
        sent = 0
        while sent < total:
            p.stdin.write(chunk)
            sent += len(chunk)
        p.stdin.write(b"\nEI0006: Getting socket times out.\n")
        p.stdin.close()
        rc = p.wait()
        dt = time.perf_counter() - t0
        rss = float([x for x in out.read().split() if x.isdigit()][-1]) / 1024
    return {"name": f"triage -, {gib:g} GiB without a newline (pipe)", "ours_s": round(dt, 2),
            "ours_rss_mb": round(rss, 1), "exit": rc, "peer": None}


def engines() -> list[str]:
    from ascend_doctor.probes.logs import scan_engine

    out = []
    try:
        scan_engine(["abc"], "hyperscan")
        out.append("hyperscan")
    except ImportError:
        pass
    return out + ["python"]


_LIFTED = ("import sys, ascend_doctor.probes.logs as l; l.READ_BUDGET_S = 1e9; "
           "from ascend_doctor.cli import main; sys.argv[0] = 'ascend-doctor'; main()")


def growth(sizes: "tuple[int, ...]", d: str, env: dict) -> list[dict]:
    """Triage (default engine, pure Python when hyperscan is absent: ``python``) at each
    size, one run against one grep run: time, peak RSS, lines/s. The shipped command stops
    reading after READ_BUDGET_S (40 s): these runs lift it in-process to measure the scan."""
    ere = grep_pattern()
    grep_env = {**os.environ, "LC_ALL": "C.UTF-8"}
    rows = []
    cpu: dict = {}
    for lines in sizes:
        log = Path(d) / f"growth-{lines}.log"
        realistic_log(log, lines)
        size = log.stat().st_size / 2**20
        tenv = {**env, "ASCEND_DOCTOR_SCAN_ENGINE": "python"}
        ours, peer, ratio = measure_pair(
            [sys.executable, "-c", _LIFTED, "triage", str(log), "--json"],
            ["grep", "-E", "-n", "-i", ere, str(log)], 1, env=tenv, peer_env=grep_env,
            stdout_dir=d, ok_codes=(0, 1), warm=False, cpu=cpu)
        with open(os.path.join(d, "ours.out")) as fh:
            read = json.load(fh)["lines"]
        rows.append(_row(f"growth: triage FILE, {lines:,} lines ({size:,.0f} MiB), python engine, "
                         "read budget lifted", ours, peer, ratio,
                         f"{read:,} lines read, {read / ours[0]:,.0f} lines/s; one run each",
                         cpu))
        log.unlink()
    return rows


def run(quick: bool = False) -> list[dict]:
    """Quick: 10⁵ (3 pairs, the plain path too) and 10⁶ lines (one pair, triage only)."""
    sizes = (100_000, 1_000_000) if quick else (10_000, 100_000, 1_000_000)
    plain_at = 100_000 if quick else 1_000_000
    ere = grep_pattern()
    env = pyc_envs()["warm"]  # measure_pair's warm-up run fills the .pyc cache
    grep_env = {**os.environ, "LC_ALL": "C.UTF-8"}
    rows = []
    cpu: dict = {}
    with tempfile.TemporaryDirectory() as d:
        for lines in sizes:
            log = Path(d) / f"server-{lines}.log"
            realistic_log(log, lines)
            size = log.stat().st_size / 2**20
            grep = ["grep", "-E", "-n", "-i", ere, str(log)]
            n = (1 if lines >= 1_000_000 else 3) if quick else (3 if lines >= 1_000_000 else 5)
            agree = peer_agrees(log, full=lines <= 100_000)
            for eng in engines():
                tenv = {**env, "ASCEND_DOCTOR_SCAN_ENGINE": eng}
                ours, peer, ratio = measure_pair(
                    [sys.executable, "-m", "ascend_doctor", "triage", str(log), "--json"], grep,
                    n, env=tenv, peer_env=grep_env, stdout_dir=d, ok_codes=(0, 1), cpu=cpu)
                rows.append(_row(f"triage FILE, {lines:,} lines ({size:.0f} MiB), {eng} engine",
                                 ours, peer, ratio, f"{agree}; {lines / ours[0]:,.0f} lines/s",
                                 cpu))
                if quick and lines >= 1_000_000:
                    continue
                ours, peer, ratio = measure_pair(
                    [sys.executable, "-c", _CHECK.format(repo=str(REPO)), str(log), eng], grep,
                    n, env=env, peer_env=grep_env, stdout_dir=d, cpu=cpu)
                tail = " (reads the last 256 MiB: TAIL_BYTES)" if size > 256 else ""
                rows.append(_row(f"logs check, {lines:,} lines, {eng} engine{tail}", ours, peer,
                                 ratio, agree, cpu))
            if lines == plain_at:  # the plain path: every line decoded and tested
                tenv = {**env, "ASCEND_DOCTOR_SCAN_ENGINE": "line"}
                ours, peer, ratio = measure_pair(
                    [sys.executable, "-c", _LIFTED, "triage", str(log), "--json"], grep, 1,
                    env=tenv, peer_env=grep_env, stdout_dir=d, ok_codes=(0, 1), warm=False,
                    cpu=cpu)
                rows.append(_row(f"triage FILE, {lines:,} lines ({size:.0f} MiB), plain "
                                 "line-by-line path (no engine), read budget lifted", ours, peer,
                                 ratio, "what the engines are speed code over; one run each",
                                 cpu))
            log.unlink()
        if os.environ.get("BENCH_LOGS_10M"):  # minutes: opt-in (or bench_logs.py --growth)
            rows += growth((10_000_000,), d, env)
    rows.append(endless_line(0.25 if quick else 1.0))
    return rows


def _row(name: str, ours, peer, ratio: float, note: str, cpu: "dict | None" = None) -> dict:
    if cpu:  # CPU seconds: what load from other processes distorts least
        note = (f"CPU {cpu['ours']:.2f} s vs grep {cpu['peer']:.2f} s "
                f"({cpu['ours'] / max(cpu['peer'], 1e-3):.1f}x); {note}")
    return {"name": name, "ours_s": round(ours[0], 3), "peer": "grep -E -n -i (same signatures)",
            "peer_s": round(peer[0], 3), "ratio": round(ratio, 3),
            "ours_rss_mb": round(ours[1], 1), "peer_rss_mb": round(peer[1], 1), "note": note}


if __name__ == "__main__":
    if "--growth" in sys.argv:  # 10⁵ → 10⁶ → 10⁷ lines, one run each (~10 min)
        sys.path.insert(0, str(REPO / "bench"))
        import run as table

        with tempfile.TemporaryDirectory() as tmp:
            got = growth((100_000, 1_000_000, 10_000_000), tmp, pyc_envs()["warm"])
        text = "\n".join(table.table(got))
        print(text)
        (REPO / "bench" / "out").mkdir(exist_ok=True)
        (REPO / "bench" / "out" / "logs-growth.md").write_text(text + "\n")
    else:
        for row in run(quick="--quick" in sys.argv):
            print(row)
