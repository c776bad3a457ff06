"""Log triage over a large vLLM log against ``grep -E -n -i`` with the same signatures (same
file, run alternately in one run; the ratio is the median of the pairs).

Rows: the logs check's scan (checks/logs.py ``match_file``: one pass per block, then the
unchanged matcher on candidate lines) with each engine available — ``hyperscan`` (the
``ascend-doctor[fast]`` extra) and the pure-Python fallback — and the ``triage FILE`` path
(knowledge/gate.py ``match_chunks``: the lines ``match_lines`` could use, wrapped pastes
kept), at 10⁴, 10⁵ and 10⁶ lines. Each writes its output to a file, as grep does.
Both run as child processes so their peak RSS is measured alike (GNU time, common.py).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measure_pair, pyc_envs  # noqa: E402

_CHECK = r"""
import sys, json
sys.path.insert(0, {repo!r})
from ascend_doctor import knowledge
from ascend_doctor.checks.logs import LinePrefilter, match_file
from ascend_doctor.probes.logs import LogScan, scan_engine
kb = knowledge.load()
pre = LinePrefilter([p for e in kb.entries.values() for p in e.signatures])
scan = LogScan()
with open(sys.argv[1], "rb") as fh:
    m = match_file(kb, fh, None, scan, scan_engine(pre.literals, sys.argv[2]))
print(json.dumps([[a.entry.id, a.count, a.lines] for a in m]), scan.lines)
"""

_TRIAGE = r"""
import sys, json
sys.path.insert(0, {repo!r})
from ascend_doctor import knowledge
from ascend_doctor.knowledge.gate import match_chunks, text_chunks
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:  # as `triage FILE` opens it
    m = match_chunks(knowledge.load(), text_chunks(fh), sys.argv[2])
print(json.dumps([[x.entry.id, x.score, x.lines] for x in m]))
"""

STATS = ("INFO 11-20 03:06:02 [loggers.py:123] Engine 000: Avg prompt throughput: 5198.0 tokens/s, "
         "Avg generation throughput: 903.2 tokens/s, Running: 48 reqs, Waiting: 140 reqs, GPU KV "
         "cache usage: 97.0%, Prefix cache hit rate: 0.0%\n")
ACCESS = 'INFO:     10.0.0.7:51514 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
ERRORS = ["RuntimeError: NPU out of memory. Tried to allocate 3.47 GiB (NPU 2; 29.50 GiB total)\n",
          "EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time.\n"]


def _log(path: Path, lines: int) -> None:
    with open(path, "w") as fh:
        for i in range(lines):
            fh.write(ERRORS[i % 2] if i % 50_000 == 49_999 else (STATS if i % 10 == 0 else ACCESS))


def engines() -> list[str]:
    from ascend_doctor.probes.logs import scan_engine

    out = []
    try:
        scan_engine(["abc"], "hyperscan")
        out.append("hyperscan")
    except ImportError:
        pass
    return out + ["python"]


def grep_pattern() -> str:
    from ascend_doctor import knowledge
    sigs = [re.sub(r"\(\?P<\w+>", "(", s) for e in knowledge.load().entries.values()
            for s in e.signatures]
    return "|".join(f"({s.replace('(?:', '(')})" for s in sigs).replace(r"\d", "[0-9]") \
        .replace(r"\w", "[A-Za-z0-9_]")


def run(quick: bool = False) -> list[dict]:
    sizes = (10_000, 100_000) if quick else (10_000, 100_000, 1_000_000)
    ere = grep_pattern()
    env = pyc_envs()["warm"]  # measure_pair's warm-up run fills the .pyc cache
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for lines in sizes:
            log = Path(d) / f"server-{lines}.log"
            _log(log, lines)
            size = log.stat().st_size / 2**20
            grep = ["grep", "-E", "-n", "-i", ere, str(log)]
            n = 3 if quick or lines >= 1_000_000 else 5
            for eng in engines():
                ours, peer, ratio = measure_pair(
                    [sys.executable, "-c", _CHECK.format(repo=str(REPO)), str(log), eng], grep,
                    n, env=env, stdout_dir=d)
                rows.append(_row(f"logs check, {lines:,} lines ({size:.1f} MiB), {eng} engine, .pyc warm",
                                 ours, peer, ratio, "same entries, counts and line numbers as "
                                 "the line-by-line matcher; grep only prints matches"))
                ours, peer, ratio = measure_pair(
                    [sys.executable, "-c", _TRIAGE.format(repo=str(REPO)), str(log), eng], grep,
                    n, env=env, stdout_dir=d)
                rows.append(_row(f"triage FILE, {lines:,} lines, {eng} engine, .pyc warm", ours, peer,
                                 ratio, "ranked as match_lines on every line (wrapped pastes "
                                 "joined)"))
    return rows


def _row(name: str, ours, peer, ratio: float, note: str) -> dict:
    return {"name": name, "ours_s": round(ours[0], 4), "peer": "grep -E -n -i (same signatures)",
            "peer_s": round(peer[0], 4), "ratio": ratio, "ours_rss_mb": round(ours[1], 1),
            "peer_rss_mb": round(peer[1], 1), "note": note}


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
